// Package priofirst is a built-in fairness policy that honours task priority
// across queues: among the eligible queue heads it picks
//
//  1. a head that has waited at least the aging threshold (oldest first), so
//     no queue starves however low its priority;
//  2. otherwise the head of the highest priority (CRITICAL before HIGH before
//     NORMAL before LOW), whichever agent or lane it belongs to;
//  3. then, among heads of one priority, the fair-share order (package
//     fairshare: the agent with the smallest weighted share in flight, the
//     larger weight, the oldest head).
//
// The default fairness policy stays fair-share, under which priority orders
// tasks only within one (lane, agent) queue: a CRITICAL task of one agent
// does not overtake another agent's NORMAL one. Choose this policy with
// setPolicy(slot: FAIRNESS, name: "priority-first").
//
// It takes at most one task per queue per decision (the head, whose priority
// it sees); the engine asks again for the next heads. It sees the heads the
// engine offers: the FairnessCandidates best queues of each lane.
package priofirst

import (
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
)

// Name is the policy's registered name.
const Name = "priority-first"

// Fairness implements policy.Fairness. It keeps scratch space between
// calls, so one value must not be used by two goroutines at once; the zero
// value is ready to use.
type Fairness struct {
	taken      []bool
	agentExtra map[uint32]uint32
	laneExtra  map[uint16]uint32
}

// Stateless reports that a decision depends only on its input.
func (*Fairness) Stateless() bool { return true }

// Pick implements policy.Fairness.
func (f *Fairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if cap(f.taken) < len(cands) {
		f.taken = make([]bool, len(cands))
	}
	f.taken = f.taken[:len(cands)]
	clear(f.taken)
	if f.agentExtra == nil {
		f.agentExtra, f.laneExtra = map[uint32]uint32{}, map[uint16]uint32{}
	}
	clear(f.agentExtra)
	clear(f.laneExtra)
	n := 0
	for n < len(picks) {
		best := -1
		for i := range cands {
			c := &cands[i]
			if f.taken[i] || full(c.AgentInflight+f.agentExtra[c.Agent], c.AgentLimit) || full(c.LaneInflight+f.laneExtra[c.Lane], c.LaneLimit) {
				continue
			}
			if best < 0 || f.before(ctx, c, &cands[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		c := &cands[best]
		f.taken[best] = true
		f.agentExtra[c.Agent]++
		f.laneExtra[c.Lane]++
		picks[n] = uint32(best)
		n++
	}
	return n
}

func full(inflight, limit uint32) bool { return limit > 0 && inflight >= limit }

// before reports whether a goes before b (rules 1–3).
func (f *Fairness) before(ctx policy.PickContext, a, b *policy.Candidate) bool {
	aAged := ctx.AgingMs > 0 && a.HeadWaitMs >= ctx.AgingMs
	bAged := ctx.AgingMs > 0 && b.HeadWaitMs >= ctx.AgingMs
	switch {
	case aAged != bAged:
		return aAged
	case aAged:
		if a.HeadWaitMs != b.HeadWaitMs {
			return a.HeadWaitMs > b.HeadWaitMs
		}
		return a.HeadSeq < b.HeadSeq
	case a.HeadPriority != b.HeadPriority:
		return a.HeadPriority < b.HeadPriority
	}
	return fairshare.Before(a.AgentInflight+f.agentExtra[a.Agent], a.AgentWeight, a.HeadSeq,
		b.AgentInflight+f.agentExtra[b.Agent], b.AgentWeight, b.HeadSeq)
}
