package engine

import (
	"context"
	"time"
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

type taskTimers struct {
	kind  int
	items []*task
}

func (h *taskTimers) less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.timerAt[h.kind] != b.timerAt[h.kind] {
		return a.timerAt[h.kind] < b.timerAt[h.kind]
	}
	return a.seq < b.seq
}

func (h *taskTimers) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].timerIdx[h.kind] = int32(i)
	h.items[j].timerIdx[h.kind] = int32(j)
}

func (h *taskTimers) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *taskTimers) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// set schedules (or reschedules) t at `at`, Unix nanoseconds. A task's
// timerIdx entries are -1 while it is not scheduled (newTask sets them).
func (h *taskTimers) set(t *task, at int64) {
	t.timerAt[h.kind] = at
	i := int(t.timerIdx[h.kind])
	if i < 0 {
		i = len(h.items)
		t.timerIdx[h.kind] = int32(i)
		h.items = append(h.items, t)
	}
	h.down(i)
	h.up(int(t.timerIdx[h.kind]))
}

// remove unschedules t, if it is scheduled.
func (h *taskTimers) remove(t *task) {
	i := int(t.timerIdx[h.kind])
	if i < 0 {
		return
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	t.timerIdx[h.kind] = -1
}

func (h *taskTimers) top() *task {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
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
		return
	}
	n := len(t.attempts)
	att := t.lastAttempt()
	att.EndedAt = now
	att.Class = classTransient
	att.Error = "lease expired"
	t.run = nil
	c.releaseLocked(t)
	c.stats.leaseExpired++
	if t.state == StateCancelled {
		c.emitTaskLocked(t, EventReleased, t.state, t.state, "lease expired after cancellation")
		return
	}
	c.failAttemptLocked(t, classTransient, 0, CodeLeaseExpired, "lease expired (attempt "+itoa(n)+")", now, nil)
}
