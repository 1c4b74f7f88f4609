// Command riverbench compares Switchyard's durable path on PostgreSQL with
// River's (github.com/riverqueue/river, the leading Go job queue on
// PostgreSQL) on the same database, in the same process, alternating the two
// in rounds so that both see the same load on a shared machine. It prints
// one table of medians. It is a module of its own so that River never
// becomes a dependency of Switchyard. Run it with:
//
//	cd engine/store/postgres/riverbench
//	go run . -database-url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//
// Both sides use their Go API (no HTTP): `switchyard bench` measures the
// GraphQL layer on top. The workloads:
//
//   - insert: one task at a time from one caller (Engine.Submit / Client.Insert),
//     with latency percentiles;
//   - batch: batches of -batch tasks from -callers callers
//     (Engine.SubmitBatch / Client.InsertMany);
//   - e2e: the same batches while workers run them (a no-op executor / a
//     worker that returns nil), counting the tasks that completed.
//
// Each side gets a fresh schema per round, dropped afterwards.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

type options struct {
	url      string
	duration time.Duration
	warmup   time.Duration
	rounds   int
	batch    int
	callers  int
	workers  int
	only     string
	profile  string
	side     string
}

func main() {
	var o options
	flag.StringVar(&o.url, "database-url", os.Getenv("SWITCHYARD_DATABASE_URL"), "the PostgreSQL database (default $SWITCHYARD_DATABASE_URL)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "how long each measurement loads")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "load before each measurement")
	flag.IntVar(&o.rounds, "rounds", 3, "alternating rounds (the table shows medians)")
	flag.IntVar(&o.batch, "batch", 100, "tasks per batch")
	flag.IntVar(&o.callers, "callers", 8, "concurrent batch callers")
	flag.IntVar(&o.workers, "workers", 1000, "River's MaxWorkers for e2e (Switchyard's in-flight ceiling is 4096)")
	flag.StringVar(&o.only, "only", "", "run one workload only: insert, batch or e2e")
	flag.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&o.side, "side", "", "run one side only: switchyard or river")
	flag.Parse()
	if o.url == "" {
		fmt.Fprintln(os.Stderr, "riverbench: -database-url is required")
		os.Exit(2)
	}
	if o.profile != "" {
		f, err := os.Create(o.profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "riverbench:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "riverbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// result is one measurement.
type result struct {
	perSec   float64 // tasks (or jobs) per second
	p50, p99 float64 // per call, ms
	// CPU per task, in µs: this process's (both sides run in it, one at a
	// time) and the PostgreSQL backends serving this side's connections.
	// On a shared machine they are steadier than the rates.
	cpu, pgCPU float64
}

// system is one side of the comparison.
type system interface {
	name() string
	// appName is the application_name of the side's connections.
	appName() string
	// setUp prepares a fresh schema; e2e starts the workers.
	setUp(ctx context.Context, e2e bool) error
	insert(ctx context.Context) error
	insertMany(ctx context.Context, n int) error
	completed() uint64
	tearDown(ctx context.Context)
}

func run(ctx context.Context, o options) error {
	systems := []system{&switchyard{url: o.url}, &riverSide{url: o.url, workers: o.workers}}
	switch o.side {
	case "switchyard":
		systems = systems[:1]
	case "river":
		systems = systems[1:]
	}
	workloads := []string{"insert", "batch", "e2e"}
	if o.only != "" {
		workloads = []string{o.only}
	}
	all := map[string]map[string][]result{}
	for round := 0; round < o.rounds; round++ {
		for _, w := range workloads {
			order := slices.Clone(systems)
			if round%2 == 1 { // alternate who goes first
				slices.Reverse(order)
			}
			for _, s := range order {
				r, err := measure(ctx, s, w, o)
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.name(), w, err)
				}
				fmt.Fprintf(os.Stderr, "round %d %-10s %-7s %9.0f/s  p50 %7.2f ms  p99 %7.2f ms  cpu %5.1f + pg %5.1f µs/task\n",
					round+1, s.name(), w, r.perSec, r.p50, r.p99, r.cpu, r.pgCPU)
				if all[w] == nil {
					all[w] = map[string][]result{}
				}
				all[w][s.name()] = append(all[w][s.name()], r)
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "workload\tSwitchyard/s\tp50 ms\tp99 ms\tcpu+pg µs\tRiver/s\tp50 ms\tp99 ms\tcpu+pg µs\tratio\t\n")
	for _, w := range workloads {
		sy, rv := median(all[w]["switchyard"]), median(all[w]["river"])
		ratio := 0.0
		if rv.perSec > 0 {
			ratio = sy.perSec / rv.perSec
		}
		label := w
		switch w {
		case "insert":
			label = "insert, 1 caller"
		case "batch":
			label = fmt.Sprintf("batch of %d, %d callers", o.batch, o.callers)
		case "e2e":
			label = fmt.Sprintf("end to end, %d callers", o.callers)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.0f+%.0f\t%.0f\t%.2f\t%.2f\t%.0f+%.0f\t%.2f\t\n", label, sy.perSec, sy.p50, sy.p99, sy.cpu, sy.pgCPU,
			rv.perSec, rv.p50, rv.p99, rv.cpu, rv.pgCPU, ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Printf("medians of %d alternating rounds of %s each; cpu+pg: µs of CPU per task in this process and in the PostgreSQL backends serving it\n",
		o.rounds, o.duration)
	return nil
}

// median takes each column's median on its own.
func median(rs []result) result {
	col := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v) == 0 {
			return 0
		}
		return v[len(v)/2]
	}
	return result{perSec: col(func(r result) float64 { return r.perSec }), p50: col(func(r result) float64 { return r.p50 }),
		p99: col(func(r result) float64 { return r.p99 }), cpu: col(func(r result) float64 { return r.cpu }),
		pgCPU: col(func(r result) float64 { return r.pgCPU })}
}

// measure runs one workload against one system.
func measure(ctx context.Context, s system, workload string, o options) (result, error) {
	e2e := workload == "e2e"
	if err := s.setUp(ctx, e2e); err != nil {
		return result{}, err
	}
	defer s.tearDown(ctx)
	callers, size := o.callers, o.batch
	call := func(ctx context.Context) error { return s.insertMany(ctx, size) }
	if workload == "insert" {
		callers, size = 1, 1
		call = s.insert
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		measuring atomic.Bool
		done      atomic.Uint64
		mu        sync.Mutex
		lat       []time.Duration
		firstErr  error
		wg        sync.WaitGroup
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for ctx.Err() == nil {
				start := time.Now()
				err := call(ctx)
				took := time.Since(start)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						cancel()
					}
					break
				}
				if measuring.Load() {
					mine = append(mine, took)
					done.Add(uint64(size))
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	sleep(ctx, o.warmup)
	c0 := s.completed()
	cpu0, pg0 := processCPU(), backendCPU(ctx, o.url, s.appName(), nil)
	measuring.Store(true)
	start := time.Now()
	sleep(ctx, o.duration)
	measuring.Store(false)
	c1 := s.completed()
	elapsed := time.Since(start)
	cpu1, pg1 := processCPU(), backendCPU(ctx, o.url, s.appName(), pg0)
	cancel()
	wg.Wait()
	if firstErr != nil {
		return result{}, firstErr
	}
	r := result{perSec: float64(done.Load()) / elapsed.Seconds()}
	tasks := float64(done.Load())
	if e2e {
		tasks = float64(c1 - c0)
		r.perSec = tasks / elapsed.Seconds()
	}
	if tasks > 0 {
		r.cpu = float64((cpu1 - cpu0).Microseconds()) / tasks
		var pg time.Duration
		for _, d := range pg1 {
			pg += d
		}
		r.pgCPU = float64(pg.Microseconds()) / tasks
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.p50 = ms(lat[n/2])
		r.p99 = ms(lat[min(n-1, n*99/100)])
	}
	return r, nil
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// backendCPU reads, from /proc (a local server), the CPU time of the
// backends whose application_name is app, less what since recorded for
// each: the PostgreSQL work done for one side, apart from other users of
// the server. Nil when the server is not local.
func backendCPU(ctx context.Context, url, app string, since map[int]time.Duration) map[int]time.Duration {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil
	}
	defer c.Close(ctx) //nolint:errcheck
	rows, err := c.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(raw)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		sy, _ := strconv.ParseInt(f[12], 10, 64)
		out[int(pid)] = time.Duration(u+sy)*10*time.Millisecond - since[int(pid)] // USER_HZ = 100
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// freshSchema returns a schema name no earlier round used.
func freshSchema(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
}

func dropSchema(ctx context.Context, url, schema string) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverbench: drop schema:", err)
		return
	}
	defer c.Close(ctx) //nolint:errcheck
	if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		fmt.Fprintln(os.Stderr, "riverbench: drop schema:", err)
	}
}

// switchyard is the engine over the PostgreSQL store, with an executor
// that succeeds at once; a paused lane when only acceptance is measured.
type switchyard struct {
	url    string
	schema string
	store  *postgres.Store
	eng    *engine.Engine
}

func (s *switchyard) name() string { return "switchyard" }

func (s *switchyard) appName() string { return "riverbench-switchyard" }

func (s *switchyard) setUp(ctx context.Context, e2e bool) error {
	s.schema = freshSchema("sy_riverbench")
	st, err := postgres.Open(ctx, postgres.Options{URL: s.url, Schema: s.schema, ConfigurePool: func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["application_name"] = s.appName()
	}})
	if err != nil {
		return err
	}
	s.store = st
	cfg := engine.Config{
		MaxInFlight: 4096, AgentMaxInFlight: 4096, SessionMaxInFlight: 1,
		Lanes:     []engine.LaneConfig{{Name: "main", MaxInFlight: 4096, Paused: !e2e, MaxQueued: 10_000_000}},
		MaxQueued: 10_000_000, MaxQueuedPerAgent: 10_000_000,
	}
	s.eng, err = engine.New(engine.Options{Config: cfg, Store: st, Executor: engine.NoopExecutor{}})
	if err != nil {
		return err
	}
	return s.eng.Start(ctx)
}

var action = &engine.Action{Kind: "click", Selector: "css:#go", Params: json.RawMessage(`{"n":1}`)}

func (s *switchyard) insert(ctx context.Context) error {
	_, err := s.eng.Submit(ctx, engine.TaskSpec{AgentID: "bench", Action: action})
	return err
}

func (s *switchyard) insertMany(ctx context.Context, n int) error {
	items := make([]engine.BatchItem, n)
	for i := range items {
		items[i].Spec = engine.TaskSpec{AgentID: "bench", Action: action}
	}
	res, err := s.eng.SubmitBatch(ctx, engine.BatchSpec{Items: items})
	if err != nil {
		return err
	}
	for _, it := range res.Items {
		if it.Err != nil {
			return it.Err
		}
	}
	return nil
}

func (s *switchyard) completed() uint64 {
	return s.eng.Stats(context.Background()).Ended[engine.StateSucceeded]
}

func (s *switchyard) tearDown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = s.eng.Shutdown(ctx)
	_ = s.store.Close()
	dropSchema(ctx, s.url, s.schema)
}

// riverSide is a River client with riverpgxv5 on its own schema.
type riverSide struct {
	url     string
	workers int
	schema  string
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	started bool
	done    atomic.Uint64
}

func (r *riverSide) name() string { return "river" }

func (r *riverSide) appName() string { return "riverbench-river" }

// noopArgs is River's job: it does nothing, like Switchyard's no-op executor.
type noopArgs struct {
	Selector string `json:"selector"`
	N        int    `json:"n"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	done *atomic.Uint64
}

func (w *noopWorker) Work(context.Context, *river.Job[noopArgs]) error {
	w.done.Add(1)
	return nil
}

func (r *riverSide) setUp(ctx context.Context, e2e bool) error {
	r.schema = freshSchema("river_riverbench")
	cfg, err := pgxpool.ParseConfig(r.url)
	if err != nil {
		return err
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.RuntimeParams["application_name"] = r.appName()
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return err
	}
	if _, err := r.pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{r.schema}.Sanitize()); err != nil {
		return err
	}
	driver := riverpgxv5.New(r.pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: r.schema})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{done: &r.done})
	// River logs a canceled insert notification when a round stops: quiet.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))
	rc := &river.Config{Schema: r.schema, Workers: workers, Logger: quiet}
	if e2e {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: r.workers}}
		// Short fetch intervals, so that River's workers never idle waiting
		// for the next poll (the defaults are 100 ms and 1 s).
		rc.FetchCooldown = 2 * time.Millisecond
		rc.FetchPollInterval = 20 * time.Millisecond
	}
	if r.client, err = river.NewClient(driver, rc); err != nil {
		return err
	}
	r.started = e2e
	if e2e {
		return r.client.Start(ctx)
	}
	return nil
}

func (r *riverSide) insert(ctx context.Context) error {
	_, err := r.client.Insert(ctx, noopArgs{Selector: "css:#go", N: 1}, nil)
	return err
}

func (r *riverSide) insertMany(ctx context.Context, n int) error {
	ps := make([]river.InsertManyParams, n)
	for i := range ps {
		ps[i].Args = noopArgs{Selector: "css:#go", N: i}
	}
	_, err := r.client.InsertMany(ctx, ps)
	return err
}

// completed counts jobs whose completion River has recorded: Work returning
// is counted by the worker, and River's completer writes it shortly after
// in batches, so over a window of seconds the two agree.
func (r *riverSide) completed() uint64 { return r.done.Load() }

func (r *riverSide) tearDown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if r.started {
		_ = r.client.Stop(ctx)
	}
	r.pool.Close()
	dropSchema(ctx, r.url, r.schema)
}
