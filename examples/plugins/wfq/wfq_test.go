package wfq

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

// busy returns always-busy queues of agents 1 (weight 3) and 2 (weight 1),
// each with nothing in flight: what the policy sees in a lane that runs
// one task at a time.
func busy() []policy.Candidate {
	return []policy.Candidate{
		{HeadSeq: 1, Agent: 1, AgentWeight: 3, AgentLimit: 100, LaneLimit: 100, QueueLen: 100},
		{HeadSeq: 2, Agent: 2, AgentWeight: 1, AgentLimit: 100, LaneLimit: 100, QueueLen: 100},
	}
}

func count(q *WFQ, cands []policy.Candidate, decisions, slots int) map[uint32]int {
	got := map[uint32]int{}
	picks := make([]uint32, slots)
	for range decisions {
		n := q.Pick(policy.PickContext{Slots: uint32(slots)}, cands, picks)
		for _, p := range picks[:n] {
			got[cands[p].Agent]++
		}
	}
	return got
}

func TestAgentsShareDispatchesByWeightOneAtATime(t *testing.T) {
	t.Parallel()
	got := count(&WFQ{}, busy(), 400, 1)
	require.Equal(t, 300, got[1])
	require.Equal(t, 100, got[2])
}

func TestAgentsShareDispatchesByWeightWithinADecision(t *testing.T) {
	t.Parallel()
	got := count(&WFQ{}, busy(), 10, 40)
	require.Equal(t, 300, got[1])
	require.Equal(t, 100, got[2])
}

func TestAnIdleAgentIsNotOwedAndCannotBurst(t *testing.T) {
	t.Parallel()
	q := &WFQ{}
	only1 := busy()[:1]
	count(q, only1, 100, 1) // agent 2 idle meanwhile
	got := count(q, busy(), 8, 1)
	require.Equal(t, 6, got[1], "agent 2 joins the rotation at 3:1 rather than taking the next 100")
	require.Equal(t, 2, got[2])
}

func TestDryRunDoesNotChangeTheRotation(t *testing.T) {
	t.Parallel()
	a, b := &WFQ{}, &WFQ{}
	cands, picks := busy(), make([]uint32, 1)
	for range 7 {
		a.Pick(policy.PickContext{Slots: 1}, cands, picks)
		b.Pick(policy.PickContext{Slots: 1}, cands, picks)
		b.Pick(policy.PickContext{Slots: 1, Flags: policy.PickDryRun}, cands, picks)
	}
	require.Equal(t, count(a, cands, 20, 1), count(b, cands, 20, 1))
}

func TestPicksRespectCeilings(t *testing.T) {
	t.Parallel()
	cands := busy()
	cands[0].QueueLen = 2                              // agent 1 has two tasks ready
	cands[1].AgentInflight, cands[1].AgentLimit = 4, 5 // agent 2 has room for one
	picks := make([]uint32, 10)
	n := (&WFQ{}).Pick(policy.PickContext{Slots: 10}, cands, picks)
	require.Equal(t, 3, n)
}
