package host_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/host"
)

// A dry run's fault (DRY_RUN: a plan's preview) falls back and is counted
// apart, in DryRunFaults; it does not feed the breaker, is no fault event,
// and so cannot change what the plugin decides for real: a module that
// faults only in previews keeps holding real dispatch however often a
// reader previews.
func TestDryRunFaultsDoNotFeedTheBreaker(t *testing.T) {
	t.Parallel()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add, BreakerThreshold: 2, BreakerStall: time.Hour, QuarantineBase: time.Hour,
		AwaitRebuilds: true})
	p, err := rt.Load(context.Background(), "previewspin", plugintest.HoldSpinningInDryRun(), nil)
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	cands, picks := host.SyntheticCandidates(8, 1), make([]uint32, 4)
	dry := pickCtx()
	dry.Flags |= policy.PickDryRun

	for range 6 {
		n, why := w.PickExplained(dry, cands, picks)
		require.Equal(t, 4, n, "the fallback previews")
		require.Contains(t, why, "it faulted: fuel")
	}
	st := p.Stats()
	require.Equal(t, uint64(6), st.DryRunFaults)
	require.Zero(t, st.FaultTotal(), "not in Faults")
	require.Equal(t, host.StateActive, st.State, "not quarantined: %s", st.Reason)
	require.Empty(t, ev.kinds(), "no fault events")

	n, _ := w.PickExplained(pickCtx(), cands, picks)
	hint, held := policy.HoldHint(n)
	require.True(t, held, "a real decision still holds")
	require.Zero(t, hint)
	require.Equal(t, uint64(1), p.Stats().Holds)
}
