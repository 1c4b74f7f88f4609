package mcp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// countingEngine counts the MCP server's own reads of tasks.
type countingEngine struct {
	*engine.Engine
	reads atomic.Int64
}

func (e *countingEngine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	e.reads.Add(1)
	return e.Engine.CommittedTask(ctx, id)
}

// direct is an MCP server built with mcp.New over a real engine and the
// real resolvers, served on a loopback port: the tests that look inside it.
type direct struct {
	eng  *engine.Engine
	ce   *countingEngine
	srv  *mcp.Server
	base string
}

func setupDirect(t *testing.T, cfg engine.Config, sessionTimeout time.Duration) *direct {
	t.Helper()
	return setupDirectOver(t, cfg, sessionTimeout, memory.New(memory.Options{}), enginetest.NewExecutor(), nil)
}

// setupDirectOver is setupDirect over a store and an executor; wrap, when
// set, makes what the MCP server is given of the engine (else a
// countingEngine).
func setupDirectOver(t *testing.T, cfg engine.Config, sessionTimeout time.Duration, st engine.Store, exec engine.Executor, wrap func(*engine.Engine) mcp.Engine) *direct {
	t.Helper()
	return setupDirectMutations(t, cfg, sessionTimeout, st, exec, wrap, nil)
}

// setupDirectMutations is setupDirectOver; mutations, when set, makes what
// the MCP server is given of the mutations from the resolvers'.
func setupDirectMutations(t *testing.T, cfg engine.Config, sessionTimeout time.Duration, st engine.Store, exec engine.Executor,
	wrap func(*engine.Engine) mcp.Engine, mutations func(mcp.Mutations) mcp.Mutations) *direct {
	t.Helper()
	eng, err := engine.New(engine.Options{Config: cfg, Store: st, Executor: exec})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	res := resolvers.New(resolvers.Options{Engine: eng})
	ce := &countingEngine{Engine: eng}
	var me mcp.Engine = ce
	if wrap != nil {
		me = wrap(eng)
	}
	var mu mcp.Mutations = res.Tools()
	if mutations != nil {
		mu = mutations(mu)
	}
	srv, err := mcp.New(mcp.Options{Engine: me, Mutations: mu, Queries: res.Query(), SessionTimeout: sessionTimeout})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer closeCancel()
		srv.Close(closeCtx)
		hs.Close()
		res.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
	return &direct{eng: eng, ce: ce, srv: srv, base: hs.URL}
}

func (d *direct) connect(t *testing.T, name string) *client {
	t.Helper()
	b := &bundle{base: d.base, tokens: map[string]string{}}
	return b.connect(t, name, "", "")
}

func TestAWaitingCallReadsItsTaskOnlyForItsOwnEventsAndReportsItsPlace(t *testing.T) {
	t.Parallel()
	d := setupDirect(t, engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1, Paused: true}}}, 0)
	ctx := ctxFor(t)
	submit := func(agent, session string) *engine.Task {
		tk, err := d.eng.Submit(ctx, engine.TaskSpec{AgentID: agent, SessionKey: session, Action: &engine.Action{Kind: "text"}})
		require.NoError(t, err)
		return tk
	}
	ahead := []*engine.Task{submit("waiter", "s1"), submit("waiter", "s2")}

	c := d.connect(t, "waiter")
	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(callCtx, &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "p"}})
		done <- err
	}()
	t.Cleanup(func() { cancel(); <-done }) // before the server's own cleanup
	has := func(msg string) func() bool {
		return func() bool {
			for _, m := range c.progressMessages() {
				if m == msg {
					return true
				}
			}
			return false
		}
	}
	waitfor.Eventually(t, "the call says two tasks are ahead", has("queued in lane main, 2 tasks ahead (the lane is paused)"))
	readsQueued := d.ce.reads.Load()

	// Another agent's tasks come and go, and tasks of its own agent queue
	// up behind it and leave: 800 events of its lane, 400 of its queue.
	start := time.Now()
	var noise []*engine.Task
	for i := range 200 {
		noise = append(noise, submit("noisy", "n"+strings.Repeat("x", i%3)), submit("waiter", "behind"))
	}
	for _, tk := range noise {
		_, err := d.eng.Cancel(ctx, tk.ID, "noise")
		require.NoError(t, err)
	}
	// Its own queue moves ahead of it: its place is re-read and reported.
	_, err := d.eng.Cancel(ctx, ahead[0].ID, "moved")
	require.NoError(t, err)
	waitfor.Eventually(t, "the call says one task is ahead", has("queued in lane main, 1 task ahead (the lane is paused)"))
	_, err = d.eng.Cancel(ctx, ahead[1].ID, "moved")
	require.NoError(t, err)
	waitfor.Eventually(t, "the call says it is next", has("queued in lane main, 0 tasks ahead (the lane is paused)"))
	// Re-reads of its task: none for the other agent's events, and for its
	// queue's at most one per 250 ms, plus the last two moves.
	bound := int64(time.Since(start)/(250*time.Millisecond)) + 3
	reads := d.ce.reads.Load() - readsQueued
	t.Logf("%d reads of the task in %s while 802 events of its lane passed", reads, time.Since(start))
	require.LessOrEqual(t, reads, bound, "reads of the task")
	// The moves of its own queue are its last two reports. While the noise
	// passed, a re-read may have caught its place among the agent's other
	// tasks for a moment (a busy machine slows the noise past one re-read
	// interval), so what came between is not asserted.
	msgs := c.progressMessages()
	require.Equal(t, []string{"queued in lane main, 1 task ahead (the lane is paused)",
		"queued in lane main, 0 tasks ahead (the lane is paused)"}, msgs[len(msgs)-2:])
	require.Contains(t, msgs[:len(msgs)-2], "queued in lane main, 2 tasks ahead (the lane is paused)")

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	done <- nil // for the cleanup
	waitfor.Eventually(t, "the call's task is cancelled", func() bool {
		ts, err := d.eng.Tasks(context.Background(), engine.TaskQuery{Filter: engine.TaskFilter{States: []engine.State{engine.StateQueued}}, Limit: 10})
		return err == nil && len(ts) == 0
	})
}

func TestPerSessionStateEndsWithItsMCPSession(t *testing.T) {
	t.Parallel()
	// An idle session goes when the SDK times it out, and its key with it:
	// opened first, so that its time passes while the rest of the test runs.
	short := setupDirect(t, engine.Config{}, 3*time.Second)
	idle := short.connect(t, "idle")
	require.False(t, idle.call(t, "open_session", nil).IsError)
	l, k := short.srv.SessionState()
	require.Equal(t, [2]int{1, 1}, [2]int{l, k}, "the session and its key are kept while it lives")

	d := setupDirect(t, engine.Config{}, 0)
	sessionState := func(live, keys int) func() bool {
		return func() bool { l, k := d.srv.SessionState(); return l == live && k == keys }
	}
	var clients []*client
	for range 5 {
		c := d.connect(t, "agent")
		res := c.call(t, "open_session", nil)
		require.False(t, res.IsError, textOf(res))
		clients = append(clients, c)
	}
	waitfor.Eventually(t, "five sessions with a browser session key each", sessionState(5, 5))
	for _, c := range clients {
		require.NoError(t, c.Close())
	}
	waitfor.Eventually(t, "closed sessions leave nothing behind", sessionState(0, 0))

	// A call that ends after its session did keeps nothing.
	d.srv.SetSession("gone", "mcp-late")
	l, k = d.srv.SessionState()
	require.Equal(t, [2]int{0, 0}, [2]int{l, k}, "no key for a session that is not live")

	// A session that is never initialized keeps nothing either.
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, d.base, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, resp.Header.Get("Mcp-Session-Id"))
	l, k = d.srv.SessionState()
	require.Equal(t, [2]int{0, 0}, [2]int{l, k})

	waitfor.Eventually(t, "the idle session times out and is forgotten", func() bool {
		l, k := short.srv.SessionState()
		return l == 0 && k == 0
	})
}

func TestCloseAnswersTheCallsWaitingForTheirTasksAndLeavesTheTasksToTheEngine(t *testing.T) {
	t.Parallel()
	d := setupDirect(t, engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}, 0)
	c := d.connect(t, "waiter")
	// The lane is paused: nothing but the close can end the call, and its
	// client must hear why (a tool error naming the task), not lose the
	// answer with its session.
	type answer struct {
		res *sdk.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "p"}})
		done <- answer{res, err}
	}()
	waitfor.Eventually(t, "the call waits in the queue", func() bool { return len(c.progressMessages()) > 0 })
	closed := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.srv.Close(ctx)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(2 * time.Minute):
		t.Fatal("Close waits for the calls waiting for their tasks")
	}
	a := <-done
	require.NoError(t, a.err, "the call is answered before its session ends")
	require.True(t, a.res.IsError)
	ts, err := d.eng.Tasks(context.Background(), engine.TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Len(t, ts, 1)
	require.Contains(t, textOf(a.res), "shutting down; task "+ts[0].ID+" is left to the engine")
	require.Equal(t, engine.StateQueued, ts[0].State, "shutting down is not the client cancelling: the task stays")
}
