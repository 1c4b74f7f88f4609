package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/netguard"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
)

// gate is the server's listener: it can drop every connection and refuse
// new ones for a while, as a network cut or a restarting proxy would.
type gate struct {
	net.Listener
	mu      sync.Mutex
	conns   []net.Conn
	refused bool
}

func (g *gate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.refused {
			g.mu.Unlock()
			_ = c.Close()
			continue
		}
		g.conns = append(g.conns, c)
		g.mu.Unlock()
		return c, nil
	}
}

// cut closes every connection and refuses new ones until heal.
func (g *gate) cut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = true
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.conns = nil
}

func (g *gate) heal() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refused = false
}

// bundle is a real server (engine, memory store, registry with one fake
// browser instance) on a loopback port. The engine's executor finishes
// attempts only when the test says so.
type bundle struct {
	eng  *engine.Engine
	exec *enginetest.Executor
	gate *gate
	base string         // the page's way to the server, through the gate
	c    *client.Client // the test's, around it
}

func setup(t *testing.T) *bundle { return setupServer(t, false) }

// setupServer is setup, with the policy plugins (the built-ins) when
// plugins is set, so that the policies panel lists them; each of more may
// change the server's options (tokens, say).
func setupServer(t *testing.T, plugins bool, more ...func(*server.Options)) *bundle {
	t.Helper()
	exec := enginetest.NewExecutor()
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))

	// A browser instance that answers its health checks as a PinchTab bridge
	// does (/health, then its tab list), so the instances panel has something
	// to show.
	browser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/health":
			_, _ = w.Write([]byte(`{"status":"ok","tabs":2}`))
		case "/tabs":
			_, _ = w.Write([]byte(`{"tabs":[{"id":"tab-1","url":"about:blank"},{"id":"tab-2","url":"about:blank"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(browser.Close)
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 500 * time.Millisecond, HealthTimeout: time.Second})
	t.Cleanup(reg.Close)
	reg.SetSink(eng)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "chromium-1", URL: browser.URL, Capacity: 8})
	require.NoError(t, err)

	// A heartbeat check of the same server, so that the checks panel has a
	// row with a state and a latency.
	checks := heartbeat.New(eng, heartbeat.Options{Guard: &netguard.Guard{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	require.NoError(t, checks.Start(context.Background()))
	t.Cleanup(checks.Stop)
	_, err = checks.Create(context.Background(), heartbeat.Spec{Name: "bridge health", URL: browser.URL + "/health", Interval: time.Hour, Enabled: true})
	require.NoError(t, err)

	// Pull lanes' leases, so that a leased task shows its lease.
	workers, err := pull.New(context.Background(), pull.Options{Engine: eng})
	require.NoError(t, err)
	t.Cleanup(workers.Close)

	opts := server.Options{Engine: eng, Registry: reg, Heartbeats: checks, Pull: workers, Version: "test", Logger: hclog.NewNullLogger()}
	if plugins {
		rt, err := host.New(host.Config{})
		require.NoError(t, err)
		m := manager.New(eng, rt, manager.Options{Native: true})
		require.NoError(t, m.Start(context.Background()))
		t.Cleanup(func() { _ = m.Close(context.Background()) })
		opts.Plugins = m
	}
	for _, f := range more {
		f(&opts)
	}
	srv, err := server.New(opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &gate{Listener: ln}
	go func() { _ = srv.Serve(g) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		sctx, scancel := context.WithTimeout(context.Background(), 0)
		defer scancel()
		_ = eng.Shutdown(sctx)
	})
	// The test's own client goes around the gate.
	side, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sideSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = sideSrv.Serve(side) }()
	t.Cleanup(func() { _ = sideSrv.Close() })
	base := "http://" + ln.Addr().String()
	c := client.New("http://" + side.Addr().String() + "/graphql")
	c.HTTP = &http.Client{Timeout: 10 * time.Second}
	return &bundle{eng: eng, exec: exec, gate: g, base: base, c: c}
}

// submit submits a task through the API and returns its id.
func (b *bundle) submit(t *testing.T, agent, lane string) string {
	t.Helper()
	var res struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(context.Background(),
		`mutation($a: String!, $l: String) { submitTask(input: {agentId: $a, lane: $l, action: {kind: "click", selector: "#go"}}) { id } }`,
		map[string]any{"a": agent, "l": lane}, &res))
	return res.SubmitTask.ID
}

// taskState reads a task's state through the API.
func (b *bundle) taskState(t *testing.T, id string) string {
	t.Helper()
	var res struct{ Task struct{ State string } }
	require.NoError(t, b.c.Do(context.Background(), `query($id: ID!) { task(id: $id) { state } }`, map[string]any{"id": id}, &res))
	return res.Task.State
}

func (b *bundle) taskReason(t *testing.T, id string) string {
	t.Helper()
	var res struct{ Task struct{ Reason string } }
	require.NoError(t, b.c.Do(context.Background(), `query($id: ID!) { task(id: $id) { reason } }`, map[string]any{"id": id}, &res))
	return res.Task.Reason
}

// pageLog records what the page did: every request and WebSocket it opened,
// and the errors it reported.
type pageLog struct {
	mu       sync.Mutex
	requests []string
	sockets  []string
	errors   []string
	quiet    bool // a cut is under way: failed requests are expected
}

func (l *pageLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.requests = append(l.requests, ev.Request.URL)
	case *network.EventWebSocketCreated:
		l.sockets = append(l.sockets, ev.URL)
	case *runtime.EventExceptionThrown:
		msg := ev.ExceptionDetails.Text
		if ex := ev.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
		l.errors = append(l.errors, "exception: "+msg)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError && !l.quiet {
			l.errors = append(l.errors, string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	}
}

func (l *pageLog) setQuiet(q bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.quiet = q
}

func (l *pageLog) snapshot() (requests, sockets, errors []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests...), append([]string(nil), l.sockets...), append([]string(nil), l.errors...)
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("chromium is not installed (/usr/bin/chromium): skipping the dashboard browser test; install Debian's chromium to run it")
	return ""
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SWITCHYARD_TEST_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// waitFor polls a JavaScript expression until it is truthy and returns it.
func waitFor[T any](expr string) chromedp.Action[T] {
	return chromedp.Poll[T](expr, chromedp.WithPollingTimeout(15*time.Second))
}

// rowState is the state a feed row shows for a task ("" while it has none).
func rowState(id string) string {
	return `(() => { const r = document.querySelector('#feed tr[data-task=' + ` + jsString(jsString(id)) + ` + ']');
		return r ? r.querySelector('.state').textContent : ''; })()`
}

func waitRowState(id, state string) chromedp.Action[string] {
	return waitFor[string](`(() => { const s = ` + rowState(id) + `; return s === ` + jsString(state) + ` ? s : false; })()`)
}

func TestDashboardFollowsTheServerLiveInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setup(t)
	server, err := url.Parse(b.base)
	require.NoError(t, err)

	// Every host but the test server's is unreachable: names do not
	// resolve, and anything not on loopback goes to a closed proxy port.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.WindowSize(1440, 1000),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+server.Hostname()),
			chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		)...)
	t.Cleanup(cancelAlloc)
	var seen pageLog
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(seen.listen))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 50*time.Second)
	t.Cleanup(cancelTimeout)
	artifacts := artifactsDir(t)
	shoot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		p := filepath.Join(artifacts, name)
		require.NoError(t, os.WriteFile(p, shot, 0o644))
		t.Logf("screenshot: %s", p)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			p := filepath.Join(artifacts, "dashboard-failure.png")
			if os.WriteFile(p, shot, 0o644) == nil {
				t.Logf("screenshot of the failure: %s", p)
			}
		}
		requests, sockets, errors := seen.snapshot()
		t.Logf("requests: %q\nsockets: %q\nerrors: %q", requests, sockets, errors)
	})

	// Some history before the page opens: the feed starts a little back.
	early := b.submit(t, "agent-early", "main")
	waitfor.Eventually(t, "the early task to start", func() bool { return b.exec.Run(early) != nil })
	require.NoError(t, b.exec.Succeed(early, `{"early":true}`))

	// The page loads, connects its subscriptions and shows the lanes, the
	// instance and the earlier task.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.base+"/dashboard"),
		chromedp.WaitVisible(chromedp.CSS(`#lanes tr[data-lane="main"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#link.live`)),
	))
	_, err = chromedp.Run(ctx, waitRowState(early, "SUCCEEDED"))
	require.NoError(t, err, "the feed should start with recent history")
	_, err = chromedp.Run(ctx, waitFor[string](`(() => { const r = document.querySelector('#instances tr[data-instance="chromium-1"] .badge');
		return r && r.textContent === 'HEALTHY' ? r.textContent : false; })()`))
	require.NoError(t, err, "the instances panel should show the instance healthy")
	_, err = chromedp.Run(ctx, waitFor[string](`(() => { const r = document.querySelector('#heartbeats tr td.name[title$="/health"]');
		const row = r && r.parentElement;
		return row && row.querySelector('.badge').textContent === 'UP' && row.querySelector('svg.spark') ? row.textContent : false; })()`))
	require.NoError(t, err, "the heartbeat panel should show the check up, with its latency")

	t.Run("a submitted task appears and finishes live", func(t *testing.T) {
		id := b.submit(t, "agent-a", "main")
		_, err := chromedp.Run(ctx, waitFor[bool](`!!document.querySelector('#feed tr[data-task=`+jsString(id)+`]')`))
		require.NoError(t, err, "the task should appear in the feed")
		waitfor.Eventually(t, "the task to be dispatched", func() bool { return b.exec.Run(id) != nil })
		b.exec.Run(id).Started("chromium-1", "tab-1")
		_, err = chromedp.Run(ctx, waitRowState(id, "RUNNING"))
		require.NoError(t, err)
		require.NoError(t, b.exec.Succeed(id, `{"title":"Example Domain"}`))
		_, err = chromedp.Run(ctx, waitRowState(id, "SUCCEEDED"))
		require.NoError(t, err)

		// The detail view shows the attempt and the result.
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#feed tr[data-task=`+jsString(id)+`] td.mono a`))))
		_, err = chromedp.Run(ctx, waitFor[string](`(() => { const s = document.querySelector('#detail-state');
			const r = document.querySelector('#detail-result');
			return s && s.textContent === 'SUCCEEDED' && r && r.textContent.includes('Example Domain') ? r.textContent : false; })()`))
		require.NoError(t, err, "the detail view should show the state and the result")
		attempts, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#detail table.attempts tbody`)))
		require.NoError(t, err)
		require.Contains(t, attempts, "chromium-1 / tab-1")
		shoot("dashboard-task-detail.png")
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#detail a.close`))))
	})

	t.Run("the cancel button cancels a queued task", func(t *testing.T) {
		// A lane with a ceiling of 0 keeps its tasks queued.
		require.NoError(t, b.c.Do(context.Background(), `mutation { updateLane(name: "team", input: {maxInFlight: 0}) { name } }`, nil, nil))
		id := b.submit(t, "agent-b", "team")
		_, err := chromedp.Run(ctx, waitRowState(id, "QUEUED"))
		require.NoError(t, err)
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#feed tr[data-task=`+jsString(id)+`] button.cancel`))))
		waitfor.Eventually(t, "the task to be cancelled", func() bool { return b.taskState(t, id) == "CANCELLED" })
		_, err = chromedp.Run(ctx, waitRowState(id, "CANCELLED"))
		require.NoError(t, err, "the row should show the cancellation")
	})

	t.Run("a running task cancelled keeps the cancellation's reason", func(t *testing.T) {
		id := b.submit(t, "agent-c", "main")
		waitfor.Eventually(t, "the task to be dispatched", func() bool { return b.exec.Run(id) != nil })
		b.exec.Run(id).Started("chromium-1", "tab-1")
		_, err := chromedp.Run(ctx, waitRowState(id, "RUNNING"))
		require.NoError(t, err)
		require.NoError(t, b.c.Do(context.Background(), `mutation($id: ID!) { cancelTask(id: $id, reason: "stop") { id } }`, map[string]any{"id": id}, nil))
		// The executor's call returns after the cancellation: a RELEASED
		// event, whose reason is the slot's, not the task's.
		require.NoError(t, b.exec.Finish(id, engine.Outcome{Err: context.Canceled}))
		// Events reach the page in order: once a later task's row shows,
		// the RELEASED event has been applied.
		later := b.submit(t, "agent-c", "team")
		_, err = chromedp.Run(ctx, waitFor[bool](`!!document.querySelector('#feed tr[data-task=`+jsString(later)+`]')`))
		require.NoError(t, err)
		reason, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#feed tr[data-task=`+jsString(id)+`] td.reason`)))
		require.NoError(t, err)
		require.Equal(t, b.taskReason(t, id), reason, "the row shows the task's reason, as task(id) does")
		require.Contains(t, reason, "stop")
	})

	t.Run("a paused lane shows as paused", func(t *testing.T) {
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#lanes tr[data-lane="subagent"] button.pause`))))
		_, err := chromedp.Run(ctx, waitFor[string](`(() => { const s = document.querySelector('#lanes tr[data-lane="subagent"] .lane-state');
			return s && s.textContent === 'paused' ? s.textContent : false; })()`))
		require.NoError(t, err, "the lane should show as paused")
		var res struct{ Lane struct{ Paused bool } }
		require.NoError(t, b.c.Do(context.Background(), `{ lane(name: "subagent") { paused } }`, nil, &res))
		require.True(t, res.Lane.Paused, "the button should have paused the lane on the server")

		// A change made by another client shows too: the LANE event makes
		// the page read the lanes again.
		require.NoError(t, b.c.Do(context.Background(), `mutation { updateLane(name: "cron", input: {paused: true, maxInFlight: 7}) { name } }`, nil, nil))
		_, err = chromedp.Run(ctx, waitFor[string](`(() => { const r = document.querySelector('#lanes tr[data-lane="cron"]');
			return r && r.querySelector('.lane-state').textContent === 'paused' && r.textContent.includes('0 / 7') ? r.textContent : false; })()`))
		require.NoError(t, err, "a lane paused through the API should show as paused")

		// The ceiling form changes the lane's limit.
		require.NoError(t, chromedp.Do(ctx,
			chromedp.SetValue(chromedp.CSS(`#lanes tr[data-lane="main"] input[name="max"]`), "12"),
			chromedp.Click(chromedp.CSS(`#lanes tr[data-lane="main"] button.set-limit`)),
		))
		waitfor.Eventually(t, "the main lane's ceiling to change", func() bool {
			var res struct{ Lane struct{ MaxInFlight int } }
			return b.c.Do(context.Background(), `{ lane(name: "main") { maxInFlight } }`, nil, &res) == nil && res.Lane.MaxInFlight == 12
		})
		shoot("dashboard-overview.png")
	})

	t.Run("after a network cut the feed resumes without missing events", func(t *testing.T) {
		seen.setQuiet(true)
		b.gate.cut()
		_, err := chromedp.Run(ctx, waitFor[bool](`!document.querySelector('#link.live')`))
		require.NoError(t, err, "the page should notice the cut")
		// Work done while the page cannot connect.
		var ids []string
		for i := range 3 {
			id := b.submit(t, fmt.Sprintf("agent-cut-%d", i), "main")
			waitfor.Eventually(t, "the task to be dispatched", func() bool { return b.exec.Run(id) != nil })
			require.NoError(t, b.exec.Succeed(id, `{}`))
			ids = append(ids, id)
		}
		b.gate.heal()
		for _, id := range ids {
			_, err := chromedp.Run(ctx, waitRowState(id, "SUCCEEDED"))
			require.NoError(t, err, "events of %s, made during the cut, should arrive after it", id)
		}
		_, err = chromedp.Run(ctx, chromedp.WaitVisible(chromedp.CSS(`#link.live`)))
		require.NoError(t, err)
		seen.setQuiet(false)
	})

	// The page talked to the test server only, over HTTP and WebSocket, and
	// reported no error (no CSP violation, no failed load, no exception).
	requests, sockets, errors := seen.snapshot()
	require.NotEmpty(t, requests)
	for _, r := range requests {
		if strings.HasPrefix(r, "data:") {
			continue
		}
		u, err := url.Parse(r)
		require.NoError(t, err)
		require.Equal(t, server.Host, u.Host, "the page requested %s", r)
	}
	require.NotEmpty(t, sockets, "subscriptions should use a WebSocket")
	for _, s := range sockets {
		require.Equal(t, "ws://"+server.Host+"/graphql", s)
	}
	require.Empty(t, errors, "the page reported errors")
}
