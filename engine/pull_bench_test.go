package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// outsideFairShare is the built-in fair share in a type the engine does not
// know as inline: it decides outside the engine lock, as a plugin does,
// without a module's own cost.
type outsideFairShare struct{ fs fairshare.Fairness }

func (f *outsideFairShare) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	return f.fs.Pick(ctx, cands, picks)
}

// BenchmarkPull measures what a worker's lease costs the engine: Engine.Pull
// of up to max tasks of a pull lane (ten agents' queues), then the end of
// each attempt, on an asynchronous engine over the memory store. One op is
// one task. policy=native is the built-in fair share; policy=outside a
// fairness policy that decides outside the engine lock.
func BenchmarkPull(b *testing.B) {
	for _, pol := range []string{"native", "outside"} {
		for _, max := range []int{1, 16} {
			b.Run(fmt.Sprintf("policy=%s/max=%d", pol, max), func(b *testing.B) {
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
				if pol == "outside" {
					if err := e.SetFairness("outside", &outsideFairShare{}); err != nil {
						b.Fatal(err)
					}
				}
				for i := range b.N {
					if _, err := e.Submit(ctx, enginetest.Spec(fmt.Sprintf("a%d", i%10)).Lane("jobs").Action("job").Obj()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; {
					runs, err := e.Pull(ctx, "jobs", max, time.Minute, "bench")
					if err != nil {
						b.Fatal(err)
					}
					if len(runs) == 0 {
						b.Fatalf("nothing to lease after %d of %d tasks", done, b.N)
					}
					for _, r := range runs {
						r.Finish(engine.Outcome{})
					}
					done += len(runs)
				}
			})
		}
	}
}
