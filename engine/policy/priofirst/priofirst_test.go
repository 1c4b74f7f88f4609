package priofirst_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/priofirst"
)

func cand(seq uint64, prio int32, agent uint32, inflight uint32) policy.Candidate {
	return policy.Candidate{HeadSeq: seq, HeadPriority: prio, Agent: agent, AgentInflight: inflight, AgentLimit: 10, AgentWeight: 1,
		LaneLimit: 10, QueueLen: 1}
}

func TestPriorityGoesFirstAcrossAgentsThenFairShareThenAge(t *testing.T) {
	t.Parallel()
	var f priofirst.Fairness
	picks := make([]uint32, 4)
	cands := []policy.Candidate{cand(1, 2, 0, 0), cand(2, 0, 1, 5), cand(3, 2, 2, 3), cand(4, 1, 3, 0)}
	n := f.Pick(policy.PickContext{Slots: 4}, cands, picks)
	require.Equal(t, []uint32{1, 3, 0, 2}, picks[:n], "CRITICAL, HIGH, then the NORMAL heads by share")

	cands[2].HeadWaitMs = 60_000
	n = f.Pick(policy.PickContext{Slots: 1, AgingMs: 30_000}, cands, picks[:1])
	require.Equal(t, []uint32{2}, picks[:n], "an aged head goes before any priority")

	cands = []policy.Candidate{cand(1, 3, 0, 0), cand(2, 0, 1, 0)}
	cands[1].LaneInflight, cands[1].LaneLimit = 2, 2
	n = f.Pick(policy.PickContext{Slots: 2}, cands, picks)
	require.Equal(t, []uint32{0}, picks[:n], "a head whose lane is full is not picked")
}
