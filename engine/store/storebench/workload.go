package storebench

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/switchyard/switchyard/engine"
)

// Workload produces group commits as the engine makes them. Steady: each
// commit inserts n new QUEUED tasks, dispatches the previous commit's tasks
// and finishes the ones before (n inserts, 2n updates, 4n events). Coalesced:
// each task is committed once, already ended, with its 4 events (an engine
// whose tasks finish faster than it commits).
type Workload struct {
	n         int
	coalesced bool
	seq       uint64
	prev      [2][]*engine.Task
}

// NewWorkload returns a workload of n tasks per commit.
func NewWorkload(n int, coalesced bool) *Workload { return &Workload{n: n, coalesced: coalesced} }

// Next returns the next commit.
func (w *Workload) Next() *engine.Batch {
	now := time.Now()
	b := &engine.Batch{Tasks: make([]*engine.Task, 0, 3*w.n), Events: make([]engine.Event, 0, 4*w.n)}
	batchID := fmt.Sprintf("B%012d", w.seq)
	b.Batches = []engine.BatchInfo{{ID: batchID, CreatedAt: now}}
	ev := func(t *engine.Task, from, to engine.State) {
		w.seq++
		b.Events = append(b.Events, engine.Event{Seq: w.seq, At: now, Type: engine.EventState, TaskID: t.ID,
			AgentID: t.Spec.AgentID, Lane: t.Spec.Lane, BatchID: t.Spec.BatchID, From: from, To: to, Attempt: 1, Reason: to.String()})
		t.LastSeq = w.seq
	}
	if !w.coalesced {
		for _, t := range w.prev[1] {
			c := *t
			c.State, c.Reason, c.EndedAt, c.Result = engine.StateSucceeded, "succeeded", now, []byte(`{"success":true}`)
			c.Attempts = []engine.Attempt{{N: 1, LeaseID: c.Seq, InstanceID: "inst-1", AssignedAt: now, StartedAt: now, EndedAt: now}}
			ev(&c, engine.StateAssigned, engine.StateRunning)
			ev(&c, engine.StateRunning, engine.StateSucceeded)
			b.Tasks = append(b.Tasks, &c)
		}
		var next []*engine.Task
		for _, t := range w.prev[0] {
			c := *t
			c.State, c.Reason = engine.StateAssigned, "dispatched"
			c.Attempts = []engine.Attempt{{N: 1, LeaseID: c.Seq, InstanceID: "inst-1", AssignedAt: now}}
			ev(&c, engine.StateQueued, engine.StateAssigned)
			b.Tasks = append(b.Tasks, &c)
			next = append(next, &c)
		}
		w.prev[1] = next
	}
	var fresh []*engine.Task
	for i := range w.n {
		agent := "agent-" + strconv.Itoa(i%100)
		t := &engine.Task{ID: fmt.Sprintf("01J%023d", w.seq+1), Seq: w.seq + 1, State: engine.StateQueued, Reason: "submitted",
			Spec: &engine.TaskSpec{AgentID: agent, Lane: "main", Priority: engine.PriorityNormal, BatchID: batchID,
				Action: &engine.Action{Kind: "click", Selector: "css:#go", Params: []byte(`{"x":1}`)}, SubmittedAt: now},
			CreatedAt: now, UpdatedAt: now, QueuedAt: now, Position: -1}
		ev(t, 0, engine.StateQueued)
		if w.coalesced {
			t.State, t.Reason, t.EndedAt, t.Result = engine.StateSucceeded, "succeeded", now, []byte(`{"success":true}`)
			t.Attempts = []engine.Attempt{{N: 1, LeaseID: t.Seq, InstanceID: "inst-1", AssignedAt: now, StartedAt: now, EndedAt: now}}
			ev(t, engine.StateQueued, engine.StateAssigned)
			ev(t, engine.StateAssigned, engine.StateRunning)
			ev(t, engine.StateRunning, engine.StateSucceeded)
		}
		b.Tasks = append(b.Tasks, t)
		fresh = append(fresh, t)
	}
	w.prev[0] = fresh
	// Events in seq order: the fresh tasks' first events came last.
	slices.SortFunc(b.Events, func(x, y engine.Event) int { return cmp.Compare(x.Seq, y.Seq) })
	return b
}
