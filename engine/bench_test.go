package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/enginebench"
)

// The engine's benchmarks. They report tasks/s and per-dispatch cost with the
// built-in native policies; `switchyard bench --engine` prints the same
// figures (and the WebAssembly policies' beside them).

// BenchmarkThroughput measures submit→dispatch→complete through the engine
// API with a no-op executor and the memory store.
func BenchmarkThroughput(b *testing.B) {
	for _, agents := range []int{10, 1000} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			r, err := enginebench.RunThroughput(context.Background(), b.N, agents, runtime.GOMAXPROCS(0), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.TasksPerSec, "tasks/s")
		})
	}
}

// BenchmarkDispatchAtDepth measures one dispatch (and its completion) while
// the queues hold a backlog of the given size spread over the given number
// of agents: the cost should stay flat as both grow.
func BenchmarkDispatchAtDepth(b *testing.B) {
	for _, queued := range []int{1_000, 100_000, 1_000_000} {
		for _, agents := range []int{10, 1_000, 10_000} {
			b.Run(fmt.Sprintf("queued=%d/agents=%d", queued, agents), func(b *testing.B) {
				r, err := enginebench.RunAtDepth(context.Background(), queued, agents, b.N, 1, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(r.PerDispatch.Nanoseconds()), "ns/dispatch")
			})
		}
	}
}

// BenchmarkMemoryPerQueuedTask reports the heap held per queued task.
func BenchmarkMemoryPerQueuedTask(b *testing.B) {
	for range b.N {
		total, engineOnly, err := enginebench.MemoryPerQueuedTask(context.Background(), 1_000_000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(total, "B/queued-task")
		b.ReportMetric(engineOnly, "B/queued-task-engine-only")
	}
}

// BenchmarkTaskRead compares a read of a task in memory whose changes are
// committed, with a durable store, as Task (memory as it is) and as
// CommittedTask (what the task(id) query and an event's task read): the
// committed read answers at once too, and costs a second look under the
// lock at most.
func BenchmarkTaskRead(b *testing.B) {
	ctx := context.Background()
	exec := enginetest.NewExecutor()
	e, err := engine.New(engine.Options{Store: enginetest.NewHeldStore(memory.New(memory.Options{})), Executor: exec})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 0) // the attempt stays in flight: do not wait for it
		defer cancel()
		_ = e.Shutdown(sctx)
	})
	task, err := e.Submit(ctx, enginetest.Spec("a").Obj())
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	for _, read := range []struct {
		name string
		fn   func(context.Context, string) (*engine.Task, error)
	}{{"Task", e.Task}, {"CommittedTask", e.CommittedTask}} {
		b.Run(read.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := read.fn(ctx, task.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
