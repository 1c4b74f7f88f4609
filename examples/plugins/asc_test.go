package plugins_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/simulate"
	"github.com/switchyard/switchyard/plugins/host"
)

// The AssemblyScript example (asc/): the ABI from a second language.

func TestAssemblyScriptPluginLoadsAndServesTheShortestQueueFirst(t *testing.T) {
	t.Parallel()
	p := load(t, "asc.wasm", "")
	require.Equal(t, policy.SlotFairness, p.Slot())
	require.True(t, p.Stateless())
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := []policy.Candidate{
		{HeadSeq: 1, Agent: 1, Lane: 0, AgentLimit: 10, LaneLimit: 10, QueueLen: 9},
		{HeadSeq: 2, Agent: 2, Lane: 0, AgentLimit: 10, LaneLimit: 10, QueueLen: 1},
		{HeadSeq: 3, Agent: 3, Lane: 1, AgentLimit: 10, LaneLimit: 10, QueueLen: 2},
		{HeadSeq: 4, Agent: 4, Lane: 1, AgentInflight: 5, AgentLimit: 5, LaneLimit: 10, QueueLen: 1}, // agent full
	}
	picks := make([]uint32, 6)
	n := w.Pick(policy.PickContext{Slots: 6}, cands, picks)
	// queue 1 (1 ready), queue 2 (2, then 1 left: tie with none), queue 2
	// again, then queue 0; queue 3's agent is full.
	require.Equal(t, []uint32{1, 2, 2, 0, 0, 0}, picks[:n])

	picks = make([]uint32, 3)
	cands[0].LaneInflight, cands[0].LaneLimit = 9, 10 // lane 0 has room for one
	n = w.Pick(policy.PickContext{Slots: 3}, cands, picks)
	require.Equal(t, []uint32{1, 2, 2}, picks[:n], "lane 0 is full after one pick")

	// Input the host must refuse to pass on, and the guest's own refusal.
	n = w.Pick(policy.PickContext{Slots: 2}, host.SyntheticCandidates(1100, 1), picks[:2])
	require.Equal(t, 2, n, "the fallback decided")
	st := p.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultRefused], "more than 1,024 candidates: refused with a reason")
	require.Equal(t, uint64(1), st.Fallbacks)
}

func TestAssemblyScriptPluginThroughTheEngineServesAQuietAgentFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "asc.wasm", "").Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}
	// A noisy agent queues 20 tasks; a quiet one submits one task 0.5 s later.
	subs := append(burst("noisy", "main", 0, 20), burst("quiet", "main", 500*time.Millisecond, 1)...)
	ctx := context.Background()

	plugin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Fairness: w, Name: "shortest-queue"})
	require.NoError(t, err)
	builtin, err := simulate.Run(ctx, subs, simulate.Options{Config: cfg, Name: "fair-share"})
	require.NoError(t, err)
	quiet := func(r *simulate.Report) time.Duration { return r.Agents[1].WaitP50 }
	require.Equal(t, "quiet", plugin.Agents[1].Agent)
	require.LessOrEqual(t, quiet(plugin), 100*time.Millisecond, "served at the next free slot")
	require.Greater(t, quiet(builtin), time.Second, "the built-in serves the older heads of the noisy queue first")
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}
