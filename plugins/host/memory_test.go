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

// Closing the runtime while a decision runs in the guest must leave the
// guest its memory until the call returns: wazero frees every module's
// memory as the runtime closes, busy or not, and an unmapped memory under
// a running guest kills the process (a fault, not a panic). The guest
// stores into its memory on every turn of its loop, so the process dies
// here at once if Close unmaps it.
//
// With the garbage collector off, as in the deadline tests: a collection
// stops the world and waits for the guest, which cannot be preempted, so
// the test could not stop it once started.
func TestClosingTheRuntimeDuringADecisionKeepsItsMemory(t *testing.T) {
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

	require.NoError(t, rt.Close(ctx))
	require.True(t, host.Running(p), "the decision still runs after Close (nothing stopped it yet)")

	// Stop it as its deadline would: the watchdog empties the tank at every
	// tick until the call returns, since the guest's own metering may write
	// back the fuel it read before the tank was emptied.
	waitfor.Eventually(t, "the decision answers", func() bool {
		host.AbandonRunning(p)
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
