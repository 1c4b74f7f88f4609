package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// countingExecutor succeeds at once and signals when a target count of
// attempts has finished.
type countingExecutor struct {
	n      atomic.Int64
	target atomic.Int64
	done   chan struct{}
}

func (x *countingExecutor) Start(_ context.Context, run *engine.Run) {
	run.Finish(engine.Outcome{})
	if x.n.Add(1) == x.target.Load() {
		close(x.done)
	}
}

func (x *countingExecutor) expect(n int64) {
	x.n.Store(0)
	x.target.Store(n)
	x.done = make(chan struct{})
}

func benchEngine(b *testing.B, x engine.Executor, queued int) *engine.Engine {
	b.Helper()
	cfg := engine.Config{
		MaxQueued: queued + 10_000_000, MaxQueuedPerAgent: queued + 10_000_000, MaxQueuedPerSession: 1 << 30,
		AgentMaxInFlight: 64, MaxInFlight: 256,
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 256, MaxQueued: queued + 10_000_000}},
	}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEnded: 100_000}), Executor: x})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

// BenchmarkThroughput measures submit→dispatch→complete through the engine
// API with the built-in policies, a no-op executor and the memory store.
func BenchmarkThroughput(b *testing.B) {
	for _, agents := range []int{10, 1000} {
		b.Run("agents="+strconv.Itoa(agents), func(b *testing.B) {
			x := &countingExecutor{}
			e := benchEngine(b, x, 0)
			x.expect(int64(b.N))
			specs := make([]engine.TaskSpec, agents)
			for i := range specs {
				specs[i] = engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(i), Action: &engine.Action{Kind: "click"}}
			}
			workers := runtime.GOMAXPROCS(0)
			var next atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx := context.Background()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						if _, err := e.Submit(ctx, specs[i%int64(agents)]); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			<-x.done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
		})
	}
}

// BenchmarkDispatchAtDepth measures the cost of one dispatch (and its
// completion) while the queues hold a backlog of the given size spread over
// the given number of agents: the cost should stay flat as both grow.
func BenchmarkDispatchAtDepth(b *testing.B) {
	for _, queued := range []int{1_000, 100_000, 1_000_000} {
		for _, agents := range []int{10, 1_000, 10_000} {
			b.Run(fmt.Sprintf("queued=%d/agents=%d", queued, agents), func(b *testing.B) {
				x := &countingExecutor{}
				e := benchEngine(b, x, queued+b.N)
				paused, running := true, false
				if _, err := e.UpdateLane("main", engine.LaneUpdate{Paused: &paused}); err != nil {
					b.Fatal(err)
				}
				fill(b, e, queued+b.N, agents)
				x.expect(int64(b.N))
				b.ResetTimer()
				if _, err := e.UpdateLane("main", engine.LaneUpdate{Paused: &running}); err != nil {
					b.Fatal(err)
				}
				<-x.done
				b.StopTimer()
				// Stop before the backlog drains further.
				if _, err := e.UpdateLane("main", engine.LaneUpdate{Paused: &paused}); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func fill(b *testing.B, e *engine.Engine, n, agents int) {
	b.Helper()
	batch := engine.BatchSpec{Items: make([]engine.BatchItem, 0, 100)}
	ctx := context.Background()
	for i := 0; i < n; i++ {
		batch.Items = append(batch.Items, engine.BatchItem{Spec: engine.TaskSpec{
			AgentID: "agent-" + strconv.Itoa(i%agents), Action: &engine.Action{Kind: "click"}}})
		if len(batch.Items) == 100 || i == n-1 {
			if _, err := e.SubmitBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch.Items = batch.Items[:0]
		}
	}
}

// BenchmarkMemoryPerQueuedTask reports the heap held per queued task.
func BenchmarkMemoryPerQueuedTask(b *testing.B) {
	const n = 200_000
	for range b.N {
		x := &countingExecutor{}
		e := benchEngine(b, x, n)
		paused := true
		if _, err := e.UpdateLane("main", engine.LaneUpdate{Paused: &paused}); err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fill(b, e, n, 1000)
		if err := e.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/queued-task")
	}
}
