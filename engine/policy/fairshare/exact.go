// The exact path: the same tournament tree as the fast path, over candidate
// indices compared by the full comparison (aging, then Before) instead of
// packed keys. It decides for any input, whatever the magnitudes of its
// numbers or the order of its candidates; the fast path (fast.go) covers the
// usual input and defers to this one for the rest.

package fairshare

import (
	"math/bits"

	"github.com/switchyard/switchyard/engine/policy"
)

// exact holds the exact path's scratch space. It uses no maps: agents and
// lanes get dense indices from small open-addressing tables.
type exact struct {
	tree      []int32 // the best candidate beneath each node, -1 for none; leaves at [size, 2·size)
	state     []candState
	agents    denseIndex // agent -> index into agentS
	agentS    []agentState
	lanes     denseIndex         // lane -> index into laneExtra
	laneExtra []uint32           // per lane: extra in flight from this decision
	cands     []policy.Candidate // the decision's candidates, during pick only
}

type candState struct {
	taken uint32 // tasks already picked from this queue
	aged  bool   // the head has waited past the aging threshold
	agent int32  // index into agentS
	lane  int32  // index into laneExtra
	next  int32  // the next candidate of the same agent, -1 at the end
}

type agentState struct {
	extra uint32 // picked in this decision
	first int32  // the agent's first candidate
}

// denseIndex numbers distinct uint32 keys 0, 1, 2, … in order of first
// appearance. Entries are valid when their stamp is the current
// generation, so resetting is O(1).
type denseIndex struct {
	keys  []uint32
	vals  []int32
	stamp []uint32
	gen   uint32
	n     int32
}

// reset empties the index and sizes it for up to n keys.
func (d *denseIndex) reset(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if len(d.keys) < size {
		d.keys = make([]uint32, size)
		d.vals = make([]int32, size)
		d.stamp = make([]uint32, size)
		d.gen = 0
	}
	d.gen++
	if d.gen == 0 { // wrapped: clear the stamps once every 2^32 resets
		clear(d.stamp)
		d.gen = 1
	}
	d.n = 0
}

// index returns k's number, assigning the next one if k is new.
func (d *denseIndex) index(k uint32) (int32, bool) {
	mask := uint32(len(d.keys) - 1)
	for i := (k * 0x9E3779B1) & mask; ; i = (i + 1) & mask {
		if d.stamp[i] != d.gen {
			d.stamp[i], d.keys[i], d.vals[i] = d.gen, k, d.n
			d.n++
			return d.n - 1, true
		}
		if d.keys[i] == k {
			return d.vals[i], false
		}
	}
}

// pick makes the decision of Fairness.Pick.
func (f *exact) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if len(cands) == 0 || len(picks) == 0 {
		return 0
	}
	size := f.reset(ctx, cands)
	tree := f.tree
	n := 0
	for n < len(picks) {
		i := tree[1]
		if i < 0 {
			break
		}
		c := &cands[i]
		st := &f.state[i]
		as := &f.agentS[st.agent]
		if st.taken >= c.QueueLen || full(c.AgentInflight, as.extra, c.AgentLimit) ||
			full(c.LaneInflight, f.laneExtra[st.lane], c.LaneLimit) {
			tree[size+int(i)] = -1 // out for the rest of the decision
			f.update(size + int(i))
			continue
		}
		picks[n] = uint32(i)
		n++
		st.taken++
		st.aged = false // the next task of this queue is younger than the head
		as.extra++
		f.laneExtra[st.lane]++
		for m := as.first; m >= 0; m = f.state[m].next { // the agent's share grew
			if tree[size+int(m)] >= 0 {
				f.update(size + int(m))
			}
		}
	}
	f.cands = nil
	return n
}

// reset prepares the tree for cands and returns the index of its first leaf.
func (f *exact) reset(ctx policy.PickContext, cands []policy.Candidate) int {
	f.agents.reset(len(cands))
	f.lanes.reset(len(cands))
	f.laneExtra = f.laneExtra[:0]
	f.agentS = f.agentS[:0]
	f.state = f.state[:0]
	for i := range cands {
		c := &cands[i]
		a, isNew := f.agents.index(c.Agent)
		if isNew {
			f.agentS = append(f.agentS, agentState{first: -1})
		}
		l, isNew := f.lanes.index(uint32(c.Lane))
		if isNew {
			f.laneExtra = append(f.laneExtra, 0)
		}
		f.state = append(f.state, candState{
			aged:  ctx.AgingMs > 0 && c.HeadWaitMs >= ctx.AgingMs,
			agent: a,
			lane:  l,
			next:  f.agentS[a].first,
		})
		f.agentS[a].first = int32(i)
	}
	f.cands = cands
	size := 1 << bits.Len(uint(len(cands)-1))
	if cap(f.tree) < 2*size {
		f.tree = make([]int32, 2*size)
	}
	f.tree = f.tree[:2*size]
	for i := range size {
		f.tree[size+i] = -1
		if i < len(cands) {
			f.tree[size+i] = int32(i)
		}
	}
	for j := size - 1; j >= 1; j-- {
		f.tree[j] = f.better(f.tree[2*j], f.tree[2*j+1])
	}
	return size
}

// update recomputes the nodes above leaf.
func (f *exact) update(leaf int) {
	for j := leaf >> 1; j >= 1; j >>= 1 {
		f.tree[j] = f.better(f.tree[2*j], f.tree[2*j+1])
	}
}

// better returns whichever of candidates a and b goes first; -1 stands for
// no candidate. Of two that compare equal (only possible when sequences
// repeat), the one further left wins.
func (f *exact) better(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0 || !f.less(b, a):
		return a
	}
	return b
}

func (f *exact) less(a, b int32) bool {
	ca, cb := &f.cands[a], &f.cands[b]
	sa, sb := &f.state[a], &f.state[b]
	if sa.aged != sb.aged {
		return sa.aged
	}
	if sa.aged && ca.HeadWaitMs != cb.HeadWaitMs {
		return ca.HeadWaitMs > cb.HeadWaitMs
	}
	return Before(ca.AgentInflight+f.agentS[sa.agent].extra, max(ca.AgentWeight, 1), ca.HeadSeq,
		cb.AgentInflight+f.agentS[sb.agent].extra, max(cb.AgentWeight, 1), cb.HeadSeq)
}
