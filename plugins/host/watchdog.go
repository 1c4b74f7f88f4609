// The watchdog is the wall-clock backstop of every guest call, independent
// of fuel: a call still running past its deadline is stopped by emptying its
// tank, so that the guest traps at its next metered point (a function entry
// or loop header, at most one function's straight-line code away). This
// costs the fast path nothing measurable: a call stores when it started and
// reads one flag, and nothing in the guest's code changes, unlike wazero's
// close-on-context-done, which exits to Go at every loop header.
//
// The watchdog sleeps while no call is running: a goroutine that ticks
// every Deadline/4 while calls run, and parks when a tick finds none.

package host

import (
	"sync"
	"sync/atomic"
	"time"
)

type watchdog struct {
	rt      *Runtime
	tick    time.Duration
	asleep  atomic.Bool
	stopped atomic.Bool // set by stop: no call may start after it
	wake    chan struct{}
	done    chan struct{}
	exited  chan struct{}

	mu        sync.Mutex
	instances map[*instance]struct{}
}

func newWatchdog(rt *Runtime) *watchdog {
	d := &watchdog{
		rt:        rt,
		tick:      min(max(rt.cfg.Deadline/4, time.Millisecond), 50*time.Millisecond),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		instances: map[*instance]struct{}{},
	}
	d.asleep.Store(true)
	go d.run()
	return d
}

func (d *watchdog) add(in *instance) {
	d.mu.Lock()
	d.instances[in] = struct{}{}
	d.mu.Unlock()
}

func (d *watchdog) remove(in *instance) {
	d.mu.Lock()
	delete(d.instances, in)
	d.mu.Unlock()
}

// arm wakes the watchdog if it sleeps; a call has just stored its start.
func (d *watchdog) arm() {
	if d.asleep.Load() && d.asleep.CompareAndSwap(true, false) {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

func (d *watchdog) stop() {
	d.stopped.Store(true)
	close(d.done)
	<-d.exited
}

func (d *watchdog) run() {
	defer close(d.exited)
	t := time.NewTimer(d.tick)
	defer t.Stop()
	for {
		if d.asleep.Load() {
			select {
			case <-d.wake:
			case <-d.done:
				return
			}
		}
		t.Reset(d.tick)
		select {
		case <-t.C:
		case <-d.done:
			return
		}
		if d.scan() {
			continue
		}
		// Nothing ran: sleep, unless a call started after the scan (it
		// stored its start before reading asleep, so one of us sees the
		// other).
		d.asleep.Store(true)
		if d.scan() && d.asleep.CompareAndSwap(true, false) {
			continue
		}
	}
}

// scan stops every call past its deadline and reports whether any call is
// running.
func (d *watchdog) scan() bool {
	now := int64(time.Since(d.rt.epoch))
	busy := false
	d.mu.Lock()
	defer d.mu.Unlock()
	for in := range d.instances {
		start := in.started.Load()
		if start == 0 {
			continue
		}
		busy = true
		in.watch(start, now-start > in.deadline.Load())
	}
	return busy
}

// watch looks at the call that started at start, if it is still running,
// and abandons it if it is overdue and has burnt fuel since the watchdog
// last looked (or was not seen before). A call that burnt none was not
// running: its thread waited for a core (a busy machine) and it could end
// no sooner for being abandoned, so that it is left to finish, and is
// abandoned at the next look if it then goes on running. A plugin is not
// quarantined for the machine's load.
func (in *instance) watch(start int64, overdue bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started.Load() != start {
		return
	}
	left := int64(in.fuel.Get())
	if overdue && (in.seenStart != start || left != in.seenFuel || in.expired.Load()) {
		in.expired.Store(true)
		in.fuel.Set(0)
		left = 0
	}
	in.seenStart, in.seenFuel = start, left
}

// abandon empties the tank of the call that started at start, if it is
// still the one running: the overdue call may have returned and the next
// one begun since the watchdog looked, and that one is not overdue. The
// guest's own metering reads and writes the tank without a lock, so a write
// of its may undo this one: the watchdog repeats it at every tick until the
// call returns.
func (in *instance) abandon(start int64) {
	in.mu.Lock()
	if in.started.Load() == start {
		in.expired.Store(true)
		in.fuel.Set(0)
	}
	in.mu.Unlock()
}
