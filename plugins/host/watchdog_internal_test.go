package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero/api"
)

// ms is x milliseconds on the runtime's clock (ns).
func ms(x float64) int64 { return int64(x * float64(time.Millisecond)) }

// judgeTicks runs the watchdog's bookkeeping over one call with the given
// deadline (ms) that starts at 1 s on the runtime's clock: the watchdog,
// asleep, wakes wake ms after the call started, then ticks every tick ms,
// the i-th tick running late[i] ms after it was due. It returns the
// verdict of each tick's look, as watch judges it.
func judgeTicks(deadline, tick, wake float64, late []float64) []verdict {
	var l ledger
	start := ms(1000)
	now := start + ms(wake)
	l.tick(start, now) // woke: due when the call started
	base := int64(-1)
	var out []verdict
	for _, lt := range late {
		due := now + ms(tick)
		now = due + ms(lt)
		l.tick(due, now)
		if base < 0 { // the first look at the call
			base = l.base(start)
		}
		out = append(out, judge(now-start, l.total-base, ms(deadline)))
	}
	return out
}

// The watchdog judges a call on its wall time net of its own lateness:
// ticks on time (late by less than lateSlack, as Go's timers are on an
// idle machine) leave a call to its deadline in wall time; late ticks
// (the process starved) give it that much more, and its wall time is
// capped whatever the lateness.
func TestWatchdogJudgesWallTimeNetOfItsLateness(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                 string
		deadline, tick, wake float64
		late                 []float64
		want                 []verdict
	}{{
		name:     "on time: expires at the first look past the deadline",
		deadline: 10, tick: 2.5, wake: 0.05,
		late: []float64{0.7, 0.7, 0.7, 0.7, 0.7},
		// looks at 3.25, 6.45, 9.65, 12.85 ms
		want: []verdict{onTime, onTime, onTime, overdue, overdue},
	}, {
		name:     "ticks exactly late by the slack count nothing",
		deadline: 10, tick: 2.5, wake: 1,
		late: []float64{1, 1, 1, 1},
		// looks at 4.5, 8, 11.5 ms
		want: []verdict{onTime, onTime, overdue, overdue},
	}, {
		name:     "late ticks: grace for the starvation, then expires net of it",
		deadline: 10, tick: 2.5, wake: 0,
		late: []float64{8, 8, 8, 0, 0, 0},
		// looks at 10.5 (7 credited), 21 (14), 31.5 (21), 34, 36.5, 39 ms
		want: []verdict{graced, graced, overdue, overdue, overdue, overdue},
	}, {
		name:     "grace then on time: expires once its running time passes the deadline",
		deadline: 10, tick: 2.5, wake: 0,
		late: []float64{20, 0.5, 0.5, 0.5, 0.5},
		// looks at 22.5 (19 credited: 3.5 net), 25.5 (6.5), 28.5 (9.5), 31.5 (12.5) ms
		want: []verdict{graced, graced, graced, overdue, overdue},
	}, {
		name:     "a late wake-up is starvation too",
		deadline: 10, tick: 2.5, wake: 9,
		late: []float64{0.5, 0.5, 0.5, 0.5},
		// looks at 12, 15, 18, 21 ms, 8 credited: 4, 7, 10, 13 net
		want: []verdict{graced, graced, graced, overdue},
	}, {
		name:     "the cap: 10 times the deadline, at least 100 ms",
		deadline: 10, tick: 2.5, wake: 0,
		late: []float64{40, 40, 40},
		// looks at 42.5 (39 credited), 85 (78), 127.5 ms: past 100
		want: []verdict{graced, graced, capped},
	}, {
		name:     "the cap of a short deadline is 100 ms",
		deadline: 4, tick: 1, wake: 0,
		late: []float64{60, 60},
		// looks at 61 (59 credited), 122 ms
		want: []verdict{graced, capped},
	}, {
		name:     "the cap of a long deadline is 10 times it",
		deadline: 50, tick: 12.5, wake: 0,
		late: []float64{300, 300},
		// looks at 312.5 (299 credited: 13.5 net), 625 ms: past 500
		want: []verdict{graced, capped},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, judgeTicks(tc.deadline, tc.tick, tc.wake, tc.late))
		})
	}
}

// A call first seen at a tick is credited with the lateness it was running
// for: all of a tick's if it started before the tick was due, the part
// after it started if it started during the lateness, none if it started
// after the tick ran, and none of the ticks before it started.
func TestLedgerCreditsOnlyTheLatenessAfterACallStarted(t *testing.T) {
	t.Parallel()
	var l ledger
	l.tick(ms(0), ms(5))   // counted from 1 to 5 ms: 4
	l.tick(ms(10), ms(20)) // from 11 to 20 ms: 9
	l.tick(ms(25), ms(25.5))
	require.Equal(t, ms(13), l.total)
	for _, tc := range []struct {
		start, credit float64
	}{
		{start: 0, credit: 13},
		{start: 3, credit: 11},
		{start: 8, credit: 9},
		{start: 11, credit: 9},
		{start: 15, credit: 5},
		{start: 20, credit: 0},
		{start: 30, credit: 0},
	} {
		require.Equal(t, ms(tc.credit), l.total-l.base(ms(tc.start)), "a call started at %v ms", tc.start)
	}
	for range len(l.recent) { // older spans leave recent: credited no more
		l.tick(ms(100), ms(102))
	}
	require.Equal(t, ms(4), l.total-l.base(ms(0)), "the last four late ticks only")
}

// tank is a guest's fuel global, for watch.
type tank struct {
	api.MutableGlobal
	v uint64
}

func (g *tank) Get() uint64  { return g.v }
func (g *tank) Set(v uint64) { g.v = v }

// watch abandons a call that is overdue net of the watchdog's lateness and
// running (its fuel moves), lets a call run on that is past its deadline
// only in wall time, or not running, counting each such call once, and
// abandons a call past the cap whatever its fuel.
func TestWatchAbandonsNetOfLatenessAndCountsGraces(t *testing.T) {
	t.Parallel()
	const deadline = 10
	for _, tc := range []struct {
		name string
		// the looks: when (ms after the call started), the watchdog's
		// lateness counted before it (ms) and the fuel left
		looks []struct {
			at, late float64
			fuel     uint64
		}
		expire int // the look that empties the tank (-1: none)
		graces uint64
	}{{
		name: "on time and running: abandoned at the first look past the deadline",
		looks: []struct {
			at, late float64
			fuel     uint64
		}{{5, 0, 900}, {10.5, 0, 800}},
		expire: 1,
	}, {
		name: "late: let run on and counted once, then abandoned net of the lateness",
		looks: []struct {
			at, late float64
			fuel     uint64
		}{{12, 6, 900}, {15, 0, 800}, {17.5, 0, 700}},
		expire: 2, graces: 1,
	}, {
		name: "not running: let run on, counted once, then abandoned once it runs",
		looks: []struct {
			at, late float64
			fuel     uint64
		}{{5, 0, 900}, {12, 0, 900}, {14, 0, 900}, {16, 0, 800}},
		expire: 3, graces: 1,
	}, {
		name: "the cap, not running and late: abandoned",
		looks: []struct {
			at, late float64
			fuel     uint64
		}{{60, 55, 900}, {101, 41, 900}},
		expire: 1, graces: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plugin{}
			g := &tank{v: 1000}
			in := &instance{plugin: p, fuel: g}
			start := ms(1000) | 1
			in.started.Store(start)
			in.deadline.Store(ms(deadline))
			var l ledger
			expired := -1
			for i, lk := range tc.looks {
				now := start + ms(lk.at)
				if lk.late > 0 {
					l.tick(now-ms(lk.late)-lateSlack, now)
				}
				if g.v != 0 {
					g.v = lk.fuel
				}
				in.watch(start, now, &l)
				if in.expired.Load() && expired < 0 {
					expired = i
					require.Zero(t, g.v, "the tank is emptied")
				}
			}
			require.Equal(t, tc.expire, expired)
			require.Equal(t, tc.graces, p.stats.graces.Load())
		})
	}
}

// seeing is a guest export that records what the watchdog's fields of its
// instance hold while it runs, and returns err.
type seeing struct {
	api.Function
	in              *instance
	expired, halted bool
	deadline        time.Duration
	err             error
}

func (f *seeing) CallWithStack(context.Context, []uint64) error {
	f.expired, f.halted = f.in.expired.Load(), f.in.halted.Load()
	f.deadline = time.Duration(f.in.deadline.Load())
	return f.err
}

// A call starts with expired and halted clear and its own deadline stored,
// whatever the last call left (callWith stores them only when they
// differ), so that a call's fault is not put down to a stop the watchdog
// made of an earlier one.
func TestACallStartsWithTheWatchdogsMarksClearAndItsDeadline(t *testing.T) {
	t.Parallel()
	rt := &Runtime{epoch: time.Now(), dog: &watchdog{wake: make(chan struct{}, 1)}}
	p := &Plugin{rt: rt}
	in := &instance{plugin: p, fuel: &tank{}, depth: &tank{}}
	trap := errors.New("trap")
	for _, tc := range []struct {
		name            string
		expired, halted bool
		deadline        time.Duration
		err             error
	}{
		{"left marked by a stop, a fault follows", true, true, time.Second, trap},
		{"left expired only", true, false, 10 * time.Millisecond, trap},
		{"left clear, another deadline", false, false, time.Minute, nil},
		{"left clear", false, false, 10 * time.Millisecond, nil},
	} {
		in.expired.Store(tc.expired)
		in.halted.Store(tc.halted)
		in.deadline.Store(int64(tc.deadline))
		fn := &seeing{in: in, err: tc.err}
		err := in.callWith(fn, 1000, 10*time.Millisecond, 0)
		require.False(t, fn.expired, tc.name)
		require.False(t, fn.halted, tc.name)
		require.Equal(t, 10*time.Millisecond, fn.deadline, tc.name)
		require.Equal(t, tc.err, err, tc.name)
		require.Zero(t, in.started.Load(), tc.name)
	}
}

// expiring is a call the watchdog expires while it runs, which then ends
// before its next metered point: no error.
type expiring struct {
	api.Function
	in *instance
}

func (f *expiring) CallWithStack(context.Context, []uint64) error {
	f.in.fuel.Set(f.in.fuel.Get() - 100) // 100 units burnt
	f.in.mu.Lock()
	f.in.expire()
	f.in.mu.Unlock()
	return nil
}

// The fuel a decision burnt is deterministic, so Stats.FuelMax leaves out a
// call the host expired even when it ended without an error: its emptied
// tank's unspent units are not fuel it burnt.
func TestFuelMaxLeavesOutACallTheWatchdogExpired(t *testing.T) {
	t.Parallel()
	rt := &Runtime{epoch: time.Now(), dog: &watchdog{wake: make(chan struct{}, 1)}, cfg: Config{DecisionFuel: 1_000_000, Deadline: time.Second}}
	p := &Plugin{rt: rt}
	in := &instance{plugin: p, fuel: &tank{}, depth: &tank{}, phase: phaseDecide}
	in.decide = &seeing{in: in}
	require.NoError(t, in.timed())
	require.Zero(t, p.stats.fuel.Load(), "a call that burnt nothing")
	in.decide = &expiring{in: in}
	require.NoError(t, in.timed(), "it ended before the watchdog's stop took effect")
	require.Zero(t, p.stats.fuel.Load(), "the expired call's emptied tank counted as burnt")
}

// overCPU is a call whose CPU time the watchdog finds used up while it
// runs (watch empties its tank), and which then ends before its next
// metered point: no error.
type overCPU struct {
	api.Function
	in    *instance
	clock int32
}

func (f *overCPU) CallWithStack(context.Context, []uint64) error {
	f.in.fuel.Set(f.in.fuel.Get() - 100) // 100 units burnt
	f.in.mu.Lock()
	f.in.cpuClock, f.in.cpuFrom = f.clock, clockRead(f.clock)-int64(time.Hour) // an hour of CPU time used
	f.in.mu.Unlock()
	var late ledger
	f.in.watch(f.in.started.Load(), int64(time.Since(f.in.plugin.rt.epoch)), &late)
	return nil
}

// Nor does Stats.FuelMax count a call whose tank the watchdog emptied
// because it had used up its CPU time, when it ended without an error:
// the tank's unspent units are not fuel it burnt.
func TestFuelMaxLeavesOutACallTheWatchdogFoundOverItsCPUTime(t *testing.T) {
	t.Parallel()
	clock, ok := threadClock()
	if !ok {
		t.Skip("no thread CPU clock here: the watchdog reads none")
	}
	rt := &Runtime{epoch: time.Now(), dog: &watchdog{wake: make(chan struct{}, 1)}, cfg: Config{DecisionFuel: 1_000_000, Deadline: time.Second, DecisionCPU: time.Millisecond}}
	p := &Plugin{rt: rt}
	in := &instance{plugin: p, fuel: &tank{}, depth: &tank{}, phase: phaseDecide}
	in.decide = &overCPU{in: in, clock: clock}
	require.NoError(t, in.timed(), "it ended before the watchdog's stop took effect")
	require.True(t, in.overCPU, "the watchdog found the call over its CPU time")
	require.Zero(t, in.fuel.Get(), "and emptied its tank")
	require.Zero(t, p.stats.fuel.Load(), "the emptied tank counted as burnt")
}
