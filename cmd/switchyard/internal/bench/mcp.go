// The mcp mode: the same browser action (a click, on the target's executor)
// as an MCP tool call and through GraphQL, alternated by every worker in one
// run, so that both paths meet the same load. Each measures what an agent
// waits for: from the request to the task's end in its hands. Over GraphQL
// that is submitTask, then the task(id) subscription over SSE until the
// task ends; over MCP, one tools/call answered when the task ends. The
// submitTask mutation alone is reported too (acceptance, not the result).

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
)

// MCPResult is what the mcp mode measured, in milliseconds.
type MCPResult struct {
	// MCP is a browser tool call: submitted, run and answered.
	MCP *Summary `json:"mcp"`
	// GraphQL is the same action through GraphQL: submitTask, then the
	// task(id) subscription over SSE until the task ends.
	GraphQL *Summary `json:"graphql"`
	// GraphQLSubmit is the submitTask mutation alone (of those calls).
	GraphQLSubmit *Summary `json:"graphqlSubmit"`
	// AddedP50Ms is MCP's p50 less GraphQL's: what the MCP path adds.
	AddedP50Ms float64 `json:"addedP50Ms"`
}

func (m *MCPResult) print(w io.Writer) {
	line := func(name string, s *Summary) { s.printLine(w, 15, name) }
	fmt.Fprintln(w, "  latency ms, request to the task's end in the client's hands:")
	line("mcp tools/call", m.MCP)
	line("graphql", m.GraphQL)
	line("(submit only)", m.GraphQLSubmit)
	fmt.Fprintf(w, "  the MCP path adds %.3f ms at p50\n", m.AddedP50Ms)
}

// mcpWorker is one worker's two clients.
type mcpWorker struct {
	gql     *client.Client
	mcp     *sdk.ClientSession
	agent   string
	session string
}

// runMCP runs the mcp mode.
func runMCP(ctx context.Context, endpoint string, o Options) (*Result, error) {
	n := o.Concurrency
	if n <= 0 {
		n = 8
	}
	base, ok := strings.CutSuffix(endpoint, "/graphql")
	if !ok {
		return nil, fmt.Errorf("--server: %q is not a /graphql endpoint (the MCP endpoint is found beside it)", endpoint)
	}
	hc := httpClient(2*n, o.Token)
	workers := make([]*mcpWorker, n)
	for i := range workers {
		w := &mcpWorker{agent: fmt.Sprintf("bench-%d", i), session: fmt.Sprintf("bench-gql-%d", i)}
		w.gql = client.New(endpoint)
		w.gql.HTTP = hc
		mc := &http.Client{Transport: setHeader{name: "X-Switchyard-Agent", value: w.agent, next: hc.Transport}}
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "switchyard-bench", Version: o.Version}, nil).Connect(ctx,
			&sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: mc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			return nil, fmt.Errorf("connect to %s/mcp: %w", base, err)
		}
		defer cs.Close()
		w.mcp = cs
		workers[i] = w
	}

	r := measureRounds(ctx, n, o.Warmup, o.Duration, func(ctx context.Context, i int) ([]time.Duration, error) {
		w := workers[i]
		m, err := w.viaMCP(ctx)
		if err != nil {
			return nil, err
		}
		g, s, err := w.viaGraphQL(ctx)
		if err != nil {
			return nil, err
		}
		return []time.Duration{m, g, s}, nil
	})
	calls := 2 * r.count
	res := &Result{Seconds: r.seconds, Concurrency: n, Requests: calls, Tasks: calls, Errors: r.errs, FirstError: r.firstErr,
		RequestsPerSec: float64(calls) / r.seconds, TasksPerSec: float64(calls) / r.seconds}
	m := &MCPResult{MCP: summarize(r.figure(0)), GraphQL: summarize(r.figure(1)), GraphQLSubmit: summarize(r.figure(2))}
	if m.MCP == nil || m.GraphQL == nil {
		return nil, fmt.Errorf("no call completed (first error: %s)", r.firstErr)
	}
	m.AddedP50Ms = m.MCP.P50 - m.GraphQL.P50
	res.MCP = m
	return res, nil
}

// viaMCP clicks through the MCP endpoint: one tool call, answered when the
// task has ended.
func (w *mcpWorker) viaMCP(ctx context.Context) (time.Duration, error) {
	t0 := time.Now()
	res, err := w.mcp.CallTool(ctx, &sdk.CallToolParams{Name: "click", Arguments: map[string]any{"selector": "#go"}})
	d := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("mcp: %w", err)
	}
	if res.IsError {
		var msg []string
		for _, c := range res.Content {
			if t, ok := c.(*sdk.TextContent); ok {
				msg = append(msg, t.Text)
			}
		}
		return 0, fmt.Errorf("mcp: the call failed: %s", strings.Join(msg, " "))
	}
	return d, nil
}

// viaGraphQL clicks through GraphQL: submitTask, then follow the task until
// it ends. It returns the whole and the mutation alone.
func (w *mcpWorker) viaGraphQL(ctx context.Context) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	in := map[string]any{"agentId": w.agent, "sessionKey": w.session, "action": map[string]any{"kind": "click", "selector": "#go"}}
	out, err := Submit(ctx, w.gql, in)
	if err != nil {
		return 0, 0, fmt.Errorf("graphql submit: %w", err)
	}
	submitted := time.Since(t0)
	state, at, err := followUntilSettled(ctx, w.gql, out.SubmitTask.Id)
	if err != nil {
		return 0, 0, fmt.Errorf("graphql follow: %w", err)
	}
	if state != engine.StateSucceeded {
		return 0, 0, fmt.Errorf("graphql: the task ended %s", state)
	}
	return at.Sub(t0), submitted, nil
}
