package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/auth"
	gqlclient "github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestListToolsDescribesEveryToolWithAnExampleAndASchema(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	c := b.connect(t, "lister", "", "")
	res, err := c.ListTools(ctxFor(t), nil)
	require.NoError(t, err)
	byName := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
		require.NotEmpty(t, tool.Description, tool.Name)
		if props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any); len(props) > 0 {
			require.Contains(t, tool.Description, "Example", "%s's description shows an example call", tool.Name)
		}
		require.NotNil(t, tool.InputSchema, tool.Name)
	}
	scheduler := []string{"submit_task", "get_task", "list_tasks", "cancel_task", "open_session", "close_session"}
	for _, name := range append([]string{"navigate", "click", "hover", "fill", "type", "press", "select", "check", "uncheck", "scroll",
		"text", "snapshot", "screenshot", "evaluate", "back", "forward", "reload", "wait"}, scheduler...) {
		require.Contains(t, byName, name)
	}
	for name := range byName {
		if !slices.Contains(scheduler, name) {
			require.True(t, executor.KnownKind(executor.KindInstance, name), "browser tool %s is an action kind of the instances (executor/kinds.go)", name)
		}
	}
	schema, err := json.Marshal(byName["click"].InputSchema)
	require.NoError(t, err)
	require.Contains(t, string(schema), `"required":["selector"]`)
	require.Contains(t, string(schema), "xpath:", "the selector syntax is in the schema")
	require.Contains(t, string(schema), `"additionalProperties":false`)
}

func TestBrowserCallsRunAsTasksOfTheCallersAgentInTheMCPSessionsBrowserSession(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true, config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4}, {Name: "agents", MaxInFlight: 4}}}, lane: "agents"})
	c := b.connect(t, "claude-code", "", "")
	res := c.call(t, "click", map[string]any{"selector": "#go"})
	require.False(t, res.IsError, textOf(res))
	res2 := c.call(t, "fill", map[string]any{"selector": "css:#name", "text": "Ada"})
	require.False(t, res2.IsError, textOf(res2))
	out := structured(t, res)
	require.Equal(t, "SUCCEEDED", out["state"])

	ts := b.tasks(t)
	require.Len(t, ts, 2)
	for _, tk := range ts {
		require.Equal(t, "claude-code", tk.Spec.AgentID, "without tokens or header, the MCP client's name is the agent")
		require.Equal(t, "agents", tk.Spec.Lane, "the configured lane of MCP calls")
		require.Equal(t, out["session"], tk.Spec.SessionKey, "both calls share the MCP session's browser session")
		require.Equal(t, "mcp", tk.Spec.Labels["via"])
	}
	evs, _ := b.eng.Events().Read(0, 1000, nil)
	var states []string
	for _, e := range evs {
		if e.TaskID == ts[0].ID && e.Type == engine.EventState {
			states = append(states, e.To.String())
		}
	}
	require.Equal(t, []string{"QUEUED", "ASSIGNED", "SUCCEEDED"}, states, "an MCP call's task has the events of any task")
	require.Equal(t, "fill", ts[0].Spec.Action.Kind)
	require.JSONEq(t, `{"text":"Ada"}`, string(ts[0].Spec.Action.Params))

	// The header names the agent; open_session starts a fresh browser session.
	d := b.connect(t, "other", "", "bot-7")
	fresh := d.call(t, "open_session", nil)
	key := structured(t, fresh)["session"].(string)
	require.NotEqual(t, out["session"], key)
	d.call(t, "text", nil)
	ts = b.tasks(t)
	require.Equal(t, "bot-7", ts[0].Spec.AgentID)
	require.Equal(t, key, ts[0].Spec.SessionKey)
}

func TestACallIntoAPausedLaneReportsProgressAndTheClientsCancelCancelsItsTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}})
	c := b.connect(t, "waiter", "", "")
	ctx, cancel := context.WithCancel(ctxFor(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "text", Arguments: map[string]any{}, Meta: sdk.Meta{"progressToken": "p1"}})
		done <- err
	}()
	waitfor.Eventually(t, "the call reports its place in the queue", func() bool {
		for _, m := range c.progressMessages() {
			if m == "queued in lane main, 0 tasks ahead (the lane is paused)" {
				return true
			}
		}
		return false
	})
	ts := b.tasks(t)
	require.Len(t, ts, 1)
	require.Equal(t, engine.StateQueued, ts[0].State)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	waitfor.Eventually(t, "the task is cancelled", func() bool {
		tk, err := b.eng.Task(context.Background(), ts[0].ID)
		return err == nil && tk.State == engine.StateCancelled
	})
	tk, _ := b.eng.Task(context.Background(), ts[0].ID)
	require.Equal(t, "cancelled by the MCP client", tk.Reason)
}

func TestTwoAgentsCallingAtOnceShareTheInstanceByFairness(t *testing.T) {
	t.Parallel()
	// Two slots; ada's four calls are older than bob's two. First come,
	// first served would run ada's two first; the fairness policy runs one
	// of each agent while both have work waiting.
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 2, Paused: true}}}})
	results := make(chan *sdk.CallToolResult, 6)
	callAs := func(agent string, n int) {
		c := b.connect(t, "x", "", agent)
		for i := range n {
			go func() {
				res, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "text",
					Arguments: map[string]any{"session": fmt.Sprintf("%s-%d", agent, i)}})
				if err != nil {
					res = &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}
				}
				results <- res
			}()
		}
	}
	callAs("ada", 4)
	waitfor.Eventually(t, "ada's calls are queued", func() bool { return len(b.tasks(t)) == 4 })
	callAs("bob", 2)
	waitfor.Eventually(t, "bob's calls are queued", func() bool { return len(b.tasks(t)) == 6 })
	_, err := b.eng.UpdateLane(context.Background(), "main", engine.LaneUpdate{Paused: new(false)})
	require.NoError(t, err)

	agentOf := func(id string) string {
		tk, err := b.eng.Task(context.Background(), id)
		require.NoError(t, err)
		return tk.Spec.AgentID
	}
	finishedIDs := map[string]bool{} // finished by the test, whether or not the engine recorded it yet
	for finished := 0; finished < 6; finished++ {
		want := min(2, 6-finished)
		waitfor.Eventually(t, "the free slots are taken", func() bool { return len(b.exec.Running()) == want })
		running := b.exec.Running()
		unfinished, busy := map[string]bool{}, map[string]bool{}
		for _, tk := range b.tasks(t) {
			if !tk.State.Terminal() && !finishedIDs[tk.ID] {
				unfinished[tk.Spec.AgentID] = true
			}
		}
		for _, id := range running {
			busy[agentOf(id)] = true
		}
		if len(unfinished) == 2 {
			require.Len(t, busy, 2, "while both agents have work, each has a task running: %v", running)
		}
		finishedIDs[running[0]] = true
		require.NoError(t, b.exec.Succeed(running[0], `{"text":"ok"}`))
	}
	for range 6 {
		res := <-results
		require.False(t, res.IsError, textOf(res))
		require.Equal(t, "ok", textOf(res))
	}
}

func TestRolesAndOwnershipHoldOverMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true, tokens: []auth.Token{
		{Name: "reader", Role: auth.RoleReader},
		{Name: "ada", Role: auth.RoleAgent, AgentID: "ada"},
		{Name: "bob", Role: auth.RoleAgent, AgentID: "bob"},
		{Name: "crawler", Role: auth.RoleWorker, Lanes: []string{"main"}},
	}})

	// A pull lanes' worker token does nothing but lease, over MCP too.
	worker := b.connect(t, "w", "crawler", "")
	for _, tool := range []string{"navigate", "submit_task", "list_tasks"} {
		args := map[string]any{"url": "https://example.com"}
		if tool == "submit_task" {
			args = map[string]any{"action": map[string]any{"kind": "text"}}
		} else if tool == "list_tasks" {
			args = nil
		}
		res := worker.call(t, tool, args)
		require.Equal(t, "FORBIDDEN", errorOf(t, res)["code"], "%s: %s", tool, textOf(res))
	}
	require.Empty(t, b.tasks(t))

	reader := b.connect(t, "r", "reader", "")
	res := reader.call(t, "navigate", map[string]any{"url": "https://example.com"})
	e := errorOf(t, res)
	require.Equal(t, "FORBIDDEN", e["code"])
	require.Contains(t, textOf(res), `token "reader" is reader`)
	require.Empty(t, b.tasks(t), "a refused call submits nothing")

	ada := b.connect(t, "a", "ada", "")
	sub := ada.call(t, "submit_task", map[string]any{"action": map[string]any{"kind": "text"}})
	require.False(t, sub.IsError, textOf(sub))
	id := structured(t, sub)["taskId"].(string)
	own, err := ada.ReadResource(ctxFor(t), &sdk.ReadResourceParams{URI: "switchyard://tasks/" + id})
	require.NoError(t, err)
	require.Contains(t, own.Contents[0].Text, `"agentId": "ada"`)

	bob := b.connect(t, "b", "bob", "")
	_, err = bob.ReadResource(ctxFor(t), &sdk.ReadResourceParams{URI: "switchyard://tasks/" + id})
	var werr *jsonrpc.Error
	require.ErrorAs(t, err, &werr)
	require.Equal(t, int64(mcp.CodeForbidden), werr.Code)
	require.Contains(t, werr.Message, "belongs to another agent")
	got := bob.call(t, "get_task", map[string]any{"id": id})
	require.Equal(t, "FORBIDDEN", errorOf(t, got)["code"])

	// An agent token submits as its own agent only, whatever the header says.
	other := b.connect(t, "b", "bob", "ada")
	res = other.call(t, "text", nil)
	require.Equal(t, "FORBIDDEN", errorOf(t, res)["code"])
	require.Len(t, b.tasks(t), 1)

	// An MCP session is bound to the token that opened it: bob cannot use ada's.
	require.NotEmpty(t, ada.ID())
	hijack, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
	require.NoError(t, err)
	hijack.Header.Set("Authorization", "Bearer "+b.tokens["bob"])
	hijack.Header.Set("Mcp-Session-Id", ada.ID())
	hijack.Header.Set("Content-Type", "application/json")
	hijack.Header.Set("Accept", "application/json, text/event-stream")
	hres, err := http.DefaultClient.Do(hijack)
	require.NoError(t, err)
	_ = hres.Body.Close()
	require.Equal(t, http.StatusForbidden, hres.StatusCode)

	// Without a valid token, nothing is served.
	_, err = sdk.NewClient(&sdk.Implementation{Name: "anon", Version: "1"}, nil).Connect(ctxFor(t),
		&sdk.StreamableClientTransport{Endpoint: b.base + "/mcp"}, nil)
	require.Error(t, err)
	for _, header := range []string{"", "Bearer swy_not-a-token"} {
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/mcp", strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", header)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusUnauthorized, res.StatusCode)
		require.Equal(t, `Bearer realm="switchyard"`, res.Header.Get("WWW-Authenticate"))
	}
}

func TestBadInputIsAClearMCPErrorAndSubmitsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	c := b.connect(t, "sloppy", "", "")

	_, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: "teleport", Arguments: map[string]any{}})
	require.ErrorContains(t, err, `unknown tool "teleport"`)

	// Arguments that do not fit the tool's schema: INVALID_INPUT naming the
	// argument, in the structured content like every other refusal.
	for _, tc := range []struct {
		tool  string
		args  map[string]any
		field string
	}{
		{"navigate", map[string]any{"bogus": 1}, "bogus"},
		{"navigate", map[string]any{}, "url"},
		{"navigate", map[string]any{"url": 42}, "url"},
		{"click", map[string]any{"selector": "#go", "button": "left"}, "button"},
		{"screenshot", map[string]any{"quality": 500}, "quality"},
		{"text", map[string]any{"timeoutMs": "soon"}, "timeoutMs"},
		{"get_task", map[string]any{"id": "x", "reason": "copied"}, "reason"},
		{"submit_task", map[string]any{"action": map[string]any{"kind": 7}}, "action.kind"},
		{"submit_task", map[string]any{"priority": "URGENT"}, "priority"},
		{"list_tasks", map[string]any{"first": "ten"}, "first"},
	} {
		res := c.call(t, tc.tool, tc.args)
		e := errorOf(t, res)
		require.Equal(t, "INVALID_INPUT", e["code"], "%s %v", tc.tool, tc.args)
		require.Equal(t, tc.field, e["field"], "%s %v: %s", tc.tool, tc.args, textOf(res))
		require.Equal(t, false, e["retryable"])
		require.Contains(t, textOf(res), tc.field, "the text names the argument too")
	}

	res := c.call(t, "navigate", map[string]any{"url": "ftp://example.com"})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])

	for _, sel := range []string{"css:div[", "xpath:", "ref:abc", "a >", "text:", "//div[@id='x'"} {
		res = c.call(t, "click", map[string]any{"selector": sel})
		e := errorOf(t, res)
		require.Equal(t, "INVALID_INPUT", e["code"], sel)
		require.Equal(t, "selector", e["field"], sel)
		require.True(t, strings.Contains(textOf(res), "is not a valid selector"), textOf(res))
	}
	res = c.call(t, "submit_task", map[string]any{"action": map[string]any{"kind": "click", "selector": "div[["}})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])
	res = c.call(t, "submit_task", map[string]any{"lane": "no such lane!"})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])
	// A URL the navigate tool refuses is refused in submit_task too.
	res = c.call(t, "submit_task", map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "file:///etc/hostname"}}})
	e := errorOf(t, res)
	require.Equal(t, "INVALID_INPUT", e["code"], textOf(res))
	require.Equal(t, "action.params.url", e["field"], textOf(res))
	require.Contains(t, textOf(res), "scheme must be http, https, about or data")

	require.Empty(t, b.tasks(t), "nothing was submitted")
	require.Zero(t, b.eng.Stats(context.Background()).Submitted)
}

// lockedBuffer is a log's output that a test reads while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestACallRefusedBeforeSubmissionIsAudited: a browser tool call refused
// for its arguments (a schema violation, a bad selector, not a URL) is
// audited with its outcome, as a refused submit_task is; so are
// submit_task's and cancel_task's own refusals.
func TestACallRefusedBeforeSubmissionIsAudited(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	b := setup(t, options{auto: true, audit: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info})})
	c := b.connect(t, "auditor", "", "")
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"click", map[string]any{}},                              // schema: selector missing
		{"fill", map[string]any{"selector": "#name", "text": 5}}, // schema: a number
		{"click", map[string]any{"selector": "xpath://[["}},      // a malformed selector
		{"navigate", map[string]any{"url": "not a url"}},         // not a URL
		{"submit_task", map[string]any{"priority": "URGENT"}},    // schema
		{"submit_task", map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "file:///etc/hostname"}}}}, // the resolvers' check
		{"cancel_task", map[string]any{}}, // schema: id missing
	} {
		res := c.call(t, tc.tool, tc.args)
		require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"], "%s %v", tc.tool, tc.args)
	}
	require.Empty(t, b.tasks(t), "nothing was submitted")
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	want := []string{"click", "fill", "click", "navigate", "submit_task", "submit_task", "cancel_task"}
	require.Len(t, lines, len(want), log.String())
	for i, tool := range want {
		require.Contains(t, lines[i], "mcp: token=", lines[i])
		require.Contains(t, lines[i], "agent=auditor", lines[i])
		require.Contains(t, lines[i], "tool="+tool+" ", lines[i])
		require.Contains(t, lines[i], "outcome=INVALID_INPUT", lines[i])
	}
}

func TestTheTokensRateOfMutationsIsSharedWithGraphQL(t *testing.T) {
	t.Parallel()
	// Three tokens: the session's initialize takes one too.
	b := setup(t, options{auto: true, limits: resolvers.Limits{MutationsPerSecond: 0.01, MutationBurst: 3},
		tokens: []auth.Token{{Name: "ada", Role: auth.RoleAgent, AgentID: "ada"}}})
	c := b.connect(t, "a", "ada", "")
	require.False(t, c.call(t, "text", nil).IsError)

	gql := gqlclient.New(b.base + "/graphql")
	gql.Header.Set("Authorization", "Bearer "+b.tokens["ada"])
	require.NoError(t, gql.Do(ctxFor(t), `mutation { submitTask(input: {agentId: "ada", action: {kind: "text"}}) { id } }`, nil, nil))

	res := c.call(t, "text", nil)
	e := errorOf(t, res)
	require.Equal(t, "RATE_LIMITED", e["code"])
	require.Equal(t, true, e["retryable"])
	require.Positive(t, e["retryAfterMs"])
	require.Len(t, b.tasks(t), 2, "the refused call submitted nothing")
}

func TestABrowserOnAnotherSiteCannotCallTools(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	body := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/mcp", body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusForbidden, res.StatusCode)
}

// TestABrowserFromAnAllowedOriginCallsTools: api.allowedOrigins (the MCP
// Inspector's page, http://localhost:6274) may call tools, as it may open
// GraphQL WebSockets; other sites still get 403.
func TestABrowserFromAnAllowedOriginCallsTools(t *testing.T) {
	t.Parallel()
	initialize := func(base, origin, site string) int {
		body := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, base+"/mcp", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", site)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = res.Body.Close()
		return res.StatusCode
	}
	allowed := setup(t, options{auto: true, allowedOrigins: []string{"localhost:6274", "https://*.example.org"}})
	require.Equal(t, http.StatusOK, initialize(allowed.base, "http://localhost:6274", "same-site"))
	require.Equal(t, http.StatusOK, initialize(allowed.base, "https://tools.example.org", "cross-site"))
	require.Equal(t, http.StatusForbidden, initialize(allowed.base, "http://tools.example.org", "cross-site"), "the pattern names the scheme")
	require.Equal(t, http.StatusForbidden, initialize(allowed.base, "https://evil.example", "cross-site"))

	plain := setup(t, options{auto: true})
	require.Equal(t, http.StatusForbidden, initialize(plain.base, "http://localhost:6274", "same-site"), "an origin no one allowed")
}

func TestSchedulerToolsSubmitListGetAndCancelTheCallersTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}})
	c := b.connect(t, "planner", "", "")
	args := map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.com"}},
		"sessionKey": "research-1", "idempotencyKey": "step-1", "priority": "HIGH", "labels": map[string]any{"step": "1"}}
	first := c.call(t, "submit_task", args)
	require.False(t, first.IsError, textOf(first))
	id := structured(t, first)["taskId"].(string)
	again := c.call(t, "submit_task", args)
	require.Equal(t, id, structured(t, again)["taskId"], "the idempotency key returns the original task")
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, "planner", tk.Spec.AgentID)
	require.Equal(t, engine.PriorityHigh, tk.Spec.Priority)
	require.Equal(t, "research-1", tk.Spec.SessionKey)

	other := b.connect(t, "someone-else", "", "")
	require.False(t, other.call(t, "submit_task", map[string]any{"instruction": "summarise"}).IsError)

	list := c.call(t, "list_tasks", map[string]any{"states": []any{"QUEUED"}})
	tasks := structured(t, list)["tasks"].([]any)
	require.Len(t, tasks, 1, "the caller's own tasks only")
	require.Equal(t, id, tasks[0].(map[string]any)["id"])

	got := c.call(t, "get_task", map[string]any{"id": id})
	require.Equal(t, "QUEUED", structured(t, got)["state"])
	view := structured(t, got)["tasks"].([]any)[0].(map[string]any)
	require.EqualValues(t, 0, view["position"], "first in its queue")

	cancelled := c.call(t, "cancel_task", map[string]any{"id": id, "reason": "plan changed"})
	require.Equal(t, "CANCELLED", structured(t, cancelled)["state"])
	tk, err = b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, engine.StateCancelled, tk.State)
	require.Equal(t, "plan changed", tk.Reason)

	res := c.call(t, "list_tasks", map[string]any{"states": []any{"DONE"}})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])
}

func TestCloseSessionClosesTheTabAndStartsAFreshSession(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	c := b.connect(t, "closer", "", "")
	before := structured(t, c.call(t, "text", nil))["session"]
	res := c.call(t, "close_session", nil)
	require.False(t, res.IsError, textOf(res))
	ts := b.tasks(t)
	require.Equal(t, "close", ts[0].Spec.Action.Kind)
	require.Equal(t, before, ts[0].Spec.SessionKey, "the close runs in the session it closes")
	after := structured(t, c.call(t, "text", nil))["session"]
	require.NotEqual(t, before, after, "the next call opens a fresh session")
}

func TestEveryToolsSchemaListsExactlyTheArgumentsItsHandlerReads(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	c := b.connect(t, "lister", "", "")
	res, err := c.ListTools(ctxFor(t), nil)
	require.NoError(t, err)
	// The arguments each handler decodes: its input type's JSON fields.
	fieldsOf := func(v any) []string {
		var names []string
		var walk func(rt reflect.Type)
		walk = func(rt reflect.Type) {
			for i := range rt.NumField() {
				f := rt.Field(i)
				if f.Anonymous {
					walk(f.Type)
					continue
				}
				if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
					names = append(names, name)
				}
			}
		}
		walk(reflect.TypeOf(v))
		slices.Sort(names)
		return names
	}
	scheduler := map[string][]string{
		"submit_task":   fieldsOf(mcp.SubmitInput{}),
		"get_task":      {"id"},
		"cancel_task":   {"id", "reason"},
		"list_tasks":    {"after", "first", "session", "states"},
		"open_session":  nil,
		"close_session": {"session"},
	}
	require.Equal(t, []string{"id"}, fieldsOf(mcp.IDInput{}), "get_task reads the id only")
	require.Equal(t, []string{"id", "reason"}, fieldsOf(mcp.CancelInput{}))
	require.Equal(t, scheduler["list_tasks"], fieldsOf(mcp.ListInput{}))
	require.Equal(t, scheduler["close_session"], fieldsOf(mcp.SessionInput{}))
	browserArgs := fieldsOf(mcp.Args{})
	for _, tool := range res.Tools {
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Properties           map[string]json.RawMessage `json:"properties"`
			Required             []string                   `json:"required"`
			AdditionalProperties *bool                      `json:"additionalProperties"`
		}
		require.NoError(t, json.Unmarshal(schema, &s))
		props := slices.Sorted(maps.Keys(s.Properties))
		require.NotNil(t, s.AdditionalProperties, "%s refuses unknown arguments", tool.Name)
		require.False(t, *s.AdditionalProperties, "%s refuses unknown arguments", tool.Name)
		for _, r := range s.Required {
			require.Contains(t, props, r, "%s requires an argument it lists", tool.Name)
		}
		if want, ok := scheduler[tool.Name]; ok {
			require.Equal(t, want, props, "%s's schema lists what its handler reads", tool.Name)
			continue
		}
		require.Subset(t, browserArgs, props, "browser tool %s lists only arguments of Args", tool.Name)
		require.Contains(t, props, "session", tool.Name)
		require.Contains(t, props, "timeoutMs", tool.Name)
	}
}

func TestListTasksAlwaysAnswersATasksArrayAndSaysWhoseForEachRole(t *testing.T) {
	t.Parallel()
	b := setup(t, options{config: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}},
		tokens: []auth.Token{
			{Name: "reader", Role: auth.RoleReader},
			{Name: "ops", Role: auth.RoleOperator},
			{Name: "ada", Role: auth.RoleAgent, AgentID: "ada"},
			{Name: "bob", Role: auth.RoleAgent, AgentID: "bob"},
		}})
	ids := func(res *sdk.CallToolResult) []string {
		t.Helper()
		require.False(t, res.IsError, textOf(res))
		tasks, ok := structured(t, res)["tasks"].([]any)
		require.True(t, ok, "tasks is an array: %#v", res.StructuredContent)
		var out []string
		for _, tk := range tasks {
			out = append(out, tk.(map[string]any)["id"].(string))
		}
		return out
	}
	reader := b.connect(t, "r", "reader", "")
	require.Empty(t, ids(reader.call(t, "list_tasks", nil)), "nothing yet: an empty array, not {}")
	require.JSONEq(t, `{"tasks":[]}`, textOf(reader.call(t, "list_tasks", nil)))

	ada := b.connect(t, "a", "ada", "")
	sub := ada.call(t, "submit_task", map[string]any{"instruction": "one"})
	require.False(t, sub.IsError, textOf(sub))
	adaTask := structured(t, sub)["taskId"].(string)
	bob := b.connect(t, "b", "bob", "")
	sub = bob.call(t, "submit_task", map[string]any{"instruction": "two"})
	require.False(t, sub.IsError, textOf(sub))
	bobTask := structured(t, sub)["taskId"].(string)

	require.Equal(t, []string{adaTask}, ids(ada.call(t, "list_tasks", nil)), "an agent token: its own tasks")
	require.Equal(t, []string{bobTask, adaTask}, ids(reader.call(t, "list_tasks", nil)), "a reader naming no agent: every task, as GraphQL's tasks")
	ops := b.connect(t, "o", "ops", "")
	require.Equal(t, []string{bobTask, adaTask}, ids(ops.call(t, "list_tasks", nil)), "an operator naming no agent: every task")
	opsForBob := b.connect(t, "o", "ops", "bob")
	require.Equal(t, []string{bobTask}, ids(opsForBob.call(t, "list_tasks", nil)), "the header names the agent")
	readerForNobody := b.connect(t, "r", "reader", "nobody")
	require.Empty(t, ids(readerForNobody.call(t, "list_tasks", nil)))

	res := reader.call(t, "list_tasks", map[string]any{"first": 500})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])
	require.Equal(t, []any{}, structured(t, res)["tasks"], "a refusal keeps the shape")
}
