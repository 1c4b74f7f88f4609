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
//
// When the runtime closes, the watchdog halts every call still running,
// whatever its deadline, and stops only once none runs (see stop): it is
// the one thing that can end a guest call early, and a call left running
// after it had stopped could be ended by its fuel alone. Closing one
// plugin halts that plugin's calls the same way (haltPlugin).

package host

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// haltTick is how often the watchdog of a closing runtime empties the
// tanks of the calls still running: a guest in a tight loop may write back
// the fuel it read just before the tank was emptied, so one emptying is
// often undone, and a few in a row are not.
const haltTick = time.Millisecond

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

// stop stops the watchdog for good. No call starts after it (callWith
// reads stopped after storing its start, and the watchdog scans after
// stopped is set, so one of them sees the other), and every call already
// running is halted (haltUntilIdle). stop returns once no call runs, or
// with an error once wait has passed or ctx is done (awaitHalted); the
// watchdog then goes on halting in the background until the last call has
// returned.
func (d *watchdog) stop(ctx context.Context, wait time.Duration) error {
	d.stopped.Store(true)
	close(d.done)
	return awaitHalted(ctx, wait, d.exited)
}

// haltPlugin halts every call running on p's instances, as stop halts
// every call of the runtime: p's calls must already be refused from now on
// (p.stopping is set, which callWith reads after storing its start). The
// returned channel is closed once none of p's calls runs.
func (d *watchdog) haltPlugin(p *Plugin) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.haltUntilIdle(func(in *instance) bool { return in.plugin == p })
	}()
	return done
}

// awaitHalted waits for halted (closed once the halted calls have
// returned), for at most wait or until ctx is done: a halted call ends at
// its next metered point, microseconds away, once its thread runs, so wait
// only bounds a machine too busy to run it. The halting goes on after an
// error.
func awaitHalted(ctx context.Context, wait time.Duration, halted <-chan struct{}) error {
	t := time.NewTimer(wait)
	defer t.Stop()
	var err error
	select {
	case <-halted:
		return nil
	case <-t.C:
		err = fmt.Errorf("a guest call still ran %s after it was halted; it ends in the background", wait)
	case <-ctx.Done():
		err = fmt.Errorf("a guest call still ran when the context ended (%w); it ends in the background", context.Cause(ctx))
	}
	select {
	case <-halted: // both were ready: the calls have ended
		return nil
	default:
		return err
	}
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
				d.haltUntilIdle(nil)
				return
			}
		}
		t.Reset(d.tick)
		select {
		case <-t.C:
		case <-d.done:
			d.haltUntilIdle(nil)
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

// haltUntilIdle halts every running call that match selects (nil: every
// call), again at every haltTick, until none runs: the runtime or the
// plugin is closing. The caller has made sure that no such call starts
// any more (stopped, or the plugin's stopping).
func (d *watchdog) haltUntilIdle(match func(*instance) bool) {
	t := time.NewTicker(haltTick)
	defer t.Stop()
	for d.halt(match) {
		<-t.C
	}
}

// halt halts every running call that match selects (nil: every call) and
// reports whether any was running.
func (d *watchdog) halt(match func(*instance) bool) bool {
	busy := false
	d.mu.Lock()
	defer d.mu.Unlock()
	for in := range d.instances {
		if start := in.started.Load(); start != 0 && (match == nil || match(in)) {
			busy = true
			in.halt(start)
		}
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

// halt empties the tank of the call that started at start, if it is still
// the one running, and marks it halted: the runtime or the plugin is
// closing, and the call ends at its next metered point, not by any fault
// of the plugin's.
func (in *instance) halt(start int64) {
	in.mu.Lock()
	if in.started.Load() == start {
		in.halted.Store(true)
		in.expired.Store(true)
		in.fuel.Set(0)
	}
	in.mu.Unlock()
}
