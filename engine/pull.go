package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// Pull lanes: work for external workers that ask for it (CW's leased
// entries) instead of being pushed to a browser instance.
//
// The dispatcher never opens a pull lane on its own. A worker's Pull opens
// it for one decision loop: the fairness policy chooses among the lane's
// queue heads as it chooses among the pushed lanes' (the native built-in
// under the lock: aged heads first, then fair share among agents; any other
// policy as in a round of dispatch, outside the lock unless inline, with
// its hold and the native fallback), under every ceiling — global, lane,
// agent, session, batch — and each task chosen is assigned and
// marked RUNNING at once, under a lease that lasts as long as the worker
// asked. The attempts are committed before Pull returns them. From there the
// Run is the worker's: Extend renews the lease, Finish ends the attempt
// (success, failure, or a release that spends no attempt), and a lease that
// runs out ends it as a timed-out, transient failure under the lane's retry
// policy. A cancelled task's run is cancelled as usual; the worker learns of
// it on its next call.

// releasedPrefix starts the error of an attempt handed back by its worker
// (Outcome.Release): such attempts do not count against the retry budget.
const releasedPrefix = "released: "

// Pull assigns up to max tasks of the pull lane named lane to a worker, each
// under a lease of leaseFor (no later than the task's own deadline), and
// returns their runs once they are committed. It returns no runs, and no
// error, when nothing can be dispatched: the lane is empty or paused, a
// ceiling is reached, or the fairness policy holds the lane's heads
// (PullHold, HoldOf). worker names the worker in the tasks' events.
func (e *Engine) Pull(ctx context.Context, lane string, max int, leaseFor time.Duration, worker string) ([]*Run, error) {
	if max < 1 {
		return nil, invalid("max", "must be at least 1, got %d", max)
	}
	if leaseFor <= 0 {
		return nil, invalid("leaseFor", "must be positive, got %s", leaseFor)
	}
	var (
		runs    []*Run
		stalled error
	)
	pb, err := e.apply(false, func(c *core) error {
		if c.closed || !e.running {
			return &Error{Code: CodeUnavailable, Retryable: true, Message: "the scheduler is not running here"}
		}
		var err error
		runs, err = c.pullLocked(lane, max, leaseFor, worker)
		if errors.Is(err, errPullStalled) {
			// What was leased is recorded: the change goes through the
			// usual unlock (timers, cascades), and the leases are handed
			// back below.
			stalled, err = err, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if stalled != nil {
		for _, r := range runs {
			r.Finish(Outcome{Release: true, Err: Transientf("the pull that leased it failed: %v", stalled)})
		}
		e.log.Error("pull lane stalled", "lane", lane, "err", stalled)
		return nil, stalled
	}
	if e.sync {
		e.commitNow() // the leases, or the events of a hold
	}
	if len(runs) > 0 && e.durable {
		// A lease is an attempt: on disk before the worker starts it.
		e.commitSoon()
		ended, err := e.waitCommitted(ctx, pb)
		if !ended || err != nil {
			for _, r := range runs {
				r.Finish(Outcome{Release: true, Err: Transientf("the lease was not confirmed durable")})
			}
			return nil, &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "the leases could not be committed; lease again"}
		}
	}
	return runs, nil
}

// pullLocked assigns up to max tasks of the pull lane named lane, leased for
// leaseFor, and returns their runs. The fairness policy chooses among the
// lane's queue heads as it does among the heads of the pushed lanes
// (pluginRoundLocked): the native built-in on the fast path here, any other
// policy through pullByPolicyLocked.
func (c *core) pullLocked(lane string, max int, leaseFor time.Duration, worker string) ([]*Run, error) {
	l := c.laneByName[lane]
	switch {
	case l == nil:
		return nil, &Error{Code: CodeNotFound, Field: "lane", Message: "unknown lane " + quote(lane)}
	case !l.cfg.Pull:
		return nil, &Error{Code: CodeConflict, Field: "lane", Message: "lane " + quote(lane) + " is not a pull lane: its tasks go to browser instances"}
	}
	now := c.now()
	if c.fairness.p != policy.Fairness(c.native) {
		return c.pullByPolicyLocked(l, max, leaseFor, worker, now)
	}
	if len(l.hold.queues) > 0 { // a plugin held before the native policy took over
		c.clearHoldsLocked()
	}
	var runs []*Run
	stalls := pullStallBudget(l)
	for len(runs) < max && c.pullOpen(l) {
		aq, _ := c.laneTop(l, now.UnixNano())
		t := c.admitHeadLocked(aq, now.UnixNano()) // parks what a ceiling blocks, expires what is past its deadline: the loop moves on
		if t == nil {
			if stalls--; stalls < 0 {
				return runs, pullStalled(l)
			}
			continue
		}
		runs = append(runs, c.leaseLocked(t, leaseFor, worker, now))
	}
	return runs, nil
}

// errPullStalled is wrapped by the error of a pull that stopped because its
// lane's heads kept failing admission without being parked (pullStalled).
var errPullStalled = errors.New("engine: a pull made no progress")

// pullStallBudget bounds the admissions of a pull (under one hold of the
// lock) that lease nothing. Each such admission parks what a ceiling blocks
// — an agent at its ceiling, or a queue of a session or batch at its own —
// which takes it out of the lane's heaps until a slot frees, and nothing
// frees one while the lock is held; or it expires a head whose deadline
// has come (admitHeadLocked), which takes that task out of its queue: the
// lane's pending tasks, n, have at most n agents and n queues, and each
// task expired is one fewer, so at most 2n admissions lease nothing before
// the heaps are empty. One more means that a ceiling check and the heaps
// disagree, a head coming back to the top without being parked: an engine
// bug, which would otherwise loop for ever under the lock.
func pullStallBudget(l *lane) int { return 2*l.queued + 1 }

// pullStalled is the error of a pull of l whose stall budget ran out.
func pullStalled(l *lane) error {
	return fmt.Errorf("%w: lane %q: its heads were refused %d times without being parked (in flight %d of %d; an engine bug: the ceiling checks and the queues disagree)",
		errPullStalled, l.cfg.Name, pullStallBudget(l)+1, l.inflight, l.cfg.MaxInFlight)
}

// pullOpen reports whether the pull lane l may lease one more task: it is
// still a pull lane (not removed, nor switched while a policy decided
// outside the lock), not paused, under its ceiling and the engine's, and
// has a queue whose head may go.
func (c *core) pullOpen(l *lane) bool {
	return l.cfg.Pull && !l.cfg.Removed && !l.cfg.Paused && c.inflight < c.cfg.MaxInFlight &&
		l.inflight < l.cfg.MaxInFlight && l.fair.Len() > 0
}

// pullScratch holds the candidates of pulls whose fairness policy is not
// the native one: each pull takes its own, since several workers' pulls and
// a round of dispatch may each be deciding outside the lock at once.
var pullScratch = sync.Pool{New: func() any { return new(dispatchScratch) }}

// pullByPolicyLocked is pullLocked under a fairness policy other than the
// native one, as pluginRoundLocked is a round of dispatch under one: the
// policy picks among up to FairnessCandidates of the lane's queue heads
// (under the lock if it is inline, else outside it on the pull's own copy
// of them), for up to as many slots as the worker asked for and the
// ceilings leave, and each pick is checked against every ceiling as it is
// leased. An answer of none makes that decision in the native order; a
// hold leases nothing more (what was leased before it stays leased), and
// the lane's tasks say so (lane.hold, HoldOf) until the next pull's decision
// ends (or the fairness policy changes).
// No timer asks a held pull lane's policy again: a worker's next Pull does,
// and a waiting worker looks again at the hold's hint (PullHold).
func (c *core) pullByPolicyLocked(l *lane, max int, leaseFor time.Duration, worker string, now time.Time) ([]*Run, error) {
	sc := pullScratch.Get().(*dispatchScratch)
	defer func() {
		clear(sc.aqs)
		clear(sc.topK)
		clear(sc.agentIDs)
		clear(sc.laneNames)
		clear(sc.dets)
		sc.placed = nil
		pullScratch.Put(sc)
	}()
	// The lane's hold stands until this decision ends: a decision outside
	// the lock lets other work in meanwhile, whose announcements must see
	// the hold as it is, not as cleared (that would end it and announce it
	// again once this pull holds the same heads).
	var next holdState
	defer c.replaceHoldLocked(&l.hold, &next)
	var runs []*Run
	for len(runs) < max && c.pullOpen(l) {
		slots := min(max-len(runs), c.cfg.MaxInFlight-c.inflight, l.cfg.MaxInFlight-l.inflight)
		cands, aqs := c.candidatesLocked(sc, now.UnixNano(), 0, l)
		if len(cands) == 0 {
			break
		}
		d, ok := c.decideFairnessLocked(sc, now, cands, aqs, slots, &next)
		if !ok || d.held {
			return runs, nil // a hold: nothing from these heads now, and what was leased stays leased
		}
		now = d.now
		made := false
		for _, p := range d.picks {
			aq := aqs[p]
			if len(runs) >= max || !aq.eligible() || !c.pullOpen(l) {
				continue
			}
			if t := c.admitHeadLocked(aq, now.UnixNano()); t != nil {
				runs = append(runs, c.leaseLocked(t, leaseFor, worker, now))
				made = true
			}
		}
		if made {
			continue
		}
		// None: the policy's answer, or every pick blocked by a ceiling it
		// cannot see (those queues are parked now, so the next call sees
		// new heads). This decision is made in the native order, so that a
		// policy that keeps picking parked queues cannot stall the lane.
		stalls := pullStallBudget(l)
		for !made && len(runs) < max && c.pullOpen(l) {
			aq, _ := c.laneTop(l, now.UnixNano())
			if t := c.admitHeadLocked(aq, now.UnixNano()); t != nil {
				runs = append(runs, c.leaseLocked(t, leaseFor, worker, now))
				made = true
			} else if stalls--; stalls < 0 {
				return runs, pullStalled(l)
			}
		}
		if !made {
			break
		}
	}
	return runs, nil
}

// leaseLocked assigns t to a worker under a lease of leaseFor and marks it
// RUNNING: the lease starts the attempt.
func (c *core) leaseLocked(t *task, leaseFor time.Duration, worker string, now time.Time) *Run {
	// Its ASSIGNED event says it was leased, and to whom, not dispatched:
	// nothing pushed it anywhere.
	assigned := "leased"
	if worker != "" {
		assigned = "leased by " + worker
	}
	r := c.assignLocked(t, nil, now, assigned)
	c.extendLocked(r, now.Add(leaseFor))
	// A worker reports no start of its own, so its start is its
	// assignment, one instant.
	att := t.lastAttempt()
	att.StartedAt = now
	reason := "leased for " + leaseFor.String()
	if worker != "" {
		reason = "leased by " + worker + " for " + leaseFor.String()
	}
	c.setStateAt(t, StateRunning, reason, now)
	return r
}

// Extend moves the deadline of the attempt (the worker's lease) to until, or
// to the task's deadline if that is earlier, and returns the deadline now in
// force. It fails with CONFLICT once the attempt has ended, timed out or been
// cancelled.
func (r *Run) Extend(until time.Time) (time.Time, error) { return r.owner.extend(r, until) }

// extend is Run.Extend for the engine's runs.
func (e *Engine) extend(r *Run, until time.Time) (time.Time, error) {
	_, err := e.apply(false, func(c *core) error {
		var err error
		until, err = c.extendRunLocked(r, until)
		return err
	})
	if err != nil {
		return time.Time{}, err
	}
	return until, nil
}

// extendRunLocked extends r's lease, unless its attempt is over.
func (c *core) extendRunLocked(r *Run, until time.Time) (time.Time, error) {
	t := r.task
	if t.run != r || t.timedOut || !t.state.InFlight() {
		return time.Time{}, conflict("attempt %d of task %s is over", r.attempt, r.id)
	}
	return c.extendLocked(r, until), nil
}

// extendLocked sets r's deadline (capped by its task's) and lease timer.
func (c *core) extendLocked(r *Run, until time.Time) time.Time {
	t := r.task
	if d := t.spec.Deadline; !d.IsZero() && d.Before(until) {
		until = d
	}
	r.ctx.mu.Lock()
	r.ctx.deadline = until
	r.ctx.mu.Unlock()
	c.timers[timerLease].set(t, until.UnixNano())
	return until
}

// Leased returns the runs of the attempts under way in the pull lane named
// lane ("" for every pull lane): after a restart, the leases that survived it
// (see resumePullLocked), for the worker-facing side to take back.
func (e *Engine) Leased(lane string) []*Run {
	var out []*Run
	e.view(func(c *core) { out = c.leasedLocked(lane) })
	return out
}

// leasedLocked is Leased on the core.
func (c *core) leasedLocked(lane string) []*Run {
	var out []*Run
	for _, t := range c.tasks {
		if t.run != nil && t.lane.cfg.Pull && (lane == "" || t.lane.cfg.Name == lane) {
			out = append(out, t.run)
		}
	}
	return out
}

// resumePullLocked keeps the lease of a pull task that was RUNNING when the
// previous process stopped: its worker may still be at it and complete it
// with the lease it holds. The lease runs for the lane's timeout from now
// (the worker's own term was not recorded), and the task's reason says so
// (resumedLeaseReason), and an EventLeaseResumed announces it; renewing it
// or ending the attempt works as before the restart. A lease whose task's
// deadline has come is not resumed: it could only be over already, and its
// attempt counts as interrupted, as a pushed one does (recoverLocked), which
// fails the task for its deadline. It reports whether it resumed t.
func (e *Engine) resumePullLocked(t *task, now time.Time) bool {
	att := t.lastAttempt()
	if !t.lane.cfg.Pull || t.state != StateRunning || att == nil || !att.EndedAt.IsZero() || !e.durable {
		return false
	}
	if d := t.spec.Deadline; !d.IsZero() && !now.Before(d) {
		return false
	}
	e.reserveLocked(t, nil)
	r := &Run{owner: e, task: t, spec: t.spec, id: t.id, lease: att.LeaseID, attempt: att.N}
	e.nextLease = max(e.nextLease, att.LeaseID)
	t.run, t.timedOut = r, false
	until := e.extendLocked(r, now.Add(t.lane.cfg.Timeout))
	// The state does not change, but the reason does: an event says so, in
	// the same commit as the task, so that the task's subscribers learn what
	// the stored task says (as they learn of a push lane's interrupted
	// attempt from its state event).
	t.reason = resumedLeaseReason(t.reason, until.Sub(now), until.Before(now.Add(t.lane.cfg.Timeout)))
	e.emitTaskAtLocked(t, EventLeaseResumed, now, t.reason)
	return true
}

// resumedLeasePrefix starts the reason of a task whose lease was resumed
// after a restart.
const resumedLeasePrefix = "lease resumed after a restart"

// resumedLeaseReason is the reason of a pull task whose lease was resumed
// after a restart, for term (the lane's timeout, or less when the task's
// deadline comes first: byDeadline): the worker's own term and name were not
// stored, so what the reason said before the restart — "leased by W for D",
// the lease as it was made — follows as what it was. A lease resumed again
// keeps the original's words, not the first resumption's.
func resumedLeaseReason(prev string, term time.Duration, byDeadline bool) string {
	if rest, ok := strings.CutPrefix(prev, resumedLeasePrefix); ok {
		if _, orig, ok := strings.Cut(rest, "): it was "); ok {
			prev = orig
		}
	}
	bound := "the lane's timeout"
	if byDeadline {
		bound = "up to the task's deadline"
	}
	reason := resumedLeasePrefix + " for " + term.String() + " (" + bound + "; the worker's own term is not kept)"
	if prev != "" {
		reason += ": it was " + prev
	}
	return reason
}

// keepsLeaseLocked reports whether shutting down leaves t's attempt under
// way: a worker's lease on a durable store, which the next start resumes.
func (e *Engine) keepsLeaseLocked(t *task) bool {
	return e.durable && t.lane.cfg.Pull && t.state == StateRunning
}

// keptLeasesLocked counts the attempts shutting down leaves under way
// (keepsLeaseLocked): Shutdown does not wait for them.
func (e *Engine) keptLeasesLocked() int {
	n := 0
	if e.durable {
		for _, l := range e.lanes {
			if l.cfg.Pull {
				n += l.inflight
			}
		}
	}
	return n
}

// released counts the attempts since the last reset that their worker
// handed back: they do not count against the retry budget.
func (t *task) released() int {
	from := 0
	if t.out != nil {
		from = int(t.out.resetAt)
	}
	n := 0
	for _, a := range t.attempts[min(from, len(t.attempts)):] {
		if strings.HasPrefix(a.Error, releasedPrefix) {
			n++
		}
	}
	return n
}

func quote(s string) string { return `"` + s + `"` }
