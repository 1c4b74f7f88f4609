package room_test

import (
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

func TestTrackerStopsAtEachCeiling(t *testing.T) {
	t.Parallel()
	cands := []policy.Candidate{
		{Agent: 1, Lane: 0, QueueLen: 5, AgentInflight: 1, AgentLimit: 2, LaneLimit: 10}, // agent 1 has room for one
		{Agent: 2, Lane: 0, QueueLen: 1, AgentLimit: 9, LaneLimit: 10},                   // one task queued
		{Agent: 3, Lane: 1, QueueLen: 9, AgentLimit: 9, LaneInflight: 2, LaneLimit: 3},   // lane 1 has room for one
		{Agent: 1, Lane: 1, QueueLen: 9, AgentInflight: 1, AgentLimit: 2, LaneLimit: 3},  // shares agent 1 and lane 1
	}
	var tr room.Tracker
	tr.Reset(cands)
	for i := range cands {
		if !tr.Has(i) {
			t.Fatalf("candidate %d has room before any pick", i)
		}
	}
	tr.Take(0)
	tr.Take(1)
	tr.Take(2)
	for i := range cands {
		if tr.Has(i) {
			t.Errorf("candidate %d still has room after its ceiling was reached", i)
		}
	}
	if tr.Taken(0) != 1 || tr.Taken(3) != 0 {
		t.Errorf("taken: %d and %d, want 1 and 0", tr.Taken(0), tr.Taken(3))
	}
}

// Candidates share an agent's and a lane's room however many there are and
// whatever their indices: a pick from one candidate leaves each other one
// with room exactly when a count by agent and by lane says so.
func TestTrackerSharesRoomByAgentAndLaneAmongManyCandidates(t *testing.T) {
	t.Parallel()
	const n = 700
	var tr room.Tracker
	for round, spread := range []uint32{1, 7, 300, n} {
		cands := make([]policy.Candidate, n)
		for i := range cands {
			agent := uint32(i) % spread * 2654435761 // large, scattered indices
			if i%5 == 0 {
				agent = 1<<32 - 1 - uint32(i)%spread
			}
			cands[i] = policy.Candidate{Agent: agent, Lane: uint16(i % 3 * 21845), QueueLen: 4,
				AgentInflight: uint32(i % 2), AgentLimit: 3, LaneLimit: n}
		}
		tr.Reset(cands)
		agents := map[uint32]uint32{}
		lanes := map[uint16]uint32{}
		for i := range cands {
			if i%3 != 0 {
				continue
			}
			for tr.Has(i) {
				tr.Take(i)
				agents[cands[i].Agent]++
				lanes[cands[i].Lane]++
			}
		}
		for i, c := range cands {
			want := tr.Taken(i) < c.QueueLen && c.AgentInflight+agents[c.Agent] < c.AgentLimit && lanes[c.Lane] < c.LaneLimit
			if tr.Has(i) != want {
				t.Fatalf("round %d: candidate %d (agent %d, lane %d): has room %v, want %v", round, i, c.Agent, c.Lane, tr.Has(i), want)
			}
		}
	}
}
