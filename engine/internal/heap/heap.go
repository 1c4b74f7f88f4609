// Package heap is the engine's one priority queue: an indexed (intrusive)
// 4-ary min-heap whose items record their own position, so that any item
// can be re-ordered or removed in O(log n) without a search. It allocates
// nothing beyond the growth of its slice, and it boxes nothing: the order
// and the index bookkeeping are a value of a type parameter, not an
// interface or a closure.
//
// It is 4-ary because the engine's large heaps (ten thousand agents' queues
// in a lane, the timers of every task waiting) move an item from the top to
// the bottom and back on every dispatch and completion: half the levels of
// a binary heap means half the items moved and half the index updates.
package heap

// Ops orders a heap's items and keeps their recorded positions. Its methods
// take items by value: an item is typically a pointer, or a small entry
// holding one, with its sort key cached in it.
type Ops[E any] interface {
	// Less reports whether a goes before b. It must be a strict total
	// order over the items in the heap (ties broken by something unique),
	// so that what the heap yields never depends on its layout.
	Less(a, b E) bool
	// SetIndex records that e is now at position i of the heap, or no
	// longer in it when i is -1.
	SetIndex(e E, i int)
}

// arity is the number of children of a node.
const arity = 4

// Heap is an indexed min-heap of E ordered by O. The zero value is an empty
// heap whose Ops is O's zero value; use Init for an Ops with state.
type Heap[E any, O Ops[E]] struct {
	ops   O // first: a zero-size O adds no padding
	items []E
}

// Init sets the heap's Ops. Call it before the first Push.
func (h *Heap[E, O]) Init(ops O) { h.ops = ops }

// Ops returns the heap's Ops.
func (h *Heap[E, O]) Ops() O { return h.ops }

// Len returns the number of items.
func (h *Heap[E, O]) Len() int { return len(h.items) }

// Top returns the first item in order. The heap must not be empty.
func (h *Heap[E, O]) Top() E { return h.items[0] }

// At returns a pointer to the item at position i, for its owner to update
// the key it caches before calling Fix(i). Any other change to the heap
// invalidates the pointer.
func (h *Heap[E, O]) At(i int) *E { return &h.items[i] }

// Items returns the items in heap order (not sorted). The slice is the
// heap's own: read it, never keep or change it.
func (h *Heap[E, O]) Items() []E { return h.items }

// Push adds e.
func (h *Heap[E, O]) Push(e E) {
	h.items = append(h.items, e)
	h.up(len(h.items)-1, e)
}

// Pop removes and returns the first item. The heap must not be empty.
func (h *Heap[E, O]) Pop() E {
	e := h.items[0]
	h.Remove(0)
	return e
}

// Remove removes the item at position i.
func (h *Heap[E, O]) Remove(i int) {
	e := h.items[i]
	last := len(h.items) - 1
	moved := h.items[last]
	var zero E
	h.items[last] = zero // let the collector have what the item points to
	h.items = h.items[:last]
	h.ops.SetIndex(e, -1)
	if i != last {
		h.fix(i, moved)
	}
}

// Fix restores the order after the key of the item at position i changed.
func (h *Heap[E, O]) Fix(i int) { h.fix(i, h.items[i]) }

// fix places e, which belongs at or around position i, where the order
// wants it.
func (h *Heap[E, O]) fix(i int, e E) {
	if i > 0 && h.ops.Less(e, h.items[(i-1)/arity]) {
		h.up(i, e)
		return
	}
	h.down(i, e)
}

// up moves e from position i towards the root, shifting down the parents
// it goes before: one write and one index update per level.
func (h *Heap[E, O]) up(i int, e E) {
	for i > 0 {
		p := (i - 1) / arity
		pe := h.items[p]
		if !h.ops.Less(e, pe) {
			break
		}
		h.items[i] = pe
		h.ops.SetIndex(pe, i)
		i = p
	}
	h.items[i] = e
	h.ops.SetIndex(e, i)
}

// down moves e from position i towards the leaves, shifting up the
// smallest child while it goes before e.
func (h *Heap[E, O]) down(i int, e E) {
	n := len(h.items)
	for {
		first := arity*i + 1
		if first >= n {
			break
		}
		m, me := first, h.items[first]
		for c := first + 1; c < min(first+arity, n); c++ {
			if ce := h.items[c]; h.ops.Less(ce, me) {
				m, me = c, ce
			}
		}
		if !h.ops.Less(me, e) {
			break
		}
		h.items[i] = me
		h.ops.SetIndex(me, i)
		i = m
	}
	h.items[i] = e
	h.ops.SetIndex(e, i)
}

// TopK appends to dst the positions of the k first items without changing
// the heap: in order, or all of them in heap order when k >= Len. scratch
// is the frontier's storage, returned for reuse. It takes O(k log k).
func (h *Heap[E, O]) TopK(k int, dst, scratch []int) (out, spare []int) {
	n := len(h.items)
	if n == 0 || k <= 0 {
		return dst, scratch
	}
	if n <= k {
		for i := range n {
			dst = append(dst, i)
		}
		return dst, scratch
	}
	fr := append(scratch[:0], 0)
	for len(fr) > 0 && k > 0 {
		var i int
		i, fr = h.frontierPop(fr)
		dst = append(dst, i)
		k--
		for c := arity*i + 1; c < min(arity*i+1+arity, n); c++ {
			fr = h.frontierPush(fr, c)
		}
	}
	return dst, fr
}

// frontierPush adds position i to fr, a binary heap of positions.
func (h *Heap[E, O]) frontierPush(fr []int, i int) []int {
	fr = append(fr, i)
	for c := len(fr) - 1; c > 0; {
		p := (c - 1) / 2
		if !h.ops.Less(h.items[fr[c]], h.items[fr[p]]) {
			break
		}
		fr[c], fr[p] = fr[p], fr[c]
		c = p
	}
	return fr
}

// frontierPop removes the first position of fr.
func (h *Heap[E, O]) frontierPop(fr []int) (int, []int) {
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
		if r := l + 1; r < len(fr) && h.ops.Less(h.items[fr[r]], h.items[fr[l]]) {
			m = r
		}
		if !h.ops.Less(h.items[fr[m]], h.items[fr[c]]) {
			break
		}
		fr[c], fr[m] = fr[m], fr[c]
		c = m
	}
	return i, fr
}
