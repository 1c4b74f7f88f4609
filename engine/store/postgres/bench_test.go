package postgres_test

// Benchmarks of the store on the engine's workload, against the SQLite store
// in the same run. PostgreSQL does most of its work in its own processes, so
// besides the wall-clock rates each benchmark reports the CPU time per task
// of this process (cpu-µs/task) and of the local PostgreSQL server
// (pg-cpu-µs/task, from /proc; 0 when the server is not local).
//
//	go test ./engine/store/postgres -run '^$' -bench . -benchtime 2s
//
// The workload mirrors engine/store/sqlite's benchmarks so that the figures
// compare; it is not shared because storetest carries the conformance suite
// only (lifting both into one driver-neutral benchmark suite is a small
// follow-up).

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU sums the CPU time of the local processes named postgres.
func serverCPU() time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		f := strings.Fields(s[end+2:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + sy
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ = 100
}

type storeKind struct {
	name string
	open func(b *testing.B) engine.Store
}

func kinds() []storeKind {
	return []storeKind{
		{"memory", func(*testing.B) engine.Store { return memory.New(memory.Options{}) }},
		{"sqlite-full", func(b *testing.B) engine.Store {
			s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), "bench.db")})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres", func(b *testing.B) engine.Store { return openBenchStore(b) }},
		{"postgres-batch", func(b *testing.B) engine.Store { s := openBenchStore(b); s.SetCopyMin(math.MaxInt); return s }},
		{"postgres-copy", func(b *testing.B) engine.Store { s := openBenchStore(b); s.SetCopyMin(0); return s }},
	}
}

func openBenchStore(b *testing.B) *postgres.Store {
	schema := newSchema(b)
	s, err := postgres.Open(context.Background(), postgres.Options{URL: databaseURL(b), Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// workload produces group commits as the engine makes them. Steady: each
// commit inserts n new QUEUED tasks, dispatches the previous commit's tasks
// and finishes the ones before (n inserts, 2n updates, 4n events). Coalesced:
// each task is committed once, already ended, with its 4 events (an engine
// whose tasks finish faster than it commits).
type workload struct {
	n         int
	coalesced bool
	seq       uint64
	prev      [2][]*engine.Task
}

func (w *workload) next() *engine.Batch {
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
	sortEvents(b.Events) // the fresh tasks' first events came last
	return b
}

func sortEvents(evs []engine.Event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j-1].Seq > evs[j].Seq; j-- {
			evs[j-1], evs[j] = evs[j], evs[j-1]
		}
	}
}

// BenchmarkCommit measures group commits of the engine's workload.
func BenchmarkCommit(b *testing.B) {
	databaseURL(b)
	for _, coalesced := range []bool{false, true} {
		for _, n := range []int{100, 1000} {
			for _, k := range kinds() {
				b.Run(fmt.Sprintf("coalesced=%v/batch=%d/%s", coalesced, n, k.name), func(b *testing.B) {
					s := k.open(b)
					defer s.Close() //nolint:errcheck
					w := &workload{n: n, coalesced: coalesced}
					batches := make([]*engine.Batch, b.N)
					events := 0
					for i := range batches {
						batches[i] = w.next()
						events += len(batches[i].Events)
					}
					ctx := context.Background()
					b.ResetTimer()
					start, cpu0, pg0 := time.Now(), cpuTime(), serverCPU()
					for _, batch := range batches {
						if err := s.Commit(ctx, batch); err != nil {
							b.Fatal(err)
						}
					}
					el := time.Since(start).Seconds()
					tasks := float64(n * b.N)
					b.ReportMetric(tasks/el, "tasks/s")
					b.ReportMetric(float64(events)/el, "events/s")
					b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/tasks, "cpu-µs/task")
					b.ReportMetric(float64((serverCPU()-pg0).Microseconds())/tasks, "pg-cpu-µs/task")
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

// BenchmarkEngineSubmitBatch measures the engine on a store: goroutines
// submit batches of 100 through SubmitBatch (which returns once the batch is
// durable with a durable store), a no-op executor runs every task. accepted/s
// counts tasks whose SubmitBatch returned; e2e/s counts tasks finished and
// committed.
func BenchmarkEngineSubmitBatch(b *testing.B) {
	databaseURL(b)
	for _, workers := range []int{2, 4} {
		for _, k := range kinds() {
			b.Run(fmt.Sprintf("workers=%d/%s", workers, k.name), func(b *testing.B) {
				const size = 100
				batches := max(b.N/size, 1)
				total := batches * size
				x := &countingExecutor{want: int64(total), done: make(chan struct{})}
				s := k.open(b)
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
				start, cpu0, pg0 := time.Now(), cpuTime(), serverCPU()
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
				cpu, pg := cpuTime()-cpu0, serverCPU()-pg0
				b.StopTimer()
				b.ReportMetric(float64(total)/accepted, "accepted/s")
				b.ReportMetric(float64(total)/e2e, "e2e/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(total), "cpu-µs/task")
				b.ReportMetric(float64(pg.Microseconds())/float64(total), "pg-cpu-µs/task")
				_ = e.Shutdown(context.Background())
				_ = s.Close()
			})
		}
	}
}
