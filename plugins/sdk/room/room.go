// Package room tracks, during one fairness decision, the room left under
// each ceiling a candidate is subject to (its queue's length, its agent's
// and its lane's in-flight limits) as picks are made, so that a fairness
// policy does not spend its picks on queues the engine would skip. The
// engine checks every ceiling itself; this only keeps picks useful. The
// examples drr, wfq and lanepri use it.
package room

import (
	"math/bits"

	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// Tracker holds one decision's counters. The zero value is ready; Reset
// it at the start of every decision. Agents and lanes are numbered once
// per decision, so that Has and Take cost a few slice reads.
type Tracker struct {
	cands  []policy.Candidate
	taken  []uint32 // per candidate
	agent  []int32  // per candidate: its agent's number
	lane   []int32  // per candidate: its lane's number
	agents []uint32 // per agent: picked in this decision
	lanes  []uint32 // per lane: picked in this decision
	ids    numbering
}

// Reset starts a decision over cands.
func (t *Tracker) Reset(cands []policy.Candidate) {
	t.cands = cands
	n := len(cands)
	if cap(t.taken) < n {
		t.taken, t.agent, t.lane = make([]uint32, n), make([]int32, n), make([]int32, n)
	}
	t.taken, t.agent, t.lane = t.taken[:n], t.agent[:n], t.lane[:n]
	clear(t.taken)
	t.ids.reset(2 * n) // an agent and a lane a candidate at most
	t.agents, t.lanes = t.agents[:0], t.lanes[:0]
	for i := range cands {
		t.agent[i] = t.ids.number(uint64(cands[i].Agent), &t.agents)
		t.lane[i] = t.ids.number(1<<32|uint64(cands[i].Lane), &t.lanes)
	}
}

// numbering numbers a decision's agents and lanes in an open-addressing
// table of its own: a Go map costs a WebAssembly module about a thousand
// instructions a lookup (its hashing has no machine instructions to use
// there), which made Reset the most expensive part of a decision over a
// few hundred candidates.
type numbering struct {
	keys  []uint64 // key+1; 0 is an empty slot
	nums  []int32
	shift uint8 // 64 - log2(len(keys))
}

// reset empties the table, with room for n keys at most half full.
func (m *numbering) reset(n int) {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	if cap(m.keys) < size {
		m.keys, m.nums = make([]uint64, size), make([]int32, size)
	}
	m.keys, m.nums = m.keys[:size], m.nums[:size]
	clear(m.keys)
	m.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

// number returns key's number, appending a zero counter for a new key.
func (m *numbering) number(key uint64, counters *[]uint32) int32 {
	k := key + 1
	mask := uint64(len(m.keys) - 1)
	for h := (k * 0x9e3779b97f4a7c15) >> m.shift; ; h = (h + 1) & mask {
		switch m.keys[h] {
		case k:
			return m.nums[h]
		case 0:
			n := int32(len(*counters))
			m.keys[h], m.nums[h] = k, n
			*counters = append(*counters, 0)
			return n
		}
	}
}

// Has reports whether candidate i's queue can send one more task.
func (t *Tracker) Has(i int) bool {
	c := &t.cands[i]
	return t.taken[i] < c.QueueLen &&
		uint64(c.AgentInflight)+uint64(t.agents[t.agent[i]]) < uint64(c.AgentLimit) &&
		uint64(c.LaneInflight)+uint64(t.lanes[t.lane[i]]) < uint64(c.LaneLimit)
}

// Take records a pick of candidate i.
func (t *Tracker) Take(i int) {
	t.taken[i]++
	t.agents[t.agent[i]]++
	t.lanes[t.lane[i]]++
}

// Taken returns how many tasks were picked from candidate i's queue.
func (t *Tracker) Taken(i int) uint32 { return t.taken[i] }
