package host_test

import (
	"context"
	"errors"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// spin is an initialisation that never ends: a loop with nothing in it
// but its metered header.
var spin = [][]byte{{opLoop, 0x40, opBr, 0, opEnd}}

// countdown is an initialisation that ends: a loop of a thousand turns.
var countdown = [][]byte{i64c(1000), {opLocalSet, 0, opLoop, 0x40, opLocalGet, 0}, i64c(1),
	{0x7D, opLocalTee, 0, 0x50, opI32Eqz, opBrIf, 0, opEnd}} // i64.sub; local.tee; i64.eqz; i32.eqz; br_if

// within runs f and fails the test if it has not returned after limit: a
// bound a loaded machine cannot miss, for what would otherwise never end.
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s: still running after %s", what, limit)
	}
}

// A module whose initialisation never ends, with setup fuel for hours, is
// refused at load by the wall-clock bound of the load's calls: with
// _initialize, and with a start section, which runs inside wazero's
// instantiation unless the host takes it out (the meter exports it
// instead, and the host calls it under the watchdog). The error is typed
// and says which bound it ran past.
//
// Not parallel, and with the garbage collector off, as in the other
// deadline tests: a collection stops the world and waits for the guest,
// which cannot be preempted, and only fuel would then end the call.
func TestAnInitialisationThatNeverEndsIsRefusedAtLoad(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	rt := newRuntime(t, host.Config{SetupFuel: 1 << 40, Deadline: 10 * time.Millisecond, NoFileCache: true})
	for _, tc := range []struct{ as, export string }{{"_initialize", "_initialize"}, {"start", "switchyard_start"}} {
		var err error
		within(t, time.Minute, "the load of a module whose "+tc.as+" never ends", func() {
			_, err = rt.Load(ctx, "init-forever", hostileModuleInit(forever(denseBody), nil, spin, tc.as), nil)
		})
		require.ErrorIs(t, err, host.ErrInvalid, tc.as)
		var ie *host.InitDeadlineError
		require.True(t, errors.As(err, &ie), "%s: %v", tc.as, err)
		require.Equal(t, 5*time.Second, ie.Bound, "the load's bound: 100 × the deadline, at least 5 s")
		require.Equal(t, tc.export, ie.Export)
		require.ErrorContains(t, err, "initialisation exceeded 5000 ms")
	}
	// An initialisation that ends is run, once, before anything else: the
	// start function's and _initialize's loops end and the module loads.
	for _, as := range []string{"_initialize", "start"} {
		p, err := rt.Load(ctx, "init-"+as, hostileModuleInit([][]byte{answer}, nil, countdown, as), nil)
		require.NoError(t, err, as)
		require.Positive(t, p.Stats().SetupFuelMax, "%s burnt setup fuel", as)
		require.NoError(t, p.Close(ctx))
	}
}

// An instance rebuilt after a fault runs the module's initialisation again,
// off the decision path, under the setup bound (ten times the deadline, at
// least a second): an initialisation that never ends there does not stall
// the decisions, which the fallback answers meanwhile, and ends in the
// plugin being disabled with a reason that says so.
func TestARebuildWhoseInitialisationNeverEndsDisablesThePlugin(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add, DecisionFuel: 1 << 40, SetupFuel: 1 << 40,
		Deadline: 10 * time.Millisecond, NoFileCache: true})
	p, err := rt.Load(ctx, "endless", hostileModule(forever(denseBody), nil), nil)
	require.NoError(t, err)
	require.NoError(t, host.RebuildFrom(ctx, p, hostileModuleInit(forever(denseBody), nil, spin, "_initialize")))
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	cands := host.SyntheticCandidates(16, 1)
	want := make([]uint32, 4)
	require.Equal(t, 4, reverse{}.Pick(pickCtx(), cands, want))

	picks := make([]uint32, 4)
	within(t, time.Minute, "a decision past its deadline", func() { w.Pick(pickCtx(), cands, picks) })
	require.Equal(t, want, picks, "the fallback decides the abandoned decision")
	require.Equal(t, uint64(1), p.Stats().Faults[host.FaultDeadline])

	// The instance's replacement is being initialised, for ever if nothing
	// stops it; decisions meanwhile go to the fallback at once.
	for range 3 {
		clear(picks)
		within(t, time.Minute, "a decision during the rebuild", func() { w.Pick(pickCtx(), cands, picks) })
		require.Equal(t, want, picks)
	}
	waitfor.Eventually(t, "the rebuild's initialisation is stopped and the plugin disabled", func() bool {
		return p.Stats().State == host.StateDisabled
	})
	st := p.Stats()
	require.Contains(t, st.Reason, "cannot rebuild an instance: initialisation exceeded 1000 ms (_initialize was stopped there)")
	require.Equal(t, uint64(1), st.FaultTotal(), "the rebuild is not a decision: the one fault is the decision's")
	require.False(t, host.Running(p))
	// The rebuild's goroutine sets the state, then announces it.
	waitfor.Eventually(t, "the disable is announced", func() bool { return ev.last().Kind == host.EventDisabled })
	clear(picks)
	require.Equal(t, 4, w.Pick(pickCtx(), cands, picks))
	require.Equal(t, want, picks, "a disabled plugin's decisions go to the fallback")
}

// Closing one plugin while a decision runs in its guest stops the decision,
// as closing the runtime does, whatever its fuel and deadline (2^40 units
// and an hour here): Close returns once the call has ended, the decision
// falls back and counts no fault, and the rest of the runtime goes on: a
// plugin beside it keeps deciding, and the closed plugin's wrapper answers
// through its fallback.
func TestClosingAPluginDuringADecisionStopsIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	rt := newRuntime(t, host.Config{DecisionFuel: 1 << 40, Deadline: time.Hour})
	gw, err := loadBuiltin(t, rt, policy.SlotFairness).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	before := host.LiveMappings()
	store := []byte{0x36, 2, 0} // i32.store: the guest writes its memory on every turn
	p, err := rt.Load(ctx, "store-forever", hostileModule(forever(i32c(64), i32c(1), store), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	cands := host.SyntheticCandidates(16, 1)
	want := make([]uint32, 4)
	require.Equal(t, 4, reverse{}.Pick(pickCtx(), cands, want))
	statsBefore := p.Stats()
	done := make(chan []uint32, 1)
	go func() {
		picks := make([]uint32, 4)
		w.Pick(pickCtx(), cands, picks)
		done <- picks
	}()
	waitfor.Eventually(t, "the decision runs in the guest", func() bool { return host.Running(p) })

	began := time.Now()
	require.NoError(t, p.Close(ctx), "Close returns once the decision has ended")
	t.Logf("Close took %s", time.Since(began))
	require.False(t, host.Running(p), "the decision still runs after Close")
	require.Equal(t, want, awaitPicks(t, "the decision answers", done), "the fallback's answer")
	after := p.Stats()
	require.Equal(t, statsBefore.Fallbacks+1, after.Fallbacks)
	require.Equal(t, statsBefore.FaultTotal(), after.FaultTotal(), "closing a plugin is not its fault")
	require.NotEqual(t, host.StateQuarantined, after.State)

	picks := make([]uint32, 4)
	require.Equal(t, 4, w.Pick(pickCtx(), cands, picks))
	require.Equal(t, want, picks, "the closed plugin's wrapper answers through its fallback")
	require.Equal(t, 4, gw.Pick(pickCtx(), host.SyntheticCandidates(64, 3), make([]uint32, 4)), "the runtime goes on")
	require.Zero(t, gw.Plugin().Stats().Fallbacks)
	waitfor.Eventually(t, "the closed plugin's memory is unmapped", func() bool {
		return host.LiveMappings() <= before
	})
}

// Closing a plugin while one of its instances is being rebuilt stops the
// rebuild's initialisation too, which would otherwise hold Close until its
// bound (ten minutes here): replacing a plugin is not held by the module
// it replaces.
func TestClosingAPluginStopsARebuildsInitialisation(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	rt := newRuntime(t, host.Config{SetupFuel: 1 << 40, Deadline: time.Minute, NoFileCache: true})
	trap := [][]byte{{opUnreachable}, answer}
	p, err := rt.Load(ctx, "trap", hostileModule(trap, nil), nil)
	require.NoError(t, err)
	require.NoError(t, host.RebuildFrom(ctx, p, hostileModuleInit(trap, nil, spin, "_initialize")))
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4)))
	require.Equal(t, uint64(1), p.Stats().Faults[host.FaultTrap])
	waitfor.Eventually(t, "the replacement's initialisation runs", func() bool { return host.Running(p) })

	var cerr error
	within(t, time.Minute, "Close during a rebuild", func() { cerr = p.Close(ctx) })
	require.NoError(t, cerr)
	require.False(t, host.Running(p))
	st := p.Stats()
	require.Equal(t, uint64(1), st.FaultTotal(), "the halted initialisation is no fault of the plugin's")
	require.NotEqual(t, host.StateDisabled, st.State, "a closed plugin is not disabled by the rebuild Close stopped")
}
