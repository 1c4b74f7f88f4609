// Package room tracks, during one fairness decision, the room left under
// each ceiling a candidate is subject to (its queue's length, its agent's
// and its lane's in-flight limits) as picks are made, so that an example
// policy does not spend its picks on queues the engine would skip. The
// engine checks every ceiling itself; this only keeps picks useful.
package room

import "github.com/switchyard/switchyard/engine/policy"

// Tracker holds one decision's counters. The zero value is ready; Reset
// it at the start of every decision.
type Tracker struct {
	cands []policy.Candidate
	taken []uint32
	agent map[uint32]uint32
	lane  map[uint16]uint32
}

// Reset starts a decision over cands.
func (t *Tracker) Reset(cands []policy.Candidate) {
	t.cands = cands
	if cap(t.taken) < len(cands) {
		t.taken = make([]uint32, len(cands))
	}
	t.taken = t.taken[:len(cands)]
	clear(t.taken)
	if t.agent == nil {
		t.agent, t.lane = map[uint32]uint32{}, map[uint16]uint32{}
	}
	clear(t.agent)
	clear(t.lane)
}

// Has reports whether candidate i's queue can send one more task.
func (t *Tracker) Has(i int) bool {
	c := &t.cands[i]
	return t.taken[i] < c.QueueLen &&
		uint64(c.AgentInflight)+uint64(t.agent[c.Agent]) < uint64(c.AgentLimit) &&
		uint64(c.LaneInflight)+uint64(t.lane[c.Lane]) < uint64(c.LaneLimit)
}

// Take records a pick of candidate i.
func (t *Tracker) Take(i int) {
	c := &t.cands[i]
	t.taken[i]++
	t.agent[c.Agent]++
	t.lane[c.Lane]++
}

// Taken returns how many tasks were picked from candidate i's queue.
func (t *Tracker) Taken(i int) uint32 { return t.taken[i] }

// AgentTaken returns how many tasks were picked for agent a.
func (t *Tracker) AgentTaken(a uint32) uint32 { return t.agent[a] }
