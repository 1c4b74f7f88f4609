// Package bench is `switchyard bench`: a load generator that drives the
// GraphQL API over real HTTP and WebSocket connections, against a running
// server or one it starts in-process (memory store, an executor that
// succeeds at once), and reports throughput and latency percentiles.
//
// Modes:
//
//	submit   single submitTask mutations from --concurrency workers
//	batch    submitTasks mutations of --batch items
//	e2e      as batch, but counts the tasks that succeeded in the window
//	         (from the server's stats), not the tasks accepted: end to end
//	fanout   --subscribers WebSocket subscribers to the full task event
//	         stream while tasks are submitted at --rate events per second;
//	         reports deliveries, lag, delivery latency and how the engine
//	         fared (submit latency and dispatch latency, against a baseline
//	         measured without subscribers)
//	mcp      the same browser action as an MCP tool call and through
//	         GraphQL (submitTask, then the task(id) subscription until the
//	         task ends), alternated by each worker: what the MCP path adds
//	forward  the same read of a real instance's tab, directly and through
//	         the scheduler (submitTask naming the tab, then task(id) until
//	         it ends), alternated by each worker: what forwarding adds
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
)

// Options configure a run.
type Options struct {
	Mode        string
	Server      string // a GraphQL endpoint; "" starts a server in-process
	Token       string // sent as Authorization: Bearer to Server (HTTP requests and WebSocket upgrades)
	Duration    time.Duration
	Warmup      time.Duration
	Concurrency int
	Batch       int
	Subscribers int
	Rate        int // fanout: events per second
	Protocol    string
	Feed        bool // fanout: taskEventFeed
	JSON        bool
	Version     string
	CPUProfile  string
	// MemProfile names a file for the process's allocation profile (every
	// allocation since the start, sampled as the runtime does), written
	// after the run.
	MemProfile string
	Listen     string // serve the target only, on this address
	// DatabaseURL is the PostgreSQL database of Store postgres (the bench
	// uses a schema of its own and drops it).
	DatabaseURL string
	// Store is the in-process target's store: memory (default), sqlite or postgres
	// (a fresh file in a temporary directory, synchronous=FULL).
	Store string
	// AcceptOnly pauses the in-process target's lane: tasks are admitted and
	// made durable but not run, which measures acceptance alone.
	AcceptOnly bool
	// InstanceURL and InstanceToken name, for --mode forward against
	// --server, the instance to read from directly; it must be registered
	// with that server.
	InstanceURL   string
	InstanceToken string
}

// Result is what a run measured.
type Result struct {
	Mode        string  `json:"mode"`
	Server      string  `json:"server"`
	Version     string  `json:"version"`
	GoVersion   string  `json:"goVersion"`
	CPUs        int     `json:"cpus"`
	Seconds     float64 `json:"seconds"`
	Concurrency int     `json:"concurrency,omitempty"`
	Batch       int     `json:"batch,omitempty"`

	Requests       uint64  `json:"requests"`
	Tasks          uint64  `json:"tasks"`
	Errors         uint64  `json:"errors"`
	FirstError     string  `json:"firstError,omitempty"`
	RequestsPerSec float64 `json:"requestsPerSec"`
	TasksPerSec    float64 `json:"tasksPerSec"`
	// Accepted is, in e2e mode, the tasks accepted in the window (Tasks
	// counts the tasks that succeeded).
	Accepted uint64   `json:"accepted,omitempty"`
	Latency  *Summary `json:"latencyMs,omitempty"`

	Fanout  *FanoutResult  `json:"fanout,omitempty"`
	MCP     *MCPResult     `json:"mcp,omitempty"`
	Forward *ForwardResult `json:"forward,omitempty"`
}

// Summary is a latency distribution, in milliseconds.
type Summary struct {
	N    int     `json:"n"`
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
}

// printLine prints one indented line of a latency summary, its name padded
// to width; nothing for a nil summary.
func (s *Summary) printLine(w io.Writer, width int, name string) {
	if s != nil {
		fmt.Fprintf(w, "  %-*s p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  (n %d)\n", width, name, s.P50, s.P90, s.P99, s.Max, s.N)
	}
}

func summarize(ds []time.Duration) *Summary {
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	q := func(p float64) float64 {
		i := int(p*float64(len(ds)-1) + 0.5)
		return ms(ds[i])
	}
	return &Summary{N: len(ds), Min: ms(ds[0]), Mean: ms(sum / time.Duration(len(ds))), P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: ms(ds[len(ds)-1])}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Run runs the benchmark and prints its result.
func Run(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if o.Duration <= 0 {
		return errors.New("--duration must be positive")
	}
	if o.Listen != "" {
		_, url, stop, err := startInProcess(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "bench target (%s) at %s\n", o.target(), url)
		<-ctx.Done()
		stop()
		return nil
	}
	endpoint := o.Server
	where := o.Server
	inst := forwardTarget{url: o.InstanceURL, token: o.InstanceToken}
	switch {
	case o.Mode == "forward" && endpoint == "":
		url, local, stop, err := startForwardTarget(ctx, o)
		if err != nil {
			return err
		}
		defer stop()
		store := o.Store
		if store == "" {
			store = "memory"
		}
		endpoint, where, inst = url, "in-process ("+store+" store, the real executor, built-in Chromium) at "+url, local
	case o.Mode == "forward" && inst.url == "":
		return errors.New("--mode forward with --server needs --instance-url (and --instance-token) of an instance registered there")
	case endpoint == "":
		srv, url, stop, err := startInProcess(o)
		if err != nil {
			return err
		}
		defer stop()
		_ = srv
		endpoint, where = url, "in-process ("+o.target()+") at "+url
	}
	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if !o.JSON {
		fmt.Fprintf(stderr, "bench %s against %s for %s (+%s warm-up)\n", o.Mode, where, o.Duration, o.Warmup)
	}
	var (
		res *Result
		err error
	)
	switch o.Mode {
	case "submit":
		res, err = runSubmit(ctx, endpoint, o, false, false)
	case "batch":
		res, err = runSubmit(ctx, endpoint, o, true, false)
	case "e2e":
		if o.AcceptOnly {
			return errors.New("--mode e2e runs the tasks: it cannot be --accept-only")
		}
		res, err = runSubmit(ctx, endpoint, o, true, true)
	case "mcp":
		if o.AcceptOnly {
			return errors.New("--mode mcp waits for the tasks to end: it cannot be --accept-only")
		}
		res, err = runMCP(ctx, endpoint, o)
	case "forward":
		res, err = runForward(ctx, endpoint, inst, o)
	case "fanout":
		res, err = runFanout(ctx, endpoint, o, stderr)
	default:
		return fmt.Errorf("--mode: %q is not submit, batch, e2e, fanout, mcp or forward", o.Mode)
	}
	if err != nil {
		return err
	}
	if o.MemProfile != "" {
		if err := writeAllocs(o.MemProfile); err != nil {
			return err
		}
	}
	res.Mode, res.Server, res.Version = o.Mode, where, o.Version
	res.GoVersion, res.CPUs = runtime.Version(), runtime.NumCPU()
	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printResult(stdout, res)
	return nil
}

func printResult(w io.Writer, r *Result) {
	fmt.Fprintf(w, "mode %s, %.1fs, %d CPUs, %s\n", r.Mode, r.Seconds, r.CPUs, r.GoVersion)
	if r.Mode != "fanout" {
		fmt.Fprintf(w, "  requests   %d (%.0f/s), errors %d\n", r.Requests, r.RequestsPerSec, r.Errors)
		if r.Mode == "e2e" {
			fmt.Fprintf(w, "  succeeded  %d (%.0f/s), accepted %d (%.0f/s)\n", r.Tasks, r.TasksPerSec, r.Accepted, float64(r.Accepted)/r.Seconds)
		} else {
			fmt.Fprintf(w, "  tasks      %d (%.0f/s)\n", r.Tasks, r.TasksPerSec)
		}
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error: %s\n", r.FirstError)
	}
	if s := r.Latency; s != nil {
		fmt.Fprintf(w, "  latency ms p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f, n %d)\n", s.P50, s.P90, s.P99, s.P999, s.Max, s.Mean, s.N)
	}
	if f := r.Fanout; f != nil {
		f.print(w)
	}
	if m := r.MCP; m != nil {
		m.print(w)
	}
	if f := r.Forward; f != nil {
		f.print(w)
	}
}

// target describes the in-process target.
func (o Options) target() string {
	store := o.Store
	if store == "" {
		store = "memory"
	}
	if o.AcceptOnly {
		return store + " store, lane paused: acceptance only"
	}
	return store + " store, no-op executor"
}

// startInProcess starts a server over an engine with the chosen store and
// an executor that succeeds at once, on a loopback port.
func startInProcess(o Options) (*server.Server, string, func(), error) {
	cfg := engine.Config{
		MaxInFlight: 4096, AgentMaxInFlight: 1024, SessionMaxInFlight: 1,
		Lanes:     []engine.LaneConfig{{Name: "main", MaxInFlight: 4096, Paused: o.AcceptOnly, MaxQueued: 10_000_000}},
		MaxQueued: 10_000_000, MaxQueuedPerAgent: 10_000_000,
	}
	store, closeStore, err := openStore(o)
	if err != nil {
		return nil, "", nil, err
	}
	eng, err := engine.New(engine.Options{Config: cfg, Store: store, Executor: engine.NoopExecutor{}})
	if err != nil {
		return nil, "", nil, err
	}
	if err := eng.Start(context.Background()); err != nil {
		return nil, "", nil, err
	}
	srv, err := server.New(server.Options{Engine: eng, Version: o.Version, Logger: hclog.NewNullLogger(),
		// No rate limit: the bench measures the server, not its limit.
		Limits: resolvers.Limits{MaxSubscriberLag: 1 << 16, MutationsPerSecond: -1}})
	if err != nil {
		return nil, "", nil, err
	}
	addr := o.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = eng.Shutdown(ctx)
		closeStore(ctx)
	}
	return srv, "http://" + ln.Addr().String() + "/graphql", stop, nil
}

// openStore opens the in-process target's store (--store): memory, SQLite
// over a temporary file, or PostgreSQL in a temporary schema. closeStore
// closes it and removes the file or the schema.
func openStore(o Options) (store engine.Store, closeStore func(context.Context), err error) {
	var dir, schema string
	switch o.Store {
	case "", "memory":
		store = memory.New(memory.Options{MaxEnded: 200_000})
	case "sqlite":
		if dir, err = os.MkdirTemp("", "switchyard-bench-"); err != nil {
			return nil, nil, err
		}
		if store, err = sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(dir, "bench.db"), PreallocateWAL: true}); err != nil {
			return nil, nil, err
		}
	case "postgres":
		if o.DatabaseURL == "" {
			return nil, nil, errors.New("--store postgres needs --database-url")
		}
		schema = fmt.Sprintf("switchyard_bench_%d", time.Now().UnixNano())
		if store, err = postgres.Open(context.Background(), postgres.Options{URL: o.DatabaseURL, Schema: schema}); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("--store: %q is not memory, sqlite or postgres", o.Store)
	}
	return store, func(ctx context.Context) {
		_ = store.Close()
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
		if schema != "" {
			if err := dropSchema(ctx, o.DatabaseURL, schema); err != nil {
				fmt.Fprintf(os.Stderr, "bench: could not drop the schema %s: %v\n", schema, err)
			}
		}
	}, nil
}

// dropSchema drops the bench's PostgreSQL schema.
func dropSchema(ctx context.Context, url, schema string) error {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx) //nolint:errcheck
	_, err = c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}

// httpClient returns a client that keeps n connections open and sends the
// token, if any, with every request (a WebSocket's upgrade included).
func httpClient(n int, token string) *http.Client {
	var rt http.RoundTripper = &http.Transport{
		MaxIdleConns: n, MaxIdleConnsPerHost: n, MaxConnsPerHost: n, DisableCompression: true,
		IdleConnTimeout: time.Minute,
	}
	if token != "" {
		rt = setHeader{name: "Authorization", value: "Bearer " + token, next: rt}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: rt}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// writeAllocs writes the allocation profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
