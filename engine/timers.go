package engine

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/engine/internal/heap"
)

// Timers. Everything time-driven in the engine — retry backoff, deadlines,
// attempt timeouts and lease expiry — is an entry in one of three indexed
// heaps of tasks, and a single clock timer is armed for the earliest entry of
// all. An entry is removed as soon as it is moot (the task moved on), so the
// heaps hold only live deadlines: the lease heap is bounded by the tasks in
// flight, the others by the tasks waiting.

const (
	timerRetry    = iota // RETRY_WAIT → QUEUED at timerAt[timerRetry]; also a task its lane's debounce holds WAITING
	timerDeadline        // a waiting task's deadline
	timerLease           // an attempt's timeout, then its lease expiry
	timerKinds
)

// noTimers is the timerIdx of a task with nothing scheduled.
var noTimers = [timerKinds]int32{-1, -1, -1}

// taskTimers is the heap of one kind of timer, by due time then seq.
type taskTimers struct {
	heap.Heap[*task, timerOrder]
}

// timerOrder orders the tasks of one kind of timer and keeps their
// timerIdx of that kind.
type timerOrder struct{ kind int }

func (o timerOrder) Less(a, b *task) bool {
	if a.timerAt[o.kind] != b.timerAt[o.kind] {
		return a.timerAt[o.kind] < b.timerAt[o.kind]
	}
	return a.seq < b.seq
}

func (o timerOrder) SetIndex(t *task, i int) { t.timerIdx[o.kind] = int32(i) }

// set schedules (or reschedules) t at `at`, Unix nanoseconds. A task's
// timerIdx entries are -1 while it is not scheduled (newTask sets them).
func (h *taskTimers) set(t *task, at int64) {
	k := h.Ops().kind
	t.timerAt[k] = at
	if i := int(t.timerIdx[k]); i >= 0 {
		h.Fix(i)
	} else {
		h.Push(t)
	}
}

// remove unschedules t, if it is scheduled.
func (h *taskTimers) remove(t *task) {
	if i := int(t.timerIdx[h.Ops().kind]); i >= 0 {
		h.Remove(i)
	}
}

func (h *taskTimers) top() *task {
	if h.Len() == 0 {
		return nil
	}
	return h.Top()
}

// armLocked makes sure the clock timer fires for the earliest entry.
func (e *Engine) armLocked() {
	if e.closed {
		return
	}
	var next int64
	for i := range e.timers {
		if t := e.timers[i].top(); t != nil && (next == 0 || t.timerAt[i] < next) {
			next = t.timerAt[i]
		}
	}
	if next == 0 || e.armed != nil && e.armedAt <= next {
		return
	}
	if e.armed != nil {
		e.armed.Stop()
	}
	e.armedAt = next
	e.armed = e.clock.AfterFunc(time.Duration(next-e.now().UnixNano()), e.onTimer)
}

// onTimer handles every entry that has fallen due.
func (e *Engine) onTimer() {
	_ = e.mutate(func(c *core) error {
		e.armed = nil
		if c.closed {
			return errUnchanged
		}
		c.timersDueLocked(c.now())
		return nil
	})
}

// timersDueLocked handles every timer entry due at now, earliest first.
func (c *core) timersDueLocked(now time.Time) {
	ns := now.UnixNano()
	for {
		k, t := -1, (*task)(nil)
		for i := range c.timers {
			if x := c.timers[i].top(); x != nil && x.timerAt[i] <= ns && (t == nil || x.timerAt[i] < t.timerAt[k]) {
				k, t = i, x
			}
		}
		if t == nil {
			break
		}
		c.timers[k].remove(t)
		switch k {
		case timerRetry:
			if t.state == StateWaiting {
				c.setState(t, StateQueued, "debounce window elapsed")
			} else {
				c.setState(t, StateQueued, "backoff elapsed")
			}
		case timerDeadline:
			c.deadlineLocked(t)
		case timerLease:
			c.leaseTimerLocked(t, now)
		}
	}
}

// deadlineLocked ends a waiting task whose deadline has passed.
func (c *core) deadlineLocked(t *task) {
	switch t.state {
	case StateQueued, StateWaiting:
		// The reason and the error say the same, so that a client reading
		// only error (as for FAILED) learns why too.
		reason := "deadline exceeded while " + lower(t.state.String())
		t.outcomeOf().errMsg = reason
		c.setState(t, StateExpired, reason)
	case StateRetryWait, StateParked:
		c.setState(t, StateFailed, "deadline exceeded while "+lower(t.state.String()))
	}
}

// deadlinesDueLocked handles every deadline due at now, earliest first, as
// their timers would: a restart (recoverLocked) runs it before anything
// can be dispatched.
func (c *core) deadlinesDueLocked(now time.Time) {
	ns := now.UnixNano()
	h := &c.timers[timerDeadline]
	for t := h.top(); t != nil && t.timerAt[timerDeadline] <= ns; t = h.top() {
		h.remove(t)
		c.deadlineLocked(t)
	}
}

// pastDeadlineLocked takes t, the head of its queue, out of the way of a
// pick that found its deadline come (admitHeadLocked): it expires at once,
// as the deadline's timer will not have run yet (it runs on the clock's
// goroutine, or fires at the same instant later in line). A plan, which
// changes nothing, sets t aside instead, and puts it back when it is made.
func (c *core) pastDeadlineLocked(t *task) {
	if c.planning {
		c.unqueueLocked(t)
		c.planAside = append(c.planAside, t)
		return
	}
	c.deadlineLocked(t)
}

// queuedPastDeadlineLocked expires t, which has just entered QUEUED at now,
// when its deadline is at or before now: whatever queued it — a retry's
// backoff ending, a lease handed back, its dependencies met, an operator's
// reset or retry, a restart — it never waits in its queue for the
// deadline's timer, where a round of dispatch or a pull could pick it
// first. It ends as that timer would end it, "deadline exceeded while
// queued".
func (c *core) queuedPastDeadlineLocked(t *task, now time.Time) {
	if d := t.timerAt[timerDeadline]; d != 0 && d <= now.UnixNano() {
		c.deadlineLocked(t)
	}
}

// leaseTimerLocked handles an attempt's timeout (first firing: cancel the
// attempt's context) and then its lease expiry (second firing: reclaim the
// slots and count a failed attempt).
func (c *core) leaseTimerLocked(t *task, now time.Time) {
	if !t.holding {
		return
	}
	if !t.timedOut {
		t.timedOut = true
		if t.run != nil {
			t.run.cancel(context.DeadlineExceeded, errAttemptTimeout)
		}
		c.timers[timerLease].set(t, now.Add(c.cfg.LeaseGrace).UnixNano())
		if t.run != nil && !t.lane.cfg.Pull && t.state.InFlight() {
			c.timeOutLocked(t, now)
		}
		return
	}
	if r := t.run; r != nil && r.ended {
		// Its executor never returned: the attempt ended at its timeout;
		// now its slot goes too.
		t.run = nil
		c.releaseLocked(t)
		if t.state == StateQueued {
			c.joinQueuesLocked(t) // its retry waited for the slot
		}
		c.stats.leaseExpired++
		c.emitReleaseLocked(t, now,
			"slot of timed-out attempt "+itoa(r.attempt)+" reclaimed: its executor did not return")
		return
	}
	n := len(t.attempts)
	att := t.lastAttempt()
	att.EndedAt = now
	att.EndedBy = EndedByEngine
	att.Class = classTransient
	att.Error = "lease expired"
	t.run = nil
	c.releaseLocked(t)
	c.stats.leaseExpired++
	if t.state == StateCancelled {
		c.emitReleaseLocked(t, now, "lease expired after cancellation")
		return
	}
	att.Code = CodeLeaseExpired // the code its retry policy is given
	c.failAttemptLocked(t, classTransient, 0, CodeLeaseExpired, "lease expired (attempt "+itoa(n)+")", now, nil)
}

// timeOutLocked ends t's push-lane attempt at its timeout: the attempt fails
// with the code timeout and the retry policy decides at once, whatever the
// instance answers later. The attempt keeps its slot until its executor
// returns (the instance confirmed the end of the action, or
// executor.abortGrace passed) or the lease grace runs out, so that ceilings
// hold at the instance; a retry joins its queues only then.
func (c *core) timeOutLocked(t *task, now time.Time) {
	r := t.run
	r.ended = true
	att := t.lastAttempt()
	att.EndedAt = now
	att.EndedBy = EndedByEngine
	msg := "timed out after " + r.ctx.deadline.Sub(att.AssignedAt).Round(time.Millisecond).String()
	att.Class, att.Error, att.Code = classTransient, msg, CodeTimeout
	c.failAttemptLocked(t, classTransient, 0, CodeTimeout, msg, now, nil)
}
