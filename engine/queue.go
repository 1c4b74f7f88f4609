package engine

import "github.com/switchyard/switchyard/engine/internal/heap"

// The queue structures. A task that is QUEUED sits in exactly one subQueue:
//
//	lane ──fair heap / age heap──▶ agentQueue (lane, agent)
//	                                   └─ready heap──▶ subQueue (lane, agent, session)
//	                                                       └─task heap──▶ task
//
// A subQueue holds the tasks of one session (or, for tasks without a session,
// of one batch) ordered by (front, rank, seq). An agentQueue holds the
// subQueues of one agent in one lane that are ready, ordered by their heads.
// A lane holds the agentQueues that are ready, twice: ordered by the fairness
// key (share in flight, weight, oldest head) and by the age of their head (for
// the aging boost). A subQueue whose head cannot run because a ceiling is full
// is parked on that ceiling's limiter and leaves the ready heaps; releasing a
// slot of the limiter wakes every queue parked on it. An agent at its ceiling
// takes all its agentQueues out of the lane heaps until it has room again.
// Every ordering is total (ties end at the unique seq), so decisions never
// depend on the layout of a heap.

// taskBefore orders tasks within a subQueue.
func taskBefore(a, b *task) bool {
	if a.front != b.front {
		return a.front
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.seq < b.seq
}

type subQueue struct {
	aq      *agentQueue
	key     string                      // session key, or "\x00" + batch id for sessionless tasks
	session *session                    // nil for sessionless tasks
	tasks   heap.Heap[*task, taskOrder] // by taskBefore
	ready   int                         // index in aq.ready; -1 when not there
	parked  *limiter                    // the limiter it waits on, or nil
	parkIdx int                         // index in parked.waiters
}

// taskOrder orders a subQueue's tasks and keeps task.heapIdx.
type taskOrder struct{}

func (taskOrder) Less(a, b *task) bool    { return taskBefore(a, b) }
func (taskOrder) SetIndex(t *task, i int) { t.heapIdx = int32(i) }

func (q *subQueue) head() *task { return q.tasks.Top() }

func (q *subQueue) push(t *task) {
	t.sq = q
	q.tasks.Push(t)
}

func (q *subQueue) remove(t *task) {
	q.tasks.Remove(int(t.heapIdx))
	t.sq = nil
}

type agentQueue struct {
	lane   *lane
	agent  *agent
	subs   map[string]*subQueue
	spare  *subQueue                        // an emptied subQueue, kept for reuse
	ready  heap.Heap[*subQueue, readyOrder] // by head
	queued int                              // QUEUED tasks in all subs
	fair   int                              // index in lane.fair; -1 when not there
	age    int                              // index in lane.age; -1 when not there
}

// readyOrder orders an agentQueue's ready subQueues by their heads and keeps
// subQueue.ready.
type readyOrder struct{}

func (readyOrder) Less(a, b *subQueue) bool    { return taskBefore(a.head(), b.head()) }
func (readyOrder) SetIndex(q *subQueue, i int) { q.ready = i }

func (aq *agentQueue) head() *task { return aq.ready.Top().head() }

// eligible reports whether aq belongs in its lane's heaps.
func (aq *agentQueue) eligible() bool { return aq.ready.Len() > 0 && !aq.agent.parked }

func (aq *agentQueue) addReady(q *subQueue) { aq.ready.Push(q) }

func (aq *agentQueue) removeReady(q *subQueue) { aq.ready.Remove(q.ready) }

func (aq *agentQueue) fixReady(q *subQueue) { aq.ready.Fix(q.ready) }

// fairBefore orders agentQueues across lanes: the smaller share of work in
// flight first, then the larger weight, then the older head. The lane heaps
// order by the same rule over keys cached in their entries (fairKeyBefore).
func fairBefore(a, b *agentQueue) bool {
	return fairKeyBefore(int64(a.agent.inflight), int64(a.agent.weight), a.head().seq,
		int64(b.agent.inflight), int64(b.agent.weight), b.head().seq)
}

func fairKeyBefore(aIn, aW int64, aSeq uint64, bIn, bW int64, bSeq uint64) bool {
	if l, r := aIn*bW, bIn*aW; l != r {
		return l < r
	}
	if aW != bW {
		return aW > bW
	}
	return aSeq < bSeq
}

// ageBefore orders agentQueues by how long their head has been queued.
func ageBefore(a, b *agentQueue) bool {
	ha, hb := a.head(), b.head()
	if ha.queuedAt != hb.queuedAt {
		return ha.queuedAt < hb.queuedAt
	}
	return ha.seq < hb.seq
}

// aqEntry is an agentQueue in a lane heap with its ordering key cached, so
// that sifting through ten thousand queues compares contiguous memory
// instead of chasing pointers to agents and head tasks.
type aqEntry struct {
	aq  *agentQueue
	k1  int64 // fair: the agent's in-flight count; age: the head's queuedAt
	k2  int64 // fair: the agent's weight
	seq uint64
}

// aqOrder orders a lane heap's entries, by fairness or by age, and keeps
// agentQueue.age (by age) or agentQueue.fair.
type aqOrder struct{ age bool }

func (o aqOrder) Less(a, b aqEntry) bool {
	if o.age {
		if a.k1 != b.k1 {
			return a.k1 < b.k1
		}
		return a.seq < b.seq
	}
	return fairKeyBefore(a.k1, a.k2, a.seq, b.k1, b.k2, b.seq)
}

func (o aqOrder) SetIndex(e aqEntry, i int) {
	if o.age {
		e.aq.age = i
	} else {
		e.aq.fair = i
	}
}

// aqHeap is a lane's heap of agentQueues, ordered either by fairness or by
// age (newAQHeap).
type aqHeap struct {
	heap.Heap[aqEntry, aqOrder]
	picked []int // TopK's answer, kept for reuse
}

func newAQHeap(age bool) aqHeap {
	var h aqHeap
	h.Init(aqOrder{age: age})
	return h
}

// idxOf returns aq's position.
func (h *aqHeap) idxOf(aq *agentQueue) int {
	if h.Ops().age {
		return aq.age
	}
	return aq.fair
}

// key refreshes an entry's cached key from its queue.
func (h *aqHeap) key(e *aqEntry) {
	head := e.aq.head()
	e.seq = head.seq
	if h.Ops().age {
		e.k1 = head.queuedAt
		return
	}
	e.k1, e.k2 = int64(e.aq.agent.inflight), int64(e.aq.agent.weight)
}

func (h *aqHeap) push(aq *agentQueue) {
	e := aqEntry{aq: aq}
	h.key(&e)
	h.Push(e)
}

func (h *aqHeap) remove(aq *agentQueue) { h.Remove(h.idxOf(aq)) }

// fix re-keys aq and restores the order.
func (h *aqHeap) fix(aq *agentQueue) {
	i := h.idxOf(aq)
	h.key(h.At(i))
	h.Fix(i)
}

func (h *aqHeap) top() *agentQueue { return h.Top().aq }

// topK appends to dst the k best queues without changing the heap, using
// scratch for the search's frontier. O(k log k).
func (h *aqHeap) topK(k int, dst []*agentQueue, scratch []int) ([]*agentQueue, []int) {
	h.picked, scratch = h.TopK(k, h.picked[:0], scratch)
	items := h.Items()
	for _, i := range h.picked {
		dst = append(dst, items[i].aq)
	}
	return dst, scratch
}

// limiter is a ceiling that queues can wait on: a session's, a batch's or an
// instance's concurrency.
type limiter struct {
	inflight int
	limit    int // 0 means unlimited
	waiters  []*subQueue
}

func (l *limiter) full() bool { return l.limit > 0 && l.inflight >= l.limit }
