package host_test

import (
	"context"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// Closing the runtime while a decision runs in the guest must stop the
// decision, whatever its fuel and deadline, and return once it has ended:
// here the guest loops forever on a budget of 2^40 units and an hour's
// deadline, so nothing but Close ends it in the test's time. The guest's
// loop is tight (its metering reads the tank and writes back what it read
// minus its weight), so a single emptying of the tank from outside is
// usually undone: Close's watchdog empties it again until the call
// returns. The decision falls back and counts no fault: closing the
// runtime is not the plugin's doing.
//
// Until the call has returned, the guest keeps its memory: wazero frees
// every module's memory as the runtime closes, busy or not, and an
// unmapped memory under a running guest kills the process (a fault, not a
// panic). The guest stores into its memory on every turn of its loop, so
// the process dies here at once if its memory is unmapped under it.
//
// With the garbage collector off, as in the deadline tests: a collection
// stops the world and waits for the guest, which cannot be preempted, so
// the watchdog could not run while it waits.
func TestClosingTheRuntimeDuringADecisionStopsIt(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	before := host.LiveMappings()
	rt := newRuntime(t, host.Config{DecisionFuel: 1 << 40, Deadline: time.Hour})
	store := []byte{0x36, 2, 0} // i32.store
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
	require.NoError(t, rt.Close(ctx), "Close returns once the decision has ended")
	t.Logf("Close took %s", time.Since(began))
	require.False(t, host.Running(p), "the decision still runs after Close")

	require.Equal(t, want, awaitPicks(t, "the decision answers", done), "the fallback's answer")
	after := p.Stats()
	require.Equal(t, statsBefore.Fallbacks+1, after.Fallbacks)
	require.Equal(t, statsBefore.FaultTotal(), after.FaultTotal(), "a closed runtime is not the plugin's fault")
	waitfor.Eventually(t, "its memory is unmapped once the call returned", func() bool {
		return host.LiveMappings() <= before
	})
}

// Close does not wait for a halted call past its context: with a context
// already ended it releases the runtime at once (wazero then frees the
// modules' memories), says that a call still ran, and the watchdog halts
// the call in the background. The guest, storing into its memory on every
// turn of its loop, must keep it until the call returns (see above).
func TestClosingTheRuntimeWithAnEndedContextLeavesTheDecisionItsMemory(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	ctx := context.Background()
	before := host.LiveMappings()
	rt := newRuntime(t, host.Config{DecisionFuel: 1 << 40, Deadline: time.Hour})
	store := []byte{0x36, 2, 0} // i32.store
	p, err := rt.Load(ctx, "store-forever", hostileModule(forever(i32c(64), i32c(1), store), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4))
	}()
	waitfor.Eventually(t, "the decision runs in the guest", func() bool { return host.Running(p) })

	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := rt.Close(ended); err != nil { // nil only if the halt won the race with the ended context
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorContains(t, err, "a guest call still ran")
	}
	waitfor.Eventually(t, "the decision is halted in the background", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	waitfor.Eventually(t, "its memory is unmapped once the call returned", func() bool {
		return host.LiveMappings() <= before
	})
}

// A load whose instantiation fails after wazero made the memory (here a
// data segment out of bounds, checked only at instantiation) must give
// the memory back: wazero closes no module then, so it never frees it.
func TestFailedInstantiationLeavesNoMapping(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, host.Config{})
	seg := func(off int32) []byte {
		s := append([]byte{0}, i32c(off)...)
		s = append(s, opEnd)
		s = append(s, uleb(uint32(len(logText)))...)
		return append(s, logText...)
	}
	m := hostileModule(forever(denseBody), nil)
	tail := sect(11, vec(seg(0)))
	m = append(m[:len(m)-len(tail):len(m)-len(tail)], sect(11, vec(seg(1<<20)))...)
	before := host.LiveMappings()
	for range 3 {
		_, err := rt.Load(ctx, "data-out-of-bounds", m, nil)
		require.ErrorIs(t, err, host.ErrInvalid)
		require.LessOrEqual(t, host.LiveMappings(), before, "a failed load leaves no mapping behind")
	}
}

// Once the runtime is closed its watchdog is stopped, and a guest call
// could be stopped by fuel alone: a wrapper still called must answer
// through its fallback at once and start no call, and count no fault
// against the plugin. That holds too for an instance that a decision put
// back into its slot just as the pool closed (the instant before put sees
// the pool closed and closes it): here the module would run for 2^40
// units of fuel, far past the test's time, if it were called.
func TestAfterCloseAWrapperFallsBackAtOnce(t *testing.T) {
	ctx := context.Background()
	rt := newRuntime(t, host.Config{DecisionFuel: 1 << 40, Deadline: time.Hour})
	p, err := rt.Load(ctx, "forever", hostileModule(forever(denseBody), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	held := host.TakeIdle(p)
	require.NoError(t, rt.Close(ctx))
	require.True(t, held.Slip(p), "the instance sits in its closed pool's slot")

	cands := host.SyntheticCandidates(16, 1)
	want := make([]uint32, 4)
	require.Equal(t, 4, reverse{}.Pick(pickCtx(), cands, want))
	before := p.Stats()
	for range 3 {
		done := make(chan []uint32, 1)
		go func() {
			picks := make([]uint32, 4)
			w.Pick(pickCtx(), cands, picks)
			done <- picks
		}()
		require.Equal(t, want, awaitPicks(t, "the wrapper answers", done), "the fallback's answer")
	}
	after := p.Stats()
	require.Equal(t, before.Fallbacks+3, after.Fallbacks)
	require.Equal(t, before.FaultTotal(), after.FaultTotal(), "a closed runtime is not the plugin's fault")
	require.False(t, host.Running(p))
}

// awaitPicks waits for a decision run in another goroutine to hand over
// its picks on done, and returns them.
func awaitPicks(t *testing.T, what string, done <-chan []uint32) []uint32 {
	t.Helper()
	var got []uint32
	waitfor.Eventually(t, what, func() bool {
		select {
		case got = <-done:
			return true
		default:
			return false
		}
	})
	return got
}
