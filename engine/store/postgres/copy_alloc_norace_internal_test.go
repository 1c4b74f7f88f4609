//go:build !race

// The race detector drops a sync.Pool's items at random: allocation counts
// that rest on a pool are checked without it.

package postgres

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
)

// A COPY commit's rows are built with allocations per commit, not per
// task: each new task's event seqs are gathered into one buffer for the
// batch (the payloads are written as the rows are built, finding 22 of
// ADR 0005), where every task with events allocated a slice of its own.
func TestACopyCommitsRowsAllocatePerCommit(t *testing.T) {
	const maxSeq = 1000
	b := &engine.Batch{}
	for i := range 100 {
		spec := &engine.TaskSpec{AgentID: "agent-7", Lane: "main", BatchID: "b1",
			Action:      &engine.Action{Kind: "click", Selector: "css:#go", Params: json.RawMessage(`{"n":1}`)},
			SubmittedAt: time.Unix(1700000000, int64(i))}
		tk := &engine.Task{ID: fmt.Sprintf("t%03d", i), Spec: spec, Seq: maxSeq + 1 + uint64(i), State: engine.StateQueued}
		b.Tasks = append(b.Tasks, tk)
		b.Events = append(b.Events, engine.Event{Seq: tk.Seq, Type: engine.EventState, To: engine.StateQueued, TaskID: tk.ID, AgentID: "agent-7", Lane: "main"})
	}
	s := &Store{copyMin: 0, maxTaskSeq: maxSeq}
	build := func() {
		r, err := s.rowsLocked(b)
		if err != nil || !r.copy || r.cp.newTasks != 100 {
			t.Fatalf("rows: %v", err)
		}
		r.cp.release()
	}
	build() // the pool's first buffers
	allocs := testing.AllocsPerRun(20, build)
	// The rows, the map of the batch's tasks and its chain of events, the
	// seqs buffer and the batch list: 6 here, 105 with a slice a task.
	if allocs > 10 {
		t.Fatalf("%v allocations to build the rows of 100 new tasks", allocs)
	}
	t.Logf("%v allocations", allocs)
}
