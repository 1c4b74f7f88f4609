package mcp_test

// The cap on live MCP sessions, over the real HTTP handler: a new session
// evicts the least recently used idle one, never one with a call in
// progress, and is refused when every session has one; a session that
// never initializes does not linger; initialize is rate-limited.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// capped is an MCP server of at most max sessions over a real engine whose
// executor runs nothing until told.
type capped struct {
	srv  *mcp.Server
	exec *enginetest.Executor
	b    *bundle // its base, for rawSession
}

func setupCapped(t *testing.T, max int, initTimeout time.Duration) *capped {
	t.Helper()
	exec := enginetest.NewExecutor()
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	res := resolvers.New(resolvers.Options{Engine: eng})
	srv, err := mcp.New(mcp.Options{Engine: eng, Mutations: res.Tools(), Queries: res.Query(), MaxSessions: max, InitTimeout: initTimeout})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		for _, id := range exec.Running() {
			_ = exec.Finish(id, engine.Outcome{Err: context.Canceled})
		}
		closeCtx, closeCancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer closeCancel()
		srv.Close(closeCtx)
		hs.Close()
		res.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Shutdown(ctx)
	})
	return &capped{srv: srv, exec: exec, b: &bundle{base: hs.URL}}
}

const listTools = `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`

// initializeOnly opens a session with initialize alone: no
// notifications/initialized, nothing after it.
func initializeOnly(t *testing.T, ctx context.Context, base string) *rawSession {
	t.Helper()
	s := &rawSession{base: base}
	status, h, out := s.post(t, ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Equal(t, http.StatusOK, status, out)
	s.id = h.Get("Mcp-Session-Id")
	require.NotEmpty(t, s.id)
	return s
}

// alive reports whether a session still answers.
func alive(t *testing.T, ctx context.Context, s *rawSession) bool {
	t.Helper()
	status, _, out := s.post(t, ctx, listTools)
	require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, status, out)
	return status == http.StatusOK
}

// startCall starts a browser call in s that waits for its task (the
// executor holds it), and returns its task's id once it runs.
func (c *capped) startCall(t *testing.T, ctx context.Context, s *rawSession) (taskID string, done <-chan []string) {
	t.Helper()
	before := map[string]bool{}
	for _, id := range c.exec.Running() {
		before[id] = true
	}
	ch := make(chan []string, 1)
	go func() {
		_, _, events := s.post(t, ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"text","arguments":{}}}`)
		ch <- events
	}()
	waitfor.Eventually(t, "the call's task runs", func() bool {
		for _, id := range c.exec.Running() {
			if !before[id] {
				taskID = id
				return true
			}
		}
		return false
	})
	return taskID, ch
}

func TestANewSessionOverTheCapEvictsTheLeastRecentlyUsedIdleOne(t *testing.T) {
	t.Parallel()
	c := setupCapped(t, 3, 0)
	ctx := ctxFor(t)
	s1, s2, s3 := openRaw(t, ctx, c.b), openRaw(t, ctx, c.b), openRaw(t, ctx, c.b)
	require.True(t, alive(t, ctx, s1)) // s2 is now the least recently used
	// s2's client listens on its standalone stream (GET), as many do: that
	// is no call, and it does not keep the session from eviction.
	streamEnded := make(chan error, 1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.b.base+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", s2.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, stream.StatusCode)
	go func() {
		_, err := io.Copy(io.Discard, stream.Body)
		stream.Body.Close()
		streamEnded <- err
	}()

	s4 := openRaw(t, ctx, c.b)
	require.False(t, alive(t, ctx, s2), "the least recently used idle session is evicted: its next request gets 404")
	<-streamEnded // its stream ends with it
	for i, s := range []*rawSession{s1, s3, s4} {
		require.True(t, alive(t, ctx, s), "session %d lives", i)
	}
	st := c.srv.SessionStats()
	require.Equal(t, 3, st.Live)
	require.EqualValues(t, 1, st.Evicted)
	require.Equal(t, 3, c.srv.SDKSessions(), "the SDK holds no more sessions than the cap")

	// The evicted session's client initializes again, as a 404 tells it to.
	s2 = openRaw(t, ctx, c.b)
	require.True(t, alive(t, ctx, s2))
	require.Equal(t, 3, c.srv.SessionStats().Live)
}

func TestASessionWithACallInProgressIsNeverEvicted(t *testing.T) {
	t.Parallel()
	c := setupCapped(t, 2, 0)
	ctx := ctxFor(t)
	busy := openRaw(t, ctx, c.b)
	idle := openRaw(t, ctx, c.b)
	require.True(t, alive(t, ctx, idle))
	taskID, done := c.startCall(t, ctx, busy)
	require.True(t, alive(t, ctx, idle)) // busy is the least recently used now

	s3 := openRaw(t, ctx, c.b)
	require.False(t, alive(t, ctx, idle), "the idle session is evicted, not the one whose call waits")
	require.True(t, alive(t, ctx, s3))

	// Both live sessions have a call in progress: a new one is refused,
	// with Retry-After and a JSON-RPC error that says why.
	task3, done3 := c.startCall(t, ctx, s3)
	status, h, out := (&rawSession{base: c.b.base}).post(t, ctx, `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Empty(t, h.Get("Mcp-Session-Id"))
	require.Len(t, out, 1)
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code    int            `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[0]), &msg))
	require.Equal(t, 7, msg.ID)
	require.Equal(t, -32000, msg.Error.Code)
	require.Contains(t, msg.Error.Message, "at most 2 MCP sessions")
	require.Equal(t, "LIMIT", msg.Error.Data["code"])
	require.Equal(t, true, msg.Error.Data["retryable"])
	require.EqualValues(t, 1, c.srv.SessionStats().RefusedFull)

	// The waiting calls were never disturbed: they answer when their
	// tasks end.
	require.NoError(t, c.exec.Finish(taskID, engine.Outcome{Result: []byte(`{"success":true,"result":{"text":"one"}}`)}))
	require.Contains(t, strings.Join(<-done, ""), `"id":2`)
	require.NoError(t, c.exec.Finish(task3, engine.Outcome{Result: []byte(`{"success":true,"result":{"text":"three"}}`)}))
	require.Contains(t, strings.Join(<-done3, ""), `"id":2`)
	require.True(t, alive(t, ctx, busy))
}

func TestASessionThatNeverInitializesDoesNotLinger(t *testing.T) {
	t.Parallel()
	// Long enough that an initialized session's notification, one loopback
	// request after its initialize, comes in time on a busy machine.
	c := setupCapped(t, 10, 3*time.Second)
	ctx := ctxFor(t)
	half := initializeOnly(t, ctx, c.b.base)
	done := openRaw(t, ctx, c.b) // sent notifications/initialized
	waitfor.Eventually(t, "the uninitialized session is closed", func() bool { return c.srv.SessionStats().Live == 1 })
	require.False(t, alive(t, ctx, half))
	require.True(t, alive(t, ctx, done), "an initialized session lives on (SessionTimeout)")
	require.EqualValues(t, 1, c.srv.SessionStats().Expired)
	require.Equal(t, 1, c.srv.SDKSessions())
}

// Not parallel: it counts the process's goroutines.
func TestManyInitializesKeepGoroutinesAndSessionsBounded(t *testing.T) {
	c := setupCapped(t, 5, 0)
	ctx := ctxFor(t)
	for range 5 {
		initializeOnly(t, ctx, c.b.base)
	}
	base := runtime.NumGoroutine()
	const n = 300
	for range n {
		initializeOnly(t, ctx, c.b.base)
	}
	// Each session the SDK keeps holds goroutines; the cap keeps their
	// number where it was (within what other parallel tests start).
	waitfor.Eventually(t, "the evicted sessions' goroutines end", func() bool { return runtime.NumGoroutine() < base+n/3 })
	require.Equal(t, 5, c.srv.SessionStats().Live)
	require.Equal(t, 5, c.srv.SDKSessions())
	require.EqualValues(t, n, c.srv.SessionStats().Evicted)
}

func TestInitializeTakesFromTheCallersRate(t *testing.T) {
	t.Parallel()
	b := setup(t, options{limits: resolvers.Limits{MutationsPerSecond: 0.001, MutationBurst: 2}})
	ctx := ctxFor(t)
	openRaw(t, ctx, b)
	openRaw(t, ctx, b)
	status, h, out := (&rawSession{base: b.base}).post(t, ctx, `{"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Equal(t, http.StatusTooManyRequests, status, out)
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Len(t, out, 1)
	require.Contains(t, out[0], `"id":"x"`)
	require.Contains(t, out[0], `"RATE_LIMITED"`)
	require.Contains(t, out[0], `"retryAfterMs"`)
	require.Contains(t, out[0], "over its rate of mutations")

	res, err := http.Get(b.base + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `switchyard_mcp_initialize_refused_total{reason="rate"} 1`)
	require.Contains(t, string(body), fmt.Sprintf("switchyard_mcp_sessions %d", 2))
}
