package engine

import "time"

// Debounce (LaneConfig.Debounce): a burst of submissions to one session in
// a lane collapses to its last task. Each task of a session is held WAITING
// for the lane's window before it queues; a newer task of the same session
// arriving meanwhile cancels the held one, naming itself, and is held in its
// place for a full window. An interrupting task is never held: it cancels
// the held task the same way and queues at once, at the front, as it would
// without debounce. The hold is a timer in the retry heap, so a held
// task costs what a task in backoff does. A restart releases what was held
// (it queues at once, as a waiting task whose dependencies are met).

// MaxDebounce is the longest debounce window a lane may have.
const MaxDebounce = time.Minute

// holdLocked holds t, a new task of a session in a lane that debounces, for
// d: the task its session had held in the lane, if any, is superseded.
func (c *core) holdLocked(t *task, d time.Duration, now time.Time) {
	c.setStateAt(t, StateWaiting, "debounce: held "+d.String()+" for newer tasks of its session", now)
	c.timers[timerRetry].set(t, now.Add(d).UnixNano())
	c.supersedeHeldLocked(t) // its event follows t's first
	if t.lane.held == nil {
		t.lane.held = map[string]*task{}
	}
	t.lane.held[t.spec.SessionScope()] = t
}

// supersedeHeldLocked cancels the task t's session has held in t's lane, if
// any, naming t. An interrupting task (QueueInterrupt, QueueInterruptDrain)
// supersedes the held task without being held itself.
func (c *core) supersedeHeldLocked(t *task) {
	if prev := t.lane.held[t.spec.SessionScope()]; prev != nil && prev != t && prev.state == StateWaiting {
		c.cancelLocked(prev, "debounced: superseded by "+t.id)
	}
}

// releaseHeldLocked ends t's hold as it leaves WAITING (its window elapsed,
// it was superseded or cancelled, or it expired).
func (c *core) releaseHeldLocked(t *task) {
	c.timers[timerRetry].remove(t)
	if key := t.spec.SessionScope(); t.lane.held[key] == t {
		delete(t.lane.held, key)
	}
}
