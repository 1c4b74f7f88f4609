// The forward mode: what forwarding through the scheduler adds to a browser
// action. The same read (a tab's title) is sent directly to a real instance
// and through Switchyard — submitTask naming the tab, then the task(id)
// subscription until the task ends, as a client waits for it — alternated by
// every worker in one run, so that both paths meet the same machine load.
// Without --server, the bench starts its own target: a server with the real
// executor over the built-in Chromium instance (found on the system), over
// the store --store names (memory by default).

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
)

// ForwardResult is what the forward mode measured, in milliseconds.
type ForwardResult struct {
	Direct  *Summary `json:"direct"`  // GET /tabs/{id}/title on the instance
	Through *Summary `json:"through"` // submitTask + task(id) until SUCCEEDED
	Submit  *Summary `json:"submit"`  // the submitTask mutation alone
	// AddedP50Ms and AddedP99Ms are the paired differences (through − direct
	// of the same round), at p50 and p99: what the scheduler adds.
	AddedP50Ms float64 `json:"addedP50Ms"`
	AddedP99Ms float64 `json:"addedP99Ms"`
}

func (f *ForwardResult) print(w io.Writer) {
	line := func(name string, s *Summary) { s.printLine(w, 16, name) }
	fmt.Fprintln(w, "  latency ms, request to the answer in the client's hands:")
	line("direct", f.Direct)
	line("through switchyard", f.Through)
	line("(submit only)", f.Submit)
	fmt.Fprintf(w, "  forwarding adds %.3f ms at p50, %.3f ms at p99 (paired per round); p99 through − p99 direct %.3f ms\n",
		f.AddedP50Ms, f.AddedP99Ms, f.Through.P99-f.Direct.P99)
}

// forwardTarget is the instance the forward mode reads from directly.
type forwardTarget struct {
	url, token string
}

// startForwardTarget starts a server whose executor forwards to the built-in
// Chromium instance.
func startForwardTarget(ctx context.Context, o Options) (endpoint string, inst forwardTarget, stop func(), err error) {
	path, ok := chromium.Find()
	if !ok {
		return "", forwardTarget{}, nil, errors.New("--mode forward without --server needs Chromium (looked for /usr/bin/chromium and chromium on PATH)")
	}
	local, err := chromium.Start(ctx, chromium.Options{ExecPath: path})
	if err != nil {
		return "", forwardTarget{}, nil, fmt.Errorf("start chromium: %w", err)
	}
	reg := executor.NewRegistry(executor.RegistryOptions{})
	if _, err := reg.Register(ctx, executor.InstanceConfig{ID: "local", URL: local.URL(), Token: local.Token(), Capacity: 64}); err != nil {
		return "", forwardTarget{}, nil, err
	}
	exec, err := executor.New(executor.Options{Registry: reg})
	if err != nil {
		return "", forwardTarget{}, nil, err
	}
	store, closeStore, err := openStore(o)
	if err != nil {
		return "", forwardTarget{}, nil, err
	}
	eng, err := engine.New(engine.Options{Store: store, Executor: exec, TabLocator: reg, PlaceOnInstances: true, Config: engine.Config{
		MaxInFlight: 1024, AgentMaxInFlight: 1024, Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1024}}}})
	if err != nil {
		return "", forwardTarget{}, nil, err
	}
	if err := eng.Start(ctx); err != nil {
		return "", forwardTarget{}, nil, err
	}
	reg.SetSink(eng)
	srv, err := server.New(server.Options{Engine: eng, Registry: reg, Version: o.Version, Logger: hclog.NewNullLogger(),
		// No rate limit: the bench measures the server, not its limit.
		Limits: resolvers.Limits{MaxSubscriberLag: 1 << 16, MutationsPerSecond: -1}})
	if err != nil {
		return "", forwardTarget{}, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", forwardTarget{}, nil, err
	}
	go func() { _ = srv.Serve(ln) }()
	// Work is placed only on a healthy instance: wait for the first check.
	for deadline := time.Now().Add(30 * time.Second); ; {
		if in, _ := reg.Get(ctx, "local"); in.Health == executor.HealthHealthy {
			break
		}
		if time.Now().After(deadline) {
			return "", forwardTarget{}, nil, errors.New("the local instance did not become healthy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		_ = eng.Shutdown(sctx)
		closeStore(sctx)
		_ = exec.Close()
		reg.Close()
		_ = local.Close()
	}
	return "http://" + ln.Addr().String() + "/graphql", forwardTarget{url: local.URL(), token: local.Token()}, stop, nil
}

// runForward runs the forward mode against endpoint, reading directly from
// inst.
func runForward(ctx context.Context, endpoint string, inst forwardTarget, o Options) (*Result, error) {
	n := o.Concurrency
	if n <= 0 {
		n = 1 // light load: the figure is the scheduler's own cost
	}
	direct, err := pinchtab.New(inst.url, inst.token)
	if err != nil {
		return nil, fmt.Errorf("--instance-url: %w", err)
	}
	hc := httpClient(2*n, o.Token)
	type worker struct {
		gql *client.Client
		tab string
	}
	workers := make([]*worker, n)
	for i := range workers {
		opened, err := direct.OpenTab(ctx, "about:blank")
		if err != nil {
			return nil, fmt.Errorf("open a tab on the instance: %w", err)
		}
		defer direct.CloseTab(context.Background(), opened.TabID) //nolint:errcheck
		w := &worker{gql: client.New(endpoint), tab: opened.TabID}
		w.gql.HTTP = hc
		workers[i] = w
	}

	r := measureRounds(ctx, n, o.Warmup, o.Duration, func(ctx context.Context, i int) ([]time.Duration, error) {
		w := workers[i]
		t0 := time.Now()
		if _, err := direct.Read(ctx, w.tab, "title", nil); err != nil {
			return nil, fmt.Errorf("direct: %w", err)
		}
		d := time.Since(t0)
		th, sub, err := throughSwitchyard(ctx, w.gql, fmt.Sprintf("bench-forward-%d", i), w.tab)
		if err != nil {
			return nil, err
		}
		return []time.Duration{d, th, sub, th - d}, nil
	})
	calls := 2 * r.count
	res := &Result{Seconds: r.seconds, Concurrency: n, Requests: calls, Tasks: r.count, Errors: r.errs, FirstError: r.firstErr,
		RequestsPerSec: float64(calls) / r.seconds, TasksPerSec: float64(r.count) / r.seconds}
	f := &ForwardResult{Direct: summarize(r.figure(0)), Through: summarize(r.figure(1)), Submit: summarize(r.figure(2))}
	if added := r.figure(3); len(added) > 0 {
		sort.Slice(added, func(i, j int) bool { return added[i] < added[j] })
		f.AddedP50Ms = ms(added[len(added)*50/100])
		f.AddedP99Ms = ms(added[min(len(added)*99/100, len(added)-1)])
	}
	if f.Direct == nil || f.Through == nil {
		return nil, fmt.Errorf("no round completed (first error: %s)", r.firstErr)
	}
	res.Forward = f
	return res, nil
}

// throughSwitchyard reads the tab's title through the scheduler: submitTask,
// then follow the task until it ends. It returns the whole and the mutation
// alone.
func throughSwitchyard(ctx context.Context, gql *client.Client, agent, tab string) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	in := map[string]any{"agentId": agent, "tabId": tab, "action": map[string]any{"kind": "title"}}
	out, err := Submit(ctx, gql, in)
	if err != nil {
		return 0, 0, fmt.Errorf("through: submit: %w", err)
	}
	submitted := time.Since(t0)
	state, at, err := followUntilSettled(ctx, gql, out.SubmitTask.Id)
	if err != nil {
		return 0, 0, fmt.Errorf("through: follow: %w", err)
	}
	if state != engine.StateSucceeded {
		return 0, 0, fmt.Errorf("through: the task ended %s", state)
	}
	return at.Sub(t0), submitted, nil
}
