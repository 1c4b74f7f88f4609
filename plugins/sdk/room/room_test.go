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
