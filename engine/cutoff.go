package engine

import (
	"encoding/json"
	"strings"
	"time"
)

// A session's cut-off is the moment StopSession(all) stopped it: work for
// the session submitted before it and admitted after it is cancelled at
// admission ("session stopped"). Only a submission that another node
// accepted can arrive that late — a follower of a cluster stamps its
// submission time when it accepts a task, and the leader admits the task
// when it applies the follower's command, which may be after a stop applied
// meanwhile, or by the next leader after a failover (commands are applied at
// least once). So the cut-off is kept as a setting, "cutoff/<sessionKey>",
// written in the same commit as the stop's cancellations: an engine started
// after a restart or a failover refuses that work as the stopping one did.
// A cut-off is kept for cutoffRetention, then forgotten with its setting
// (housekeeping); a submission that late is admitted.
const cutoffSettingPrefix = "cutoff/"

// storedCutoff is a cut-off as its setting holds it.
type storedCutoff struct {
	At time.Time `json:"at"`
}

// setCutoffLocked records that the session was stopped at now.
func (c *core) setCutoffLocked(key string, now time.Time) {
	c.cutoffs[key] = now
	v, err := json.Marshal(storedCutoff{At: now.UTC()})
	if err != nil {
		return // cannot happen: a time
	}
	c.putSettingLocked(cutoffSettingPrefix+key, v)
}

// forgetCutoffsLocked forgets the cut-offs past their retention, stored
// ones included.
func (c *core) forgetCutoffsLocked(now time.Time) {
	for key, at := range c.cutoffs {
		if now.Sub(at) > cutoffRetention {
			delete(c.cutoffs, key)
			c.putSettingLocked(cutoffSettingPrefix+key, nil)
		}
	}
}

// restoreCutoffsLocked loads the stored cut-offs. One past its retention is
// forgotten at the next housekeeping, as it would have been had the engine
// run on.
func (e *Engine) restoreCutoffsLocked() {
	for k, v := range e.settings {
		key, ok := strings.CutPrefix(k, cutoffSettingPrefix)
		if !ok || key == "" {
			continue
		}
		var sc storedCutoff
		if err := json.Unmarshal(v, &sc); err != nil || sc.At.IsZero() {
			e.log.Warn("ignoring a stored session cut-off that does not parse", "key", k, "error", err)
			continue
		}
		e.cutoffs[key] = sc.At
	}
}
