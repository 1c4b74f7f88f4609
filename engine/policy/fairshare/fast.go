// The fast path. Each candidate's place in the order is packed into two
// integers (k0, k1) that compare lexicographically exactly as the full
// comparison does, and a tournament tree over them yields the best candidate
// at its root. A pick worsens the keys of the picked agent's queues; rather
// than finding and updating them all, each key is checked when it reaches
// the root and, if its agent has had picks since it was computed, it is
// recomputed and the root contested again. Keys only ever get worse during a
// decision, so a stale key is an optimistic one and the root is always the
// true best once it is checked. A change is a walk of log2(n) levels from a
// leaf to the root with the same arithmetic at every level.
//
// The code is written for Go compiled to WebAssembly, where every taken
// branch and every call goes through the function's dispatch loop (an
// indirect jump) and costs more than the arithmetic around it: the keys and
// the bounds checks are computed without branches, the hot loops sit in
// small functions, arrays have fixed sizes so that masked indices need no
// bounds checks, and the walk is written out where it is needed.
//
// The keys, smaller first:
//
//	k0 = 2^62 - 1 - wait   for an aged head (rule 1: longest wait first)
//	     2^62              for any other head
//	     2^63 - 1          for a leaf out of the running (removed or padding)
//	k1 = ratio << 21 | (2047 - weight) << 10 | index
//
// where ratio = floor(inflight × 2^22 ÷ weight). Two distinct fractions
// with denominators below 2^11 differ by more than 2^-22, so ratio orders
// shares exactly (rule 2), then the larger weight wins (rule 3), then the
// lower index, which is the older head because the candidates arrive in
// submission order (rule 4). Every key stays below 2^63, so a comparison is
// a subtraction whose sign bit is the answer. The bounds this needs are
// checked as the keys are built; input outside them goes to the exact path.

package fairshare

import (
	"math/bits"

	"github.com/switchyard/switchyard/engine/policy"
)

const (
	fastWeightBits   = 11 // weights up to 2047 (0 counts as 1)
	fastInflightBits = 17 // agent in-flight counts below 2^17
	fastIndexBits    = 10 // up to 1,024 candidates
	fastLanes        = 256

	maxCands   = 1 << fastIndexBits
	indexMask  = maxCands - 1
	treeMask   = 2*maxCands - 1
	maxWeight  = 1<<fastWeightBits - 1
	keyUnaged  = uint64(1) << 62
	keyRemoved = uint64(1)<<63 - 1

	// The agent table counts the picks of each agent in this decision by
	// the agent's low bits: an entry is high bits<<40 | gen<<16 | picks.
	// Two agents of one decision with the same low bits clash and send the
	// decision to the exact path.
	agentTableBits = 12
	agentGenBits   = 24
	agentGenMask   = 1<<agentGenBits - 1
	agentPicksMask = 1<<16 - 1
)

// node is a tree node: the keys of the best leaf beneath it.
type node struct{ k0, k1 uint64 }

// removedNode is a leaf out of the running.
var removedNode = node{keyRemoved, 0}

type fastCand struct {
	taken uint32 // tasks already picked from this queue
	w     uint32 // weight, at least 1
}

// fast holds the fast path's scratch space, reused between decisions. Its
// arrays have fixed sizes so that masked indices need no bounds checks.
type fast struct {
	tree  [2 * maxCands]node // tree[1] is the root; leaves at [size, 2·size); tree[0] is scratch
	cands [maxCands]fastCand
	lanes [fastLanes]uint32           // per lane: picked in this decision
	table [1 << agentTableBits]uint64 // per agent: picked in this decision
	gen   uint64
}

// ratioKey is the k1 of a candidate with inflight tasks (its own and those
// picked in this decision), weight w and index i.
//
// The quotient is computed in floating point, which is several times faster
// than 64-bit integer division on the CPUs here, and exact: the dividend is
// below 2^40 and the divisor below 2^11, so both convert exactly, and the
// correctly rounded quotient is within 2^-14 of the true one, which lies at
// least 1/w > 2^-11 below the next integer, so truncation gives the floor.
func ratioKey(inflight uint32, w uint32, i int) uint64 {
	q := uint64(int64(float64(int64(inflight)<<22) / float64(int64(w))))
	return q<<21 | uint64(maxWeight-w)<<10 | uint64(i)
}

// negative returns 1 if x, read as a signed number, is negative.
func negative(x uint64) uint64 { return x >> 63 }

// better returns the node with the smaller keys.
func better(l, r node) node {
	lt := negative(l.k0-r.k0) | negative((l.k0^r.k0)-1)&negative(l.k1-r.k1)
	m := -lt
	return node{r.k0 ^ (l.k0^r.k0)&m, r.k1 ^ (l.k1^r.k1)&m}
}

// pick makes the decision, or reports ok false when the input is outside
// the fast path's bounds (or two of its agents clash in the agent table);
// the caller then decides on the exact path, overwriting any picks.
func (f *fast) pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) (int, bool) {
	n := len(cands)
	if n == 0 || len(picks) == 0 {
		return 0, true
	}
	if n > maxCands || len(picks) >= 1<<16 || ctx.AgingMs >= 1<<62 {
		return 0, false
	}
	size := 1 << bits.Len(uint(n-1))
	t, fc := &f.tree, &f.cands

	var agingOn uint64
	if ctx.AgingMs > 0 {
		agingOn = 1
	}
	var b node
	var bad uint64
	if len(picks) == 1 {
		b, bad = best(cands, agingOn, ctx.AgingMs)
	} else {
		b, bad = f.leaves(cands, size, agingOn, ctx.AgingMs)
	}
	switch {
	case bad != 0:
		return 0, false
	case b.k0 == keyRemoved:
		return 0, true
	case len(picks) == 1: // nothing changes before the last pick
		picks[0] = uint32(b.k1 & indexMask)
		return 1, true
	}
	for i := size + n; i < 2*size; i++ {
		t[i&treeMask] = removedNode
	}
	for j := size - 1; j >= 1; j-- {
		t[j&treeMask] = better(t[(2*j)&treeMask], t[(2*j+1)&treeMask])
	}
	f.gen++
	if f.gen > agentGenMask { // wrapped: clear the table once every 16M decisions
		clear(f.table[:])
		f.gen = 1
	}
	gen := f.gen
	lanes := &f.lanes
	k := 0
	for k < len(picks) {
		top := t[1]
		if top.k0 == keyRemoved {
			break
		}
		i := int(top.k1 & indexMask)
		c, s := &cands[i], &fc[i]
		e := &f.table[c.Agent&(1<<agentTableBits-1)]
		hi := uint64(c.Agent >> agentTableBits)
		var agentPicks uint32
		if (*e>>16)&agentGenMask == gen {
			if *e>>40 != hi { // another agent of this decision has the entry
				clearLanes(lanes, cands, picks[:k])
				return 0, false
			}
			agentPicks = uint32(*e & agentPicksMask)
		}
		leaf := &t[(size+i)&treeMask]
		lane := &lanes[uint8(c.Lane)]
		switch k1 := ratioKey(c.AgentInflight+agentPicks, s.w, i); {
		case k1 != top.k1:
			// Stale: its agent has had picks since the key was made.
			leaf.k1 = k1
		case s.taken >= c.QueueLen || full(c.AgentInflight, agentPicks, c.AgentLimit):
			leaf.k0 = keyRemoved // out for the rest of the decision
		case full(c.LaneInflight, *lane, c.LaneLimit):
			// The lane is full: take all its queues out at once and rebuild
			// the tree, rather than walking them out one by one as they
			// reach the root. (The engine asks for every free slot of its
			// global ceiling, so a decision often fills a lane this way.)
			f.closeLane(cands, size, c.Lane)
			continue
		default:
			picks[k] = uint32(i)
			k++
			s.taken++
			*lane++
			*e = hi<<40 | gen<<16 | uint64(agentPicks+1)
			leaf.k0 = keyUnaged // the queue's next task is younger than the head
			leaf.k1 = ratioKey(c.AgentInflight+agentPicks+1, s.w, i)
		}
		// The walk to the root, two levels a turn (past the root it
		// computes tree[0], which nothing reads); written out because a
		// call costs as much as the walk in Go's WebAssembly code.
		for j := (size + i) >> 1; j != 0; j >>= 2 {
			t[j&treeMask] = better(t[(2*j)&treeMask], t[(2*j+1)&treeMask])
			h := j >> 1
			t[h&treeMask] = better(t[(2*h)&treeMask], t[(2*h+1)&treeMask])
		}
	}
	clearLanes(lanes, cands, picks[:k])
	return k, true
}

// closeLane takes out of the running every candidate of lane for which the
// lane is now full (each candidate carries its own ceiling), then rebuilds
// the tree.
//
//go:noinline
func (f *fast) closeLane(cands []policy.Candidate, size int, lane uint16) {
	t, picked := &f.tree, f.lanes[uint8(lane)]
	for i := range cands {
		c := &cands[i]
		if c.Lane == lane && full(c.LaneInflight, picked, c.LaneLimit) {
			t[(size+i)&treeMask].k0 = keyRemoved
		}
	}
	for j := size - 1; j >= 1; j-- {
		t[j&treeMask] = better(t[(2*j)&treeMask], t[(2*j+1)&treeMask])
	}
}

// clearLanes zeroes the lane counters the picks raised.
func clearLanes(lanes *[fastLanes]uint32, cands []policy.Candidate, picks []uint32) {
	for _, p := range picks {
		lanes[uint8(cands[p].Lane)] = 0
	}
}

// outOfBounds returns nonzero when c is outside the fast path's bounds;
// prev is the previous candidate's sequence.
func outOfBounds(c *policy.Candidate, prev uint64) uint64 {
	return uint64(c.AgentWeight)>>fastWeightBits | uint64(c.AgentInflight)>>fastInflightBits |
		uint64(c.Lane)>>8 | c.HeadSeq>>62 | (uint64(c.HeadWaitMs)+1<<62)>>63 |
		(negative(prev-c.HeadSeq) ^ 1) // 1 unless the sequence rises
}

// weightOf returns c's weight, 0 counting as 1.
func weightOf(c *policy.Candidate) uint32 {
	return c.AgentWeight + uint32(negative(uint64(c.AgentWeight)-1))
}

// k0Of returns c's first key; agingOn is 1 when aging is on.
func k0Of(c *policy.Candidate, agingOn uint64, aging int64) uint64 {
	// aged = aging on && wait >= aging; both are within ±2^62 on the fast
	// path, so the subtraction cannot overflow.
	aged := agingOn & (negative(uint64(c.HeadWaitMs-aging)) ^ 1)
	return keyUnaged ^ ((keyUnaged ^ (keyUnaged - 1 - uint64(c.HeadWaitMs))) & -aged)
}

// outAtStart returns all ones when c's queue is empty or its agent or lane
// is full, so that it is out from the start, and zero otherwise.
func outAtStart(c *policy.Candidate) uint64 {
	return -(negative(uint64(c.QueueLen)-1) | negative(uint64(c.AgentLimit)-uint64(c.AgentInflight)-1) |
		negative(uint64(c.LaneLimit)-uint64(c.LaneInflight)-1))
}

// best returns the best leaf of cands, and a nonzero bad when the input is
// outside the fast path's bounds: the whole decision when there is one
// slot.
//
//go:noinline
func best(cands []policy.Candidate, agingOn uint64, aging int64) (best node, bad uint64) {
	prev := cands[0].HeadSeq - 1
	best = removedNode
	for i := range cands {
		c := &cands[i]
		bad |= outOfBounds(c, prev)
		prev = c.HeadSeq
		k0 := k0Of(c, agingOn, aging)
		k0 ^= (k0 ^ keyRemoved) & outAtStart(c)
		best = better(best, node{k0, ratioKey(c.AgentInflight, weightOf(c), i)})
	}
	return best, bad
}

// leaves writes the tree's leaves and returns the best of them, and a
// nonzero bad when the input is outside the fast path's bounds.
//
//go:noinline
func (f *fast) leaves(cands []policy.Candidate, size int, agingOn uint64, aging int64) (best node, bad uint64) {
	t, fc := &f.tree, &f.cands
	prev := cands[0].HeadSeq - 1
	best = removedNode
	for i := range cands {
		c := &cands[i]
		bad |= outOfBounds(c, prev)
		prev = c.HeadSeq
		w := weightOf(c)
		k0 := k0Of(c, agingOn, aging)
		k0 ^= (k0 ^ keyRemoved) & outAtStart(c)
		l := node{k0, ratioKey(c.AgentInflight, w, i)}
		best = better(best, l)
		t[(size+i)&treeMask] = l
		fc[i&indexMask] = fastCand{w: w}
	}
	return best, bad
}
