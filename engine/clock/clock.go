// Package clock provides the engine's notion of time: the real wall clock for
// production and a fake one, advanced by hand, that makes every time-driven
// behaviour of the engine (backoff, deadlines, leases, aging, schedules)
// deterministic in tests and simulations.
package clock

import (
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine/internal/heap"
)

// Timer is a pending call scheduled with AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was still pending.
	Stop() bool
}

// Clock tells the time and schedules calls.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (Real) or in the goroutine that
	// advances the clock (Fake) once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a clock that moves only when told to. Calls scheduled with AfterFunc
// run synchronously, in time order, inside Advance or Set. It is safe for
// concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers heap.Heap[*fakeTimer, fakeTimerOrder]
	seq    uint64
}

// NewFake returns a fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc schedules f to run when the fake time reaches Now()+d. A call due
// already (d <= 0) runs at the next Advance or Set, not inline, so that callers
// holding locks cannot deadlock on it.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{clock: c, when: c.now.Add(d), f: f, seq: c.seq, index: -1}
	c.timers.Push(t)
	return t
}

// Advance moves the clock forward by d, running every call that falls due, in
// order of due time (and of scheduling, for equal times). Calls scheduled by
// those calls run too if they fall due within the advance.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.Set(target)
}

// Set moves the clock to t (never backwards), running the calls that fall due.
func (c *Fake) Set(t time.Time) {
	for {
		c.mu.Lock()
		if c.timers.Len() == 0 || c.timers.Top().when.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := c.timers.Pop()
		if next.when.After(c.now) {
			c.now = next.when
		}
		c.mu.Unlock()
		next.f()
	}
}

// Step runs the earliest scheduled call if it falls due at or before t,
// moving the clock to its due time (never backwards), and reports whether it
// ran one. Unlike Set, it runs one call at a time, so that a caller can bound
// how many calls it runs.
func (c *Fake) Step(t time.Time) bool {
	c.mu.Lock()
	if c.timers.Len() == 0 || c.timers.Top().when.After(t) {
		c.mu.Unlock()
		return false
	}
	next := c.timers.Pop()
	if next.when.After(c.now) {
		c.now = next.when
	}
	c.mu.Unlock()
	next.f()
	return true
}

// Pending returns how many calls are scheduled and not yet run or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timers.Len()
}

// NextDue returns when the earliest scheduled call falls due, and false when
// none is scheduled.
func (c *Fake) NextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timers.Len() == 0 {
		return time.Time{}, false
	}
	return c.timers.Top().when, true
}

type fakeTimer struct {
	clock *Fake
	when  time.Time
	f     func()
	seq   uint64
	index int
}

func (t *fakeTimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.index < 0 {
		return false
	}
	t.clock.timers.Remove(t.index)
	return true
}

// fakeTimerOrder orders a fake clock's timers by due time, then by order of
// scheduling, and keeps each timer's position in the heap.
type fakeTimerOrder struct{}

func (fakeTimerOrder) Less(a, b *fakeTimer) bool {
	if !a.when.Equal(b.when) {
		return a.when.Before(b.when)
	}
	return a.seq < b.seq
}

func (fakeTimerOrder) SetIndex(t *fakeTimer, i int) { t.index = i }
