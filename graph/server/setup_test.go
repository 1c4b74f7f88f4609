package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/netguard"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
)

// bundle is a real server on a random loopback port over a real engine
// whose executor finishes attempts only when told (or at once, with Auto).
type bundle struct {
	eng       *engine.Engine
	exec      *enginetest.Executor
	srv       *server.Server
	base      string // http://127.0.0.1:port
	c         *client.Client
	artifacts artifact.Store
	reg       *executor.Registry
	plugins   *manager.Manager    // with setupOptions.plugins
	sched     *schedule.Scheduler // with setupOptions.schedules
	pull      *pull.Manager       // with setupOptions.pull
	checks    *heartbeat.Checker  // with setupOptions.heartbeats
}

type setupOptions struct {
	config     engine.Config
	storeOpts  memory.Options
	store      engine.Store                          // instead of a memory store with storeOpts
	engine     func(*engine.Engine) resolvers.Engine // what the server is given of the engine (default: the engine)
	registry   bool
	limits     resolvers.Limits
	keepAlive  time.Duration
	auto       func(*engine.Run) engine.Outcome
	sendBuffer int                   // the server's socket send buffer, when set
	plugins    bool                  // a plugin manager (native built-ins)
	maxWasm    int                   // the plugin manager's MaxWasmBytes, when set
	schedules  bool                  // a scheduler
	pull       bool                  // pull lanes' leases
	heartbeats bool                  // a heartbeat checker that may reach loopback
	server     func(*server.Options) // adjusts the server's options
	logs       io.Writer             // receives the server's log (info and up) besides the test log
	clock      clock.Clock           // the engine's (and the pull lanes' leases') clock, when set
}

// setup starts the bundle; opts adjust its options.
func setup(t *testing.T, opts ...func(*setupOptions)) *bundle {
	t.Helper()
	var o setupOptions
	for _, f := range opts {
		f(&o)
	}
	exec := enginetest.NewExecutor()
	exec.Auto = o.auto
	store := o.store
	if store == nil {
		store = memory.New(o.storeOpts)
	}
	eng, err := engine.New(engine.Options{Config: o.config, Store: store, Executor: exec, Clock: o.clock})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	arts := artifact.NewMemory()
	var reg *executor.Registry
	if o.registry {
		reg = executor.NewRegistry(executor.RegistryOptions{HealthInterval: 50 * time.Millisecond, HealthTimeout: time.Second})
		reg.SetSink(eng)
		t.Cleanup(reg.Close)
	}
	var mgr *manager.Manager
	if o.plugins {
		rt, err := host.New(host.Config{CacheDir: pluginCache(), Deadline: time.Minute, OnEvent: func(ev host.Event) { mgr.HostEvent(ev) }})
		require.NoError(t, err)
		mgr = manager.New(eng, rt, manager.Options{Native: true, MaxWasmBytes: o.maxWasm})
		require.NoError(t, mgr.Start(context.Background()))
		t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	}
	var sched *schedule.Scheduler
	if o.schedules {
		sched = schedule.New(eng, clock.Real{}, nil)
		require.NoError(t, sched.Start(context.Background()))
		t.Cleanup(sched.Stop)
	}
	var workers *pull.Manager
	if o.pull {
		workers, err = pull.New(context.Background(), pull.Options{Engine: eng, Clock: o.clock})
		require.NoError(t, err)
		t.Cleanup(workers.Close)
	}
	var checks *heartbeat.Checker
	if o.heartbeats {
		checks = heartbeat.New(eng, heartbeat.Options{Guard: &netguard.Guard{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
		require.NoError(t, checks.Start(context.Background()))
		t.Cleanup(checks.Stop)
	}
	logOut := io.Writer(testWriter{t})
	level := hclog.Warn
	if o.logs != nil {
		logOut, level = io.MultiWriter(logOut, o.logs), hclog.Info
	}
	var api resolvers.Engine = eng
	if o.engine != nil {
		api = o.engine(eng)
	}
	sopts := server.Options{
		Engine: api, Registry: reg, Artifacts: arts, Limits: o.limits, KeepAlive: o.keepAlive, Version: "test",
		Plugins: mgr, Schedules: sched, Pull: workers, Heartbeats: checks,
		Logger: hclog.New(&hclog.LoggerOptions{Level: level, Output: logOut}),
	}
	if o.server != nil {
		o.server(&sopts)
	}
	srv, err := server.New(sopts)
	require.NoError(t, err)
	var ln net.Listener
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	if o.sendBuffer > 0 {
		ln = smallBuffers{Listener: ln, size: o.sendBuffer}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		sctx, scancel := context.WithTimeout(context.Background(), 0)
		defer scancel()
		_ = eng.Shutdown(sctx)
	})
	base := "http://" + ln.Addr().String()
	c := client.New(base + "/graphql")
	c.HTTP = &http.Client{Timeout: 30 * time.Second}
	return &bundle{eng: eng, exec: exec, srv: srv, base: base, c: c, artifacts: arts, reg: reg, plugins: mgr, sched: sched, pull: workers, checks: checks}
}

// pluginCache is the compilation cache of the tests' plugin hosts: compiling
// a Go guest takes about a second, loading it from the cache milliseconds.
func pluginCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "switchyard", "wazero-test")
}

// smallBuffers shrinks the socket send buffer of accepted connections, so
// that a client that stops reading makes the server wait soon.
type smallBuffers struct {
	net.Listener
	size int
}

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(l.size)
	}
	return c, err
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// succeed finishes every attempt at once with a small result.
func succeed(o *setupOptions) {
	o.auto = func(*engine.Run) engine.Outcome { return engine.Outcome{Result: []byte(`{"ok":true}`)} }
}

// gqlErr returns the first GraphQL error of err, failing the test if there
// is none.
func gqlErr(t *testing.T, err error) *client.Error {
	t.Helper()
	var errs client.Errors
	require.ErrorAs(t, err, &errs)
	require.NotEmpty(t, errs)
	return errs[0]
}

// submit submits a task for agent and returns its id.
func (b *bundle) submit(t *testing.T, agent string, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"agentId": agent, "action": map[string]any{"kind": "click", "selector": "css:#go"}}
	for k, v := range extra {
		in[k] = v
	}
	var out struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`, map[string]any{"in": in}, &out))
	require.NotEmpty(t, out.SubmitTask.ID)
	return out.SubmitTask.ID
}

// submitMany submits n tasks for agent in batches of at most 100.
func (b *bundle) submitMany(t *testing.T, agent string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 100)
		items := make([]map[string]any, k)
		for i := range items {
			items[i] = map[string]any{"task": map[string]any{"agentId": agent, "action": map[string]any{"kind": "click"}}}
		}
		var out struct{ SubmitTasks struct{ Accepted int } }
		require.NoError(t, b.c.Do(ctxFor(t), `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted } }`,
			map[string]any{"in": map[string]any{"items": items}}, &out))
		require.Equal(t, k, out.SubmitTasks.Accepted)
		n -= k
	}
}

// state reads a task's state.
func (b *bundle) state(t *testing.T, id string) string {
	t.Helper()
	var out struct{ Task struct{ State string } }
	require.NoError(t, b.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { state } }`, map[string]any{"id": id}, &out))
	return out.Task.State
}

// waitSubscribed waits until n subscriptions of a field are running (as the
// metrics count them): events after that reach them.
func (b *bundle) waitSubscribed(t *testing.T, field string, n int) {
	t.Helper()
	want := fmt.Sprintf(`switchyard_graphql_subscriptions{subscription=%q} %d`, field, n)
	waitfor.Eventually(t, want, func() bool {
		res, err := http.Get(b.base + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), want)
	})
}
