package engine

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// Cancellation and the operator's other verbs on tasks: retry and reset.

// cancelLocked cancels t unless it has ended. A task in flight keeps its
// slots until its executor returns (or its lease runs out): the ceiling is
// never exceeded while a cancelled attempt winds down.
func (c *core) cancelLocked(t *task, reason string) bool {
	if t.state.Terminal() {
		return false
	}
	inflight := t.state.InFlight()
	c.setState(t, StateCancelled, reason)
	if inflight {
		if t.run != nil {
			t.run.cancel(context.Canceled, &CancelledError{Reason: reason})
		}
		// Give the executor the grace period to return, then reclaim.
		t.timedOut = true
		at := c.now().Add(c.cfg.LeaseGrace).UnixNano()
		if t.timerIdx[timerLease] < 0 || at < t.timerAt[timerLease] {
			c.timers[timerLease].set(t, at)
		}
	}
	return true
}

// Cancel cancels one task. Cancelling a task that has already ended is a
// CONFLICT (the task is returned too, as far as it is committed). With a
// durable store it answers once the cancellation is committed, as Submit
// does.
func (e *Engine) Cancel(ctx context.Context, id, reason string) (*Task, error) {
	if reason == "" {
		reason = "cancelled"
	}
	var snap *Task
	pb, err := e.apply(true, func(c *core) error {
		t := c.tasks[id]
		if t == nil {
			return errNotLive
		}
		if !c.cancelLocked(t, reason) {
			return errUnchanged
		}
		snap = t.snapshot()
		return nil
	})
	switch {
	case errors.Is(err, errNotLive):
		st, err := e.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		return st, conflict("task %s has already ended (%s)", id, st.State)
	case errors.Is(err, errUnchanged):
		// It ended in memory; its end may not be committed yet (another
		// caller's cancellation, waiting for its commit): the conflict
		// shows only what is.
		st, err := e.CommittedTask(ctx, id)
		if err != nil {
			return nil, err
		}
		return st, conflict("task %s has already ended (%s)", id, st.State)
	case err != nil:
		return nil, err
	}
	if err := e.awaitCommit(ctx, pb, "the cancellation of task "+id); err != nil {
		return nil, err
	}
	return snap, nil
}

// CancelWhere cancels every live task that matches f (an empty filter is
// refused) and returns their ids, in submission order. With a durable store
// it answers once the cancellations are committed.
func (e *Engine) CancelWhere(ctx context.Context, f TaskFilter, reason string) ([]string, error) {
	if f.AgentID == "" && f.SessionKey == "" && f.Lane == "" && f.BatchID == "" && len(f.IDs) == 0 && f.ParentID == "" && len(f.Labels) == 0 {
		return nil, invalid("filter", "name at least one of agentId, sessionKey, lane, batchId, parentId, ids or labels")
	}
	if f.Lane != "" && e.laneByName[f.Lane] == nil {
		return nil, invalid("filter.lane", "unknown lane %q", f.Lane)
	}
	if reason == "" {
		reason = "cancelled"
	}
	var ids []string
	pb, _ := e.apply(true, func(c *core) error {
		victims := c.matchLiveLocked(f)
		ids = make([]string, 0, len(victims))
		for _, t := range victims {
			if c.cancelLocked(t, reason) {
				ids = append(ids, t.id)
			}
		}
		return nil
	})
	if err := e.awaitCommit(ctx, pb, "the cancellation of "+itoa(len(ids))+" tasks"); err != nil {
		return nil, err
	}
	return ids, nil
}

// matchLiveLocked returns the live tasks that have not ended and match f, in
// seq order.
func (c *core) matchLiveLocked(f TaskFilter) []*task {
	var out []*task
	for _, t := range c.tasks {
		if t.state.Terminal() {
			continue
		}
		if f.MatchFields(t.id, t.spec, t.state) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *task) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// sessionTasksLocked returns the session's live tasks that have not ended.
func (c *core) sessionTasksLocked(key string) []*task {
	return c.matchLiveLocked(TaskFilter{SessionKey: key})
}

// sessionMembersLocked returns the live tasks of session s (the agent's own:
// another agent's session of the same name is another session) that have
// not ended, in seq order.
func (c *core) sessionMembersLocked(s *session) []*task {
	var out []*task
	for _, t := range c.tasks {
		if t.session == s && !t.state.Terminal() {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *task) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// StopSession stops the sessions named key: of every agent that has one of
// that name (an agent-bound client filters by agent itself). Without all, it cancels the session's oldest
// running task. With all, it cancels everything the session has running or
// waiting, and refuses work for the session submitted before this moment
// that arrives later (a submission another node accepted, Ingest), for
// cutoffRetention, across a restart or a failover too (see
// cutoffSettingPrefix). It returns the cancelled ids; with a durable store,
// once their cancellations and the cut-off are committed.
func (e *Engine) StopSession(ctx context.Context, key string, all bool) ([]string, error) {
	if key == "" {
		return nil, invalid("sessionKey", "is required")
	}
	var ids []string
	pb, _ := e.apply(true, func(c *core) error {
		tasks := c.sessionTasksLocked(key)
		if !all {
			for _, t := range tasks {
				if t.state.InFlight() {
					c.cancelLocked(t, "session stopped")
					ids = append(ids, t.id)
					break
				}
			}
			return nil
		}
		c.setCutoffLocked(key, c.now())
		for _, t := range tasks {
			if c.cancelLocked(t, "session stopped") {
				ids = append(ids, t.id)
			}
		}
		return nil
	})
	if err := e.awaitCommit(ctx, pb, "the stop of session "+key); err != nil {
		return nil, err
	}
	return ids, nil
}

// Reset puts a PARKED task back in its queue with a fresh attempt budget.
// With a durable store it answers once the reset is committed.
func (e *Engine) Reset(ctx context.Context, id string) (*Task, error) {
	var snap *Task
	pb, err := e.apply(true, func(c *core) error {
		t := c.tasks[id]
		if t == nil {
			return errNotLive
		}
		if t.state != StateParked {
			return conflict("only a PARKED task can be reset; task %s is %s", id, t.state)
		}
		o := t.outcomeOf()
		o.resetAt = int32(len(t.attempts))
		o.prevDelay = 0
		c.setState(t, StateQueued, "reset by operator")
		snap = t.snapshot()
		return nil
	})
	if errors.Is(err, errNotLive) {
		return nil, e.endedOrMissing(ctx, id, "reset")
	}
	if err != nil {
		return nil, err
	}
	if err := e.awaitCommit(ctx, pb, "the reset of task "+id); err != nil {
		return nil, err
	}
	return snap, nil
}

// awaitCommit waits, with a durable store, for the commit that holds what an
// operator's verb recorded (w), asking for it now: the verb (Cancel,
// CancelWhere, StopSession, Retry, Reset) answers only once its change is
// durable, as a submission does. A commit that fails or
// is not confirmed within Config.CommitTimeout is UNAVAILABLE; the change
// stays recorded, and is committed once the store takes it.
func (e *Engine) awaitCommit(ctx context.Context, w commitWait, what string) error {
	if !e.durable || w.none() {
		return nil
	}
	e.commitSoon()
	ended, err := e.waitCommitted(ctx, w)
	switch {
	case !ended:
		return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: what + " was not confirmed committed in time (it may still be, once the store takes it)"}
	case err != nil:
		return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: what + " could not be committed"}
	}
	return nil
}

// errNotLive says that a task is not in memory: it has ended and left, or
// never was (the store knows which).
var errNotLive = errors.New("engine: task not live")

// errUnchanged tells mutate that an operation changed nothing, so that
// there is nothing to publish or dispatch.
var errUnchanged = errors.New("engine: nothing changed")

// Retry runs a task again now. A task backing off (RETRY_WAIT) queues at once,
// keeping its attempts and budget; a PARKED task is reset (Reset); a task that
// ended FAILED, CANCELLED, EXPIRED or REJECTED is submitted again as a new
// task that records RetryOf (terminal states never change; the link is
// committed with the new task). The new task has the original's spec —
// agent, lane, session, tab, instance, priority, action or instruction,
// labels, parent, timeout, retry policy, exhausted, webhook, queue mode —
// and none of its attempts; it drops the idempotency key (which still names
// the original), the dependencies (met, or the original ended because one
// did not: the retry runs regardless), the batch, and a deadline that has
// passed (one still ahead is kept). Retrying a task in any other state is a
// CONFLICT. With a durable store it answers once the retry is committed, as
// Submit does.
func (e *Engine) Retry(ctx context.Context, id string) (*Task, error) {
	var snap *Task
	var spec *TaskSpec
	var st State
	parked := false
	pb, err := e.apply(true, func(c *core) error {
		t := c.tasks[id]
		if t == nil {
			return errNotLive
		}
		switch t.state {
		case StateRetryWait:
			c.setState(t, StateQueued, "retried by operator")
			snap = t.snapshot()
			return nil
		case StateParked:
			parked = true
		}
		spec, st = t.spec, t.state
		return errUnchanged
	})
	switch {
	case err == nil:
		if err := e.awaitCommit(ctx, pb, "the retry of task "+id); err != nil {
			return nil, err
		}
		return snap, nil
	case parked:
		return e.Reset(ctx, id)
	case errors.Is(err, errNotLive):
		old, err := e.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		spec, st = old.Spec, old.State
	}
	if !st.Terminal() || st == StateSucceeded {
		return nil, conflict("task %s is %s: only a task in %s or %s, or one that ended %s, %s, %s or %s, can be retried",
			id, st, StateRetryWait, StateParked, StateFailed, StateCancelled, StateExpired, StateRejected)
	}
	again := *spec
	again.IdempotencyKey = "" // it keeps naming the original
	again.SubmittedAt = e.now()
	again.DependsOn = nil // met, or the original ended because one was not: the operator runs it regardless
	if !again.Deadline.IsZero() && !again.Deadline.After(again.SubmittedAt) {
		// An EXPIRED task's deadline has always passed: running it again
		// is the operator's decision to run it after all.
		again.Deadline = time.Time{}
	}
	res, pb, err := e.record(ctx, []BatchItem{{Spec: again, retryOf: id}}, nil, "")
	if err != nil {
		return nil, err
	}
	if err := e.awaitCommit(ctx, pb, "the retry of task "+id); err != nil {
		return nil, err
	}
	return res.Items[0].Task, res.Items[0].Err
}

func (e *Engine) endedOrMissing(ctx context.Context, id, verb string) error {
	st, err := e.Task(ctx, id)
	if err != nil {
		return err
	}
	return conflict("cannot %s task %s: it has ended (%s)", verb, id, st.State)
}
