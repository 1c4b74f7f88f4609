package host_test

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// A stop of the world waits for every goroutine to reach a point where it
// may stop, and compiled guest code has none: a collection started while a
// decision ran used to wait for the decision to end, and the watchdog,
// stopped with the world, could not end it, so that only fuel did. The
// meter's refills are Go code, where the collection proceeds: it no longer
// waits for the decision.
func TestACollectionDoesNotWaitForARunningDecision(t *testing.T) {
	ctx := context.Background()
	// Fuel for hours; the deadline and the CPU limit are a minute (the
	// tests' default): nothing ends the decision but the test.
	rt := newRuntime(t, host.Config{DecisionFuel: 1 << 50, NoFileCache: true})
	p, err := rt.Load(ctx, "endless", hostileModule(forever(denseBody), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	done := make(chan int, 1)
	go func() { done <- w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4)) }()
	waitfor.Eventually(t, "the decision runs", func() bool { return host.Running(p) })

	runtime.GC()
	require.True(t, host.Running(p), "the collection ran to its end while the decision went on")

	host.AbandonRunning(p)
	select {
	case n := <-done:
		require.Equal(t, 4, n, "the fallback decides the abandoned decision")
	case <-time.After(time.Minute):
		t.Fatal("the abandoned decision did not end")
	}
}

// Fuel prices a load about as an addition; a chase of loads that each miss
// the caches costs tens of nanoseconds a unit, so that its fuel lasts a
// hundred times longer than a dense loop's. The decision's CPU time ends
// it, with a budget fault that says so, long before its fuel or its
// deadline (here a minute, so that only the CPU limit can end it in time).
func TestCPUTimeEndsADecisionThatFuelUnderprices(t *testing.T) {
	if _, ok := host.ThreadCPU(); !ok {
		t.Skip("no per-thread CPU clock on this system: fuel and the deadline bound a decision")
	}
	ctx := context.Background()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add, DecisionCPU: host.DefaultDecisionCPU, NoFileCache: true})
	p, err := rt.Load(ctx, "pointer-chase", hostileModuleMem(pointerChase(), nil, nil, "", chasePages, chaseSegments()), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4)), "the fallback decides")

	st := p.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultBudget], "%+v", st)
	require.Less(t, st.FuelMax, uint64(rt.Config().DecisionFuel), "its fuel did not run out")
	reasons := ev.faultReasons()
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], "of CPU time")
}

// A memory.grow hands the guest pages the kernel maps as they are first
// touched, which on a virtual machine can cost tens of microseconds a
// page: a decision that grows its memory and then walks the new pages
// could run for milliseconds on a tank that fuel sizes for a few hundred
// microseconds, and before its CPU time was counted, only the deadline
// could end it. The grow starts the count: the fault says so, and the
// count began within the grow's first microseconds, not at the first
// refill a quarter of a millisecond into the decision.
func TestAMemoryGrowStartsTheCPUCount(t *testing.T) {
	if _, ok := host.ThreadCPU(); !ok {
		t.Skip("no per-thread CPU clock on this system: fuel and the deadline bound a decision")
	}
	ctx := context.Background()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add, DecisionCPU: host.DefaultDecisionCPU, NoFileCache: true})
	p, err := rt.Load(ctx, "grow-and-walk", hostileModule(append([][]byte{grow}, forever(chaseBody, chaseBody, chaseBody, chaseBody)...), nil), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4)), "the fallback decides")

	require.Equal(t, uint64(1), p.Stats().Faults[host.FaultBudget], "%+v", p.Stats())
	reasons := ev.faultReasons()
	require.Len(t, reasons, 1)
	require.Contains(t, reasons[0], "of CPU time (counted from its memory.grow")
}

// BenchmarkCollectionDuringDecision times a garbage collection (the
// runtime.GC call: its stops of the world and its marking) started while
// a decision of the pointer chase runs on its fuel (the deadline and the
// CPU limit a minute away, so that the decision outlasts the collection).
// A stop of the world waits for the guest's next refill.
//
//	go test -run '^$' -bench CollectionDuringDecision ./plugins/host/
func BenchmarkCollectionDuringDecision(b *testing.B) {
	wasm := hostileModuleMem(pointerChase(), nil, nil, "", chasePages, chaseSegments())
	rt := newRuntime(b, host.Config{NoFileCache: true, AwaitRebuilds: true, BreakerThreshold: 1 << 30, BreakerStall: time.Hour})
	p, err := rt.Load(context.Background(), "pointer-chase", wasm, nil)
	require.NoError(b, err)
	w, err := p.Fairness(reverse{})
	require.NoError(b, err)
	var gcs []time.Duration
	for b.Loop() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Pick(pickCtx(), host.SyntheticCandidates(16, 1), make([]uint32, 4))
		}()
		waitfor.Eventually(b, "the decision runs", func() bool { return host.Running(p) })
		start := time.Now()
		runtime.GC()
		gcs = append(gcs, time.Since(start))
		<-done
	}
	slices.Sort(gcs)
	b.ReportMetric(float64(gcs[len(gcs)/2].Microseconds())/1000, "p50-gc-ms")
	b.ReportMetric(float64(gcs[len(gcs)-1].Microseconds())/1000, "worst-gc-ms")
}
