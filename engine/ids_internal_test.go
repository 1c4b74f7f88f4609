package engine

import (
	"strings"
	"testing"
	"time"
)

// Ids written into shared blocks are the ids the generator's bits spell,
// each of its own and never changed by the ids written after it.
func TestIDsWrittenIntoBlocksStayTheirOwn(t *testing.T) {
	g, ref := newIDGen(7), newIDGen(7)
	now := time.Unix(1_700_000_000, 0)
	var ids, want []string
	for i := range 5 * idBlock {
		if i%7 == 0 {
			now = now.Add(time.Millisecond)
		}
		id := g.next(now)
		bits := encodeULIDTo(ref.nextBits(now))
		if id != string(bits[:]) {
			t.Fatalf("id %d: %q, the bits spell %q", i, id, bits[:])
		}
		ids, want = append(ids, id), append(want, strings.Clone(id))
	}
	seen := map[string]bool{}
	for i, id := range ids {
		if id != want[i] {
			t.Fatalf("id %d changed to %q from %q once later ids were written", i, id, want[i])
		}
		if seen[id] {
			t.Fatalf("id %q given twice", id)
		}
		seen[id] = true
	}
}

// A generator allocates one block for idBlock ids, not a string an id.
func TestIDsAreAllocatedInBlocks(t *testing.T) {
	g := newIDGen(7)
	now := time.Unix(1_700_000_000, 0)
	g.next(now) // the first block
	allocs := testing.AllocsPerRun(10, func() {
		for range idBlock {
			g.next(now)
		}
	})
	if allocs > 1 {
		t.Fatalf("%v allocations for %d ids, want at most 1", allocs, idBlock)
	}
}
