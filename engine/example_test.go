package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// An engine over a memory store, a fake clock and an executor that finishes
// attempts only when told: submit a task, watch it be dispatched, finish its
// attempt, and read its events. A server wires the same engine with a
// durable store, the real clock and the executor that forwards to browsers.
func Example() {
	ctx := context.Background()
	exec := enginetest.NewExecutor()
	// enginetest.Synchronous: dispatch and commit before each call
	// returns, so that the example is deterministic.
	eng, err := engine.New(enginetest.Synchronous(engine.Options{
		Store:    memory.New(memory.Options{}),
		Executor: exec,
		Clock:    clock.NewFake(enginetest.Epoch),
		Seed:     1,
	}))
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Shutdown(ctx)

	task, err := eng.Submit(ctx, engine.TaskSpec{
		AgentID: "agent-1",
		Lane:    "main",
		Action:  &engine.Action{Kind: "navigate", Params: []byte(`{"url":"https://example.com"}`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("attempts running:", len(exec.Running()))

	if err := exec.Succeed(task.ID, `{"title":"Example Domain"}`); err != nil {
		log.Fatal(err)
	}
	done, err := eng.Task(ctx, task.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.State, string(done.Result))

	events, err := eng.StoredEvents(ctx, 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		if ev.TaskID == task.ID {
			fmt.Printf("→ %s (%s)\n", ev.To, ev.Reason)
		}
	}
	// Output:
	// attempts running: 1
	// SUCCEEDED {"title":"Example Domain"}
	// → QUEUED (admitted)
	// → ASSIGNED (dispatched)
	// → SUCCEEDED (completed)
}
