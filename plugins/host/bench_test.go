package host_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

// The benchmarks compare each built-in policy run natively with the same
// policy run as a guarded plugin. Run them with
//
//	go test -run '^$' -bench . -benchmem ./plugins/host/
//
// The decision benchmarks time every call from outside and report its
// p50/p99 (p50-ns, p99-ns) and the cost per task dispatched (ns/task).

// latencies times each call of decide and reports quantiles; tasks is how
// many dispatches (or ranks) one call decides.
func latencies(b *testing.B, tasks int, decide func()) {
	b.Helper()
	ds := make([]time.Duration, 0, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		decide()
		if len(ds) < cap(ds) {
			ds = append(ds, time.Since(start))
		}
	}
	slices.Sort(ds)
	q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.50), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	if tasks > 0 {
		b.ReportMetric(float64(sum.Nanoseconds())/float64(len(ds)*tasks), "ns/task")
	}
}

func noFallbacks(b *testing.B, p *host.Plugin) {
	if st := p.Stats(); st.Fallbacks != 0 {
		b.Fatalf("%d decisions fell back: %+v", st.Fallbacks, st)
	}
}

// BenchmarkFairness is the fairness decision over n candidates (distinct
// agents in four lanes, room under every ceiling) with 1, 8 and 64 free
// slots: the built-in natively, and the same policy as a guarded plugin.
func BenchmarkFairness(b *testing.B) {
	rt := newRuntime(b, host.Config{})
	for _, n := range []int{16, 64, 256} {
		cands := host.SyntheticCandidates(n, 7)
		for i := range cands {
			cands[i].AgentLimit, cands[i].LaneLimit, cands[i].QueueLen = 1000, 10_000, 100
		}
		for _, slots := range []int{1, 8, 64} {
			ctx := policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: uint32(slots)}
			picks := make([]uint32, slots)
			b.Run(fmt.Sprintf("cands=%d/slots=%d/native", n, slots), func(b *testing.B) {
				f := &fairshare.Fairness{}
				latencies(b, slots, func() { f.Pick(ctx, cands, picks) })
			})
			b.Run(fmt.Sprintf("cands=%d/slots=%d/wasm", n, slots), func(b *testing.B) {
				p := loadBuiltin(b, rt, policy.SlotFairness) // its own fuel figure
				w, err := p.Fairness(&fairshare.Fairness{})
				require.NoError(b, err)
				latencies(b, slots, func() { w.Pick(ctx, cands, picks) })
				noFallbacks(b, p)
				b.ReportMetric(float64(p.Stats().FuelMax), "fuel")
			})
		}
	}
}

// BenchmarkFairnessEngineShaped is the decision the engine makes most: it
// asks for every free slot under its global ceiling (256 here) while each
// of the four lanes has room for one more task, so a decision picks four
// heads and takes the other sixty out of the running.
func BenchmarkFairnessEngineShaped(b *testing.B) {
	cands := host.SyntheticCandidates(64, 7)
	for i := range cands {
		cands[i].Lane, cands[i].LaneInflight, cands[i].LaneLimit = uint16(i%4), 29, 30
		cands[i].AgentLimit, cands[i].QueueLen = 100, 10
	}
	ctx := policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: 256}
	picks := make([]uint32, 256)
	b.Run("native", func(b *testing.B) {
		f := &fairshare.Fairness{}
		latencies(b, 4, func() { f.Pick(ctx, cands, picks) })
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotFairness)
		w, err := p.Fairness(&fairshare.Fairness{})
		require.NoError(b, err)
		latencies(b, 4, func() { w.Pick(ctx, cands, picks) })
		noFallbacks(b, p)
	})
}

func BenchmarkSelection100(b *testing.B) {
	tasks := host.SyntheticTasks(100, 7)
	ranks := make([]int64, len(tasks))
	b.Run("native", func(b *testing.B) {
		latencies(b, len(tasks), func() { priority.Selection{}.Rank(1e12, tasks, ranks) })
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotSelection)
		w, err := p.Selection(priority.Selection{})
		require.NoError(b, err)
		latencies(b, len(tasks), func() { w.Rank(1e12, tasks, ranks) })
		noFallbacks(b, p)
	})
}

func BenchmarkRetry(b *testing.B) {
	f := policy.Failure{NowMs: 1e12, TaskSeq: 42, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
		Attempt: 2, MaxAttempts: 4, Class: policy.ClassTransient, Flags: policy.FailureJitter}
	var d policy.Decision
	b.Run("native", func(b *testing.B) {
		latencies(b, 1, func() { d = backoff.Retry{}.Decide(f) })
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotRetry)
		w, err := p.Retry(backoff.Retry{})
		require.NoError(b, err)
		latencies(b, 1, func() { d = w.Decide(f) })
		noFallbacks(b, p)
	})
	_ = d
}

// BenchmarkRunawayGuest measures how long a guest stuck in a tight loop
// runs before the default decision budget stops it, and so the fuel burnt
// per millisecond (fuel/ms): the figures behind Config.DecisionFuel.
func BenchmarkRunawayGuest(b *testing.B) {
	ctx := context.Background()
	rt := newRuntime(b, host.Config{})
	fuel := rt.Config().DecisionFuel
	var total time.Duration
	for b.Loop() {
		p, err := rt.Load(ctx, "loop", guests["faulty"], []byte(`{"mode": "ok"}`))
		require.NoError(b, err)
		require.NoError(b, p.Configure(ctx, []byte(`{"mode": "loop"}`)))
		w, err := p.Fairness(reverse{})
		require.NoError(b, err)
		w.Pick(pickCtx(), host.SyntheticCandidates(4, 1), make([]uint32, 4))
		st := p.Stats()
		require.Equal(b, uint64(1), st.Faults[host.FaultBudget])
		total += st.LatencyMax
		require.NoError(b, p.Close(ctx))
	}
	per := total / time.Duration(b.N)
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/stop")
	b.ReportMetric(float64(fuel)/(float64(per.Nanoseconds())/1e6), "fuel/ms")
}

// BenchmarkHostile measures what each hostile shape of TestHostileModules
// costs the host, as go test -bench Hostile reports it:
//
//   - worst-ms, p50-ms: one decision stopped by fuel alone (no deadline, no
//     breaker), the figure the default budget is calibrated on;
//   - ns/unit: wall time per unit of fuel burnt by such a decision;
//   - cpu-ms, cpu-ns/unit (Linux): the CPU time of the median such
//     decision, read from its thread's clock, and per unit: what the shape
//     costs the core it runs on, which the machine's load inflates far less
//     than the wall time (the cache it shares with other work still may);
//   - stall-ms: with the default configuration (deadline and breaker), the
//     time all decisions asked of the plugin took until the breaker
//     quarantined it: what one pathological module costs the scheduler;
//   - default-worst-ms: the longest of those decisions, the worst single
//     decision under the defaults (issue 15's bar: 5 ms on a machine that
//     is not starved);
//   - default-worst-cpu-ms, default-worst-wait-ms (Linux): that decision's
//     thread CPU time, and the time its thread waited for a core (the
//     kernel's run-queue wait, read just before and just after it, so
//     that it may include a wait around it): a worst decision far over
//     its CPU time with the difference in wait is one that the machine's
//     other work held up, not one that the host let run long;
//   - default-first-ms: the longest of the rounds' first decisions, each
//     right after its plugin's load.
func BenchmarkHostile(b *testing.B) {
	for _, tc := range hostileCases() {
		wasm := tc.wasm()
		cands := host.SyntheticCandidates(16, 1)
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			// Each decision the module's own, run to its fuel: no deadline,
			// CPU limit or breaker in the way, and the faulted instance's
			// replacement awaited.
			rt := newRuntime(b, host.Config{NoFileCache: true, Deadline: time.Hour, BreakerThreshold: 1 << 30, BreakerStall: time.Hour, AwaitRebuilds: true})
			p, err := rt.Load(ctx, tc.name, wasm, nil)
			require.NoError(b, err)
			w, err := p.Fairness(reverse{})
			require.NoError(b, err)
			var ds []time.Duration
			var cpus []int64
			var fuel uint64
			runtime.LockOSThread() // the guest runs on this thread: its CPU clock times it
			for b.Loop() {
				start := time.Now()
				c0, ok0 := host.ThreadCPU()
				w.Pick(pickCtx(), cands, make([]uint32, 4))
				c1, ok1 := host.ThreadCPU()
				ds = append(ds, time.Since(start))
				if ok0 && ok1 {
					cpus = append(cpus, c1-c0)
				}
				fuel = p.Stats().FuelMax
			}
			runtime.UnlockOSThread()
			slices.Sort(ds)
			b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "worst-ms")
			b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/float64(fuel), "ns/unit")
			if len(cpus) > 0 {
				slices.Sort(cpus)
				b.ReportMetric(float64(cpus[len(cpus)/2])/1e6, "cpu-ms")
				b.ReportMetric(float64(cpus[len(cpus)/2])/float64(fuel), "cpu-ns/unit")
			}

			// The default configuration, a fresh plugin per round: the
			// time until the breaker takes it out.
			if tc.want == 0 {
				return // legal: it is never taken out
			}
			var stall, worst, first time.Duration
			var worstCPU, worstWait int64 // of the worst decision, ns
			cpuOK, waitOK := true, true
			rounds := 0
			drt := newRuntime(b, host.Config{NoFileCache: true, Deadline: host.DefaultDeadline, DecisionCPU: host.DefaultDecisionCPU}) // newRuntime's own defaults are a minute
			// The thread's clocks time each decision, outside its wall time.
			runtime.LockOSThread()
			for range 3 {
				p, err := drt.Load(ctx, tc.name, wasm, nil)
				require.NoError(b, err)
				w, err := p.Fairness(reverse{})
				require.NoError(b, err)
				// Until the breaker takes it out: decisions made while its
				// faulted instance is rebuilt fall back at once and count.
				for i, end := 0, time.Now().Add(30*time.Second); time.Now().Before(end); i++ {
					if d, _ := p.Disabled(); d {
						break
					}
					w0, okw0 := threadWait()
					c0, ok0 := host.ThreadCPU()
					start := time.Now()
					w.Pick(pickCtx(), cands, make([]uint32, 4))
					took := time.Since(start)
					c1, ok1 := host.ThreadCPU()
					w1, okw1 := threadWait()
					if i == 0 {
						first = max(first, took)
					}
					if took > worst {
						worst, worstCPU, worstWait = took, c1-c0, w1-w0
						cpuOK, waitOK = ok0 && ok1, okw0 && okw1
					}
				}
				stall += p.Stats().Latency.Sum // the decisions the module made, every one faulted
				rounds++
				require.NoError(b, p.Close(ctx))
			}
			runtime.UnlockOSThread()
			b.ReportMetric(float64((stall/time.Duration(rounds)).Microseconds())/1000, "stall-ms")
			b.ReportMetric(float64(worst.Microseconds())/1000, "default-worst-ms")
			b.ReportMetric(float64(first.Microseconds())/1000, "default-first-ms")
			if cpuOK {
				b.ReportMetric(float64(worstCPU/1000)/1000, "default-worst-cpu-ms")
			}
			if waitOK {
				b.ReportMetric(float64(worstWait/1000)/1000, "default-worst-wait-ms")
			}
		})
	}
}

// BenchmarkTrial is the check configurePlugin adds before a configuration
// is accepted: an instance of the built-in fair-share module (a Go guest)
// made, configured and asked for the load's smoke decision, then closed.
func BenchmarkTrial(b *testing.B) {
	rt := newRuntime(b, host.Config{})
	mod, _ := builtin.ForSlot(policy.SlotFairness)
	p, err := rt.Load(context.Background(), mod.Name, mod.Wasm, nil)
	require.NoError(b, err)
	for b.Loop() {
		if err := p.Trial(context.Background(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// threadWait returns how long the calling thread has waited on a run queue
// for a core, in ns (the second field of /proc/thread-self/schedstat), and
// false where the kernel does not say.
func threadWait() (int64, bool) {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	v, err := strconv.ParseInt(f[1], 10, 64)
	return v, err == nil
}
