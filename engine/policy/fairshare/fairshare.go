// Package fairshare is the built-in fairness policy. Among the eligible queue
// heads it picks:
//
//  1. a head that has waited at least the aging threshold (oldest first), so no
//     queue starves however busy its agent is;
//  2. otherwise the agent with the smallest weighted share of work in flight
//     (in-flight ÷ weight), so an agent with nothing running goes before one
//     that already has tasks out;
//  3. then the agent with the larger weight;
//  4. then the oldest head (lowest submission sequence).
//
// Every tie ends at rule 4, and sequences are unique, so the choice never
// depends on map or slice order.
package fairshare

import "github.com/switchyard/switchyard/engine/policy"

// Name is the policy's registered name.
const Name = "fair-share"

// Before reports whether candidate a goes before candidate b under rules 2–4,
// given extra in-flight tasks already picked in this decision. Aging (rule 1)
// is applied by the caller. The engine's native dispatcher orders its queues
// with this same function.
func Before(aInflight, aWeight uint32, aSeq uint64, bInflight, bWeight uint32, bSeq uint64) bool {
	// a.inflight/a.weight < b.inflight/b.weight, without division.
	l, r := uint64(aInflight)*uint64(bWeight), uint64(bInflight)*uint64(aWeight)
	if l != r {
		return l < r
	}
	if aWeight != bWeight {
		return aWeight > bWeight
	}
	return aSeq < bSeq
}

// Fairness implements policy.Fairness. It keeps scratch space between calls,
// so one value must not be used by two goroutines at once; the zero value is
// ready to use.
//
// It uses no maps: agents and lanes get dense indices from small
// open-addressing tables, which keeps a decision cheap when the policy runs
// as a WebAssembly plugin, where every map operation costs several calls.
type Fairness struct {
	heap      []int32     // candidate indices, best first
	pos       []int32     // candidate index -> position in heap, -1 when out
	state     []candState // per candidate
	agents    denseIndex  // agent -> index into agentS
	agentS    []agentState
	lanes     denseIndex         // lane -> index into laneExtra
	laneExtra []uint32           // per lane: extra in flight from this decision
	cands     []policy.Candidate // the decision's candidates, during Pick only
}

type candState struct {
	taken uint32 // tasks already picked from this queue
	aged  bool   // the head has waited past the aging threshold
	agent int    // index into agentStates
	lane  int32  // index into laneExtra
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

type agentState struct {
	extra   uint32  // picked in this decision
	members []int32 // candidate indices of this agent
}

// Pick implements policy.Fairness.
func (f *Fairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	f.reset(ctx, cands)
	n := 0
	for n < len(picks) && len(f.heap) > 0 {
		i := f.heap[0]
		c := &cands[i]
		st := &f.state[i]
		as := &f.agentS[st.agent]
		if st.taken >= c.QueueLen || c.AgentInflight+as.extra >= c.AgentLimit ||
			c.LaneInflight+f.laneExtra[st.lane] >= c.LaneLimit {
			f.remove(i)
			continue
		}
		picks[n] = uint32(i)
		n++
		st.taken++
		st.aged = false // the next task of this queue is younger than the head
		as.extra++
		f.laneExtra[st.lane]++
		for _, m := range as.members { // the agent's share grew: reorder its queues
			if f.pos[m] >= 0 {
				f.down(int(f.pos[m]))
			}
		}
	}
	f.cands = nil
	return n
}

func (f *Fairness) reset(ctx policy.PickContext, cands []policy.Candidate) {
	f.agents.reset(len(cands))
	f.lanes.reset(len(cands))
	f.laneExtra = f.laneExtra[:0]
	f.agentS = f.agentS[:0]
	f.heap = f.heap[:0]
	f.pos = f.pos[:0]
	f.state = f.state[:0]
	for i := range cands {
		c := &cands[i]
		ai, isNew := f.agents.index(c.Agent)
		a := int(ai)
		if isNew {
			if a < cap(f.agentS) {
				f.agentS = f.agentS[:a+1]
				f.agentS[a].extra = 0
				f.agentS[a].members = f.agentS[a].members[:0]
			} else {
				f.agentS = append(f.agentS, agentState{})
			}
		}
		f.agentS[a].members = append(f.agentS[a].members, int32(i))
		l, isNew := f.lanes.index(uint32(c.Lane))
		if isNew {
			f.laneExtra = append(f.laneExtra, 0)
		}
		f.state = append(f.state, candState{
			aged:  ctx.AgingMs > 0 && c.HeadWaitMs >= ctx.AgingMs,
			agent: a,
			lane:  l,
		})
		f.pos = append(f.pos, int32(len(f.heap)))
		f.heap = append(f.heap, int32(i))
	}
	f.cands = cands
	for i := len(f.heap)/2 - 1; i >= 0; i-- {
		f.down(i)
	}
}

func (f *Fairness) less(a, b int32) bool {
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

// remove takes candidate c out of the heap.
func (f *Fairness) remove(c int32) {
	i := int(f.pos[c])
	last := len(f.heap) - 1
	f.swap(i, last)
	f.heap = f.heap[:last]
	f.pos[c] = -1
	if i < last {
		f.down(i)
		f.up(i)
	}
}

func (f *Fairness) swap(i, j int) {
	f.heap[i], f.heap[j] = f.heap[j], f.heap[i]
	f.pos[f.heap[i]] = int32(i)
	f.pos[f.heap[j]] = int32(j)
}

func (f *Fairness) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !f.less(f.heap[i], f.heap[p]) {
			return
		}
		f.swap(i, p)
		i = p
	}
}

func (f *Fairness) down(i int) {
	n := len(f.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && f.less(f.heap[r], f.heap[l]) {
			m = r
		}
		if !f.less(f.heap[m], f.heap[i]) {
			return
		}
		f.swap(i, m)
		i = m
	}
}
