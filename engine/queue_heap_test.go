package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The lane heaps are internal, so this one test lives inside the package: it
// checks the 4-ary aqHeap against a sort, through random pushes, re-keys
// and removals.
func TestAgentQueueHeapsAgreeWithASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, age := range []bool{false, true} {
		h := newAQHeap(age)
		var in []*agentQueue
		before := func(a, b *agentQueue) bool {
			if age {
				return ageBefore(a, b)
			}
			return fairKeyBefore(int64(a.agent.inflight), int64(a.agent.weight), a.head().seq,
				int64(b.agent.inflight), int64(b.agent.weight), b.head().seq)
		}
		seq := uint64(0)
		for step := range 5000 {
			switch op := rng.IntN(10); {
			case op < 4 || len(in) == 0:
				seq++
				head := &task{seq: seq, queuedAt: rng.Int64N(1000)}
				aq := &agentQueue{agent: &agent{inflight: rng.IntN(5), weight: 1 + rng.IntN(3)}, fair: -1, age: -1}
				sq := &subQueue{}
				sq.tasks.Push(head)
				aq.ready.Push(sq)
				h.push(aq)
				in = append(in, aq)
			case op < 8:
				aq := in[rng.IntN(len(in))]
				aq.agent.inflight = rng.IntN(5)
				aq.head().queuedAt = rng.Int64N(1000)
				h.fix(aq)
			default:
				i := rng.IntN(len(in))
				h.remove(in[i])
				in = slices.Delete(in, i, i+1)
			}
			want := slices.Clone(in)
			slices.SortFunc(want, func(a, b *agentQueue) int {
				if before(a, b) {
					return -1
				}
				return 1
			})
			for i, e := range h.Items() {
				if got := h.idxOf(e.aq); got != i {
					t.Fatalf("age=%v step %d: the queue at %d records index %d", age, step, i, got)
				}
			}
			if len(want) == 0 {
				continue
			}
			if h.top() != want[0] {
				t.Fatalf("age=%v step %d: top is not the first in order", age, step)
			}
			k := min(len(want), 1+rng.IntN(8))
			got, _ := h.topK(k, nil, nil)
			if !sameQueues(got, want[:k]) {
				t.Fatalf("age=%v step %d: topK(%d) is not the first %d in order", age, step, k, k)
			}
		}
	}
}

// sameQueues reports whether a and b hold the same queues, in any order.
func sameQueues(a, b []*agentQueue) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[*agentQueue]bool{}
	for _, aq := range a {
		seen[aq] = true
	}
	for _, aq := range b {
		if !seen[aq] {
			return false
		}
	}
	return true
}
