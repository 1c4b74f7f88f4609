package host_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

func loadBuiltin(t testing.TB, rt *host.Runtime, s policy.Slot) *host.Plugin {
	t.Helper()
	m, ok := builtin.ForSlot(s)
	require.True(t, ok)
	p, err := rt.Load(context.Background(), m.Name, m.Wasm, nil)
	require.NoError(t, err)
	require.Equal(t, s, p.Slot())
	return p
}

func TestBuiltinFairnessPluginDecidesLikeNative(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	w, err := loadBuiltin(t, rt, policy.SlotFairness).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	native := &fairshare.Fairness{}
	for seed := uint64(1); seed <= 50; seed++ {
		cands := host.SyntheticCandidates(int(seed%70), seed)
		ctx := policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: uint32(seed % 17)}
		want := make([]uint32, ctx.Slots)
		got := make([]uint32, ctx.Slots)
		nw := native.Pick(ctx, cands, want)
		ng := w.Pick(ctx, cands, got)
		require.Equal(t, want[:nw], got[:ng], "seed %d", seed)
	}
	st := w.Plugin().Stats()
	require.Equal(t, uint64(50), st.Calls)
	require.Zero(t, st.Fallbacks)
}

func TestBuiltinSelectionPluginRanksLikeNative(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	w, err := loadBuiltin(t, rt, policy.SlotSelection).Selection(priority.Selection{})
	require.NoError(t, err)
	tasks := host.SyntheticTasks(100, 3)
	want, got := make([]int64, 100), make([]int64, 100)
	priority.Selection{}.Rank(1e12, tasks, want)
	w.Rank(1e12, tasks, got)
	require.Equal(t, want, got)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestBuiltinRetryPluginDecidesLikeNative(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	w, err := loadBuiltin(t, rt, policy.SlotRetry).Retry(backoff.Retry{})
	require.NoError(t, err)
	for attempt := uint16(1); attempt <= 5; attempt++ {
		for _, class := range []policy.ErrorClass{policy.ClassTransient, policy.ClassPermanent} {
			f := policy.Failure{NowMs: 1e12, TaskSeq: 42, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
				Attempt: attempt, MaxAttempts: 4, Class: class, Flags: policy.FailureJitter}
			require.Equal(t, backoff.Retry{}.Decide(f), w.Decide(f), "attempt %d class %s", attempt, class)
		}
	}
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}
