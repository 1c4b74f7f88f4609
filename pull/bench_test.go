package pull_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/pull"
)

// BenchmarkLeaseAndComplete measures a worker's round trip per task on an
// asynchronous engine over the memory store: tasks are leased max at a time
// and each completed. One op is one task.
func BenchmarkLeaseAndComplete(b *testing.B) {
	for _, max := range []int{1, 100} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			jobs := engine.NewLane("jobs")
			jobs.Pull, jobs.MaxInFlight, jobs.MaxQueued = true, 1000, 10_000_000
			e, err := engine.New(engine.Options{Config: engine.Config{MaxInFlight: 1000, AgentMaxInFlight: 1000, MaxQueued: 10_000_000,
				MaxQueuedPerAgent: 10_000_000, Lanes: []engine.LaneConfig{jobs}}, Store: memory.New(memory.Options{}), Executor: engine.NoopExecutor{}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if err := e.Start(ctx); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = e.Shutdown(ctx) }()
			m, err := pull.New(ctx, pull.Options{Engine: e})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			for range b.N {
				if _, err := e.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj()); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for done := 0; done < b.N; {
				ls, err := m.Lease(ctx, "jobs", max, time.Minute, 0, "bench")
				if err != nil {
					b.Fatal(err)
				}
				for _, l := range ls {
					if _, err := m.Complete(ctx, l.ID, nil); err != nil {
						b.Fatal(err)
					}
				}
				done += len(ls)
			}
		})
	}
}
