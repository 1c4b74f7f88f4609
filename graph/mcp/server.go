// The MCP server: its options, the HTTP handler, and who a call acts as.

package mcp

import (
	"container/list"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// AgentHeader names the caller's agent when the token does not (admin and
// operator tokens, or no authentication).
const AgentHeader = "X-Switchyard-Agent"

// DefaultAgent is the agent of a caller that names none, neither in
// AgentHeader nor in its MCP client info.
const DefaultAgent = "mcp"

// Mutations are the GraphQL mutations the tools call
// (resolvers.Resolver.Tools()): the same validation, row-level rules and
// engine calls as over GraphQL.
type Mutations interface {
	// SubmitTask is submitTask; replayed says that the input's
	// idempotencyKey named a task recorded before for the same request,
	// which is the task returned: nothing new was recorded.
	SubmitTask(ctx context.Context, input model.SubmitTaskInput) (task *model.Task, replayed bool, err error)
	CancelTask(ctx context.Context, id string, reason *string) (*model.Task, error)
}

// Queries are the GraphQL queries the tools and resources call
// (resolvers.Resolver.Query()).
type Queries interface {
	Task(ctx context.Context, id string) (*model.Task, error)
	Tasks(ctx context.Context, filter *model.TaskFilter, first *int, after *string, order *engine.Order) (*model.TaskConnection, error)
}

// Engine is what the tools read of the engine directly: its event log, to
// follow a submitted task, and its lanes, to say why a task waits.
type Engine interface {
	Events() *engine.EventLog
	// CommittedTask reads a task as far as it is committed: a call never
	// reports a state that a crash would roll back
	// (engine.Engine.CommittedTask).
	CommittedTask(ctx context.Context, id string) (*engine.Task, error)
	// Follow says a call follows the task until it ends, so that its end
	// is committed without lingering (engine.Engine.Follow).
	Follow(id string) (unfollow func())
	Lane(ctx context.Context, name string) (engine.LaneStatus, error)
}

// Options configure the MCP server.
type Options struct {
	Engine    Engine    // required
	Mutations Mutations // required
	Queries   Queries   // required
	// Artifacts serves screenshots and other artifacts; nil: none.
	Artifacts artifact.Store
	// Auth authenticates calls (nil or without tokens: every call is
	// auth.Anonymous, and the caller names its agent).
	Auth *auth.Authenticator
	// Limiter is the mutation rate limiter shared with GraphQL (nil: no
	// limit): each call that submits or cancels takes one token.
	Limiter *auth.RateLimiter
	// Lane is the lane of the tasks the browser tools submit ("" is the
	// engine's default lane, main). submit_task takes any lane.
	Lane string
	// Version is the server's version, as its MCP implementation info says.
	Version string
	// SessionTimeout closes MCP sessions idle this long (default 30 min).
	SessionTimeout time.Duration
	// InitTimeout closes a session that sent nothing after its initialize,
	// not even notifications/initialized, after this long (default
	// DefaultInitTimeout).
	InitTimeout time.Duration
	// MaxSessions caps the live MCP sessions (mcp.maxSessions; default
	// DefaultMaxSessions): a new one evicts the least recently used idle
	// session, or is refused when none is idle (sessions.go).
	MaxSessions int
	// AllowedOrigins are browser origins besides the server's own that may
	// call tools (api.allowedOrigins, as for GraphQL's WebSockets).
	AllowedOrigins []string
	// MaxBodyBytes bounds a request body (default the SDK's).
	MaxBodyBytes int64
	Logger       hclog.Logger
	// Audit receives one line per mutating call (default Logger.Named("audit")).
	Audit hclog.Logger
}

// Server is the MCP endpoint.
type Server struct {
	opts Options
	log  hclog.Logger
	// withheld logs the full errors of store errors told in general terms.
	withheld storeerr.Log
	audit    hclog.Logger
	mcp      *sdk.Server
	handler  http.Handler

	mu sync.Mutex
	// sessions maps a live MCP session's id to its current browser session
	// key: only sessions in live have one, and a session's entry goes with
	// it, so neither map outlives the sessions.
	sessions map[string]string
	live     map[string]*sdk.ServerSession // the initialized MCP sessions, closed by Close
	// calls keeps, for each live MCP session, who opened it and the calls
	// waiting for their tasks, so that its termination (DELETE) cancels
	// them (terminate.go).
	calls   map[string]*sessionCalls
	closing bool
	// table keeps every session the SDK opened for an initialize, by id,
	// and lru the live ones, the most recently used first; opening counts
	// the initializes admitted whose session is not yet in the table
	// (sessions.go).
	table   map[string]*sessionEntry
	lru     *list.List
	opening int
	counts  sessionCounters

	// closed ends when Close begins: the calls waiting for their tasks
	// return (a session's Close waits for its calls).
	closed   context.Context
	closeAll context.CancelFunc
	// posts counts the POST requests in progress: they carry the calls,
	// and each ends once its answers are written, so Close waits for them
	// before it ends the sessions (closing a session drops answers not
	// yet written).
	posts openPosts
}

// New builds the MCP server and its HTTP handler.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil || opts.Mutations == nil || opts.Queries == nil {
		return nil, fmt.Errorf("mcp: an engine, mutations and queries are required")
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Audit == nil {
		opts.Audit = opts.Logger.Named("audit")
	}
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 30 * time.Minute
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = DefaultInitTimeout
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Server{opts: opts, log: opts.Logger.Named("mcp"), audit: opts.Audit, sessions: map[string]string{},
		live: map[string]*sdk.ServerSession{}, calls: map[string]*sessionCalls{},
		table: map[string]*sessionEntry{}, lru: list.New()}
	s.closed, s.closeAll = context.WithCancel(context.Background())
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "switchyard", Title: "Switchyard", Version: opts.Version},
		&sdk.ServerOptions{
			Instructions:       instructions,
			InitializedHandler: func(_ context.Context, req *sdk.InitializedRequest) { s.track(req.Session, req.Extra) },
		})
	if err := s.addTools(); err != nil {
		return nil, err
	}
	s.addResources()
	maxBody := opts.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = sdk.DefaultMaxRequestBodyBytes
	}
	h := s.posts.counting(jsonRPCRefusals(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp },
		// The session table closes idle sessions (sessions.go); the SDK's
		// timeout, later, is only a backstop.
		&sdk.StreamableHTTPOptions{SessionTimeout: 2 * opts.SessionTimeout, MaxRequestBodyBytes: opts.MaxBodyBytes,
			// Without tokens, the SDK refuses loopback requests that name
			// another host (DNS rebinding), as graph/server does for the
			// whole API; with tokens the token decides, so that a proxy on
			// the same machine may forward any Host.
			DisableLocalhostProtection: opts.Auth.Enabled()})))
	// A terminated session's calls are cancelled before the SDK closes it
	// (terminate.go).
	h = s.terminating(h)
	// At most MaxSessions sessions, none idle for long, and initialize
	// within the caller's rate (sessions.go).
	h = s.bounding(h, maxBody)
	// A request without a session, other than initialize, is a 400
	// (sessionless.go).
	h = sessionless(h, maxBody)
	// No answer to a call its client cancelled (withhold.go).
	if withholdCancelled {
		h = withhold(h, maxBody)
	}
	// MCP clients are not browsers: a page on another site may not make a
	// visitor's browser call tools (Sec-Fetch-Site, Origin), unless its
	// origin is an allowed one (origin.go).
	h = crossOrigin(h, opts.AllowedOrigins)
	if opts.Auth.Enabled() {
		// The SDK keeps the identity with the request and binds each MCP
		// session to the token that opened it (another token gets 403).
		h = sdkauth.RequireBearerToken(s.verify, &sdkauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
		h = challenge(opts.Auth, h)
	}
	s.handler = h
	return s, nil
}

// track keeps an initialized MCP session until it ends, for Close, for
// its browser session key and for its calls (with the token user that opened
// it, extra's); then forgets them. Its first call tracks it too, should the
// call run before the initialized notification's handler.
func (s *Server) track(ss *sdk.ServerSession, extra *sdk.RequestExtra) {
	if ss == nil || ss.ID() == "" {
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = ss.Close()
		return
	}
	if s.live[ss.ID()] == ss {
		s.calls[ss.ID()].own(extra)
		s.mu.Unlock()
		return
	}
	s.live[ss.ID()] = ss
	sc := &sessionCalls{calls: map[*sessionCall]struct{}{}}
	sc.own(extra)
	s.calls[ss.ID()] = sc
	s.mu.Unlock()
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		if s.live[ss.ID()] == ss {
			delete(s.sessions, ss.ID())
			delete(s.live, ss.ID())
			delete(s.calls, ss.ID())
		}
		e := s.table[ss.ID()]
		s.mu.Unlock()
		if e != nil && e.ss == ss {
			s.dropSession(e, nil)
		}
	}()
}

// instructions tell the model how to use the server.
const instructions = `Switchyard schedules browser work for many agents: every browser tool call is a task that waits its turn (fairly, per agent) and runs in your browser session's tab.
Calls in one session run in order in one tab: navigate first, then act (click, fill, type, press, …) and read (text, snapshot, screenshot).
Selectors: a CSS selector ("#go", "css:button.primary"), "xpath://button[@type='submit']", "text:Sign in", or a ref from the last snapshot ("e12").
When the fleet is busy a call waits in the queue; progress notifications say where its task stands, and name it: should the call be lost, get_task with that id tells how the task ended. Cancel the call to cancel its task.
A failed call's task is over (FAILED, never left parked): when error.retryable is true, calling again may succeed.`

// Close ends every MCP session (at shutdown). The calls waiting for their
// tasks are answered first (a tool error: the server is shutting down, the
// task is left to the engine's own shutdown), and their answers written,
// until ctx ends; then the sessions end.
func (s *Server) Close(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	s.closeAll()
	s.mu.Unlock()
	s.posts.wait(ctx)
	s.mu.Lock()
	live := make([]*sdk.ServerSession, 0, len(s.live))
	for _, ss := range s.live {
		live = append(live, ss)
	}
	s.mu.Unlock()
	for _, ss := range live {
		_ = ss.Close()
	}
	s.closeSessions()
}

// isClosing reports whether Close has begun.
func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// Handler returns the HTTP handler of /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// verify is the SDK's token verifier: the token's identity travels with the
// request as TokenInfo.
func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*sdkauth.TokenInfo, error) {
	id, err := s.opts.Auth.Authenticate(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", sdkauth.ErrInvalidToken, err)
	}
	return &sdkauth.TokenInfo{UserID: id.Name, Extra: map[string]any{identityKey: id}}, nil
}

const identityKey = "switchyard.identity"

// challenge answers a request without a valid token 401 with the bearer
// challenge, as the rest of the API does (the SDK's middleware then finds the
// token already verified, in the authenticator's cache).
func challenge(a *auth.Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.AuthenticateHeader(r.Header.Get("Authorization")); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			http.Error(w, auth.ErrUnauthenticated.Error()+": send Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// caller is who a call acts as.
type caller struct {
	id      *auth.Identity
	agent   string // the agent its tasks are submitted as
	named   bool   // agent is the token's or the X-Switchyard-Agent header's, not the client's name
	session string // the MCP session's current browser session key
	mcpID   string // the MCP session's id
	request string // the id of the call's HTTP request (internal/requestid), for the audit log
}

// ctx returns ctx carrying the caller's identity, as the resolvers expect.
func (c *caller) ctx(ctx context.Context) context.Context { return auth.WithIdentity(ctx, c.id) }

// callerOf resolves who a request acts as. It fails closed: with
// authentication on, a request without a verified identity is refused.
func (s *Server) callerOf(session *sdk.ServerSession, extra *sdk.RequestExtra, info *sdk.Implementation) (*caller, error) {
	var id *auth.Identity
	switch {
	case extra != nil && extra.TokenInfo != nil:
		id, _ = extra.TokenInfo.Extra[identityKey].(*auth.Identity)
	case !s.opts.Auth.Enabled():
		id = auth.Anonymous()
	}
	if id == nil {
		return nil, &engine.Error{Code: model.CodeUnauthenticated, Message: auth.ErrUnauthenticated.Error()}
	}
	c := &caller{id: id, agent: id.Agent(), named: id.Agent() != ""}
	if extra != nil && requestid.Valid(extra.Header.Get(requestid.Header)) {
		c.request = extra.Header.Get(requestid.Header)
	}
	var header string
	if extra != nil {
		header = extra.Header.Get(AgentHeader)
	}
	if header != "" {
		// Every call is refused, with what to fix, rather than each
		// failing on an agentId the caller never wrote.
		if err := checkAgentHeader(header); err != nil {
			return nil, err
		}
	}
	if c.agent == "" || header != "" {
		// An agent token naming another agent in the header is refused by
		// the resolvers' row-level rules, with their message.
		switch {
		case header != "":
			c.agent, c.named = header, true
		case info != nil && info.Name != "":
			if err := checkClientName(info.Name); err != nil {
				return nil, err
			}
			c.agent = info.Name
		default:
			c.agent = DefaultAgent
		}
	}
	if session != nil {
		s.track(session, extra)
		c.mcpID = session.ID()
		c.session = s.currentSession(c.mcpID)
	}
	return c, nil
}

// checkAgentHeader says what is wrong with an X-Switchyard-Agent header
// that is not an agent id: 1..256 bytes of UTF-8. (A client that writes a
// header's characters as Latin-1 bytes, as Node does, sends "ü" as the
// byte 0xFC, which is not UTF-8.)
func checkAgentHeader(v string) error {
	switch {
	case len(v) > engine.MaxIDLength:
		return &engine.Error{Code: engine.CodeInvalidInput, Message: fmt.Sprintf(
			"the %s header is %d bytes long; an agent id is at most %d bytes: name the agent with a shorter id",
			AgentHeader, len(v), engine.MaxIDLength)}
	case !utf8.ValidString(v):
		return &engine.Error{Code: engine.CodeInvalidInput, Message: fmt.Sprintf(
			"the %s header %s is not UTF-8 (a client that sends header values as Latin-1, as Node does, sends \"ü\" as the byte 0xFC): send the agent id's UTF-8 bytes, or an ASCII id",
			AgentHeader, strconv.Quote(v))}
	}
	return nil
}

// checkClientName says why the MCP client's name (clientInfo.name of its
// initialize), the agent of a caller that names none, cannot be one.
func checkClientName(name string) error {
	if len(name) <= engine.MaxIDLength && utf8.ValidString(name) {
		return nil
	}
	return &engine.Error{Code: engine.CodeInvalidInput, Message: fmt.Sprintf(
		"the MCP client's name (clientInfo.name, %d bytes) is not an agent id (1..%d bytes of UTF-8): name the agent in the %s header",
		len(name), engine.MaxIDLength, AgentHeader)}
}

// clientInfo returns the MCP client's implementation info of a session.
func clientInfo(ss *sdk.ServerSession) *sdk.Implementation {
	if ss == nil {
		return nil
	}
	if p := ss.InitializeParams(); p != nil {
		return p.ClientInfo
	}
	return nil
}

// currentSession returns the browser session key of an MCP session, making
// one on first use. A session that is not live (never initialized, or
// ended while a call ran) gets a fresh key that is not kept.
func (s *Server) currentSession(mcpID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.sessions[mcpID]
	if !ok {
		key = newSessionKey()
		if s.live[mcpID] != nil {
			s.sessions[mcpID] = key
		}
	}
	return key
}

// setSession makes key the MCP session's current browser session, if the
// session is live.
func (s *Server) setSession(mcpID, key string) {
	s.mu.Lock()
	if s.live[mcpID] != nil {
		s.sessions[mcpID] = key
	}
	s.mu.Unlock()
}

// newSessionKey returns a fresh, unguessable browser session key.
func newSessionKey() string { return "mcp-" + rand.Text()[:16] }

// allow checks the access table for the GraphQL operation a call stands for
// ("Mutation.submitTask", "Query.task") and, for mutations, takes one token
// of the caller's rate.
func (s *Server) allow(c *caller, root, field string) error {
	a, ok := auth.Lookup(root, field)
	if !ok || !a.Allows(c.id) {
		return &engine.Error{Code: model.CodeForbidden,
			Message: fmt.Sprintf("%s needs the role %s; token %q is %s", field, a.Roles, c.id.Name, c.id.Role)}
	}
	if root != "Mutation" {
		return nil
	}
	if ok, wait := s.opts.Limiter.Take(c.id.Name, 1); !ok {
		return &rateLimited{name: c.id.Name, wait: wait}
	}
	return nil
}

// rateLimited is a call over its token's rate.
type rateLimited struct {
	name string
	wait time.Duration
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("%s is over its rate of mutations: retry in %s", auth.RateHolder(e.name), time.Duration(auth.RetryAfterMs(e.wait))*time.Millisecond)
}

// refusedCall audits a call of a mutating tool refused for its arguments,
// before its handler ran (addAuditedTool).
func (s *Server) refusedCall(tool string) func(*sdk.CallToolRequest, error) {
	return func(req *sdk.CallToolRequest, err error) {
		if c, cerr := s.callerOf(req.Session, req.Extra, clientInfo(req.Session)); cerr == nil {
			s.record(c, tool, "", err)
		}
	}
}

// record writes the audit line of a mutating call.
func (s *Server) record(c *caller, tool, taskID string, err error) {
	outcome := "ok"
	if err != nil {
		outcome = codeOf(err)
	}
	args := []any{"token", c.id.Name, "role", c.id.Role.String(), "agent", c.agent, "tool", tool, "task", taskID, "outcome", outcome}
	if c.request != "" {
		args = append(args, "request_id", c.request)
	}
	s.audit.Info("mcp", args...)
}
