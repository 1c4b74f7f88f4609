// Package clock provides the engine's notion of time: the real wall clock for
// production and a fake one, advanced by hand, that makes every time-driven
// behaviour of the engine (backoff, deadlines, leases, aging, schedules)
// deterministic in tests and simulations.
package clock

import (
	"container/heap"
	"sync"
	"time"
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
	timers fakeTimers
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
	heap.Push(&c.timers, t)
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
		if len(c.timers) == 0 || c.timers[0].when.After(t) {
			if t.After(c.now) {
				c.now = t
			}
			c.mu.Unlock()
			return
		}
		next := heap.Pop(&c.timers).(*fakeTimer)
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
	if len(c.timers) == 0 || c.timers[0].when.After(t) {
		c.mu.Unlock()
		return false
	}
	next := heap.Pop(&c.timers).(*fakeTimer)
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
	return len(c.timers)
}

// NextDue returns when the earliest scheduled call falls due, and false when
// none is scheduled.
func (c *Fake) NextDue() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].when, true
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
	heap.Remove(&t.clock.timers, t.index)
	return true
}

type fakeTimers []*fakeTimer

func (h fakeTimers) Len() int { return len(h) }
func (h fakeTimers) Less(i, j int) bool {
	if !h[i].when.Equal(h[j].when) {
		return h[i].when.Before(h[j].when)
	}
	return h[i].seq < h[j].seq
}
func (h fakeTimers) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeTimers) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeTimers) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
