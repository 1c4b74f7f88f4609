package jitter

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

func failure(seq uint64, attempt uint16, prev int64) policy.Failure {
	return policy.Failure{NowMs: 1e12, TaskSeq: seq, Attempt: attempt, MaxAttempts: 10,
		BaseDelayMs: 1000, MaxDelayMs: 60_000, PrevDelayMs: prev, Class: policy.ClassTransient}
}

func TestDelaysStayBetweenBaseAndThreeTimesThePreviousAndSpreadOut(t *testing.T) {
	t.Parallel()
	seen := map[int64]bool{}
	for seq := range uint64(200) {
		d := Retry{}.Decide(failure(seq, 3, 4000))
		require.Equal(t, policy.ActionRetry, d.Action)
		require.GreaterOrEqual(t, d.DelayMs, int64(1000))
		require.LessOrEqual(t, d.DelayMs, int64(12_000))
		seen[d.DelayMs] = true
	}
	require.Greater(t, len(seen), 150, "tasks failing together must not retry in lockstep")
	require.Equal(t, Retry{}.Decide(failure(7, 3, 4000)), Retry{}.Decide(failure(7, 3, 4000)), "deterministic")
	require.LessOrEqual(t, Retry{}.Decide(failure(7, 5, 50_000)).DelayMs, int64(60_000), "capped")
}

func TestPermanentFailsAndExhaustedParks(t *testing.T) {
	t.Parallel()
	f := failure(1, 1, 0)
	f.Class = policy.ClassPermanent
	require.Equal(t, policy.ActionFail, Retry{}.Decide(f).Action)
	require.Equal(t, policy.ActionPark, Retry{}.Decide(failure(1, 10, 0)).Action)
}
