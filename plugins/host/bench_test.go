package host_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/host"
)

// The benchmarks compare each built-in policy run natively with the same
// policy run as a guarded plugin. Run them with
//
//	go test -run '^$' -bench . -benchmem ./plugins/host/
//
// The wasm benchmarks report the plugin's own p50/p99 call latency.

func reportLatency(b *testing.B, p *host.Plugin) {
	st := p.Stats()
	b.ReportMetric(float64(st.LatencyP50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(st.LatencyP99.Nanoseconds()), "p99-ns")
	if st.Fallbacks != 0 {
		b.Fatalf("%d decisions fell back: %+v", st.Fallbacks, st)
	}
}

func BenchmarkFairness64(b *testing.B) {
	cands := host.SyntheticCandidates(64, 7)
	ctx := policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: 8}
	picks := make([]uint32, 8)
	b.Run("native", func(b *testing.B) {
		f := &fairshare.Fairness{}
		b.ReportAllocs()
		for b.Loop() {
			f.Pick(ctx, cands, picks)
		}
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotFairness)
		w, err := p.Fairness(&fairshare.Fairness{})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			w.Pick(ctx, cands, picks)
		}
		reportLatency(b, p)
	})
}

func BenchmarkSelection100(b *testing.B) {
	tasks := host.SyntheticTasks(100, 7)
	ranks := make([]int64, len(tasks))
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			priority.Selection{}.Rank(1e12, tasks, ranks)
		}
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotSelection)
		w, err := p.Selection(priority.Selection{})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			w.Rank(1e12, tasks, ranks)
		}
		reportLatency(b, p)
	})
}

func BenchmarkRetry(b *testing.B) {
	f := policy.Failure{NowMs: 1e12, TaskSeq: 42, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
		Attempt: 2, MaxAttempts: 4, Class: policy.ClassTransient, Flags: policy.FailureJitter}
	b.Run("native", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			backoff.Retry{}.Decide(f)
		}
	})
	b.Run("wasm", func(b *testing.B) {
		rt := newRuntime(b, host.Config{})
		p := loadBuiltin(b, rt, policy.SlotRetry)
		w, err := p.Retry(backoff.Retry{})
		require.NoError(b, err)
		b.ReportAllocs()
		for b.Loop() {
			w.Decide(f)
		}
		reportLatency(b, p)
	})
}
