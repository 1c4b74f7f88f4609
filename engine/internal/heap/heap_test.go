package heap

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// item is a test item: its key, a unique id to break ties, and where the
// heap says it is.
type item struct {
	key int
	id  int
	idx int
}

type byKey struct{}

func (byKey) Less(a, b *item) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.id < b.id
}

func (byKey) SetIndex(it *item, i int) { it.idx = i }

func sorted(in []*item) []*item {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b *item) int {
		if (byKey{}).Less(a, b) {
			return -1
		}
		return 1
	})
	return out
}

// TestHeapAgreesWithASort drives a heap through random pushes, re-keys,
// removals and pops, and checks after every step that each item records
// its own position, that the top is the first item in sorted order, and
// that TopK yields the first k in order.
func TestHeapAgreesWithASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h Heap[*item, byKey]
	var in []*item
	id := 0
	for step := range 5000 {
		switch op := rng.IntN(12); {
		case op < 5 || len(in) == 0:
			id++
			it := &item{key: rng.IntN(100), id: id, idx: -1}
			h.Push(it)
			in = append(in, it)
		case op < 8:
			it := in[rng.IntN(len(in))]
			it.key = rng.IntN(100)
			h.Fix(it.idx)
		case op < 10:
			i := rng.IntN(len(in))
			it := in[i]
			h.Remove(it.idx)
			if it.idx != -1 {
				t.Fatalf("step %d: a removed item records index %d", step, it.idx)
			}
			in = slices.Delete(in, i, i+1)
		default:
			want := sorted(in)[0]
			if got := h.Pop(); got != want {
				t.Fatalf("step %d: Pop returned %+v, want %+v", step, got, want)
			}
			in = slices.DeleteFunc(in, func(it *item) bool { return it == want })
		}
		if h.Len() != len(in) {
			t.Fatalf("step %d: Len %d, want %d", step, h.Len(), len(in))
		}
		for i, it := range h.Items() {
			if it.idx != i {
				t.Fatalf("step %d: the item at %d records index %d", step, i, it.idx)
			}
		}
		if len(in) == 0 {
			continue
		}
		want := sorted(in)
		if h.Top() != want[0] {
			t.Fatalf("step %d: Top is not the first in order", step)
		}
		k := 1 + rng.IntN(12)
		idx, _ := h.TopK(k, nil, nil)
		got := make([]*item, len(idx))
		for i, j := range idx {
			got[i] = h.Items()[j]
		}
		if k < len(in) {
			if !slices.Equal(got, want[:k]) {
				t.Fatalf("step %d: TopK(%d) is not the first %d in order", step, k, k)
			}
		} else if !slices.Equal(sorted(got), want) {
			t.Fatalf("step %d: TopK(%d) of %d items is not all of them", step, k, len(in))
		}
	}
}

// timer has an Ops with state, as the engine's per-kind timer heaps do.
type timer struct {
	at  [2]int64
	idx [2]int
}

type byAt struct{ kind int }

func (o byAt) Less(a, b *timer) bool    { return a.at[o.kind] < b.at[o.kind] }
func (o byAt) SetIndex(t *timer, i int) { t.idx[o.kind] = i }

// TestOpsWithState: two heaps over the same items, each keeping its own
// index, as the engine's timer kinds do.
func TestOpsWithState(t *testing.T) {
	var a, b Heap[*timer, byAt]
	a.Init(byAt{0})
	b.Init(byAt{1})
	ts := make([]*timer, 50)
	for i := range ts {
		ts[i] = &timer{at: [2]int64{int64(i), int64(-i)}}
		a.Push(ts[i])
		b.Push(ts[i])
	}
	if a.Top() != ts[0] || b.Top() != ts[49] {
		t.Fatal("each heap orders by its own kind")
	}
	for i, tm := range a.Items() {
		if tm.idx[0] != i {
			t.Fatalf("kind 0: the item at %d records %d", i, tm.idx[0])
		}
	}
	for i, tm := range b.Items() {
		if tm.idx[1] != i {
			t.Fatalf("kind 1: the item at %d records %d", i, tm.idx[1])
		}
	}
}

// entry is a value item with a cached key, as the engine's lane heaps hold.
type entry struct {
	it  *item
	key int
}

type byEntry struct{}

func (byEntry) Less(a, b entry) bool {
	if a.key != b.key {
		return a.key < b.key
	}
	return a.it.id < b.it.id
}
func (byEntry) SetIndex(e entry, i int) { e.it.idx = i }

// TestValueEntriesReKeyedInPlace: an owner updates an entry's cached key
// through At, then Fix restores the order.
func TestValueEntriesReKeyedInPlace(t *testing.T) {
	var h Heap[entry, byEntry]
	its := make([]*item, 20)
	for i := range its {
		its[i] = &item{id: i}
		h.Push(entry{it: its[i], key: i})
	}
	e := h.At(its[19].idx)
	e.key = -1
	h.Fix(its[19].idx)
	if h.Top().it != its[19] {
		t.Fatal("the re-keyed entry is not first")
	}
}

// BenchmarkPushPop is the heap's steady state at a few sizes: every
// operation re-uses the slice, so it allocates nothing.
func BenchmarkPushPop(b *testing.B) {
	for _, n := range []int{1, 16, 1024, 16384} {
		b.Run(itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(5, 6))
			var h Heap[*item, byKey]
			for i := range n {
				h.Push(&item{key: rng.IntN(1 << 20), id: i})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				it := h.Pop()
				it.key += rng.IntN(1 << 10)
				h.Push(it)
			}
		})
	}
}

// BenchmarkFix moves a random item's key and restores the order, as a
// dispatch and a completion do to an agent's queue in the fairness heap.
func BenchmarkFix(b *testing.B) {
	for _, n := range []int{16, 1024, 16384} {
		b.Run(itoa(n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 8))
			var h Heap[entry, byEntry]
			its := make([]*item, n)
			for i := range its {
				its[i] = &item{id: i}
				h.Push(entry{it: its[i], key: rng.IntN(1 << 20)})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				it := its[rng.IntN(n)]
				e := h.At(it.idx)
				e.key = rng.IntN(1 << 20)
				h.Fix(it.idx)
			}
		})
	}
}

// BenchmarkTopK is the fairness candidates' search: 0 allocs/op with its
// slices re-used.
func BenchmarkTopK(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	var h Heap[*item, byKey]
	for i := range 10000 {
		h.Push(&item{key: rng.IntN(1 << 20), id: i})
	}
	dst, scratch := make([]int, 0, 64), make([]int, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		dst, scratch = h.TopK(32, dst[:0], scratch)
	}
}

func itoa(n int) string {
	switch {
	case n >= 1024:
		return itoa(n/1024) + "k"
	case n >= 10:
		return itoa(n/10) + string(rune('0'+n%10))
	}
	return string(rune('0' + n))
}
