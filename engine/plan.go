package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// Plan: a read-only dry run of the dispatcher, to answer "what runs next, and
// why is my task not running?".
//
// The plan runs the real decision code on the real queues, as if the global
// and lane ceilings had room for `limit` more tasks (their current load is
// reported alongside), while agent, session, batch and instance ceilings
// apply with their current load, each planned dispatch counting against them.
// Then it undoes every planned dispatch. Because every queue ordering is
// total, undoing restores the same order, so a plan never changes what the
// engine does next. Stateful fairness plugins are told (PickDryRun) not to
// commit state.

// PlanStep is one planned dispatch.
type PlanStep struct {
	TaskID     string
	AgentID    string
	Lane       string
	SessionKey string
	InstanceID string
	// Why this queue went next: "aged" (its head waited past the aging
	// threshold), "fair share" (the native fairness order), "policy <name>",
	// or "native fallback of policy <name> (<name> did not decide: <why>)"
	// when the policy's own fallback picked in its place (a plugin that
	// faulted or is quarantined; policy.ExplainedFairness).
	Reason string
	Waited time.Duration // how long the task has been queued
}

// PlanSkip is a queue with work that the plan had to pass over, and why.
type PlanSkip struct {
	Lane       string
	AgentID    string
	SessionKey string // "" when the reason concerns the whole (lane, agent) queue
	Reason     string
	Tasks      int // queued tasks held up
}

// Plan is the result of a dry run.
type Plan struct {
	At          time.Time
	Fairness    string
	Steps       []PlanStep
	Skipped     []PlanSkip
	InFlight    int
	MaxInFlight int
	Waiting     int // tasks waiting for dependencies
	RetryWait   int // tasks backing off
	Parked      int // tasks whose retry budget is spent
}

type plannedDispatch struct {
	t    *task
	inst *instance
}

// Plan returns the next limit dispatch decisions (1..1000) for the current
// state and clock, without changing anything.
func (e *Engine) Plan(ctx context.Context, limit int) (*Plan, error) {
	return e.PlanAt(ctx, limit, time.Time{})
}

// PlanAt is Plan as of the time now instead of the engine clock's (zero
// means the clock's): the same state and the same now give the same plan, so
// a plan can be replayed (CW's "sched plan" contract). now decides aging and
// waiting times; the state is the engine's as it stands.
func (e *Engine) PlanAt(ctx context.Context, limit int, now time.Time) (*Plan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		return nil, invalid("limit", "must be within 1..1000, got %d", limit)
	}
	var p *Plan
	e.view(func(c *core) { p = c.planLocked(limit, now) })
	return p, nil
}

// planLocked is PlanAt on the core: it changes nothing (what it takes for
// each step it gives back before it returns).
func (c *core) planLocked(limit int, now time.Time) *Plan {
	if now.IsZero() {
		now = c.now()
	}
	ns := now.UnixNano()
	p := &Plan{At: now, Fairness: c.fairness.name, InFlight: c.inflight, MaxInFlight: c.cfg.MaxInFlight,
		Waiting: c.counts[StateWaiting], RetryWait: c.counts[StateRetryWait], Parked: c.counts[StateParked]}
	native := c.fairness.p == policy.Fairness(c.native)
	c.planning = true
	var done []plannedDispatch
	var held []*agentQueue // the queues a fairness policy holds, if it does
	heldReason := ""
	for len(done) < limit {
		var t *task
		reason := ""
		if native {
			t, reason = c.nextPlannedLocked(ns, limit)
		} else {
			var hintMs int64
			var fellBack string
			t, held, hintMs, fellBack = c.nextByPolicyLocked(now, limit)
			reason = "policy " + c.fairness.name
			if fellBack != "" {
				reason = "native fallback of policy " + c.fairness.name + " (" + c.fairness.name + " did not decide: " + fellBack + ")"
			}
			if held != nil {
				heldReason = c.holdReasonLocked(hintMs)
			}
		}
		if t == nil {
			break
		}
		inst := c.scratch.placed
		step := PlanStep{TaskID: t.id, AgentID: t.agent.id, Lane: t.lane.cfg.Name, SessionKey: t.spec.Session(),
			Reason: reason, Waited: time.Duration(ns - t.queuedAt)}
		if inst != nil {
			step.InstanceID = inst.info.ID
		}
		p.Steps = append(p.Steps, step)
		c.unqueueLocked(t)
		c.reserveLocked(t, inst)
		done = append(done, plannedDispatch{t, inst})
	}
	p.Skipped = c.skipsLocked(limit, held, heldReason)
	for i := len(done) - 1; i >= 0; i-- {
		c.releaseLocked(done[i].t)
		c.enqueueLocked(done[i].t)
	}
	// The heads a pick found at or past their deadline were set aside, not
	// expired (pastDeadlineLocked): dispatch would expire them, never
	// dispatch them, so they are no step of the plan.
	for i := len(c.planAside) - 1; i >= 0; i-- {
		c.enqueueLocked(c.planAside[i])
	}
	clear(c.planAside)
	c.planAside, c.planning = c.planAside[:0], false
	return p
}

// nextPlannedLocked is nextLocked that also says why the queue won.
func (c *core) nextPlannedLocked(now int64, slack int) (*task, string) {
	switch t, aged := c.nextLocked(now, slack); {
	case t == nil:
		return nil, ""
	case aged:
		return t, "aged"
	default:
		return t, "fair share"
	}
}

// nextByPolicyLocked asks the fairness policy for one pick, in dry-run mode.
// When the policy holds, it returns no task, the queues it was asked about
// (a copy) and its hint in milliseconds. fellBack, when not "", says why
// the policy's native fallback picked in its place (policy.ExplainedFairness).
func (c *core) nextByPolicyLocked(now time.Time, slack int) (t *task, held []*agentQueue, hintMs int64, fellBack string) {
	ep, explained := c.fairness.p.(policy.ExplainedFairness)
	for c.inflight < c.cfg.MaxInFlight+slack {
		cands, aqs := c.candidatesLocked(&c.planScratch, now.UnixNano(), slack, nil)
		if len(cands) == 0 {
			return nil, nil, 0, ""
		}
		ctx, picks := c.pickInputLocked(&c.planScratch, now, 1, policy.PickDryRun)
		var n int
		if explained {
			n, fellBack = ep.PickExplained(ctx, cands, picks)
		} else {
			n = c.fairness.p.Pick(ctx, cands, picks)
		}
		picks, hintMs, isHeld := c.checkPicksLocked(ctx, cands, picks, n)
		if isHeld { // the policy dispatches nothing from these heads now
			return nil, slices.Clone(aqs), hintMs, ""
		}
		if len(picks) == 0 { // as dispatch does: this decision in the native order
			t, _ := c.nextPlannedLocked(now.UnixNano(), slack)
			return t, nil, 0, fellBack
		}
		aq := aqs[picks[0]]
		if !aq.eligible() || !c.laneOpen(aq.lane, slack) {
			return nil, nil, 0, ""
		}
		if t := c.admitHeadLocked(aq, now.UnixNano()); t != nil {
			return t, nil, 0, fellBack
		}
	}
	return nil, nil, 0, ""
}

// holdReasonLocked says that the fairness policy holds, and for how long it
// asked (hintMs 0: until something changes), in the words of Hold.Reason.
func (c *core) holdReasonLocked(hintMs int64) string {
	if hintMs > 0 {
		return fmt.Sprintf("held by fairness plugin %s (asks again in %v)", c.fairness.name, time.Duration(hintMs)*time.Millisecond)
	}
	return fmt.Sprintf("held by fairness plugin %s (until something changes)", c.fairness.name)
}

// skipsLocked lists the queues with work that cannot go next, and why:
// held are the queues a fairness policy holds, for heldReason.
func (c *core) skipsLocked(slack int, held []*agentQueue, heldReason string) []PlanSkip {
	var out []PlanSkip
	for _, aq := range held {
		if aq != nil && aq.queued > 0 {
			out = append(out, PlanSkip{Lane: aq.lane.cfg.Name, AgentID: aq.agent.id, Reason: heldReason, Tasks: aq.queued})
		}
	}
	for _, a := range c.agents {
		for _, aq := range a.queues {
			if aq == nil || aq.queued == 0 {
				continue
			}
			l := aq.lane
			switch {
			case l.cfg.Paused:
				out = append(out, PlanSkip{Lane: l.cfg.Name, AgentID: a.id, Reason: "lane paused", Tasks: aq.queued})
				continue
			case l.cfg.Pull:
				reason := "pull lane: waits for a worker to lease it"
				if h, ok := c.queueHoldLocked(aq); ok {
					reason = h.Reason() // it names the pull lane itself
				}
				out = append(out, PlanSkip{Lane: l.cfg.Name, AgentID: a.id, Reason: reason, Tasks: aq.queued})
				continue
			case l.inflight >= l.cfg.MaxInFlight+slack:
				out = append(out, PlanSkip{Lane: l.cfg.Name, AgentID: a.id, Reason: fmt.Sprintf("lane at its ceiling (%d/%d)", l.inflight, l.cfg.MaxInFlight), Tasks: aq.queued})
				continue
			case a.parked || a.inflight >= a.limit:
				out = append(out, PlanSkip{Lane: l.cfg.Name, AgentID: a.id, Reason: fmt.Sprintf("agent at its ceiling (%d/%d)", a.inflight, a.limit), Tasks: aq.queued})
				continue
			}
			for _, sq := range aq.subs {
				if sq.parked == nil {
					continue
				}
				out = append(out, PlanSkip{Lane: l.cfg.Name, AgentID: a.id, SessionKey: sessionOf(sq), Reason: c.parkReasonLocked(sq), Tasks: sq.tasks.Len()})
			}
		}
	}
	slices.SortFunc(out, func(x, y PlanSkip) int {
		if c := strings.Compare(x.Lane, y.Lane); c != 0 {
			return c
		}
		if c := strings.Compare(x.AgentID, y.AgentID); c != 0 {
			return c
		}
		return strings.Compare(x.SessionKey, y.SessionKey)
	})
	return out
}

// sessionOf is the name of a subQueue's session, as its tasks show it.
func sessionOf(sq *subQueue) string {
	if sq.session != nil {
		_, name := SplitSessionScope(sq.session.key)
		return name
	}
	return ""
}

func (c *core) parkReasonLocked(sq *subQueue) string {
	lim := sq.parked
	switch {
	case sq.session != nil && lim == &sq.session.lim:
		return fmt.Sprintf("session busy (%d/%d running)", lim.inflight, lim.limit)
	case lim == &c.pool:
		return "no healthy instance with room"
	}
	if h := sq.head(); h.batch != nil && lim == &h.batch.lim {
		return fmt.Sprintf("batch %s at its parallelism (%d/%d)", h.batch.id, lim.inflight, lim.limit)
	}
	for _, in := range c.instList {
		if lim == &in.lim {
			return fmt.Sprintf("instance %s full (%d/%d)", in.info.ID, lim.inflight, lim.limit)
		}
	}
	return "waiting for a slot"
}
