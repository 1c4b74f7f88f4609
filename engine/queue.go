package engine

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
	key     string   // session key, or "\x00" + batch id for sessionless tasks
	session *session // nil for sessionless tasks
	tasks   []*task  // heap by taskBefore
	ready   int      // index in aq.ready; -1 when not there
	parked  *limiter // the limiter it waits on, or nil
	parkIdx int      // index in parked.waiters
}

func (q *subQueue) head() *task { return q.tasks[0] }

func (q *subQueue) push(t *task) {
	t.sq = q
	t.heapIdx = int32(len(q.tasks))
	q.tasks = append(q.tasks, t)
	q.up(len(q.tasks) - 1)
}

func (q *subQueue) remove(t *task) {
	i := int(t.heapIdx)
	last := len(q.tasks) - 1
	if i != last {
		q.swap(i, last)
	}
	q.tasks[last] = nil
	q.tasks = q.tasks[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	t.sq = nil
	t.heapIdx = -1
}

func (q *subQueue) swap(i, j int) {
	q.tasks[i], q.tasks[j] = q.tasks[j], q.tasks[i]
	q.tasks[i].heapIdx = int32(i)
	q.tasks[j].heapIdx = int32(j)
}

func (q *subQueue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !taskBefore(q.tasks[i], q.tasks[p]) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *subQueue) down(i int) {
	n := len(q.tasks)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && taskBefore(q.tasks[r], q.tasks[l]) {
			m = r
		}
		if !taskBefore(q.tasks[m], q.tasks[i]) {
			return
		}
		q.swap(i, m)
		i = m
	}
}

type agentQueue struct {
	lane   *lane
	agent  *agent
	subs   map[string]*subQueue
	spare  *subQueue   // an emptied subQueue, kept for reuse
	ready  []*subQueue // heap by head
	queued int         // QUEUED tasks in all subs
	fair   int         // index in lane.fair; -1 when not there
	age    int         // index in lane.age; -1 when not there
}

func (aq *agentQueue) head() *task { return aq.ready[0].head() }

// eligible reports whether aq belongs in its lane's heaps.
func (aq *agentQueue) eligible() bool { return len(aq.ready) > 0 && !aq.agent.parked }

func (aq *agentQueue) readySwap(i, j int) {
	aq.ready[i], aq.ready[j] = aq.ready[j], aq.ready[i]
	aq.ready[i].ready = i
	aq.ready[j].ready = j
}

func (aq *agentQueue) readyUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !taskBefore(aq.ready[i].head(), aq.ready[p].head()) {
			return
		}
		aq.readySwap(i, p)
		i = p
	}
}

func (aq *agentQueue) readyDown(i int) {
	n := len(aq.ready)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && taskBefore(aq.ready[r].head(), aq.ready[l].head()) {
			m = r
		}
		if !taskBefore(aq.ready[m].head(), aq.ready[i].head()) {
			return
		}
		aq.readySwap(i, m)
		i = m
	}
}

func (aq *agentQueue) addReady(q *subQueue) {
	q.ready = len(aq.ready)
	aq.ready = append(aq.ready, q)
	aq.readyUp(q.ready)
}

func (aq *agentQueue) removeReady(q *subQueue) {
	i := q.ready
	last := len(aq.ready) - 1
	if i != last {
		aq.readySwap(i, last)
	}
	aq.ready[last] = nil
	aq.ready = aq.ready[:last]
	if i != last {
		aq.readyDown(i)
		aq.readyUp(i)
	}
	q.ready = -1
}

func (aq *agentQueue) fixReady(q *subQueue) {
	aq.readyDown(q.ready)
	aq.readyUp(q.ready)
}

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

// aqHeap is an indexed heap of agentQueues, ordered either by fairness or by
// age (and then it maintains agentQueue.age, else agentQueue.fair). It is
// 4-ary: a dispatch moves its agent's queue from the top to the bottom of
// the fairness heap and its completion moves it back, and with ten thousand
// agents half the levels means half the entries moved and half the queues
// touched to update their index.
type aqHeap struct {
	items []aqEntry
	age   bool
}

const aqArity = 4

// setIdx records that aq is at position i.
func (h *aqHeap) setIdx(aq *agentQueue, i int) {
	if h.age {
		aq.age = i
	} else {
		aq.fair = i
	}
}

// idxOf returns aq's position.
func (h *aqHeap) idxOf(aq *agentQueue) int {
	if h.age {
		return aq.age
	}
	return aq.fair
}

func (h *aqHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	if h.age {
		if a.k1 != b.k1 {
			return a.k1 < b.k1
		}
		return a.seq < b.seq
	}
	return fairKeyBefore(a.k1, a.k2, a.seq, b.k1, b.k2, b.seq)
}

// key refreshes an entry's cached key from its queue.
func (h *aqHeap) key(e *aqEntry) {
	head := e.aq.head()
	e.seq = head.seq
	if h.age {
		e.k1 = head.queuedAt
		return
	}
	e.k1, e.k2 = int64(e.aq.agent.inflight), int64(e.aq.agent.weight)
}

func (h *aqHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.setIdx(h.items[i].aq, i)
	h.setIdx(h.items[j].aq, j)
}

func (h *aqHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / aqArity
		if !h.less(i, p) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *aqHeap) down(i int) {
	n := len(h.items)
	for {
		first := aqArity*i + 1
		if first >= n {
			return
		}
		m := first
		for c := first + 1; c < min(first+aqArity, n); c++ {
			if h.less(c, m) {
				m = c
			}
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *aqHeap) push(aq *agentQueue) {
	h.setIdx(aq, len(h.items))
	h.items = append(h.items, aqEntry{aq: aq})
	h.key(&h.items[len(h.items)-1])
	h.up(len(h.items) - 1)
}

func (h *aqHeap) remove(aq *agentQueue) {
	i := h.idxOf(aq)
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = aqEntry{}
	h.items = h.items[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	h.setIdx(aq, -1)
}

// fix re-keys aq and restores the order.
func (h *aqHeap) fix(aq *agentQueue) {
	i := h.idxOf(aq)
	h.key(&h.items[i])
	h.down(i)
	h.up(i)
}

func (h *aqHeap) top() *agentQueue { return h.items[0].aq }

// topK appends to dst the k best queues without changing the heap, using
// scratch for a frontier heap of item indices. O(k log k).
func (h *aqHeap) topK(k int, dst []*agentQueue, scratch []int) ([]*agentQueue, []int) {
	if len(h.items) == 0 || k <= 0 {
		return dst, scratch
	}
	if len(h.items) <= k { // everything
		for i := range h.items {
			dst = append(dst, h.items[i].aq)
		}
		return dst, scratch
	}
	fr := append(scratch[:0], 0)
	push := func(i int) {
		fr = append(fr, i)
		for c := len(fr) - 1; c > 0; {
			p := (c - 1) / 2
			if !h.less(fr[c], fr[p]) {
				break
			}
			fr[c], fr[p] = fr[p], fr[c]
			c = p
		}
	}
	for len(fr) > 0 && k > 0 {
		i := fr[0]
		last := len(fr) - 1
		fr[0] = fr[last]
		fr = fr[:last]
		for c := 0; ; {
			l := 2*c + 1
			if l >= len(fr) {
				break
			}
			m := l
			if r := l + 1; r < len(fr) && h.less(fr[r], fr[l]) {
				m = r
			}
			if !h.less(fr[m], fr[c]) {
				break
			}
			fr[c], fr[m] = fr[m], fr[c]
			c = m
		}
		dst = append(dst, h.items[i].aq)
		k--
		for c := aqArity*i + 1; c < min(aqArity*i+1+aqArity, len(h.items)); c++ {
			push(c)
		}
	}
	return dst, fr
}

// limiter is a ceiling that queues can wait on: a session's, a batch's or an
// instance's concurrency.
type limiter struct {
	inflight int
	limit    int // 0 means unlimited
	waiters  []*subQueue
}

func (l *limiter) full() bool { return l.limit > 0 && l.inflight >= l.limit }
