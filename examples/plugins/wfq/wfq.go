// Package wfq is a weighted fair-queueing fairness policy: agents share
// dispatches in proportion to their weights, by the service they have
// recently received rather than by what they have in flight.
//
// It is start-time fair queueing: each agent has a finish tag that advances
// by Scale ÷ weight with every task it is given, and each dispatch has a
// start tag, the larger of the agent's finish tag and the start tag of the
// dispatch before (the virtual clock). The next dispatch goes to the agent
// with queued work whose start tag is smallest, then to the older head. An
// agent that had no queued work is not owed for the time it was idle: it
// comes back at the virtual clock, joining the rotation rather than
// bursting. With weights 3 and 1 and both agents busy, three dispatches in
// four go to the first, even when the lane runs one task at a time (where
// the built-in fair-share, which compares work in flight, sees two idle
// agents at every dispatch and gives them all to the heavier one).
//
// The policy keeps state between decisions: register it without
// sdk.Stateless.
package wfq

import (
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/room"
)

// Scale is the virtual time one task costs an agent of weight 1.
const Scale = 1 << 20

// maxAgents bounds the table of finish tags: past it, agents whose tag is
// behind the virtual clock are forgotten (they would start at the clock
// anyway).
const maxAgents = 4096

// WFQ is the policy. The zero value is ready to use.
type WFQ struct {
	finish map[uint32]uint64 // agent → finish tag
	clock  uint64            // the start tag of the latest dispatch
	room   room.Tracker
	saved  map[uint32]uint64 // the finish tags, while a dry run plays
	// tags is scratch: each candidate's agent's finish tag during a
	// decision, read from finish once (a map lookup costs a WebAssembly
	// module far more than a slice read) and written back for the agents
	// picked.
	tags []uint64
}

// Pick implements policy.Fairness.
func (q *WFQ) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if q.finish == nil {
		q.finish, q.saved = map[uint32]uint64{}, map[uint32]uint64{}
	}
	if ctx.Flags&policy.PickDryRun != 0 { // a preview: leave no trace
		clear(q.saved)
		for a, v := range q.finish {
			q.saved[a] = v
		}
		clock := q.clock
		defer func() { q.finish, q.saved, q.clock = q.saved, q.finish, clock }()
	}
	q.room.Reset(cands)
	q.tags = q.tags[:0]
	for i := range cands {
		q.tags = append(q.tags, q.finish[cands[i].Agent])
	}
	n := 0
	for n < len(picks) {
		best, bestStart := -1, uint64(0)
		for i := range cands {
			if !q.room.Has(i) {
				continue
			}
			start := max(q.tags[i], q.clock)
			if best < 0 || start < bestStart || start == bestStart && cands[i].HeadSeq < cands[best].HeadSeq {
				best, bestStart = i, start
			}
		}
		if best < 0 {
			break
		}
		c := &cands[best]
		picks[n] = uint32(best)
		n++
		q.room.Take(best)
		q.clock = bestStart
		tag := bestStart + Scale/uint64(max(c.AgentWeight, 1))
		q.finish[c.Agent] = tag
		for i := range cands { // the agent's other queues (other lanes) share its tag
			if cands[i].Agent == c.Agent {
				q.tags[i] = tag
			}
		}
	}
	if len(q.finish) > maxAgents {
		for a, v := range q.finish {
			if v <= q.clock {
				delete(q.finish, a)
			}
		}
	}
	return n
}
