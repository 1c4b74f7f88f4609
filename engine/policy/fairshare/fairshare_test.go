package fairshare

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

// randomCandidates makes n candidates shaped like the engine's: in
// submission order, small counters, a few lanes, agents that may have queues
// in several lanes.
func randomCandidates(r *rand.Rand, n int) []policy.Candidate {
	cands := make([]policy.Candidate, n)
	agents := 1 + r.IntN(n+1)
	lanes := 1 + r.IntN(4)
	for i := range cands {
		cands[i] = policy.Candidate{
			HeadSeq:       uint64(i)*5 + uint64(r.IntN(5)),
			HeadWaitMs:    int64(r.IntN(60_000)),
			Agent:         uint32(r.IntN(agents)) * 7919,
			AgentInflight: uint32(r.IntN(6)),
			AgentLimit:    uint32(1 + r.IntN(8)),
			AgentWeight:   uint32(r.IntN(4)),
			Lane:          uint16(r.IntN(lanes)),
			LaneInflight:  uint32(r.IntN(10)),
			LaneLimit:     uint32(1 + r.IntN(14)),
			QueueLen:      uint32(r.IntN(5)),
		}
	}
	return cands
}

// oddCandidates makes candidates outside the fast path's bounds in one of
// several ways, or right at its edges.
func oddCandidates(r *rand.Rand, n int) []policy.Candidate {
	cands := randomCandidates(r, n)
	switch r.IntN(7) {
	case 0: // not in submission order
		r.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	case 1: // large weights, at and past the edge
		for i := range cands {
			cands[i].AgentWeight = []uint32{2047, 2048, 1 << 31, ^uint32(0), 3}[r.IntN(5)]
		}
	case 2: // large in-flight counts, up to the uint32 edge
		for i := range cands {
			v := []uint32{1<<17 - 1, 1 << 17, 1 << 30, ^uint32(0) - 2}[r.IntN(4)]
			cands[i].AgentInflight, cands[i].AgentLimit = v, v+uint32(r.IntN(4))
		}
	case 3: // many lanes
		for i := range cands {
			cands[i].Lane = uint16(250 + r.IntN(10))
		}
	case 4: // huge and negative waits
		for i := range cands {
			cands[i].HeadWaitMs = []int64{-1 << 62, -5, 1<<62 - 1, 1 << 62, 1<<63 - 1, 30_000}[r.IntN(6)]
		}
	case 5: // huge sequences
		for i := range cands {
			cands[i].HeadSeq += 1<<62 - 1000
		}
	case 6: // repeated sequences: ties only the exact path breaks (by index)
		for i := range cands {
			cands[i].HeadSeq = uint64(i / 3)
		}
	}
	return cands
}

func randomContext(r *rand.Rand) policy.PickContext {
	return policy.PickContext{NowMs: 1e12, AgingMs: int64(r.IntN(3)) * 20_000, Slots: uint32(r.IntN(20))}
}

// agree fails unless Fairness and, separately, its exact path decide like
// the reference on cands. It reports whether the fast path decided.
func agree(t *testing.T, f *Fairness, ctx policy.PickContext, cands []policy.Candidate, what string) bool {
	t.Helper()
	want := make([]uint32, ctx.Slots)
	want = want[:refPick(ctx, cands, want)]
	got := make([]uint32, ctx.Slots)
	require.Equal(t, want, got[:f.Pick(ctx, cands, got)], "%s: Fairness.Pick", what)
	require.Equal(t, want, got[:f.exact.pick(ctx, cands, got)], "%s: exact path", what)
	_, fast := f.fast.pick(ctx, cands, got)
	return fast
}

func TestPickAgreesWithReferenceOnEngineShapedInput(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var f Fairness
	for iter := range 5000 {
		cands := randomCandidates(r, r.IntN(80))
		require.True(t, agree(t, &f, randomContext(r), cands, fmt.Sprint("iteration ", iter)),
			"iteration %d: engine-shaped input must take the fast path", iter)
	}
}

func TestPickAgreesWithReferenceOnOddInput(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	var f Fairness
	fast, exact := 0, 0
	for iter := range 5000 {
		if agree(t, &f, randomContext(r), oddCandidates(r, r.IntN(80)), fmt.Sprint("iteration ", iter)) {
			fast++
		} else {
			exact++
		}
	}
	require.Greater(t, exact, 2000, "most odd input goes to the exact path")
	require.Greater(t, fast, 300, "input at the fast path's edges stays on it")
}

func TestPickHandlesManyCandidatesAndSlots(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	var f Fairness
	for _, n := range []int{1, 2, 3, 1023, 1024, 1025, 3000} {
		cands := randomCandidates(r, n)
		for i := range cands {
			cands[i].AgentLimit, cands[i].LaneLimit = 1000, 10_000
		}
		ctx := policy.PickContext{AgingMs: 20_000, Slots: 700}
		require.Equal(t, n <= 1024, agree(t, &f, ctx, cands, fmt.Sprint(n, " candidates")))
	}
}

func TestPickPrefersLeastLoadedAgentThenOldestHead(t *testing.T) {
	t.Parallel()
	cands := []policy.Candidate{
		{HeadSeq: 1, Agent: 1, AgentInflight: 2, AgentLimit: 10, AgentWeight: 1, LaneLimit: 10, QueueLen: 1},
		{HeadSeq: 2, Agent: 2, AgentInflight: 0, AgentLimit: 10, AgentWeight: 1, LaneLimit: 10, QueueLen: 1},
		{HeadSeq: 3, Agent: 3, AgentInflight: 0, AgentLimit: 10, AgentWeight: 1, LaneLimit: 10, QueueLen: 1},
	}
	picks := make([]uint32, 3)
	n := (&Fairness{}).Pick(policy.PickContext{Slots: 3}, cands, picks)
	require.Equal(t, []uint32{1, 2, 0}, picks[:n])
}

func TestPickTakesTheBestQueueOfAnAgentWithQueuesInSeveralLanes(t *testing.T) {
	t.Parallel()
	// Agent 1 has queues in lanes 0 and 1; agent 2 (weight 2) one in lane
	// 0. Agent 2's share stays below agent 1's until it has two tasks out
	// per one of agent 1's, and the aged head of agent 1 in lane 1 goes
	// first of all.
	cands := []policy.Candidate{
		{HeadSeq: 1, HeadWaitMs: 1000, Agent: 1, AgentInflight: 1, AgentLimit: 10, AgentWeight: 1, Lane: 0, LaneLimit: 10, QueueLen: 5},
		{HeadSeq: 2, HeadWaitMs: 40_000, Agent: 1, AgentInflight: 1, AgentLimit: 10, AgentWeight: 1, Lane: 1, LaneLimit: 10, QueueLen: 5},
		{HeadSeq: 3, HeadWaitMs: 500, Agent: 2, AgentInflight: 1, AgentLimit: 10, AgentWeight: 2, Lane: 0, LaneLimit: 10, QueueLen: 5},
	}
	picks := make([]uint32, 6)
	n := (&Fairness{}).Pick(policy.PickContext{AgingMs: 30_000, Slots: 6}, cands, picks)
	// 1 (aged); then agent 1's share is 2/1 and agent 2's 1/2, 2/2, 3/2,
	// 4/2 (a tie, which the larger weight wins), 5/2: then agent 1's older
	// head.
	require.Equal(t, []uint32{1, 2, 2, 2, 2, 0}, picks[:n])
}

// BenchmarkPick64 measures a decision over 64 queue heads of 48 agents in 4
// lanes, with room for every pick, for several slot counts, on the fast path
// and on the exact one.
func BenchmarkPick64(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	cands := make([]policy.Candidate, 64)
	for i := range cands {
		cands[i] = policy.Candidate{
			HeadSeq: uint64(i)*7 + uint64(r.IntN(7)), HeadWaitMs: int64(r.IntN(60_000)),
			Agent: uint32(r.IntN(48)), AgentInflight: uint32(r.IntN(5)), AgentLimit: 100, AgentWeight: 1 + uint32(r.IntN(3)),
			Lane: uint16(r.IntN(4)), LaneInflight: uint32(r.IntN(10)), LaneLimit: 1000, QueueLen: 1 + uint32(r.IntN(20)),
		}
	}
	for _, slots := range []int{1, 8, 64} {
		ctx := policy.PickContext{AgingMs: 30_000, Slots: uint32(slots)}
		picks := make([]uint32, slots)
		b.Run(fmt.Sprintf("slots=%d/fast", slots), func(b *testing.B) {
			var f Fairness
			b.ReportAllocs()
			for b.Loop() {
				f.Pick(ctx, cands, picks)
			}
		})
		b.Run(fmt.Sprintf("slots=%d/exact", slots), func(b *testing.B) {
			var f Fairness
			b.ReportAllocs()
			for b.Loop() {
				f.exact.pick(ctx, cands, picks)
			}
		})
	}
}
