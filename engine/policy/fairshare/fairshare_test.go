package fairshare

import (
	"math/rand/v2"
	"testing"

	"github.com/switchyard/switchyard/engine/policy"
)

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

func TestPickAgreesWithReferenceImplementation(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var got Fairness
	var want refFairness
	for iter := range 5000 {
		n := r.IntN(80)
		cands := randomCandidates(r, n)
		ctx := policy.PickContext{NowMs: 1e12, AgingMs: int64(r.IntN(3)) * 20_000, Slots: uint32(r.IntN(20))}
		a, b := make([]uint32, ctx.Slots), make([]uint32, ctx.Slots)
		na, nb := got.Pick(ctx, cands, a), want.Pick(ctx, cands, b)
		if na != nb || string(u32bytes(a[:na])) != string(u32bytes(b[:nb])) {
			t.Fatalf("iteration %d: picks %v, reference %v", iter, a[:na], b[:nb])
		}
	}
}

func u32bytes(v []uint32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
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
	if n != 3 || picks[0] != 1 || picks[1] != 2 || picks[2] != 0 {
		t.Fatalf("picks %v, want [1 2 0]", picks[:n])
	}
}

func BenchmarkPick64(b *testing.B) {
	cands := randomCandidates(rand.New(rand.NewPCG(3, 4)), 64)
	for i := range cands {
		cands[i].QueueLen, cands[i].AgentLimit, cands[i].LaneLimit = 5, 10, 100
	}
	picks := make([]uint32, 8)
	var f Fairness
	b.ReportAllocs()
	for b.Loop() {
		f.Pick(policy.PickContext{Slots: 8}, cands, picks)
	}
}
