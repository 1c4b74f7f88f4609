package mcp_test

// A cancelled call over the Streamable HTTP transport, as a client that
// follows the specification sees it on the wire: after
// notifications/cancelled, no response for the call.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// rawSession is an MCP session driven with hand-written JSON-RPC.
type rawSession struct {
	base, id string
}

// post sends one JSON-RPC message and returns the response's status and
// the data of each SSE event (or the JSON body), read to the end.
func (s *rawSession) post(t *testing.T, ctx context.Context, msg string) (int, http.Header, []string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+"/mcp", strings.NewReader(msg))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out []string
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out = append(out, d)
			}
		}
		require.NoError(t, sc.Err())
	} else {
		var b bytes.Buffer
		_, err := b.ReadFrom(res.Body)
		require.NoError(t, err)
		if b.Len() > 0 {
			out = append(out, b.String())
		}
	}
	return res.StatusCode, res.Header, out
}

func openRaw(t *testing.T, ctx context.Context, b *bundle) *rawSession {
	t.Helper()
	s := &rawSession{base: b.base}
	status, h, out := s.post(t, ctx, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Equal(t, http.StatusOK, status, out)
	s.id = h.Get("Mcp-Session-Id")
	require.NotEmpty(t, s.id)
	status, _, _ = s.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	require.Equal(t, http.StatusAccepted, status)
	return s
}

func TestACancelledCallIsNotAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)

	type answer struct {
		status int
		events []string
	}
	done := make(chan answer, 1)
	go func() {
		status, _, events := s.post(t, ctx, `{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"text","arguments":{},"_meta":{"progressToken":"p30"}}}`)
		done <- answer{status, events}
	}()
	var id string
	waitfor.Eventually(t, "the call's task is queued", func() bool {
		ts := b.tasks(t)
		if len(ts) == 1 && ts[0].State == engine.StateQueued {
			id = ts[0].ID
			return true
		}
		return false
	})
	status, _, _ := s.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":30,"reason":"the user changed their mind"}}`)
	require.Equal(t, http.StatusAccepted, status)

	a := <-done
	require.Equal(t, http.StatusOK, a.status)
	for _, e := range a.events {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		require.NoError(t, json.Unmarshal([]byte(e), &m), e)
		require.Equal(t, "notifications/progress", m.Method, "nothing but progress for a cancelled call: %s", e)
	}
	waitfor.Eventually(t, "the task is cancelled", func() bool {
		tk, err := b.eng.Task(context.Background(), id)
		return err == nil && tk.State == engine.StateCancelled
	})
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "cancelled by the MCP client", tk.Reason)

	// The session goes on: a call under the same id is answered.
	_, _, out := s.post(t, ctx, `{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"get_task","arguments":{"id":"`+id+`"}}}`)
	require.Len(t, out, 1)
	require.Contains(t, out[0], `"id":30`)
	require.Contains(t, out[0], `cancelled by the MCP client`)
}

func TestTheAnswerOfACancelledCallThatLeavesAnywayNamesItsTaskAndReason(t *testing.T) {
	mcp.SendCancelledAnswers(t) // as if the answer left before the cancellation arrived
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)
	done := make(chan []string, 1)
	go func() {
		_, _, events := s.post(t, ctx, `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"text","arguments":{}}}`)
		done <- events
	}()
	var id string
	waitfor.Eventually(t, "the call's task is queued", func() bool {
		ts := b.tasks(t)
		if len(ts) == 1 && ts[0].State == engine.StateQueued {
			id = ts[0].ID
			return true
		}
		return false
	})
	s.post(t, ctx, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}`)
	events := <-done
	require.Len(t, events, 1)
	var res struct {
		ID     string `json:"id"`
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				TaskID string `json:"taskId"`
				State  string `json:"state"`
				Error  struct {
					Code, Message string
				} `json:"error"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	require.NoError(t, json.Unmarshal([]byte(events[0]), &res), events[0])
	require.Equal(t, "c", res.ID)
	require.True(t, res.Result.IsError)
	sc := res.Result.StructuredContent
	require.Equal(t, id, sc.TaskID, events[0])
	require.Equal(t, "CANCELLED", sc.State)
	require.Equal(t, "cancelled by the MCP client", sc.Error.Message)
	require.NotContains(t, events[0], "context canceled")
}
