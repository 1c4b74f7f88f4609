package engine

import (
	"fmt"
	"time"
)

// Hold is a fairness policy's hold on a queued task's (lane, agent) queue,
// as the latest dispatch decision left it: the policy was asked about the
// queue's head and answered hold (policy.Hold), so nothing of the queue
// goes until the policy is asked again.
type Hold struct {
	Policy  string    // the fairness policy that holds
	Lane    string    // the lane of the held queue
	Since   time.Time // when it held (the latest decision that did)
	ReaskAt time.Time // when the engine asks the policy again; zero: on the next change
}

// Reason says it in words, for people: "held by fairness plugin <name> on
// lane <lane> (asks again at <time>)".
func (h Hold) Reason() string {
	if h.ReaskAt.IsZero() {
		return fmt.Sprintf("held by fairness plugin %s on lane %s (asks again when something changes: a submission, an ended task, a lane or policy change)", h.Policy, h.Lane)
	}
	return fmt.Sprintf("held by fairness plugin %s on lane %s (asks again at %s)", h.Policy, h.Lane, h.ReaskAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// holdState is the latest dispatch round's hold: the candidates' queues a
// fairness policy held. Each round of a fairness policy other than the
// native one starts by clearing it (pluginRoundLocked), so it stands only
// while no decision has been made since.
type holdState struct {
	policy  string
	since   time.Time
	reaskAt time.Time
	queues  map[*agentQueue]struct{}
}

// noteHoldLocked records that the fairness policy held the queues aqs at
// now, with its re-ask hint in milliseconds (0: none).
func (c *core) noteHoldLocked(aqs []*agentQueue, hintMs int64, now time.Time) {
	h := holdState{policy: c.fairness.name, since: now, queues: make(map[*agentQueue]struct{}, len(aqs))}
	if hintMs > 0 {
		h.reaskAt = now.Add(time.Duration(hintMs) * time.Millisecond)
	}
	for _, aq := range aqs {
		h.queues[aq] = struct{}{}
	}
	c.hold = h
}

// holdOfLocked is the hold on t's queue, if a fairness policy holds it.
func (c *core) holdOfLocked(t *task) (Hold, bool) {
	h := &c.hold
	if len(h.queues) == 0 || t.state != StateQueued || t.sq == nil || h.policy != c.fairness.name {
		return Hold{}, false
	}
	if _, ok := h.queues[t.sq.aq]; !ok {
		return Hold{}, false
	}
	return Hold{Policy: h.policy, Lane: t.lane.cfg.Name, Since: h.since, ReaskAt: h.reaskAt}, true
}

// HoldOf reports the hold on a live QUEUED task's queue when a fairness
// policy held it at the latest dispatch decision (ABI version 2 hold) and
// nothing has been decided since. A task that is not live, not QUEUED or
// not held has none.
func (e *Engine) HoldOf(id string) (h Hold, ok bool) {
	e.view(func(c *core) {
		if t := c.tasks[id]; t != nil {
			h, ok = c.holdOfLocked(t)
		}
	})
	return h, ok
}
