package fairshare

import "github.com/switchyard/switchyard/engine/policy"

// refFairness is the original map-based implementation, kept as the
// reference that the optimised one must agree with decision for decision. It keeps scratch space between calls,
// so one value must not be used by two goroutines at once; the zero value is
// ready to use.
type refFairness struct {
	heap   []int32        // candidate indices, best first
	pos    []int32        // candidate index -> position in heap, -1 when out
	state  []refCandState // per candidate
	agents map[uint32]int // agent -> index into refAgentStates
	agentS []refAgentState
	lanes  map[uint16]uint32  // lane -> extra in flight from this decision
	cands  []policy.Candidate // the decision's candidates, during Pick only
}

type refCandState struct {
	taken uint32 // tasks already picked from this queue
	aged  bool   // the head has waited past the aging threshold
	agent int    // index into refAgentStates
}

type refAgentState struct {
	extra   uint32  // picked in this decision
	members []int32 // candidate indices of this agent
}

// Pick implements policy.Fairness.
func (f *refFairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	f.reset(ctx, cands)
	n := 0
	for n < len(picks) && len(f.heap) > 0 {
		i := f.heap[0]
		c := &cands[i]
		st := &f.state[i]
		as := &f.agentS[st.agent]
		if st.taken >= c.QueueLen || c.AgentInflight+as.extra >= c.AgentLimit ||
			c.LaneInflight+f.lanes[c.Lane] >= c.LaneLimit {
			f.remove(i)
			continue
		}
		picks[n] = uint32(i)
		n++
		st.taken++
		st.aged = false // the next task of this queue is younger than the head
		as.extra++
		f.lanes[c.Lane]++
		for _, m := range as.members { // the agent's share grew: reorder its queues
			if f.pos[m] >= 0 {
				f.down(int(f.pos[m]))
			}
		}
	}
	f.cands = nil
	return n
}

func (f *refFairness) reset(ctx policy.PickContext, cands []policy.Candidate) {
	if f.agents == nil {
		f.agents = make(map[uint32]int)
		f.lanes = make(map[uint16]uint32)
	}
	clear(f.agents)
	clear(f.lanes)
	f.agentS = f.agentS[:0]
	f.heap = f.heap[:0]
	f.pos = f.pos[:0]
	f.state = f.state[:0]
	for i := range cands {
		c := &cands[i]
		a, ok := f.agents[c.Agent]
		if !ok {
			a = len(f.agentS)
			f.agents[c.Agent] = a
			if a < cap(f.agentS) {
				f.agentS = f.agentS[:a+1]
				f.agentS[a].extra = 0
				f.agentS[a].members = f.agentS[a].members[:0]
			} else {
				f.agentS = append(f.agentS, refAgentState{})
			}
		}
		f.agentS[a].members = append(f.agentS[a].members, int32(i))
		f.state = append(f.state, refCandState{
			aged:  ctx.AgingMs > 0 && c.HeadWaitMs >= ctx.AgingMs,
			agent: a,
		})
		f.pos = append(f.pos, int32(len(f.heap)))
		f.heap = append(f.heap, int32(i))
	}
	f.cands = cands
	for i := len(f.heap)/2 - 1; i >= 0; i-- {
		f.down(i)
	}
}

func (f *refFairness) less(a, b int32) bool {
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
func (f *refFairness) remove(c int32) {
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

func (f *refFairness) swap(i, j int) {
	f.heap[i], f.heap[j] = f.heap[j], f.heap[i]
	f.pos[f.heap[i]] = int32(i)
	f.pos[f.heap[j]] = int32(j)
}

func (f *refFairness) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !f.less(f.heap[i], f.heap[p]) {
			return
		}
		f.swap(i, p)
		i = p
	}
}

func (f *refFairness) down(i int) {
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
