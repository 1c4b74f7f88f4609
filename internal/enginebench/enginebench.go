// Package enginebench measures the engine through its Go API: throughput of
// submit → dispatch → complete with a no-op executor, per-dispatch cost at a
// given backlog, memory per queued task, and the latency from a submission
// to the executor's call at a steady rate. The Go benchmarks and
// `switchyard bench --engine` both use it, so the figures in notes and in CI
// come from one place.
package enginebench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// Setup prepares an engine before the measurement (policies, say).
type Setup func(e *engine.Engine) error

// counting is a no-op executor that signals when a target number of
// attempts has finished, and can timestamp each start.
type counting struct {
	n      atomic.Int64
	target atomic.Int64
	done   chan struct{}
	starts func(run *engine.Run)
}

func (x *counting) Start(_ context.Context, run *engine.Run) {
	if x.starts != nil {
		x.starts(run)
	}
	run.Finish(engine.Outcome{})
	if x.n.Add(1) == x.target.Load() {
		close(x.done)
	}
}

func (x *counting) expect(n int64) {
	x.n.Store(0)
	x.done = make(chan struct{})
	x.target.Store(n)
}

func newEngine(x engine.Executor, queued int) (*engine.Engine, error) {
	capacity := queued + 10_000_000
	cfg := engine.Config{
		MaxQueued: capacity, MaxQueuedPerAgent: capacity, MaxQueuedPerSession: capacity,
		AgentMaxInFlight: 64, MaxInFlight: 256,
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 256, MaxQueued: capacity}},
	}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEnded: 50_000}), Executor: x})
	if err != nil {
		return nil, err
	}
	return e, e.Start(context.Background())
}

// Throughput is the result of a throughput run.
type Throughput struct {
	Tasks       int           `json:"tasks"`
	Agents      int           `json:"agents"`
	Elapsed     time.Duration `json:"elapsedNs"`
	TasksPerSec float64       `json:"tasksPerSec"`
	// CPUPerTask is the process's CPU time (every goroutine's, the
	// collector's) during the run, per task: unlike TasksPerSec it does not
	// count the time the process waited for a core, so it moves less with
	// the machine's other load. 0 where the system does not report it.
	CPUPerTask time.Duration `json:"cpuPerTaskNs"`
}

// RunThroughput submits n tasks from `submitters` goroutines spread over
// `agents` agents and waits until every one has completed.
func RunThroughput(ctx context.Context, n, agents, submitters int, setup Setup) (Throughput, error) {
	x := &counting{}
	e, err := newEngine(x, 0)
	if err != nil {
		return Throughput{}, err
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	if setup != nil {
		if err := setup(e); err != nil {
			return Throughput{}, err
		}
	}
	specs := make([]engine.TaskSpec, agents)
	for i := range specs {
		specs[i] = engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(i), Action: &engine.Action{Kind: "click"}}
	}
	x.expect(int64(n))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, submitters)
	cpu := processCPU()
	start := time.Now()
	for range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := e.Submit(ctx, specs[i%int64(agents)]); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return Throughput{}, err
	default:
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		return Throughput{}, ctx.Err()
	}
	el := time.Since(start)
	t := Throughput{Tasks: n, Agents: agents, Elapsed: el, TasksPerSec: float64(n) / el.Seconds()}
	if cpu > 0 {
		t.CPUPerTask = (processCPU() - cpu) / time.Duration(n)
	}
	return t, nil
}

// AtDepth is the result of a per-dispatch cost run.
type AtDepth struct {
	Queued        int           `json:"queued"`
	Agents        int           `json:"agents"`
	Dispatches    int           `json:"dispatches"`
	PerDispatch   time.Duration `json:"perDispatchNs"`
	DispatchesSec float64       `json:"dispatchesPerSec"`
}

// RunAtDepth fills the queues with `queued` tasks (plus those measured) over
// `agents` agents while the lane is paused, then measures how long n
// dispatches and completions take with the backlog in place. It measures
// `rounds` times over the same backlog (filled for all of them) and keeps
// the fastest, so that a noisy neighbour on the machine does not decide the
// figure.
func RunAtDepth(ctx context.Context, queued, agents, n, rounds int, setup Setup) (AtDepth, error) {
	rounds = max(rounds, 1)
	x := &counting{}
	fill := queued + n + (rounds-1)*(n+n/2) // a round dispatches a little more than n before the pause lands
	e, err := newEngine(x, fill)
	if err != nil {
		return AtDepth{}, err
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	if setup != nil {
		if err := setup(e); err != nil {
			return AtDepth{}, err
		}
	}
	paused, running := true, false
	if _, err := e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &paused}); err != nil {
		return AtDepth{}, err
	}
	if err := Fill(ctx, e, fill, agents); err != nil {
		return AtDepth{}, err
	}
	best := time.Duration(1<<63 - 1)
	for range rounds {
		if e.Stats(ctx).Pending < queued+n {
			break // the rounds before dispatched more than n while pausing
		}
		runtime.GC()
		x.expect(int64(n))
		start := time.Now()
		if _, err := e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &running}); err != nil {
			return AtDepth{}, err
		}
		select {
		case <-x.done:
		case <-ctx.Done():
			return AtDepth{}, ctx.Err()
		}
		best = min(best, time.Since(start))
		if _, err := e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &paused}); err != nil {
			return AtDepth{}, err
		}
		for e.Stats(ctx).InFlight > 0 { // let the attempts under way finish
			time.Sleep(time.Millisecond)
		}
	}
	return AtDepth{Queued: queued, Agents: agents, Dispatches: n, PerDispatch: best / time.Duration(n), DispatchesSec: float64(n) / best.Seconds()}, nil
}

// Fill submits n tasks over the given number of agents in batches of 100.
func Fill(ctx context.Context, e *engine.Engine, n, agents int) error {
	batch := engine.BatchSpec{Items: make([]engine.BatchItem, 0, 100)}
	for i := 0; i < n; i++ {
		batch.Items = append(batch.Items, engine.BatchItem{Spec: engine.TaskSpec{
			AgentID: "agent-" + strconv.Itoa(i%agents), Action: &engine.Action{Kind: "click"}}})
		if len(batch.Items) == 100 || i == n-1 {
			res, err := e.SubmitBatch(ctx, batch)
			if err != nil {
				return err
			}
			for _, it := range res.Items {
				if it.Err != nil {
					return fmt.Errorf("filling the queues: %w", it.Err)
				}
			}
			batch.Items = batch.Items[:0]
		}
	}
	return nil
}

// MemoryPerQueuedTask returns the heap held per queued task, with n queued:
// by the engine and the memory store together, and by the engine alone (with
// a store that keeps nothing in memory, as the SQLite and PostgreSQL stores
// keep their copy on disk).
func MemoryPerQueuedTask(ctx context.Context, n int) (withMemoryStore, engineOnly float64, err error) {
	withMemoryStore, err = memoryPerQueuedTask(ctx, n, memory.New(memory.Options{}))
	if err != nil {
		return 0, 0, err
	}
	engineOnly, err = memoryPerQueuedTask(ctx, n, discard{})
	return withMemoryStore, engineOnly, err
}

func memoryPerQueuedTask(ctx context.Context, n int, store engine.Store) (float64, error) {
	capacity := n + 1000
	cfg := engine.Config{MaxQueued: capacity, MaxQueuedPerAgent: capacity,
		Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 256, MaxQueued: capacity}}}
	e, err := engine.New(engine.Options{Config: cfg, Store: store, Executor: &counting{}})
	if err != nil {
		return 0, err
	}
	if err := e.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	paused := true
	if _, err := e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &paused}); err != nil {
		return 0, err
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := Fill(ctx, e, n, 1000); err != nil {
		return 0, err
	}
	if err := e.Sync(ctx); err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(e)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n), nil
}

// Latency is the result of a paced latency run.
type Latency struct {
	Rate     int           `json:"ratePerSec"`
	Tasks    int           `json:"tasks"`
	P50      time.Duration `json:"p50Ns"`
	P99      time.Duration `json:"p99Ns"`
	P999     time.Duration `json:"p999Ns"`
	Max      time.Duration `json:"maxNs"`
	Achieved float64       `json:"achievedPerSec"`
}

// RunLatency submits at a steady rate for the given duration and measures
// from the moment each Submit is called to the moment the executor is asked
// to start the task.
func RunLatency(ctx context.Context, rate int, d time.Duration, setup Setup) (Latency, error) {
	n := int(float64(rate) * d.Seconds())
	submitted := make([]int64, n)
	started := make([]int64, n)
	x := &counting{}
	x.starts = func(run *engine.Run) {
		if i, err := strconv.Atoi(run.Spec().Labels["i"]); err == nil && i < n {
			started[i] = time.Now().UnixNano()
		}
	}
	e, err := newEngine(x, 0)
	if err != nil {
		return Latency{}, err
	}
	defer func() { _ = e.Shutdown(context.Background()) }()
	if setup != nil {
		if err := setup(e); err != nil {
			return Latency{}, err
		}
	}
	x.expect(int64(n))
	specs := make([]engine.TaskSpec, n)
	for i := range specs {
		specs[i] = engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(i%10), Action: &engine.Action{Kind: "click"},
			Labels: map[string]string{"i": strconv.Itoa(i)}}
	}
	interval := time.Second / time.Duration(rate)
	begin := time.Now()
	for i := range n {
		// Sleep, never spin, until each submission is due: a spinning
		// submitter would hold one of the machine's two cores and make the
		// engine's goroutines wait for preemption.
		if wait := time.Until(begin.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		submitted[i] = time.Now().UnixNano()
		if _, err := e.Submit(ctx, specs[i]); err != nil {
			return Latency{}, err
		}
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		return Latency{}, ctx.Err()
	}
	el := time.Since(begin)
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = time.Duration(started[i] - submitted[i])
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(int(p*float64(n)), n-1)] }
	return Latency{Rate: rate, Tasks: n, P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: lat[n-1], Achieved: float64(n) / el.Seconds()}, nil
}

// discard is a store that keeps nothing: it lets MemoryPerQueuedTask count
// the engine's own memory, which is what a durable store leaves in memory.
type discard struct{}

func (discard) Durable() bool                                  { return false }
func (discard) Load(context.Context) (*engine.Snapshot, error) { return &engine.Snapshot{}, nil }
func (discard) Commit(context.Context, *engine.Batch) error    { return nil }
func (discard) Task(context.Context, string) (*engine.Task, error) {
	return nil, engine.ErrNotFound
}
func (discard) Tasks(context.Context, engine.TaskQuery) ([]*engine.Task, error) { return nil, nil }
func (discard) CountTasks(context.Context, engine.TaskFilter) (map[engine.State]int, error) {
	return nil, nil
}
func (discard) Batch(context.Context, string) (*engine.BatchInfo, error) {
	return nil, engine.ErrNotFound
}
func (discard) FindIdempotent(context.Context, string, string) (*engine.Task, error) {
	return nil, engine.ErrNotFound
}
func (discard) Events(context.Context, uint64, int) ([]engine.Event, error) { return nil, nil }
func (discard) Purge(context.Context, time.Time, int) (int, error)          { return 0, nil }
func (discard) Close() error                                                { return nil }
