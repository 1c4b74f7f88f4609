package plugins_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
)

func TestEDFPluginRanksEarlierDeadlinesFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "edf.wasm", "").Selection(priority.Selection{})
	require.NoError(t, err)
	tasks := []policy.Task{{Seq: 1, DeadlineMs: 9000}, {Seq: 2}, {Seq: 3, DeadlineMs: 2000}}
	ranks := make([]int64, 3)
	w.Rank(0, tasks, ranks)
	require.Less(t, ranks[2], ranks[0])
	require.Less(t, ranks[0], ranks[1])
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestDRRPluginAlternatesByQuantumAcrossDecisions(t *testing.T) {
	t.Parallel()
	p := load(t, "drr.wasm", `{"quantum": 2}`)
	require.False(t, p.Stateless(), "DRR keeps its turn between decisions: one instance")
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := []policy.Candidate{
		{Agent: 1, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
		{Agent: 2, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
	}
	var got []uint32
	pick := make([]uint32, 1)
	for range 8 {
		require.Equal(t, 1, w.Pick(policy.PickContext{Slots: 1}, cands, pick))
		got = append(got, cands[pick[0]].Agent)
	}
	require.Equal(t, []uint32{1, 1, 2, 2, 1, 1, 2, 2}, got)
	require.Error(t, p.Configure(context.Background(), []byte(`{"quantum": 0}`)))
	require.Zero(t, p.Stats().Fallbacks)
}

func TestJitterPluginSpreadsRetries(t *testing.T) {
	t.Parallel()
	w, err := load(t, "jitter.wasm", "").Retry(backoff.Retry{})
	require.NoError(t, err)
	seen := map[int64]bool{}
	for seq := range uint64(50) {
		d := w.Decide(policy.Failure{NowMs: 1e12, TaskSeq: seq, Attempt: 2, MaxAttempts: 4,
			BaseDelayMs: 1000, MaxDelayMs: 60_000, PrevDelayMs: 2000, Class: policy.ClassTransient})
		require.Equal(t, policy.ActionRetry, d.Action)
		require.GreaterOrEqual(t, d.DelayMs, int64(1000))
		require.LessOrEqual(t, d.DelayMs, int64(6000))
		seen[d.DelayMs] = true
	}
	require.Greater(t, len(seen), 30)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestWFQPluginSharesDispatchesByWeight(t *testing.T) {
	t.Parallel()
	p := load(t, "wfq.wasm", "")
	require.False(t, p.Stateless(), "WFQ keeps virtual time between decisions: one instance")
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := []policy.Candidate{
		{HeadSeq: 1, Agent: 1, AgentWeight: 3, AgentLimit: 100, LaneLimit: 100, QueueLen: 100},
		{HeadSeq: 2, Agent: 2, AgentWeight: 1, AgentLimit: 100, LaneLimit: 100, QueueLen: 100},
	}
	got := map[uint32]int{}
	pick := make([]uint32, 1)
	for range 40 {
		require.Equal(t, 1, w.Pick(policy.PickContext{Slots: 1}, cands, pick))
		got[cands[pick[0]].Agent]++
	}
	require.InDelta(t, 30, got[1], 1, "3:1, give or take the first rotation: %v", got)
	require.Equal(t, 40, got[1]+got[2])
	require.Zero(t, p.Stats().Fallbacks)
}

func TestLanePriorityPluginServesTheConfiguredLaneFirst(t *testing.T) {
	t.Parallel()
	p := load(t, "lanepri.wasm", `{"priorities": {"2": 10}, "agingStepMs": 1000}`)
	require.True(t, p.Stateless())
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := []policy.Candidate{
		{HeadSeq: 1, HeadWaitMs: 9000, Agent: 1, Lane: 0, AgentLimit: 9, LaneLimit: 9, QueueLen: 2},
		{HeadSeq: 2, HeadWaitMs: 100, Agent: 2, Lane: 2, AgentLimit: 9, LaneLimit: 9, QueueLen: 2},
		{HeadSeq: 3, HeadWaitMs: 12_000, Agent: 3, Lane: 1, AgentLimit: 9, LaneLimit: 9, QueueLen: 1},
	}
	picks := make([]uint32, 5)
	n := w.Pick(policy.PickContext{Slots: 5}, cands, picks)
	// lane 1's head has aged 12 steps (12 > 10), lane 2 then, then lane 0 (9 steps).
	require.Equal(t, []uint32{2, 1, 1, 0, 0}, picks[:n])
	require.ErrorContains(t, p.Configure(context.Background(), []byte(`{"priorities": {"main": 1}}`)), "lane index")
	require.Zero(t, p.Stats().Fallbacks)
}

func TestErrorClassPluginRetriesByStatus(t *testing.T) {
	t.Parallel()
	w, err := load(t, "errclass.wasm", `{"throttleFactor": 3}`).Retry(backoff.Retry{})
	require.NoError(t, err)
	f := policy.Failure{NowMs: 1e12, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
		Attempt: 1, MaxAttempts: 4, Class: policy.ClassTransient}
	decide := func(status uint16, attempt uint16) policy.Decision {
		f.HTTPStatus, f.Attempt = status, attempt
		return w.Decide(f)
	}
	require.Equal(t, policy.Decision{Action: policy.ActionRetry, DelayMs: 3000}, decide(429, 1))
	require.Equal(t, policy.Decision{Action: policy.ActionRetry, DelayMs: 1000}, decide(500, 1))
	require.Equal(t, policy.Decision{Action: policy.ActionRetry, DelayMs: 1000}, decide(504, 1))
	require.Equal(t, policy.Decision{Action: policy.ActionFail}, decide(504, 2))
	require.Equal(t, policy.Decision{Action: policy.ActionFail}, decide(404, 1))
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}
