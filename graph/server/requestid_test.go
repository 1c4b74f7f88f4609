package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// failingEngine is the engine as a server over a database that fails
// sees it: a read of a task whose id names a cause ("refused",
// "disk-full", …) fails with a store error of that cause, whose text names
// the database; Agents panics.
type failingEngine struct{ *engine.Engine }

// storeCauses are the causes a task's id may name, each told in its own
// words (a kind of its own in the log: storeerr.Log).
var storeCauses = map[string]error{
	"refused": syscall.ECONNREFUSED, "disk-full": syscall.ENOSPC, "read-only": syscall.EROFS,
	"reset": syscall.ECONNRESET, "unreachable": syscall.ENETUNREACH,
}

// dbSecret is what the store's errors name and clients are never told.
const dbSecret = "postgres://sy@db.internal:5432/prod"

func storeFailure(id string) error {
	cause, ok := storeCauses[id]
	if !ok {
		return nil
	}
	return &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "reading the task",
		Err: storeerr.Mark(fmt.Errorf("postgres store: %s: read task %s: %w", dbSecret, id, cause))}
}

func (f *failingEngine) Task(ctx context.Context, id string) (*engine.Task, error) {
	if err := storeFailure(id); err != nil {
		return nil, err
	}
	return f.Engine.Task(ctx, id)
}

func (f *failingEngine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	if err := storeFailure(id); err != nil {
		return nil, err
	}
	return f.Engine.CommittedTask(ctx, id)
}

func (f *failingEngine) Agents(context.Context) []engine.AgentStatus {
	panic("the agents' table is corrupt")
}

// syncBuffer is a log's output that tests read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// take returns what was written since the last take.
func (b *syncBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.buf.String()
	b.buf.Reset()
	return out
}

// lineWith returns the first line of logs that holds every one of parts.
func lineWith(logs string, parts ...string) string {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return l
		}
	}
	return ""
}

// failingServer is a server over failingEngine whose log (at level) is
// captured.
func failingServer(t *testing.T, level hclog.Level) (*bundle, *syncBuffer) {
	logs := &syncBuffer{}
	b := setup(t, func(o *setupOptions) {
		o.engine = func(e *engine.Engine) resolvers.Engine { return &failingEngine{e} }
		o.server = func(so *server.Options) {
			so.Logger = hclog.New(&hclog.LoggerOptions{Level: level, Output: io.MultiWriter(testWriter{t}, logs)})
			so.Ready = func() error { return storeFailure("unreachable") }
		}
	})
	return b, logs
}

// gqlAnswer is a GraphQL response as the tests read it.
type gqlAnswer struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// postWithID sends a GraphQL query with the given X-Request-Id headers (none: nil)
// and returns the answer and the response's X-Request-Id values.
func postWithID(t *testing.T, base, query string, ids ...string) (gqlAnswer, []string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for _, id := range ids {
		req.Header.Add("X-Request-Id", id)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var ans gqlAnswer
	require.NoError(t, json.NewDecoder(res.Body).Decode(&ans))
	return ans, res.Header.Values("X-Request-Id")
}

// An error whose detail was held back names its request: the response's
// X-Request-Id, the error's extensions.requestId and the log line of the
// full error carry the same id, made by the server when the caller sent
// none.
func TestAHeldBackErrorNamesItsRequest(t *testing.T) {
	t.Parallel()
	b, logs := failingServer(t, hclog.Info)

	ans, header := postWithID(t, b.base, `{ task(id: "refused") { id } }`)
	require.Len(t, ans.Errors, 1)
	e := ans.Errors[0]
	require.Equal(t, "reading the task: the database cannot be reached (connection refused)", e.Message)
	require.Len(t, header, 1, "the response carries the request's id")
	id := header[0]
	require.Regexp(t, `^[A-Z2-7]{26}$`, id)
	require.Equal(t, id, e.Extensions["requestId"])
	line := lineWith(logs.String(), "a client was told the database failed", "request_id="+id)
	require.NotEmpty(t, line, "the log line of the full error names the request:\n%s", logs)
	require.Contains(t, line, dbSecret)
	require.Contains(t, line, "answered=graphql")

	// The caller's id, when it sends a sane one, is the request's.
	const mine = "client-7f3a:9/b=c"
	ans, header = postWithID(t, b.base, `{ task(id: "disk-full") { id } }`, mine)
	require.Equal(t, []string{mine}, header)
	require.Equal(t, mine, ans.Errors[0].Extensions["requestId"])
	require.NotEmpty(t, lineWith(logs.String(), "a client was told the database failed", "request_id="+mine, "disk full"), logs.String())
	_, header = postWithID(t, b.base, `{ __typename }`, mine)
	require.Equal(t, []string{mine}, header, "echoed when nothing failed")

	// Errors that were not held back name no request.
	ans, _ = postWithID(t, b.base, `{ task(id: "`+strings.Repeat("x", 300)+`") { id } }`)
	require.Equal(t, "INVALID_INPUT", ans.Errors[0].Extensions["code"])
	require.NotContains(t, ans.Errors[0].Extensions, "requestId")

	// A panic's detail is held back as well.
	ans, header = postWithID(t, b.base, `{ agents { id } }`)
	require.Equal(t, "internal error", ans.Errors[0].Message)
	require.Len(t, header, 1)
	require.Equal(t, header[0], ans.Errors[0].Extensions["requestId"])
	require.NotEmpty(t, lineWith(logs.String(), "panic in a resolver", "request_id="+header[0]), logs.String())

	// /readyz, which anyone may read, holds back the store's error too.
	res, err := http.Get(b.base + "/readyz")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	id = res.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	require.NotEmpty(t, lineWith(logs.String(), "a client was told the database failed", "answered=readyz", "request_id="+id), logs.String())
}

// A mutation's audit line names its request, as the response does.
func TestTheAuditLineNamesTheRequest(t *testing.T) {
	t.Parallel()
	b, logs := failingServer(t, hclog.Info)
	const submit = `mutation { submitTask(input: {agentId: "a", action: {kind: "click", selector: "css:#go"}}) { id } }`
	ans, header := postWithID(t, b.base, submit)
	require.Empty(t, ans.Errors)
	require.Len(t, header, 1)
	require.NotEmpty(t, lineWith(logs.String(), "audit: mutation", "op=submitTask", "request_id="+header[0]), logs.String())
	ans, header = postWithID(t, b.base, submit, "batch-42.step-1")
	require.Empty(t, ans.Errors)
	require.Equal(t, []string{"batch-42.step-1"}, header)
	require.NotEmpty(t, lineWith(logs.String(), "audit: mutation", "op=submitTask", "request_id=batch-42.step-1"), logs.String())
}

// A caller's id that is not sane — too long, with spaces, control or
// non-ASCII characters, a log line of its own behind a newline, or sent
// twice — is not taken: the server makes one, which the response and the
// error carry, and the caller's never reaches the log.
func TestAHostileRequestIDIsReplaced(t *testing.T) {
	t.Parallel()
	b, logs := failingServer(t, hclog.Debug) // every request and every held-back error is logged
	hostile := [][]string{
		{strings.Repeat("A", 4096)},
		{strings.Repeat("B", 129)},
		{"tab\there"},
		{"spa ce"},
		{"ünïcode-id"},
		{"twice-1", "twice-2"},
		{""},
	}
	seen := map[string]bool{}
	check := func(sent []string, ans gqlAnswer, header []string) {
		t.Helper()
		require.Len(t, header, 1, "%q", sent)
		id := header[0]
		require.Regexp(t, `^[A-Z2-7]{26}$`, id, "%q", sent)
		require.False(t, seen[id], "each request has its own id")
		seen[id] = true
		require.Len(t, ans.Errors, 1)
		require.Equal(t, id, ans.Errors[0].Extensions["requestId"], "%q", sent)
		require.NotEmpty(t, lineWith(logs.String(), "a client was told the database failed", "request_id="+id), "%q:\n%s", sent, logs)
	}
	for _, ids := range hostile {
		ans, header := postWithID(t, b.base, `{ task(id: "refused") { id } }`, ids...)
		check(ids, ans, header)
	}

	// What net/http's client refuses to send, a handler may still be given.
	const injected = "x\n[ERROR] switchyard.http: forged line request_id=admin"
	for _, id := range []string{injected, "cr\rlf", "nul\x00", "\x7fdelete"} {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/graphql", strings.NewReader(`{"query":"{ task(id: \"refused\") { id } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header["X-Request-Id"] = []string{id}
		w := httptest.NewRecorder()
		b.srv.Handler().ServeHTTP(w, req)
		var ans gqlAnswer
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &ans))
		check([]string{id}, ans, w.Result().Header.Values("X-Request-Id"))
	}

	out := logs.String()
	for _, ids := range hostile {
		for _, id := range ids {
			if id != "" {
				require.NotContains(t, out, id)
			}
		}
	}
	require.NotContains(t, out, "forged line")
	require.NotContains(t, out, "cr\rlf")
	require.NotContains(t, out, "nul\x00")
	require.NotContains(t, out, "twice-")
	require.NotContains(t, out, "\x7fdelete")
}

// A WebSocket's operations carry the id of the connection's request, which
// the upgrade's response names.
func TestASubscriptionsErrorNamesItsConnection(t *testing.T) {
	t.Parallel()
	b, logs := failingServer(t, hclog.Info)
	ctx := ctxFor(t)
	ws, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{client.TransportWS}})
	require.NoError(t, err)
	defer ws.CloseNow()
	id := res.Header.Get("X-Request-Id")
	require.Regexp(t, `^[A-Z2-7]{26}$`, id, "the upgrade's response names the connection's request")
	require.NoError(t, wsjson.Write(ctx, ws, map[string]any{"type": "connection_init"}))
	var msg map[string]json.RawMessage
	require.NoError(t, wsjson.Read(ctx, ws, &msg))
	require.JSONEq(t, `"connection_ack"`, string(msg["type"]))
	require.NoError(t, wsjson.Write(ctx, ws, map[string]any{"id": "1", "type": "subscribe",
		"payload": map[string]any{"query": `subscription { task(id: "reset") { id } }`}}))
	for {
		msg = nil
		require.NoError(t, wsjson.Read(ctx, ws, &msg))
		if string(msg["type"]) != `"ping"` {
			break
		}
	}
	require.Contains(t, []string{`"error"`, `"next"`}, string(msg["type"]), "%s", msg)
	require.Contains(t, string(msg["payload"]), `"requestId":"`+id+`"`)
	require.Contains(t, string(msg["payload"]), "connection reset")
	require.NotEmpty(t, lineWith(logs.String(), "a client was told the database failed", "request_id="+id), logs.String())

	// So does an SSE stream's.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/graphql",
		strings.NewReader(`{"query":"subscription { task(id: \"read-only\") { id } }"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	sse, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer sse.Body.Close()
	id = sse.Header.Get("X-Request-Id")
	require.Regexp(t, `^[A-Z2-7]{26}$`, id)
	sc := bufio.NewScanner(sse.Body)
	found := false
	for !found && sc.Scan() {
		found = strings.Contains(sc.Text(), `"requestId":"`+id+`"`)
	}
	require.True(t, found, "the stream's error names its request")
}

// An MCP tool's error whose cause was held back names the call's request,
// in its text and its structured error, as the log line does.
func TestAnMCPErrorNamesItsRequest(t *testing.T) {
	t.Parallel()
	b, logs := failingServer(t, hclog.Info)
	for _, call := range []struct{ sent, task string }{{"", "refused"}, {"agent-call-9", "disk-full"}, {"bad id", "read-only"}} {
		sent := call.sent
		h := http.Header{}
		if sent != "" {
			h.Set("X-Request-Id", sent)
		}
		var last struct {
			sync.Mutex
			id string
		}
		cl := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
		tr := &sdk.StreamableClientTransport{Endpoint: b.base + "/mcp",
			HTTPClient: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				for k, v := range h {
					r.Header[k] = v
				}
				var body []byte
				if r.Body != nil {
					body, _ = io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				res, err := http.DefaultTransport.RoundTrip(r)
				if err == nil && bytes.Contains(body, []byte(`"tools/call"`)) {
					last.Lock()
					last.id = res.Header.Get("X-Request-Id")
					last.Unlock()
				}
				return res, err
			})}}
		cs, err := cl.Connect(ctxFor(t), tr, nil)
		require.NoError(t, err)
		res, err := cs.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "get_task", Arguments: map[string]any{"id": call.task}})
		require.NoError(t, err)
		_ = cs.Close()
		require.True(t, res.IsError)
		last.Lock()
		id := last.id
		last.Unlock()
		require.NotEmpty(t, id, "the call's response names its request")
		if sent == "agent-call-9" {
			require.Equal(t, sent, id)
		} else {
			require.Regexp(t, `^[A-Z2-7]{26}$`, id)
		}
		text := res.Content[0].(*sdk.TextContent).Text
		require.Contains(t, text, "(request id "+id+")")
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.Contains(t, string(raw), `"requestId":"`+id+`"`)
		require.NotContains(t, string(raw)+text, "db.internal")
		require.NotEmpty(t, lineWith(logs.String(), "answered=mcp", "request_id="+id), logs.String())
	}
	require.NotContains(t, logs.String(), "bad id")
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
