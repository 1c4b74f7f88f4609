package engine

import (
	"encoding/json"
	"slices"
	"strings"
)

// A session's binding (the instance and tab its tasks run in) is kept as a
// setting, "binding/<scope>" (TaskSpec.SessionScope: "<agent>/<sessionKey>"),
// written in the same commit as the attempt
// that made it: after a restart the session's next task goes back to its own
// tab, or, when that tab or its instance is gone, fails with SESSION_LOST.
// It never starts over silently in a new tab.
const bindingSettingPrefix = "binding/"

// storedBinding is a binding as a setting holds it.
type storedBinding struct {
	Instance string `json:"instance"`
	Tab      string `json:"tab"`
	Lost     bool   `json:"lost,omitempty"`
	Why      string `json:"why,omitempty"`
}

// setBindingLocked binds a session and records the binding when it changed.
func (c *core) setBindingLocked(key string, b binding) {
	if old, ok := c.bindings[key]; ok && old == b {
		return
	}
	c.bindings[key] = b
	v, err := json.Marshal(storedBinding{Instance: b.instance, Tab: b.tab, Lost: b.lost, Why: b.why})
	if err != nil {
		return // cannot happen: strings and a bool
	}
	c.putSettingLocked(bindingSettingPrefix+key, v)
}

// dropBindingLocked forgets a session's binding, stored one included.
func (c *core) dropBindingLocked(key string) {
	if _, ok := c.bindings[key]; !ok {
		return
	}
	delete(c.bindings, key)
	c.putSettingLocked(bindingSettingPrefix+key, nil)
}

// restoreBindingsLocked loads the stored bindings.
func (e *Engine) restoreBindingsLocked() {
	for k, v := range e.settings {
		key, ok := strings.CutPrefix(k, bindingSettingPrefix)
		if !ok || key == "" {
			continue
		}
		var sb storedBinding
		if err := json.Unmarshal(v, &sb); err != nil || sb.Tab == "" {
			e.log.Warn("ignoring a stored session binding that does not parse", "key", k, "error", err)
			continue
		}
		e.bindings[key] = binding{instance: sb.Instance, tab: sb.Tab, lost: sb.Lost, why: sb.Why}
	}
}

// TabClosed records that a task closed a tab (engine.InstanceSink). A
// session bound to that tab other than the closing task's own (bySession)
// did not ask for it: its page is gone, a SESSION event says so at once, and
// its next task fails with SESSION_LOST (or replays the session if it
// asked), as after a removal of its instance. closedBy says who closed it,
// for people. The closing session's own binding is the executor's to drop
// (UnbindSession), once the closing attempt has ended.
func (e *Engine) TabClosed(instanceID, tabID, bySession, closedBy string) {
	if tabID == "" {
		return
	}
	_ = e.mutate(func(c *core) error {
		var lost []string
		for k, b := range c.bindings {
			if k != bySession && b.tab == tabID && !b.lost && (b.instance == instanceID || b.instance == "" || instanceID == "") {
				lost = append(lost, k)
			}
		}
		slices.Sort(lost) // events in a stable order
		for _, k := range lost {
			b := c.bindings[k]
			b.lost, b.why = true, "closed by "+closedBy
			c.setBindingLocked(k, b)
			c.emitSessionLocked(k, SessionLabel(k)+" lost its tab "+b.tab+" on instance "+b.instance+": "+b.why+
				"; its next task fails with SESSION_LOST, or replays the session if it asked")
		}
		return nil
	})
}

// SessionBinding is a session's binding as an engine restored it from its
// store: the tab its tasks run in, on its instance (Lost: the tab was lost
// before the restart). SessionKey is the session's scope
// (TaskSpec.SessionScope), its agent's id included; a binding stored before
// sessions were scoped to their agent keeps its bare name, which no task's
// session matches any more: its tab is closed after the idle timeout.
type SessionBinding struct {
	SessionKey string
	InstanceID string
	TabID      string
	Lost       bool
}

// SessionAdopter is an Executor that takes charge of the sessions' bindings
// an engine restored from its store (Engine.Start hands them over before
// its first dispatch), so that a session never used again after a restart
// does not keep its binding and its tab for ever: the executor closes the
// tab after its idle timeout, as it does for the sessions it bound itself,
// and the binding goes (ExpireSession).
type SessionAdopter interface {
	AdoptSessions([]SessionBinding)
}

// restoredBindingsLocked lists the bindings, in session order.
func (c *core) restoredBindingsLocked() []SessionBinding {
	out := make([]SessionBinding, 0, len(c.bindings))
	for k, b := range c.bindings {
		out = append(out, SessionBinding{SessionKey: k, InstanceID: b.instance, TabID: b.tab, Lost: b.lost})
	}
	slices.SortFunc(out, func(a, b SessionBinding) int { return strings.Compare(a.SessionKey, b.SessionKey) })
	return out
}

// ExpireSession drops a session's binding to tabID (engine.InstanceSink): the
// executor closed the tab after its idle timeout. A SESSION event says so,
// with reason; the session's next task starts over in a new tab. A binding
// to another tab (the session moved on meanwhile) stays.
func (e *Engine) ExpireSession(key, tabID, reason string) {
	_ = e.mutate(func(c *core) error {
		if b, ok := c.bindings[key]; !ok || (tabID != "" && b.tab != tabID) {
			return nil
		}
		c.dropBindingLocked(key)
		c.emitSessionLocked(key, reason)
		return nil
	})
}
