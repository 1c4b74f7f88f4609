package engine

import (
	"fmt"
	"slices"
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
	// Pull is set for a pull lane's queue: the policy is asked again at a
	// worker's next Pull of the lane, and a worker waiting for work looks
	// again at ReaskAt (or at the next change, without one).
	Pull bool
}

// Reason says it in words, for people: "held by fairness plugin <name> on
// lane <lane> (asks again at <time>)", or for a pull lane "held by fairness
// plugin <name> on pull lane <lane> (asks again at the next lease, or a
// waiting lease after <hint>)". A pull lane's hold names the policy's hint
// as it gave it, a span from Since, not a time: no timer asks a pull lane
// again, so a time would be a promise that lapses once it has passed with
// no lease.
func (h Hold) Reason() string {
	if h.Pull {
		when := "when something changes"
		if !h.ReaskAt.IsZero() {
			when = "after " + h.ReaskAt.Sub(h.Since).String()
		}
		return fmt.Sprintf("held by fairness plugin %s on pull lane %s (asks again at the next lease, or a waiting lease %s)", h.Policy, h.Lane, when)
	}
	if h.ReaskAt.IsZero() {
		return fmt.Sprintf("held by fairness plugin %s on lane %s (asks again when something changes: a submission, an ended task, a lane or policy change)", h.Policy, h.Lane)
	}
	return fmt.Sprintf("held by fairness plugin %s on lane %s (asks again at %s)", h.Policy, h.Lane, h.ReaskAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
}

// holdState is the latest decision's hold: the candidates' queues a fairness
// policy held. There is one for pushed dispatch (core.hold), whose
// candidates are the heads of every lane of browser instances, and one per
// pull lane (lane.hold), whose candidates are that lane's heads when a
// worker leases (Pull). The event log follows them (announceHoldsLocked):
// EventHeld when a queue's head becomes held, EventHoldEnded when its hold
// ends while it is still QUEUED. Each decision of a fairness policy other
// than the native one replaces the hold of its scope as it ends
// (replaceHoldLocked, from pluginRoundLocked and pullByPolicyLocked), so a
// hold stands only while no decision has been made since over the same
// queues.
type holdState struct {
	policy  string
	since   time.Time
	reaskAt time.Time
	queues  map[*agentQueue]struct{}
	heads   []*agentQueue // the queues held, in the order the policy saw them
}

// noteHoldLocked records in *into that the fairness policy named policy
// (the one that decided) held the queues aqs at now, with its re-ask hint in
// milliseconds (0: none).
func (c *core) noteHoldLocked(into *holdState, policy string, aqs []*agentQueue, hintMs int64, now time.Time) {
	h := holdState{policy: policy, since: now, queues: make(map[*agentQueue]struct{}, len(aqs))}
	if hintMs > 0 {
		h.reaskAt = now.Add(time.Duration(hintMs) * time.Millisecond)
	}
	for _, aq := range aqs {
		h.queues[aq] = struct{}{}
	}
	h.heads = slices.Clone(aqs) // aqs is the decision's scratch
	*into = h
}

// replaceHoldLocked ends a decision whose scope's hold is *scope (core.hold,
// or a pull lane's lane.hold): the hold it made, next (empty if it held
// nothing), replaces the one that stood while it decided, and the event log
// follows. A hold by a policy no longer in force (replaced while the
// decision ran outside the lock, clearHoldsLocked) is not kept.
//
// The previous hold stands until then, not cleared as the decision starts:
// a decision outside the lock lets other work in, and an announcement made
// meanwhile (another scope's decision, a change of policy) would otherwise
// end the holds of this scope's tasks (EventHoldEnded) only for this
// decision to hold the same heads again (EventHeld).
func (c *core) replaceHoldLocked(scope, next *holdState) {
	if next.policy != c.fairness.name {
		*next = holdState{}
	}
	*scope = *next
	c.announceHoldsLocked(scope)
}

// heldTask is a task announced held (EventHeld), and the policy that held it.
type heldTask struct {
	t      *task
	policy string
}

// announceHoldsLocked brings the announced holds (core.held) in line with
// the latest decisions' (core.hold, and each pull lane's lane.hold), after a
// decision whose hold is h (a round of dispatch, or a pull): a task
// announced held whose queue that decision did not hold, or that another
// policy decides for now, gets an EventHoldEnded if it is still QUEUED (one
// that left QUEUED said so with its state event); the head of each queue
// h held gets an EventHeld, unless it was announced held by the same policy
// already — so a policy that holds the same queue at every re-ask emits
// nothing more. Only heads are announced, the tasks the policy was asked
// about: the tasks behind them wait for them anyway.
//
// It reads the clock only when there is something to announce: it runs
// after every plugin round and pull, and most hold nothing.
func (c *core) announceHoldsLocked(h *holdState) {
	if len(c.held) == 0 && len(h.queues) == 0 {
		return
	}
	now := c.now()
	n := len(c.held)
	kept := c.held[:0]
	for _, ht := range c.held {
		t := ht.t
		if h, ok := c.holdOfLocked(t); ok && h.Policy == ht.policy {
			kept = append(kept, ht)
			continue
		}
		if t.state == StateQueued && c.tasks[t.id] == t {
			t.updatedAt = now.UnixNano()
			c.emitTaskLocked(t, EventHoldEnded, t.state, t.state, "hold by fairness plugin "+ht.policy+" ended")
		}
	}
	clear(c.held[len(kept):n])
	c.held = kept
	for _, aq := range h.heads {
		if aq.ready.Len() == 0 {
			continue // emptied while the policy decided
		}
		t := aq.head()
		h, ok := c.holdOfLocked(t)
		if !ok || slices.ContainsFunc(c.held, func(ht heldTask) bool { return ht.t == t }) {
			continue
		}
		c.held = append(c.held, heldTask{t: t, policy: h.Policy})
		t.updatedAt = now.UnixNano()
		c.emitTaskLocked(t, EventHeld, t.state, t.state, h.Reason())
	}
}

// holdOfLocked is the hold on t's queue, if a fairness policy holds it.
func (c *core) holdOfLocked(t *task) (Hold, bool) {
	if t.state != StateQueued || t.sq == nil {
		return Hold{}, false
	}
	return c.queueHoldLocked(t.sq.aq)
}

// queueHoldLocked is the hold on the queue aq, if the fairness policy in
// force held it at the latest decision over it: pushed dispatch's for a
// lane of instances, the lane's own for a pull lane.
func (c *core) queueHoldLocked(aq *agentQueue) (Hold, bool) {
	h := &c.hold
	if aq.lane.cfg.Pull {
		h = &aq.lane.hold
	}
	if len(h.queues) == 0 || h.policy != c.fairness.name {
		return Hold{}, false
	}
	if _, ok := h.queues[aq]; !ok {
		return Hold{}, false
	}
	return Hold{Policy: h.policy, Lane: aq.lane.cfg.Name, Since: h.since, ReaskAt: h.reaskAt, Pull: aq.lane.cfg.Pull}, true
}

// clearHoldsLocked forgets every hold, pushed dispatch's and the pull
// lanes', and announces the ends: the native policy, which holds nothing,
// decides from now on.
func (c *core) clearHoldsLocked() {
	c.hold = holdState{}
	for _, l := range c.lanes {
		l.hold = holdState{}
	}
	c.announceHoldsLocked(&c.hold)
}

// HoldOf reports the hold on a live QUEUED task's queue when a fairness
// policy held it at the latest decision over it (ABI version 2 hold: a round
// of dispatch, or a worker's Pull on a pull lane) and nothing has been
// decided since. A task that is not live, not QUEUED or not held has none.
func (e *Engine) HoldOf(id string) (h Hold, ok bool) {
	e.view(func(c *core) {
		if t := c.tasks[id]; t != nil {
			h, ok = c.holdOfLocked(t)
		}
	})
	return h, ok
}

// PullHold reports the hold the fairness policy's latest decision left on
// the pull lane named lane, when it held every queue it was asked about
// (ABI version 2 hold) and no worker's Pull has decided since: a worker
// waiting for work looks again at its ReaskAt, when it has one.
func (e *Engine) PullHold(lane string) (h Hold, ok bool) {
	e.view(func(c *core) {
		l := c.laneByName[lane]
		if l == nil || !l.cfg.Pull || len(l.hold.heads) == 0 || l.hold.policy != c.fairness.name {
			return
		}
		h, ok = Hold{Policy: l.hold.policy, Lane: lane, Since: l.hold.since, ReaskAt: l.hold.reaskAt, Pull: true}, true
	})
	return h, ok
}
