package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
)

// The end of an attempt: success, failure and the retry decision, stale
// completions, and the release of a cancelled task's slots.

const (
	classTransient = policy.ClassTransient
	classPermanent = policy.ClassPermanent
	classCancelled = policy.ClassCancelled
)

var errAttemptTimeout = errors.New("attempt timed out")

// CancelledError is the cause of a cancelled attempt's context.
type CancelledError struct{ Reason string }

func (e *CancelledError) Error() string { return "task cancelled: " + e.Reason }

func itoa(n int) string { return strconv.Itoa(n) }

// started records that an attempt reached its instance.
func (e *Engine) started(r *Run, instanceID, tabID string) {
	// The start waits longer for company than other lazy changes
	// (runningCommitDelay): the attempt's end usually takes it along.
	_, _ = e.applyTo(false, e.runningCh, func(c *core) error {
		c.startedLocked(r, instanceID, tabID)
		return nil
	})
	if e.sync {
		e.commitNow()
	}
}

// startedLocked records that r's attempt reached its instance, unless the
// attempt is over already.
func (c *core) startedLocked(r *Run, instanceID, tabID string) {
	t := r.task
	if t.run != r || t.state != StateAssigned {
		return
	}
	att := t.lastAttempt()
	att.StartedAt = c.now()
	if instanceID != "" {
		att.InstanceID = instanceID
		c.moveInstanceLocked(t, instanceID)
	}
	if tabID != "" {
		att.TabID = tabID
	}
	c.bindLocked(t, att.InstanceID, att.TabID)
	reason := "started"
	if att.InstanceID != "" {
		reason = "started on " + att.InstanceID
	}
	c.setState(t, StateRunning, reason)
}

// moveInstanceLocked moves t's instance slot to the instance the executor
// actually used (a named tab may live elsewhere than the engine guessed). The
// instance is already running the attempt, so it counts there even if that
// takes it over its capacity for a moment; nothing new lands on it until it
// is back under.
func (c *core) moveInstanceLocked(t *task, id string) {
	if t.inst != nil && t.inst.info.ID == id {
		return
	}
	to := c.instances[id]
	if to == nil {
		return
	}
	if from := t.inst; from != nil {
		from.lim.inflight--
		c.wakeLocked(&from.lim)
		c.wakeLocked(&c.pool)
	}
	to.lim.inflight++
	t.inst = to
}

// bindLocked remembers the tab a session's task ran in, so that the
// session's next tasks go to the same tab.
func (c *core) bindLocked(t *task, instanceID, tabID string) {
	if t.session == nil || tabID == "" || t.spec.TabID != "" {
		return
	}
	if old, ok := c.bindings[t.session.key]; ok && old.lost && old.instance == instanceID && old.tab == tabID {
		return // lost already: said once
	}
	b := binding{instance: instanceID, tab: tabID}
	if c.instanceGoneLocked(instanceID) {
		// The attempt ran on past the instance's removal: the page it
		// built went with the instance.
		b.lost = true
		c.emitSessionLocked(t.session.key, SessionLabel(t.session.key)+" lost its tab "+tabID+": instance "+instanceID+" was removed; its next task fails with SESSION_LOST, or replays the session if it asked")
	}
	c.setBindingLocked(t.session.key, b)
}

// finish ends an attempt with the executor's outcome.
func (e *Engine) finish(r *Run, o Outcome) {
	ended := false
	_, _ = e.apply(true, func(c *core) error {
		ended = c.finishLocked(r, o)
		return nil
	})
	if !ended {
		return
	}
	// The attempt is over: release what hangs on its context. Its end
	// rides in the next commit someone waits for — usually the next
	// submission's, which saves both a transaction — unless a client
	// follows the task and it ended (unlock asks for that commit at once).
	r.cancel(context.Canceled, nil)
}

// finishLocked ends r's attempt with outcome o, or records a stale
// completion when r no longer holds its lease; it reports whether the
// attempt ended now.
func (c *core) finishLocked(r *Run, o Outcome) bool {
	t := r.task
	var ahead *retryAhead
	if t.run == r && !r.ended {
		ahead = c.retryOutsideLocked(t, o) // a policy that is not inline decides outside the lock
	}
	if t.run != r {
		c.staleLocked(r)
		return false
	}
	now := c.now()
	att := t.lastAttempt()
	if !r.ended { // a timed-out attempt ended at its timeout
		att.EndedAt = now
		att.HTTPStatus = o.HTTPStatus
		att.EndedBy = enderOf(t, o)
	}
	if o.InstanceID != "" {
		att.InstanceID = o.InstanceID
	}
	if o.TabID != "" {
		att.TabID = o.TabID
	}
	att.TabTime, att.ActionTime = max(o.TabTime, 0), max(o.ActionTime, 0)
	t.run = nil
	c.timers[timerLease].remove(t)
	c.releaseLocked(t)
	if r.ended && t.state == StateQueued {
		c.joinQueuesLocked(t) // its retry waited for the slot
	}
	if errors.Is(o.Err, ErrInstanceGone) && t.session != nil {
		c.dropBindingLocked(t.session.key)
	} else {
		c.bindLocked(t, att.InstanceID, att.TabID)
	}
	switch {
	case r.ended:
		// Its end was recorded at its timeout; the instance's late answer
		// changes nothing but frees the slot.
		answer := "an answer"
		if o.Err != nil {
			answer = "an error"
		}
		c.emitReleaseLocked(t, now,
			"slot of timed-out attempt "+itoa(r.attempt)+" released: its instance confirmed the end with "+answer)
	case t.state == StateCancelled:
		att.Class = classCancelled
		att.Error = "cancelled: " + t.reason
		att.EndedBy = EndedByEngine // the worker's or executor's return confirms the cancellation
		c.emitReleaseLocked(t, now, "executor returned after cancellation")
	case o.Release:
		why := "handed back"
		if o.Err != nil {
			why = o.Err.Error()
		}
		att.Error = releasedPrefix + why
		// Handed back at or past its deadline (a lease runs no later, so
		// its worker answered in the lease grace), it expires at once
		// (setStateAt: queuedPastDeadlineLocked).
		c.setStateAt(t, StateQueued, "released: "+why, now)
	case o.Err == nil:
		if o.Result != nil || t.out != nil {
			out := t.outcomeOf()
			out.result, out.errMsg, out.class = o.Result, "", policy.ClassNone
		}
		c.setStateAt(t, StateSucceeded, "completed", now)
	default:
		class, msg, fault := attemptFailure(t, o)
		att.InstanceFault = fault
		att.Class, att.Error, att.Code = class, msg, errorCode(t, o)
		if o.Final && !c.closed {
			// Its worker said no retry can help: the retry policy is
			// not asked.
			out := t.outcomeOf()
			out.errMsg, out.class = msg, class
			c.setStateAt(t, StateFailed, "failed by its worker (not retryable): "+msg, now)
			return true
		}
		c.failAttemptLocked(t, class, o.HTTPStatus, att.Code, msg, now, ahead)
	}
	return true
}

// enderOf says who ends t's attempt with o: on a pull lane its worker when
// the outcome is the worker's own call (Outcome.ByWorker), else the engine
// (package pull finishing an expired or cancelled lease); on a pushed lane
// the executor, but for an executor's cancellation that answers the engine
// cancelling the run (a shutdown; a timeout and a cancelled task are
// recorded as the engine's elsewhere), which is the engine's end.
func enderOf(t *task, o Outcome) Ender {
	switch {
	case t.lane.cfg.Pull && o.ByWorker:
		return EndedByWorker
	case t.lane.cfg.Pull:
		return EndedByEngine
	case o.Err != nil && o.Class == classCancelled && t.run != nil && t.run.Err() != nil:
		return EndedByEngine
	}
	return EndedByExecutor
}

// attemptFailure is how a failed attempt of t counts: its error class and
// message, and whether it is an instance fault the budget may forgive — not
// one after which the action may have run (ErrMayHaveRun) when t allows a
// single attempt: that one counts.
func attemptFailure(t *task, o Outcome) (class policy.ErrorClass, msg string, instanceFault bool) {
	class = o.Class
	msg = o.Err.Error()
	if t.timedOut {
		class = classTransient
		if o.Code != CodeLeaseExpired {
			// A pull lane's expired lease says so itself.
			msg = "timed out: " + msg
		}
	} else if class == classTransient && errors.Is(o.Err, ErrInstanceFault) {
		if errors.Is(o.Err, ErrMayHaveRun) && t.budget() <= 1 {
			// The action may have run, and the task is promised at most
			// one run of it: the attempt counts, so that the budget
			// ends the task rather than a free retry repeating it.
			msg = mayHaveRunPrefix + msg
		} else {
			msg = instanceFaultPrefix + msg
			instanceFault = true
		}
	} else if class == classCancelled {
		// Cancelled by something other than the engine (the executor
		// shutting down): worth another attempt.
		class = classTransient
	}
	return class, msg, instanceFault
}

// staleLocked records a completion for an attempt that no longer holds its
// lease.
func (c *core) staleLocked(r *Run) {
	c.stats.stale++
	t := r.task
	if c.tasks[t.id] != t {
		return // long gone from memory: counted, nothing more to record
	}
	t.updatedAt = c.now().UnixNano()
	c.emitTaskLocked(t, EventStale, t.state, t.state,
		"late completion of attempt "+itoa(r.attempt)+" ignored: lease "+strconv.FormatUint(r.lease, 10)+" was reclaimed")
}

// failAttemptLocked applies the retry policy to a failed attempt of t (which
// no longer holds its slots).
// ahead, when not nil, is the decision already made outside the lock
// (retryOutsideLocked); it is used if it was made on the same record.
func (c *core) failAttemptLocked(t *task, class policy.ErrorClass, status int, code, msg string, now time.Time, ahead *retryAhead) {
	o := t.outcomeOf()
	o.errMsg, o.class = msg, class
	if c.closed {
		c.setState(t, StateCancelled, "shutdown")
		return
	}
	if d := t.spec.Deadline; !d.IsZero() && !now.Before(d) {
		c.setState(t, StateFailed, "deadline exceeded: "+msg)
		return
	}
	if att := t.lastAttempt(); att != nil && c.forgivenLocked(att.InstanceFault, class, t.instanceFaults()) {
		faults := t.instanceFaults()
		// The instance failed, not the task: retry without spending the
		// task's budget, once the instance had time to come back (or the
		// task can go to another).
		delay := max(c.cfg.InstanceFaultDelay, t.lane.cfg.Retry.Backoff)
		t.timerAt[timerRetry] = now.Add(delay).UnixNano()
		c.setState(t, StateRetryWait, "instance fault "+itoa(faults)+"/"+itoa(c.cfg.InstanceFaultBudget)+
			", retry in "+delay.String()+": "+strings.TrimPrefix(msg, instanceFaultPrefix))
		return
	}
	dec, by, fellBack, spent := c.decideRetryLocked(t, class, status, code, now, ahead)
	decider := "retry policy " + by
	if fellBack != "" {
		decider = "the native fallback of retry policy " + by + " (" + by + " did not decide: " + fellBack + ")"
	}
	if dec.Action == policy.ActionRetry && spent {
		// The budget is the engine's to keep, whatever the policy says:
		// the policy chooses whether and when to retry within it, and an
		// attempt past it is never started. The task becomes what its
		// exhausted setting says, as it would had the policy parked it.
		why := "retry budget of " + itoa(t.budget()) + " attempts spent, though " + decider + " asked for another: "
		if t.exhausted() == ExhaustedFail {
			c.setState(t, StateFailed, why+msg)
			return
		}
		c.setState(t, StateParked, why+msg)
		return
	}
	switch dec.Action {
	case policy.ActionRetry:
		o.prevDelay = dec.DelayMs
		// Named as a failure or a park is, unless the built-in decided.
		who := ""
		if by != backoff.Name {
			who = " by " + decider
		}
		if class == policy.ClassPermanent {
			// The executor called the failure permanent (PinchTab's
			// "(not retryable)"), and the policy retries it all the
			// same: the reason says what was decided, not the verdict
			// the policy overrode. The attempt keeps its error.
			who += ", which retries a permanent failure"
			msg = strings.TrimSuffix(msg, notRetryable)
		}
		if dec.DelayMs == 0 {
			c.setState(t, StateQueued, "retrying"+who+": "+msg)
			return
		}
		t.timerAt[timerRetry] = now.Add(time.Duration(dec.DelayMs) * time.Millisecond).UnixNano()
		c.setState(t, StateRetryWait, "retry in "+(time.Duration(dec.DelayMs)*time.Millisecond).String()+who+": "+msg)
	case policy.ActionPark:
		why := "retry budget spent: "
		if !spent {
			why = "parked by " + decider + ": "
		}
		if t.exhausted() == ExhaustedFail {
			if !spent {
				why = "failed by " + decider + " (it parked the task; the lane's exhausted tasks fail): "
			}
			c.setState(t, StateFailed, why+msg)
			return
		}
		c.setState(t, StateParked, why+msg)
	default:
		if by != backoff.Name {
			msg = "failed by " + decider + ": " + msg
		}
		c.setState(t, StateFailed, msg)
	}
}

// notRetryable ends the error of a failure its instance called permanent
// (executor/pinchtab); a task's reason leaves it out when a retry policy
// retries the failure all the same.
const notRetryable = " (not retryable)"

// instanceFaultPrefix starts the error of an attempt that ended in an
// instance fault, for its readers; the engine counts Attempt.InstanceFault.
const instanceFaultPrefix = "instance fault: "

// mayHaveRunPrefix starts the error of an attempt of a single-attempt task
// that ended in an instance fault after its request was sent
// (ErrMayHaveRun): it is not forgiven, and the task's reason says why.
const mayHaveRunPrefix = "the instance failed after the request was sent, so the action may have run and was not repeated (maxAttempts 1): "

// instanceFaults counts the attempts since the last reset that ended in an
// instance fault.
func (t *task) instanceFaults() int {
	from := 0
	if t.out != nil {
		from = int(t.out.resetAt)
	}
	n := 0
	for _, a := range t.attempts[min(from, len(t.attempts)):] {
		if a.InstanceFault {
			n++
		}
	}
	return n
}

// budget is t's attempt budget (RetryPolicy.MaxAttempts, the first attempt
// included): its own retry policy's, else its lane's.
func (t *task) budget() int {
	if t.spec.Retry != nil {
		return t.spec.Retry.MaxAttempts
	}
	return t.lane.cfg.Retry.MaxAttempts
}

// exhausted is what t becomes when its retry budget is spent: its own
// choice, else its lane's.
func (t *task) exhausted() Exhausted {
	if x := t.spec.Exhausted; x != "" {
		return x
	}
	return t.lane.cfg.Exhausted
}

// forgivenLocked reports whether a failed attempt is an instance fault the
// task's budget forgives (faults counts the attempt itself).
func (c *core) forgivenLocked(instanceFault bool, class policy.ErrorClass, faults int) bool {
	return instanceFault && class == classTransient && faults <= c.cfg.InstanceFaultBudget
}

// decideRetryLocked asks the lane's retry policy — or takes the answer it
// gave outside the lock on the same record, if the lane still has that
// policy — and falls back to the built-in one when the answer is not
// valid.
//
// by names the policy whose decision it is (the built-in's when the lane's
// policy answered something invalid); fellBack, when not "", says that
// the policy's own native fallback decided in its place, and why
// (policy.ExplainedRetry: a plugin that faulted or is quarantined). spent
// reports whether the attempt was the last of the task's budget, so that a
// park or a failure the policy chose earlier is recorded as its choice,
// not as a spent budget. A retry once the budget is spent is the policy's
// answer still: failAttemptLocked refuses it.
func (c *core) decideRetryLocked(t *task, class policy.ErrorClass, status int, code string, now time.Time, ahead *retryAhead) (dec policy.Decision, by, fellBack string, spent bool) {
	f := c.failureLocked(t, class, status, now, t.instanceFaults())
	by = t.lane.retry.name
	if ahead != nil && ahead.gen == t.lane.retry.gen && ahead.decided(f, t, code) {
		dec, fellBack = ahead.dec, ahead.fellBack
	} else {
		dec, fellBack = decideRetry(t.lane.retry.p, f, t, code)
	}
	if !policy.Valid(dec) {
		c.stats.policyInvalid++
		dec, by, fellBack = defaultRetry.Decide(f), backoff.Name, ""
		if t.lane.retry.name != backoff.Name {
			by += " (in place of " + t.lane.retry.name + ", whose answer was not valid)"
		}
	}
	return dec, by, fellBack, f.Attempt >= f.MaxAttempts
}

// failureLocked is the record a retry policy decides on; faults counts the
// attempts since the last reset that ended in an instance fault, the last
// one included.
func (c *core) failureLocked(t *task, class policy.ErrorClass, status int, now time.Time, faults int) policy.Failure {
	rp := t.lane.cfg.Retry
	if t.spec.Retry != nil {
		rp = *t.spec.Retry
	}
	var prev int64
	var resetAt int
	if t.out != nil {
		prev, resetAt = t.out.prevDelay, int(t.out.resetAt)
	}
	f := policy.Failure{
		NowMs: now.UnixMilli(), TaskSeq: t.seq, CreatedAtMs: t.createdAt / int64(time.Millisecond),
		PrevDelayMs: prev, BaseDelayMs: rp.Backoff.Milliseconds(), MaxDelayMs: rp.MaxBackoff.Milliseconds(),
		Multiplier: uint32(max(rp.Multiplier, 1) * 1000), Attempt: uint16(len(t.attempts) - resetAt - min(faults, max(c.cfg.InstanceFaultBudget, 0)) - t.released()),
		MaxAttempts: uint16(rp.MaxAttempts), HTTPStatus: uint16(status), Class: class,
		Priority: int32(t.spec.Priority), Agent: t.agent.idx, Lane: t.lane.idx, LaneInflight: uint32(t.lane.inflight),
	}
	if !t.spec.Deadline.IsZero() {
		f.DeadlineMs = t.spec.Deadline.UnixMilli()
	}
	if rp.Jitter {
		f.Flags |= policy.FailureJitter
	}
	return f
}

// retryAhead is a retry decision made outside the lock, and the record it
// was made on.
type retryAhead struct {
	// gen is the assignment of the policy that decided (named.gen): the
	// lane's policy may be replaced meanwhile, perhaps by one of the same
	// name (a module reloaded under its name and assigned again), whose
	// answer this is not.
	gen      uint64
	f        policy.Failure
	code     string
	detailed bool         // the policy read the task's details (policy.DetailedRetry)
	det      recordDetail // those details, when detailed
	dec      policy.Decision
	fellBack string // why the policy's native fallback decided in its place; "" when it decided
}

// decideRetry asks p for a decision on f, with t's details when p reads
// them (policy.DetailedRetry), and says why p's native fallback decided in
// its place, if it did and p says so (policy.ExplainedRetry); the lock is
// held.
func decideRetry(p policy.Retry, f policy.Failure, t *task, code string) (policy.Decision, string) {
	switch dp := p.(type) {
	case policy.ExplainedRetry:
		return dp.DecideExplained(policy.RetryContext{Details: details{detailOf(t, code)}}, f)
	case policy.DetailedRetry:
		return dp.DecideDetailed(policy.RetryContext{Details: details{detailOf(t, code)}}, f), ""
	}
	return p.Decide(f), ""
}

// decided reports whether the decision was made on what t's failure is now:
// the same record f (the same attempt of the same task with the same
// history and settings) and, for a policy that read them, the same
// details — an agent's weight, ceiling or labels may have changed while
// the policy decided (SetAgent). The time and the lane's load may have
// moved on meanwhile. When it was not, the caller decides again under the
// lock, on the record and details as they are now.
func (a *retryAhead) decided(f policy.Failure, t *task, code string) bool {
	x := a.f
	x.NowMs, x.LaneInflight = f.NowMs, f.LaneInflight
	if x != f || a.code != code {
		return false
	}
	return !a.detailed || a.det == detailOf(t, code)
}

// retryOutsideLocked makes, outside the lock, the retry decision that the
// end of t's attempt with outcome o will need, when the lane's retry policy
// is not inline: it builds the failure record as finish will build it (the
// attempt's slot released, its error recorded), releases the lock for the
// policy call (outside) and takes it again. It returns nil when no policy decision
// will be needed, or the policy is inline.
func (c *core) retryOutsideLocked(t *task, o Outcome) *retryAhead {
	p := t.lane.retry
	if p.inline || o.Err == nil || o.Release || o.Final || t.state == StateCancelled || c.closed {
		return nil
	}
	now := c.now()
	if d := t.spec.Deadline; !d.IsZero() && !now.Before(d) {
		return nil
	}
	class, _, fault := attemptFailure(t, o)
	faults := t.instanceFaults()
	if fault {
		faults++ // the attempt ending now
	}
	if c.forgivenLocked(fault, class, faults) {
		return nil
	}
	f := c.failureLocked(t, class, o.HTTPStatus, now, faults)
	if t.holding {
		f.LaneInflight-- // its slot is released before the decision
	}
	code := errorCode(t, o)
	var det recordDetail
	dp, detailed := p.p.(policy.DetailedRetry)
	if detailed {
		det = detailOf(t, code)
	}
	var dec policy.Decision
	var fellBack string
	ep, explained := p.p.(policy.ExplainedRetry)
	c.outside(func() {
		switch {
		case explained:
			dec, fellBack = ep.DecideExplained(policy.RetryContext{Details: details{det}}, f)
		case detailed:
			dec = dp.DecideDetailed(policy.RetryContext{Details: details{det}}, f)
		default:
			dec = p.p.Decide(f)
		}
	})
	return &retryAhead{gen: p.gen, f: f, code: code, detailed: detailed, det: det, dec: dec, fellBack: fellBack}
}
