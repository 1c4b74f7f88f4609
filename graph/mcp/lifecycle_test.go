package mcp_test

// A call's life beyond its answer: the client terminates its session, the
// task runs longer than a client's request timeout, its retries are spent,
// a keyed submit_task is sent again, a session is closed that has no tab.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestDeletingTheSessionCancelsItsCallsAndAnswersWithoutWaitingForTheirTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)
	done := make(chan []string, 1)
	go func() {
		_, _, events := s.post(t, ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"text","arguments":{},"_meta":{"progressToken":"p"}}}`)
		done <- events
	}()
	var id string
	waitfor.Eventually(t, "the call's task runs", func() bool {
		if r := b.exec.Running(); len(r) == 1 {
			id = r[0]
			return true
		}
		return false
	})

	// The browser never finishes the task: the DELETE must not wait for it.
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.base+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Mcp-Session-Id", s.id)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusNoContent, res.StatusCode)

	// The call's task is cancelled, as a client's cancellation cancels it,
	// with a reason that says why; so is its attempt.
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, engine.StateCancelled, tk.State)
	require.Equal(t, mcp.SessionClosedReason, tk.Reason)
	waitfor.Eventually(t, "the attempt's context is cancelled", func() bool { return b.exec.Context(id).Err() != nil })

	// The call's stream ends: progress, and no answer but one that says
	// why (the session is gone; a client that terminated it reads none).
	for _, e := range <-done {
		if !strings.Contains(e, `"method":"notifications/progress"`) {
			require.Contains(t, e, `"id":2`)
			require.Contains(t, e, mcp.SessionClosedReason)
		}
	}

	// The session is gone.
	status, _, _ := s.post(t, ctx, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	require.Equal(t, http.StatusNotFound, status)
	_ = b.exec.Finish(id, engine.Outcome{Err: context.Canceled}) // the attempt ends, for the engine's shutdown
}

func TestADeleteWithAnotherTokenCancelsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{tokens: []auth.Token{
		{Name: "alice", Role: auth.RoleAgent, AgentID: "alice"}, {Name: "mallory", Role: auth.RoleAgent, AgentID: "mallory"}}})
	c := b.connect(t, "alice-client", "alice", "")
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}})
		done <- err
	}()
	var id string
	waitfor.Eventually(t, "the call's task runs", func() bool {
		if r := b.exec.Running(); len(r) == 1 {
			id = r[0]
			return true
		}
		return false
	})
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodDelete, b.base+"/mcp", nil)
	require.NoError(t, err)
	req.Header.Set("Mcp-Session-Id", c.ID())
	req.Header.Set("Authorization", "Bearer "+b.tokens["mallory"])
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.False(t, tk.State.Terminal(), "another token's DELETE cancels nothing: %s", tk.State)
	require.NoError(t, b.exec.Succeed(id, `{"text":"hi"}`))
	require.NoError(t, <-done)
}

func TestAWaitingCallIsToldWhereItsTaskStandsEvenWhenNothingChanges(t *testing.T) {
	mcp.SetProgressEvery(t, 20*time.Millisecond) // as if the task ran for minutes
	b := setup(t, options{})
	c := b.connect(t, "patient", "", "")
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "p"}})
		done <- err
	}()
	var id string
	waitfor.Eventually(t, "the call's task runs", func() bool {
		if r := b.exec.Running(); len(r) == 1 {
			id = r[0]
			return true
		}
		return false
	})
	running := func() int {
		n := 0
		for _, m := range c.progressMessages() {
			if m == "dispatched" { // the test executor never says the attempt started
				n++
			}
		}
		return n
	}
	waitfor.Eventually(t, "the running task is reported again and again", func() bool { return running() >= 3 })
	require.NoError(t, b.exec.Succeed(id, `{"text":"done"}`))
	require.NoError(t, <-done)

	notes := c.progressNotes()
	for i, p := range notes {
		require.True(t, strings.HasPrefix(p.Message, "task "+id+": "), "every notification names the task: %q", p.Message)
		if i > 0 {
			require.Greater(t, p.Progress, notes[i-1].Progress, "progress increases")
		}
	}
}

func TestABrowserCallWhoseRetriesAreSpentFailsInsteadOfParking(t *testing.T) {
	t.Parallel()
	// The lane parks exhausted tasks (the default), after two attempts.
	lane := engine.LaneConfig{Name: "main", MaxInFlight: 4, Exhausted: engine.ExhaustedPark,
		Retry: engine.RetryPolicy{MaxAttempts: 2, Backoff: time.Millisecond, Multiplier: 1, MaxBackoff: time.Millisecond}}
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{lane}}})
	b.exec.Auto = func(*engine.Run) engine.Outcome {
		return engine.Outcome{Err: engine.Transient(errors.New("502 Bad Gateway [navigate_failed]: net::ERR_CONNECTION_REFUSED")), HTTPStatus: 502}
	}
	c := b.connect(t, "agent", "", "")

	res := c.call(t, "navigate", map[string]any{"url": "http://127.0.0.1:1/"})
	e := errorOf(t, res)
	require.Equal(t, "FAILED", e["code"], textOf(res))
	require.Equal(t, "TRANSIENT", e["errorClass"])
	require.Equal(t, true, e["retryable"], "the agent may call again: nothing runs the failed task again behind it")
	id := structured(t, res)["taskId"].(string)
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, tk.State)
	require.Len(t, tk.Attempts, 2, "the lane's retries were made")
	require.True(t, strings.HasPrefix(tk.Reason, "retry budget spent: "), tk.Reason)

	// submit_task keeps what its caller or the lane asks.
	sub := c.call(t, "submit_task", map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "http://127.0.0.1:1/"}}})
	require.False(t, sub.IsError, textOf(sub))
	asked := c.call(t, "submit_task", map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "http://127.0.0.1:1/"}}, "exhausted": "FAIL"})
	require.False(t, asked.IsError, textOf(asked))
	for tool, want := range map[*sdk.CallToolResult]engine.State{sub: engine.StateParked, asked: engine.StateFailed} {
		id := structured(t, tool)["taskId"].(string)
		waitfor.Eventually(t, "the submitted task ends as asked", func() bool {
			tk, err := b.eng.Task(context.Background(), id)
			return err == nil && tk.State == want
		})
	}
	bad := c.call(t, "submit_task", map[string]any{"instruction": "x", "exhausted": "RETRY"})
	require.Equal(t, "exhausted", errorOf(t, bad)["field"])
}

func TestAResentKeyedSubmissionSaysItNamesTheEarlierTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}})
	c := b.connect(t, "planner", "", "")
	args := map[string]any{"instruction": "summarise", "idempotencyKey": "step-1"}
	first := c.call(t, "submit_task", args)
	require.True(t, strings.HasPrefix(textOf(first), "submitted task "), textOf(first))
	again := c.call(t, "submit_task", args)
	require.Equal(t, structured(t, first)["taskId"], structured(t, again)["taskId"])
	require.Contains(t, textOf(again), "nothing new was submitted")
	require.NotContains(t, textOf(again), "submitted task")
	require.Len(t, b.tasks(t), 1)
}

func TestClosingASessionWithoutATabOpensNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	c := b.connect(t, "closer", "", "")
	for _, args := range []map[string]any{nil, {"session": "never-used"}} {
		res := c.call(t, "close_session", args)
		require.False(t, res.IsError, textOf(res))
		require.Contains(t, textOf(res), "nothing to close")
		var out struct {
			Result struct {
				Closed *bool `json:"closed"`
			} `json:"result"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		require.NoError(t, json.Unmarshal(raw, &out))
		require.NotNil(t, out.Result.Closed)
		require.False(t, *out.Result.Closed)
	}
	require.Empty(t, b.tasks(t), "nothing was submitted")

	// A session that ran something is closed once; closing it again opens
	// nothing.
	require.False(t, c.call(t, "text", map[string]any{"session": "s1"}).IsError)
	require.False(t, c.call(t, "close_session", map[string]any{"session": "s1"}).IsError)
	require.Len(t, b.tasks(t), 2)
	again := c.call(t, "close_session", map[string]any{"session": "s1"})
	require.Contains(t, textOf(again), "nothing to close")
	require.Len(t, b.tasks(t), 2)
}

// A request without Mcp-Session-Id, other than initialize, is a 400 with a
// JSON-RPC error (invalid request) that says what is missing, as the
// transport asks of a server that requires sessions, and runs nothing; it
// was a 200 with an error of code 0. initialize and ping still pass, and a
// request with the session's id is served.
func TestARequestWithoutASessionIsABadRequestThatSaysToInitialize(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	ctx := ctxFor(t)
	none := &rawSession{base: b.base}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"text","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"tools/list"}`,
	} {
		status, h, out := none.post(t, ctx, msg)
		require.Equal(t, http.StatusBadRequest, status, out)
		require.Empty(t, h.Get("Mcp-Session-Id"), "no session was opened")
		require.Len(t, out, 1)
		var res struct {
			ID    json.RawMessage `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(out[0]), &res), out[0])
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		require.NoError(t, json.Unmarshal([]byte(msg), &req))
		require.JSONEq(t, string(req.ID), string(res.ID), "the answer names the request")
		require.Equal(t, -32600, res.Error.Code)
		require.Contains(t, res.Error.Message, "initialize")
		require.Contains(t, res.Error.Message, "Mcp-Session-Id")
	}
	require.Empty(t, b.tasks(t), "nothing ran")

	status, _, out := none.post(t, ctx, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	require.Equal(t, http.StatusOK, status, out)

	// A client of a protocol version without initialize sends its version
	// and no session: the SDK answers it (that it does not serve that
	// version), not this refusal.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var newer strings.Builder
	_, _ = io.Copy(&newer, res.Body)
	_ = res.Body.Close()
	require.NotContains(t, newer.String(), "-32600", "left to the SDK's negotiation")

	s := openRaw(t, ctx, b)
	status, _, out = s.post(t, ctx, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"text","arguments":{}}}`)
	require.Equal(t, http.StatusOK, status, out)
	require.NotContains(t, strings.Join(out, "\n"), `"error"`)
	require.Len(t, b.tasks(t), 1)
}
