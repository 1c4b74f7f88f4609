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
	t.heapIdx = len(q.tasks)
	q.tasks = append(q.tasks, t)
	q.up(t.heapIdx)
}

func (q *subQueue) remove(t *task) {
	i := t.heapIdx
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
	q.tasks[i].heapIdx = i
	q.tasks[j].heapIdx = j
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

// fairBefore orders agentQueues in a lane's fairness heap, and queue heads
// across lanes: the smaller share of work in flight first, then the larger
// weight, then the older head.
func fairBefore(a, b *agentQueue) bool {
	aa, ba := a.agent, b.agent
	l, r := int64(aa.inflight)*int64(ba.weight), int64(ba.inflight)*int64(aa.weight)
	if l != r {
		return l < r
	}
	if aa.weight != ba.weight {
		return aa.weight > ba.weight
	}
	return a.head().seq < b.head().seq
}

// ageBefore orders agentQueues by how long their head has been queued.
func ageBefore(a, b *agentQueue) bool {
	ha, hb := a.head(), b.head()
	if ha.queuedAt != hb.queuedAt {
		return ha.queuedAt < hb.queuedAt
	}
	return ha.seq < hb.seq
}

// aqHeap is an indexed heap of agentQueues; idx selects which index field of
// agentQueue it maintains.
type aqHeap struct {
	items  []*agentQueue
	before func(a, b *agentQueue) bool
	idx    func(aq *agentQueue) *int
}

func (h *aqHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.idx(h.items[i]) = i
	*h.idx(h.items[j]) = j
}

func (h *aqHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !h.before(h.items[i], h.items[p]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h *aqHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.before(h.items[r], h.items[l]) {
			m = r
		}
		if !h.before(h.items[m], h.items[i]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

func (h *aqHeap) push(aq *agentQueue) {
	*h.idx(aq) = len(h.items)
	h.items = append(h.items, aq)
	h.up(len(h.items) - 1)
}

func (h *aqHeap) remove(aq *agentQueue) {
	i := *h.idx(aq)
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	if i != last {
		h.down(i)
		h.up(i)
	}
	*h.idx(aq) = -1
}

func (h *aqHeap) fix(aq *agentQueue) {
	i := *h.idx(aq)
	h.down(i)
	h.up(i)
}

// topK appends to dst the k best items without changing the heap, using
// scratch for a frontier heap of item indices. O(k log k).
func (h *aqHeap) topK(k int, dst []*agentQueue, scratch []int) ([]*agentQueue, []int) {
	if len(h.items) == 0 || k <= 0 {
		return dst, scratch
	}
	if len(h.items) <= k { // everything
		return append(dst, h.items...), scratch
	}
	less := func(i, j int) bool { return h.before(h.items[i], h.items[j]) }
	fr := append(scratch[:0], 0)
	push := func(i int) {
		fr = append(fr, i)
		for c := len(fr) - 1; c > 0; {
			p := (c - 1) / 2
			if !less(fr[c], fr[p]) {
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
			if r := l + 1; r < len(fr) && less(fr[r], fr[l]) {
				m = r
			}
			if !less(fr[m], fr[c]) {
				break
			}
			fr[c], fr[m] = fr[m], fr[c]
			c = m
		}
		dst = append(dst, h.items[i])
		k--
		if l := 2*i + 1; l < len(h.items) {
			push(l)
			if l+1 < len(h.items) {
				push(l + 1)
			}
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
