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
// A call is judged on its wall time net of the starvation the watchdog
// observed while it ran (see ledger and judge): a tick that runs late beyond
// lateSlack shows a time when this process could not run — a machine short
// of cores, or a stop of the world — and the guest's thread very likely
// could not either. A call is not abandoned for time it spent waiting for
// a core, up to a hard cap on its wall time (graceCap) that holds whatever
// the lateness. All of this is the watchdog's own bookkeeping: the fast
// path (callWith) is unchanged.
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

// lateSlack is the lateness of a tick that is not counted as starvation:
// Go's timers wake a parked goroutine up to about a millisecond after they
// are due when their period is not a whole number of milliseconds (the
// netpoller waits in milliseconds; a 2.5 ms timer fired 0.7 ms late at the
// median on an idle goroutine), so a millisecond of lateness says nothing
// about the machine's load.
const lateSlack = int64(time.Millisecond)

// The hard cap on a call's wall time, whatever the starvation observed:
// graceFactor times its deadline, and at least graceMin (see graceCap).
const (
	graceFactor = 10
	graceMin    = int64(100 * time.Millisecond)
)

// graceCap is the most wall time a call with that deadline may run: past
// it the call is abandoned at the next look, however late the watchdog's
// ticks were and whether it burnt fuel since the last look or not.
func graceCap(deadline int64) int64 { return max(graceFactor*deadline, graceMin) }

// verdict is the watchdog's judgement of a running call (judge).
type verdict uint8

const (
	onTime  verdict = iota // within its deadline in wall time
	graced                 // past it in wall time, within it net of the starvation observed
	overdue                // past it net of the starvation observed
	capped                 // past graceCap in wall time
)

// judge judges a call that has run for elapsed ns of wall time, credit of
// which the watchdog observed as starvation, against its deadline (all in
// ns).
func judge(elapsed, credit, deadline int64) verdict {
	switch {
	case elapsed <= deadline:
		return onTime
	case elapsed > graceCap(deadline):
		return capped
	case elapsed-credit > deadline:
		return overdue
	}
	return graced
}

// ledger is the watchdog's account of its own lateness, on the runtime's
// clock (ns): total is the lateness beyond lateSlack of every tick so far,
// and recent holds when the last late ticks' counted lateness began and
// ended. Only the watchdog's goroutine uses it.
type ledger struct {
	total  int64
	recent [4]span
	next   int // where the next span goes in recent
}

// span is the counted lateness of one tick: from when it was due (plus
// lateSlack) to when it ran.
type span struct{ from, to int64 }

// tick records a tick that was due at due and ran at now.
func (l *ledger) tick(due, now int64) {
	from := due + lateSlack
	if now <= from {
		return
	}
	l.total += now - from
	l.recent[l.next] = span{from, now}
	l.next = (l.next + 1) % len(l.recent)
}

// base is what total was when a call that started at start began, as far
// as the ledger can tell: the call is credited with total - base, the
// lateness counted since it started. A call is first seen at the first
// scan after it started, and the ticks since the scan before (the
// watchdog's wake-up, if it slept, and one timer tick) are in recent; of a
// tick's lateness the call is credited with the part it was running for
// (all of it if it started before the tick was due).
func (l *ledger) base(start int64) int64 {
	b := l.total
	for _, s := range l.recent {
		if o := s.to - max(start, s.from); o > 0 {
			b -= o
		}
	}
	return b
}

type watchdog struct {
	rt      *Runtime
	tick    time.Duration
	fast    bool // the last scan saw a call whose CPU time it reads: tick every cpuTick
	asleep  atomic.Bool
	stopped atomic.Bool // set by stop: no call may start after it
	wake    chan struct{}
	done    chan struct{}
	exited  chan struct{}

	mu        sync.Mutex
	instances map[*instance]struct{}

	late ledger // the starvation observed (run's goroutine only)
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
				d.woke()
			case <-d.done:
				d.haltUntilIdle(nil)
				return
			}
		}
		period := d.tick
		if d.fast {
			period = min(period, cpuTick)
		}
		due := int64(time.Since(d.rt.epoch) + period)
		t.Reset(period)
		select {
		case <-t.C:
		case <-d.done:
			d.haltUntilIdle(nil)
			return
		}
		d.late.tick(due, int64(time.Since(d.rt.epoch)))
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

// woke records the watchdog's wake-up as a tick that was due when the
// earliest running call started, the call that woke it or one started
// since: how late the watchdog woke is starvation too.
func (d *watchdog) woke() {
	now := int64(time.Since(d.rt.epoch))
	first := int64(0)
	d.mu.Lock()
	for in := range d.instances {
		if s := in.started.Load(); s != 0 && (first == 0 || s < first) {
			first = s
		}
	}
	d.mu.Unlock()
	if first != 0 {
		d.late.tick(first, now)
	}
}

// scan stops every call past its deadline or its CPU time and reports
// whether any call is running; it records in fast whether one of them has
// its CPU time read.
func (d *watchdog) scan() bool {
	now := int64(time.Since(d.rt.epoch))
	busy, fast := false, false
	d.mu.Lock()
	defer d.mu.Unlock()
	for in := range d.instances {
		start := in.started.Load()
		if start == 0 {
			continue
		}
		busy = true
		fast = in.watch(start, now, &d.late) || fast
	}
	d.fast = fast
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
// at now, and judges it on its wall time net of the starvation in late
// since it started (judge). It abandons the call if it is overdue and has
// burnt fuel since the watchdog last looked (or was not seen before), or
// if it has run past graceCap. A call that burnt none was not running: its
// thread waited for a core (a busy machine) and it could end no sooner for
// being abandoned, so that it is left to finish, and is abandoned at the
// next look if it then goes on running. A plugin is not quarantined for
// the machine's load. A call let run on past its deadline in wall time is
// counted once (Stats.DeadlineGraces).
//
// It also reads the CPU clock of the thread of a call whose first refill
// started counting its CPU time (cpuUsedUp), and stops one that has used
// up its limit as that refill would: a guest whose code turns slow after
// a fast start (a tank sized by the fast part, then loads that miss every
// cache) may run long between two refills. It reports whether the call has
// its CPU time counted, for which the watchdog looks every cpuTick.
func (in *instance) watch(start, now int64, late *ledger) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started.Load() != start {
		return false
	}
	if in.cpuClock != 0 && (in.overCPU || in.cpuOf() >= in.cpuLimit) {
		in.overCPU = true
		in.fuel.Set(0) // the guest's next refill ends it (again at each look: a tight loop may write back what it read)
	}
	seen := in.seenStart == start
	if !seen {
		in.seenBase, in.graced = late.base(start), false
	}
	left := int64(in.fuel.Get()) + in.reserve // all the call may still spend: refills move fuel from the reserve to the tank
	switch judge(now-start, late.total-in.seenBase, in.deadline.Load()) {
	case capped:
		in.expire()
		left = 0
	case overdue:
		if !seen || left != in.seenFuel || in.expired.Load() {
			in.expire()
			left = 0
			break
		}
		in.grace()
	case graced:
		in.grace()
	}
	in.seenStart, in.seenFuel = start, left
	return in.cpuClock != 0
}

// cpuTick is how often the watchdog looks while a call has its CPU time
// counted: what a call whose tank outlasts the rest of its CPU time may
// overrun it by, at most.
const cpuTick = 500 * time.Microsecond

// expire empties the tank of the running call (under mu).
func (in *instance) expire() {
	in.expired.Store(true)
	in.fuel.Set(0)
}

// grace counts the running call as let run on past its deadline, once
// (under mu).
func (in *instance) grace() {
	if !in.graced && !in.expired.Load() {
		in.graced = true
		in.plugin.stats.graces.Add(1)
	}
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
		in.expire()
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
