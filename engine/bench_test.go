package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

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
