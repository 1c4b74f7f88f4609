package mcp_test

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
)

// bundle is a real server on a loopback port over a real engine; its
// executor is the engine's test executor unless setup was given another.
type bundle struct {
	eng    *engine.Engine
	exec   *enginetest.Executor // nil with another executor
	base   string
	tokens map[string]string // token name → token
}

type options struct {
	config   engine.Config
	executor engine.Executor
	arts     artifact.Store
	tokens   []auth.Token // names and roles; hashes are made here
	lane     string
	limits   resolvers.Limits
	auto     bool // the test executor succeeds at once
	// allowedOrigins are the server's api.allowedOrigins.
	allowedOrigins []string
	// audit receives the audit log (default: the test's log).
	audit hclog.Logger
	// registry, with executor, is its instance registry (the engine's tab
	// locator, told of the engine's bindings).
	registry *executor.Registry
}

func setup(t *testing.T, o options) *bundle {
	t.Helper()
	b := &bundle{tokens: map[string]string{}}
	exec := o.executor
	if exec == nil {
		b.exec = enginetest.NewExecutor()
		if o.auto {
			b.exec.Auto = func(r *engine.Run) engine.Outcome {
				return engine.Outcome{Result: []byte(`{"success":true,"result":{"ok":true}}`), InstanceID: "fake", TabID: "tab-" + r.Spec().Session()}
			}
		}
		exec = b.exec
	}
	eopts := engine.Options{Config: o.config, Store: memory.New(memory.Options{}), Executor: exec}
	if o.registry != nil {
		eopts.TabLocator = o.registry
	}
	eng, err := engine.New(eopts)
	require.NoError(t, err)
	if o.registry != nil {
		o.registry.SetSink(eng)
	}
	require.NoError(t, eng.Start(context.Background()))
	b.eng = eng
	var authn *auth.Authenticator
	if len(o.tokens) > 0 {
		var toks []auth.Token
		for _, tk := range o.tokens {
			tok, err := auth.NewToken()
			require.NoError(t, err)
			tk.Hash, err = auth.HashToken(tok)
			require.NoError(t, err)
			b.tokens[tk.Name] = tok
			toks = append(toks, tk)
		}
		authn, err = auth.NewAuthenticator(toks)
		require.NoError(t, err)
	}
	srv, err := server.New(server.Options{Engine: eng, Artifacts: o.arts, Auth: authn, Version: "test", Limits: o.limits,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: testWriter{t}}), MCP: server.MCPOptions{Lane: o.lane},
		AllowedOrigins: o.allowedOrigins, AuditLogger: o.audit})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = eng.Shutdown(ctx)
	})
	b.base = "http://" + ln.Addr().String()
	return b
}

// client is an MCP client session and the progress notifications it got.
type client struct {
	*sdk.ClientSession
	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
}

// taskPrefix is how each progress message names its task.
var taskPrefix = regexp.MustCompile(`^task [0-9A-Z]+: `)

// progressMessages returns the progress messages without the task they
// name (see progressNotes).
func (c *client) progressMessages() []string {
	var msgs []string
	for _, p := range c.progressNotes() {
		msgs = append(msgs, taskPrefix.ReplaceAllString(p.Message, ""))
	}
	return msgs
}

// progressNotes returns the progress notifications as sent.
func (c *client) progressNotes() []*sdk.ProgressNotificationParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*sdk.ProgressNotificationParams(nil), c.progress...)
}

// headers adds fixed headers to each request.
type headers struct {
	h    http.Header
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header[k] = v
	}
	return h.next.RoundTrip(r)
}

// connect opens an MCP session with the SDK's own client over HTTP; token
// (a name of b.tokens) and agent (the X-Switchyard-Agent header) are
// optional.
func (b *bundle) connect(t *testing.T, name, token, agent string) *client {
	t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+b.tokens[token])
	}
	if agent != "" {
		h.Set("X-Switchyard-Agent", agent)
	}
	c := &client{}
	cl := sdk.NewClient(&sdk.Implementation{Name: name, Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
		},
	})
	tr := &sdk.StreamableClientTransport{Endpoint: b.base + "/mcp",
		HTTPClient: &http.Client{Transport: headers{h: h, next: http.DefaultTransport}}}
	cs, err := cl.Connect(ctxFor(t), tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	c.ClientSession = cs
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call calls a tool and fails the test on a protocol error.
func (c *client) call(t *testing.T, tool string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := c.CallTool(ctxFor(t), &sdk.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, tool)
	return res
}

// textOf joins a result's text content.
func textOf(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured returns a result's structured content as a map.
func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	require.True(t, ok, "structured content is an object: %#v", res.StructuredContent)
	return m
}

// errorOf returns a failed result's structured error.
func errorOf(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	require.True(t, res.IsError, "the call failed: %s", textOf(res))
	e, ok := structured(t, res)["error"].(map[string]any)
	require.True(t, ok, "the structured content carries the error: %#v", res.StructuredContent)
	return e
}

// tasks lists every task of the engine.
func (b *bundle) tasks(t *testing.T) []*engine.Task {
	t.Helper()
	ts, err := b.eng.Tasks(context.Background(), engine.TaskQuery{Limit: 1000})
	require.NoError(t, err)
	return ts
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
