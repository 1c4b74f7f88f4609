package room_test

import (
	"fmt"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// A round-robin fairness decision that spends no pick on a queue the
// engine would skip: the tracker counts, per decision, the room left in
// each queue and under each agent's and lane's ceiling.
func ExampleTracker() {
	cands := []policy.Candidate{
		{Agent: 0, Lane: 0, QueueLen: 5, AgentInflight: 1, AgentLimit: 2, LaneLimit: 10},
		{Agent: 1, Lane: 0, QueueLen: 1, AgentLimit: 4, LaneLimit: 10},
		{Agent: 2, Lane: 0, QueueLen: 3, AgentLimit: 4, LaneLimit: 10},
	}
	var t room.Tracker
	t.Reset(cands)
	picks := []uint32{}
	for len(picks) < 6 {
		progress := false
		for i := range cands {
			if len(picks) < 6 && t.Has(i) {
				t.Take(i)
				picks = append(picks, uint32(i))
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	fmt.Println("picks:", picks)
	fmt.Println("taken per queue:", t.Taken(0), t.Taken(1), t.Taken(2))
	// Output:
	// picks: [0 1 2 2 2]
	// taken per queue: 1 1 3
}
