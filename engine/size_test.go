package engine

import (
	"testing"
	"time"
	"unsafe"
)

// The records the engine allocates for every task and attempt stay within
// the allocation size classes they were measured in: one field more took a
// task from 288 bytes to the 320-byte class and cost the engine about 6 %
// of its throughput. A change that needs the room should say so here, with
// its figures.
func TestPerTaskRecordsKeepTheirSizeClass(t *testing.T) {
	if got := unsafe.Sizeof(task{}); got > 288 {
		t.Errorf("task is %d bytes, past its 288-byte size class", got)
	}
	if got := unsafe.Sizeof(Run{}); got > 192 {
		t.Errorf("Run is %d bytes, past its 192-byte size class", got)
	}
}

// A submission's spec copies, which its queued tasks keep, are allocated
// specBlock at a time, not one a task (prepare's own list is the one
// allocation besides them).
func TestABatchsSpecCopiesAreAllocatedInBlocks(t *testing.T) {
	c := &core{laneByName: map[string]*lane{"main": {}}}
	items := make([]BatchItem, 100)
	for i := range items {
		items[i].Spec = TaskSpec{AgentID: "a", Action: &Action{Kind: "noop"}}
	}
	now := time.Now()
	allocs := testing.AllocsPerRun(20, func() { c.prepare(items, &BatchSpec{}, now) })
	if specBlock < 8 {
		t.Fatalf("specBlock is %d: blocks that small save little", specBlock)
	}
	if want := 1 + (len(items)+specBlock-1)/specBlock; allocs != float64(want) {
		t.Fatalf("preparing %d items made %v allocations, want %d", len(items), allocs, want)
	}
}
