// Package storebench benchmarks engine.Store implementations on the engine's
// workload, so that every store's figures come from the same code and
// compare: group commits as the engine makes them (Commit), and the engine
// itself submitting batches onto the store (EngineSubmitBatch). Each store's
// bench_test.go lists the stores to run side by side.
//
// On a shared machine the wall clock is noisy: cpu-µs/task (this process's
// CPU time per task) is the steadier figure. A store whose work happens in
// another process (a database server) adds a Meter for that process's CPU.
package storebench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
)

// Kind is a store to benchmark.
type Kind struct {
	Name string
	Open func(b *testing.B) engine.Store
}

// Meter is a cumulative CPU counter besides this process's, reported per
// task under its Name (a metric unit such as "pg-cpu-µs/task").
type Meter struct {
	Name string
	Read func() time.Duration
}

// ProcessCPU returns the CPU time this process has used.
func ProcessCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpu reads this process's CPU time and every meter's.
func cpu(meters []Meter) []time.Duration {
	out := []time.Duration{ProcessCPU()}
	for _, m := range meters {
		out = append(out, m.Read())
	}
	return out
}

// reportCPU reports the CPU time per task since `since` (from cpu).
func reportCPU(b *testing.B, meters []Meter, since []time.Duration, tasks float64) {
	now := cpu(meters)
	b.ReportMetric(float64((now[0]-since[0]).Microseconds())/tasks, "cpu-µs/task")
	for i, m := range meters {
		b.ReportMetric(float64((now[i+1]-since[i+1]).Microseconds())/tasks, m.Name)
	}
}

// Commit measures group commits of the engine's workload: steady and
// coalesced (see Workload), 10, 100 and 1000 tasks per commit (10 is the
// size of the group commits a single submitTask at concurrency 64 makes
// through the API: ADR 0005, finding 31).
func Commit(b *testing.B, kinds []Kind, meters ...Meter) {
	for _, coalesced := range []bool{false, true} {
		for _, n := range []int{10, 100, 1000} {
			for _, k := range kinds {
				b.Run(fmt.Sprintf("coalesced=%v/batch=%d/%s", coalesced, n, k.Name), func(b *testing.B) {
					s := k.Open(b)
					defer s.Close() //nolint:errcheck
					w := NewWorkload(n, coalesced)
					batches := make([]*engine.Batch, b.N)
					events := 0
					for i := range batches {
						batches[i] = w.Next()
						events += len(batches[i].Events)
					}
					ctx := context.Background()
					b.ResetTimer()
					start, cpu0 := time.Now(), cpu(meters)
					for _, batch := range batches {
						if err := s.Commit(ctx, batch); err != nil {
							b.Fatal(err)
						}
					}
					el := time.Since(start).Seconds()
					tasks := float64(n * b.N)
					b.ReportMetric(tasks/el, "tasks/s")
					b.ReportMetric(float64(events)/el, "events/s")
					reportCPU(b, meters, cpu0, tasks)
				})
			}
		}
	}
}

// countingExecutor succeeds at once and counts finished attempts.
type countingExecutor struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (x *countingExecutor) Start(_ context.Context, run *engine.Run) {
	run.Finish(engine.Outcome{})
	if x.n.Add(1) == x.want {
		close(x.done)
	}
}

// EngineSubmitBatch measures the engine on a store: 2 or 4 goroutines submit
// batches of 100 through SubmitBatch (which returns once the batch is
// durable with a durable store), a no-op executor runs every task.
// accepted/s counts tasks whose SubmitBatch returned; e2e/s counts tasks
// finished and committed.
func EngineSubmitBatch(b *testing.B, kinds []Kind, meters ...Meter) {
	for _, workers := range []int{2, 4} {
		for _, k := range kinds {
			b.Run(fmt.Sprintf("workers=%d/%s", workers, k.Name), func(b *testing.B) {
				const size = 100
				batches := max(b.N/size, 1)
				total := batches * size
				x := &countingExecutor{want: int64(total), done: make(chan struct{})}
				s := k.Open(b)
				e := startEngine(b, s, x)
				specs := make([]engine.BatchSpec, workers)
				for w := range specs {
					for i := range size {
						specs[w].Items = append(specs[w].Items, engine.BatchItem{Spec: engine.TaskSpec{
							AgentID: "agent-" + strconv.Itoa((w*size+i)%100), Action: &engine.Action{Kind: "click"}}})
					}
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start, cpu0 := time.Now(), cpu(meters)
				for w := range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(batches) {
							if _, err := e.SubmitBatch(context.Background(), specs[w]); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				accepted := time.Since(start).Seconds()
				<-x.done
				if err := e.Sync(context.Background()); err != nil {
					b.Fatal(err)
				}
				e2e := time.Since(start).Seconds()
				reportCPU(b, meters, cpu0, float64(total))
				b.StopTimer()
				b.ReportMetric(float64(total)/accepted, "accepted/s")
				b.ReportMetric(float64(total)/e2e, "e2e/s")
				_ = e.Shutdown(context.Background())
				_ = s.Close()
			})
		}
	}
}

// EngineSubmitOne measures the engine on a store under single submissions:
// 64 goroutines each submit one task at a time through SubmitItem (which
// returns once the task is durable with a durable store), a no-op executor
// runs every task. It is the engine's side of `switchyard bench --mode
// submit` (concurrency 64) without the HTTP and GraphQL layers: the group
// commits are as small as that bench makes them. submitted/s counts tasks
// whose SubmitItem returned.
func EngineSubmitOne(b *testing.B, kinds []Kind, meters ...Meter) {
	const callers = 64
	for _, k := range kinds {
		b.Run(fmt.Sprintf("callers=%d/%s", callers, k.Name), func(b *testing.B) {
			total := max(b.N, callers)
			x := &countingExecutor{want: int64(total), done: make(chan struct{})}
			s := k.Open(b)
			e := startEngine(b, s, x)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start, cpu0 := time.Now(), cpu(meters)
			for w := range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					spec := engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(w%4), Action: &engine.Action{Kind: "click"}}
					for next.Add(1) <= int64(total) {
						if _, err := e.SubmitItem(context.Background(), spec); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			submitted := time.Since(start).Seconds()
			<-x.done
			if err := e.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			reportCPU(b, meters, cpu0, float64(total))
			b.StopTimer()
			b.ReportMetric(float64(total)/submitted, "submitted/s")
			_ = e.Shutdown(context.Background())
			_ = s.Close()
		})
	}
}

// startEngine starts an engine over s whose executor is x, with caps no
// benchmark reaches: one lane, main, 256 tasks in flight, 64 an agent.
func startEngine(b *testing.B, s engine.Store, x engine.Executor) *engine.Engine {
	b.Helper()
	cfg := engine.Config{MaxQueued: 10_000_000, MaxQueuedPerAgent: 10_000_000, MaxQueuedPerSession: 1 << 30,
		AgentMaxInFlight: 64, MaxInFlight: 256,
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 256, MaxQueued: 10_000_000}}}
	e, err := engine.New(engine.Options{Config: cfg, Store: s, Executor: x})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return e
}
