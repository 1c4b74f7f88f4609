// Package server is Switchyard's HTTP server: the GraphQL endpoint with all
// its transports and limits, the playground, health and readiness, Prometheus
// metrics and the artifacts of tasks.
//
// With tokens configured (Options.Auth), /graphql, /metrics and /artifacts
// need a bearer token; see graph/auth for the roles and security.go for the
// edge.
//
//	/                 the GraphiQL playground (embedded assets, no CDN)
//	/dashboard/       the live dashboard (embedded assets, no CDN)
//	/graphql          GraphQL: POST and GET; WebSocket (graphql-transport-ws
//	                  and graphql-ws, keepalive ping/pong); Server-Sent Events
//	                  (POST with Accept: text/event-stream)
//	/healthz          200 while the process serves; the body is "ok"
//	/readyz           200 once the engine runs and, with a local instance, it
//	                  is healthy ("ready"); 503 while draining, while
//	                  commits fail, once the server stops (Options.Ready:
//	                  serve's), and in a cluster while the node cannot
//	                  write its heartbeat, the leader cannot commit (or
//	                  does not report) or no node leads, with the body
//	                  "not ready: " and the check that failed, a store
//	                  error in general terms (the log has the full error)
//	/metrics          Prometheus
//	/artifacts/{id}   screenshots, PDFs and large results of tasks
//	/mcp              the Model Context Protocol (Streamable HTTP): browser
//	                  tools that are tasks (graph/mcp)
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/mcp"
	"github.com/switchyard/switchyard/graph/metrics"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/subgate"
	"github.com/switchyard/switchyard/graph/web/dashboard"
	"github.com/switchyard/switchyard/graph/web/playground"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/netguard"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
)

// Options configure a Server.
type Options struct {
	Engine    resolvers.Engine    // required, started
	Registry  resolvers.Registry  // the instances; nil when the server manages none
	Artifacts artifact.Store      // where task artifacts are; nil serves none
	Plugins   resolvers.Plugins   // the policy plugins; nil answers their operations UNAVAILABLE
	Schedules resolvers.Schedules // the schedules; nil answers their operations UNAVAILABLE
	Pull      resolvers.Pull      // the leases of pull lanes' workers; nil answers their calls UNAVAILABLE
	// Heartbeats runs the heartbeat checks; nil answers their operations UNAVAILABLE.
	Heartbeats resolvers.Heartbeats
	// WebhookGuard decides which addresses a submitted webhook URL may name
	// (webhook.Guard of the deliverer's options); nil allows public
	// addresses only.
	WebhookGuard *netguard.Guard
	// Cluster, on a node of a cluster, tells which node leads; nil is a
	// server on its own.
	Cluster resolvers.Cluster
	// Metrics is what /metrics reads; default Engine and Registry. A node
	// of a cluster exports its own engine's figures (the leader's are the
	// cluster's), not the leader's through every node.
	Metrics *metrics.Source
	// Address is where the API listens, as the nodes query shows it.
	Address string
	Logger  hclog.Logger
	Version string
	Limits  resolvers.Limits
	// KeepAlive is the interval of WebSocket keepalives (graphql-ws "ka"
	// messages; graphql-transport-ws pings, which the client must answer
	// within twice the interval) and SSE comments. Default 15 s.
	KeepAlive time.Duration
	// WebSocketInitTimeout is how long a WebSocket may take to send
	// connection_init before it is closed (4408); default
	// DefaultWebSocketInitTimeout.
	WebSocketInitTimeout time.Duration
	// Ready, when set, is asked by /readyz besides the engine: the local
	// instance's health, for example. A non-nil error means not ready.
	Ready func() error
	// PlaygroundQuery fills the playground's editor on a first visit;
	// default DefaultPlaygroundQuery.
	PlaygroundQuery string

	// Auth authenticates requests. Nil, or without tokens, authentication
	// is off: every request acts as auth.Anonymous (everything allowed,
	// within one rate of mutations, Limits.MutationsPerSecond, for all),
	// and requests that reach a loopback address must name a loopback host.
	Auth *auth.Authenticator
	// AllowedOrigins are the browser origins besides the server's own that
	// may open WebSockets and call /mcp's tools: host patterns
	// ("dash.example.com", "*.example.com", "localhost:5173").
	AllowedOrigins []string
	// DisableIntrospection refuses __schema and __type queries (the
	// playground then has no documentation or completion).
	DisableIntrospection bool
	// AuditLogger receives one line per mutation; default
	// Logger.Named("audit").
	AuditLogger hclog.Logger
	// MCP configures the MCP endpoint at /mcp.
	MCP MCPOptions

	// noSubmitFast turns the submitTask fast path off (fastsubmit.go): its
	// tests' reference answers.
	noSubmitFast bool
}

// MCPOptions configure the MCP endpoint.
type MCPOptions struct {
	// Disabled serves no /mcp.
	Disabled bool
	// Lane is the lane of the tasks MCP calls submit without naming one
	// ("": the engine's default, main).
	Lane string
	// MaxSessions caps the live MCP sessions (0: mcp.DefaultMaxSessions).
	MaxSessions int
}

// dropNilPointers makes a nil *Registry, *Manager or *Scheduler given as
// an interface the nil interface that means "none".
func (o *Options) dropNilPointers() {
	if r, ok := o.Registry.(*executor.Registry); ok && r == nil {
		o.Registry = nil
	}
	if p, ok := o.Plugins.(*manager.Manager); ok && p == nil {
		o.Plugins = nil
	}
	if s, ok := o.Schedules.(*schedule.Scheduler); ok && s == nil {
		o.Schedules = nil
	}
	if p, ok := o.Pull.(*pull.Manager); ok && p == nil {
		o.Pull = nil
	}
	if h, ok := o.Heartbeats.(*heartbeat.Checker); ok && h == nil {
		o.Heartbeats = nil
	}
}

func (o *Options) metricsSource() metrics.Source {
	if o.Metrics != nil {
		return *o.Metrics
	}
	// A scrape carries no context (the collector is called without one), so
	// every source is bound to context.Background(): on a cluster, the
	// forward to the leader is bounded by the node's call timeout.
	src := metrics.Source{
		Stats: func() engine.Stats { return o.Engine.Stats(context.Background()) },
		Lanes: func() []engine.LaneStatus { return o.Engine.Lanes(context.Background()) },
	}
	if o.Registry != nil {
		src.Instances = func() []executor.Instance { return o.Registry.List(context.Background()) }
	}
	if o.Plugins != nil {
		src.Plugins = func() []manager.Info { return o.Plugins.List(context.Background()) }
	}
	return src
}

// DefaultPlaygroundQuery is the query the playground opens with.
const DefaultPlaygroundQuery = `# Welcome to Switchyard. Press the run button (or Ctrl-Enter).
# The docs (book icon, top left) describe every type and field.
# The README has a five-minute tour: submit, watch, cancel, a browser task.
{
  stats { submitted inFlight pending byState { state count } }
  lanes { name maxInFlight inFlight pending paused }
  instances { id kind health latencyMs tabs }
}
`

// Server serves the API.
type Server struct {
	// bodyHints are what a refusal of a body over its limit adds, for
	// someone who is not an admin and for an admin (bodyLimit); made once.
	bodyHints func() (nonAdmin, admin string)
	opts      Options
	log       hclog.Logger
	notReady  storeerr.Log // the full errors /readyz answered in general terms
	resolver  *resolvers.Resolver
	handler   http.Handler
	metrics   *prometheus.Registry

	audit *auth.Audit
	// limiter is each token's rate of mutations (without tokens, one for
	// every caller), shared by GraphQL and MCP.
	limiter *auth.RateLimiter
	mcp     *mcp.Server // nil when disabled
	fast    *submitFast // the submitTask fast path; nil when off
	// subGate shares the cores between subscription executions and the
	// engine: half of them at most for the executions.
	subGate *subgate.Gate

	http *http.Server
	// streams ends the WebSocket and SSE streams at shutdown: they never
	// end by themselves, and hijacked connections escape http.Server.
	streams    context.Context
	endStreams context.CancelFunc
}

// New builds the server's handlers. Call Serve to listen.
func New(opts Options) (*Server, error) {
	if opts.Engine == nil {
		return nil, errors.New("server: an engine is required")
	}
	opts.dropNilPointers()
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.WebSocketInitTimeout <= 0 {
		opts.WebSocketInitTimeout = DefaultWebSocketInitTimeout
	}
	if opts.PlaygroundQuery == "" {
		opts.PlaygroundQuery = DefaultPlaygroundQuery
	}
	opts.Limits = opts.Limits.WithDefaults()
	if opts.AuditLogger == nil {
		opts.AuditLogger = opts.Logger.Named("audit")
	}
	s := &Server{opts: opts, log: opts.Logger.Named("http"), metrics: prometheus.NewRegistry(), audit: auth.NewAudit(opts.AuditLogger),
		subGate: subgate.New(runtime.GOMAXPROCS(0) / 2)}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.bodyHints = sync.OnceValues(s.uploadHints)
	s.limiter = auth.NewRateLimiter(opts.Limits.MutationsPerSecond, opts.Limits.MutationBurst, nil)
	s.metrics.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewCollector(opts.metricsSource()),
	)
	s.resolver = resolvers.New(resolvers.Options{
		Engine: opts.Engine, Registry: opts.Registry, Version: opts.Version, Limits: opts.Limits,
		Plugins: opts.Plugins, Schedules: opts.Schedules, Pull: opts.Pull, Heartbeats: opts.Heartbeats, Cluster: opts.Cluster, Address: opts.Address,
		WebhookGuard: opts.WebhookGuard, Observer: metrics.NewSubscriptions(s.metrics), Logger: opts.Logger,
	})

	page, err := playground.Handler(playground.Options{Title: "Switchyard", Endpoint: "/graphql", DefaultQuery: opts.PlaygroundQuery, AuthRequired: opts.Auth.Enabled()})
	if err != nil {
		return nil, fmt.Errorf("server: playground: %w", err)
	}
	s.metrics.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "switchyard", Name: "graphql_subscription_slots",
			Help: "How many subscription events may be executed at once (half the cores)."},
			func() float64 { return float64(s.subGate.Slots()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "switchyard", Name: "graphql_subscription_stalls_total",
			Help: "Subscription events handed over without a slot because their client's transport was still busy."},
			func() float64 { return float64(s.subGate.Stalls()) }),
	)
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "switchyard", Name: "http_requests_total",
		Help: "HTTP requests by handler and status code."}, []string{"handler", "code"})
	s.metrics.MustRegister(requests)
	count := func(name string, h http.Handler) http.Handler { return countRequests(requests, name, h) }

	mux := http.NewServeMux()
	mux.Handle("/", page)
	if err := dashboard.Mount(mux, "/dashboard", dashboard.Options{Title: "Switchyard", Endpoint: "/graphql", AuthRequired: opts.Auth.Enabled()}); err != nil {
		return nil, fmt.Errorf("server: dashboard: %w", err)
	}
	gql, err := s.graphQL()
	if err != nil {
		return nil, err
	}
	mux.Handle("/graphql", count("graphql", s.authenticate(readBody(s.bodyLimit, opts.Limits.BodyTimeout, graphQLEdge, withStatusHints(s.endOnShutdown(gql))))))
	if !opts.MCP.Disabled {
		s.mcp, err = mcp.New(mcp.Options{Engine: opts.Engine, Mutations: s.resolver.Tools(), Queries: s.resolver.Query(),
			Artifacts: opts.Artifacts, Auth: opts.Auth, Limiter: s.limiter, Lane: opts.MCP.Lane, Version: opts.Version,
			MaxBodyBytes: int64(opts.Limits.MaxBodyBytes), Logger: opts.Logger, Audit: opts.AuditLogger,
			AllowedOrigins: opts.AllowedOrigins, MaxSessions: opts.MCP.MaxSessions})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
		s.metrics.MustRegister(mcpCollector{s.mcp})
		// The same edge as /graphql: 401 before the body, which is read
		// within the limits of size, time and encoding; its refusals are
		// answered as JSON-RPC (mcpedge.go).
		mux.Handle("/mcp", count("mcp", s.requireIdentityAs(writeRPCUnauthenticated, readBody(fixedBodyLimit(opts.Limits.MaxBodyBytes), opts.Limits.BodyTimeout, mcpEdge,
			s.endOnShutdown(withRequestIDHeader(s.mcp.Handler()))))))
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /tour/sign-in", serveTourPage)
	mux.Handle("GET /metrics", s.requireIdentity(promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{ErrorLog: hclogAdapter{s.log}})))
	mux.Handle("GET /artifacts/{id}", count("artifacts", s.requireIdentity(http.HandlerFunc(s.artifact))))
	s.handler = s.logRequests(s.checkHost(mux))
	// Made here, not in Serve: Shutdown may run while Serve starts.
	// ReadHeaderTimeout ends slowloris headers; readBody bounds the time a
	// body may take. There is no ReadTimeout: it would also end the
	// WebSocket and SSE streams, which read nothing more after the body.
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return s, nil
}

// HeaderTimeout is how long a client may take to send a request's line and
// headers.
const HeaderTimeout = 10 * time.Second

// graphQL returns the GraphQL handler: transports, limits, caches and the
// error presenter.
func (s *Server) graphQL() (http.Handler, error) {
	l := s.opts.Limits
	es := s.resolver.ExecutableSchema()
	gate := &auth.Gate{Limiter: s.limiter, Refused: s.refused}
	if err := gate.Validate(es); err != nil { // the access table covers the schema
		return nil, fmt.Errorf("server: %w", err)
	}
	srv := handler.New(es)
	readLimit := int64(l.MaxWebSocketPayloadBytes)
	srv.AddTransport(&transport.Websocket{
		// Browsers may open WebSockets from the server's own origin, and
		// from AllowedOrigins (the default of coder/websocket: same origin).
		// The adapter times connection_init (4408, as graphql-transport-ws
		// says), not gqlgen (which would close with 1002).
		Implementation: wsImplementation{accept: websocket.AcceptOptions{OriginPatterns: s.opts.AllowedOrigins},
			initTimeout: s.opts.WebSocketInitTimeout},
		KeepAlivePingInterval: s.opts.KeepAlive, // graphql-ws
		PingPongInterval:      s.opts.KeepAlive, // graphql-transport-ws
		PayloadReadLimit:      &readLimit,
		InitFunc:              s.wsInit,
		ErrorFunc: func(_ context.Context, err error) {
			s.log.Debug("websocket", "error", err)
		},
	})
	srv.AddTransport(sseTransport{transport.SSE{KeepAlivePingInterval: s.opts.KeepAlive}}) // sse.go
	srv.AddTransport(transport.Options{})
	cache := lru.New[*ast.QueryDocument](1000)
	vars := newVarCheck(es.Schema(), cache)
	srv.AddTransport(getTransport{vars: vars})
	limits := &queryLimits{maxComplexity: l.MaxComplexity, maxDepth: l.MaxDepth}
	if !s.opts.noSubmitFast {
		s.fast = newSubmitFast(cache, limits, s.resolver.Tools(), gate, s.audit)
	}
	srv.AddTransport(postTransport{vars: vars, keys: newBodyKeys(es.Schema()), fast: s.fast})
	srv.AddTransport(unsupported{})
	srv.SetQueryCache(varCache{cache}) // gqlparser's check without held variables (vars.go)
	srv.SetParserTokenLimit(maxQueryTokens)
	srv.Use(varSwap{})     // the first operation context mutator (vars.go)
	srv.Use(&strictVars{}) // after varSwap: the specification's coercion (strictvars.go)
	srv.Use(shapeLimit{cache: cache})
	if s.opts.DisableIntrospection {
		srv.Use(noIntrospection{})
		srv.SetDisableSuggestion(true)
	} else {
		srv.Use(extension.Introspection{})
	}
	srv.Use(gate)
	srv.Use(limits)
	srv.Use(subscriptionCap{max: l.MaxSubscriptionsPerConnection})
	srv.Use(s.subGate)
	srv.Use(s.audit)
	srv.AroundResponses(spliceResponses)
	srv.AroundResponses(refusedInFull)
	srv.SetErrorPresenter(resolvers.NewErrorPresenter(s.log))
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		// The client is told nothing of the panic but the request's id,
		// which the log line carries.
		id := requestid.ID(ctx)
		s.log.Error("panic in a resolver", "panic", p, "path", graphql.GetPath(ctx), "request_id", id)
		gerr := &gqlerror.Error{Message: "internal error", Extensions: map[string]any{"code": string(model.CodeInternal)}}
		resolvers.WithRequestID(gerr, id)
		return gerr
	})
	return srv, nil
}

// DefaultWebSocketInitTimeout is how long a WebSocket may take to send
// connection_init, unless Options.WebSocketInitTimeout says otherwise.
const DefaultWebSocketInitTimeout = 10 * time.Second

// endOnShutdown ties the context of streaming requests (WebSocket, SSE) to
// the server's life.
func (s *Server) endOnShutdown(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		// A stream's id is made before its response's header is written,
		// which then carries it: the errors of its operations (a
		// subscription's) carry the id of the connection's request.
		requestid.ID(r.Context())
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		defer cancel()
		r = r.WithContext(ctx)
		if r.Header.Get("Upgrade") != "" {
			var conn *accepted
			r, conn = withAccepted(withParking(r))
			defer conn.abandon()
		}
		next.ServeHTTP(w, r)
	})
}

// withRequestIDHeader passes the request's id (made now, when the caller
// sent none or one that is not sane) to the MCP endpoint in the request's
// X-Request-Id: a tool's handler does not run in its HTTP request's context,
// but it has the request's header (graph/mcp).
func withRequestIDHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := requestid.ID(r.Context())
		if v := r.Header[requestid.Header]; id != "" && (len(v) != 1 || v[0] != id) {
			r = r.Clone(r.Context())
			r.Header[requestid.Header] = []string{id}
		}
		next.ServeHTTP(w, r)
	})
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Resolver returns the GraphQL resolvers.
func (s *Server) Resolver() *resolvers.Resolver { return s.resolver }

// Serve serves on ln until Shutdown. It returns http.ErrServerClosed after
// a Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	return s.http.Serve(ln)
}

// Shutdown ends the WebSocket and SSE streams, stops accepting connections
// and waits for the requests in progress until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.endStreams()
	if s.mcp != nil {
		s.mcp.Close(ctx)
	}
	defer s.resolver.Close()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return s.http.Close()
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var err error
	if s.opts.Ready != nil {
		err = s.opts.Ready() // first: a node cut off from the store does not wait for the leader to say it drains
	}
	if err == nil && s.draining(r) {
		err = errors.New("draining: new work is refused")
	}
	if err != nil {
		// Anyone who reaches the port may read the body: a store error is
		// told in general terms, the full error goes to the log.
		s.notReady.Withheld(s.log, "readyz", requestid.ID(r.Context()), err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + storeerr.Public(err) + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// draining reports, for /readyz, whether the engine refuses new work. An
// engine that knows it without asking another process (a cluster node: the
// leader's last report) answers from that: a load balancer's probe must be
// answered within its timeout, and the leader's own answer waits through a
// failover, or while the node that took over starts leading.
func (s *Server) draining(r *http.Request) bool {
	if k, ok := s.opts.Engine.(interface{ KnownDraining() bool }); ok {
		return k.KnownDraining()
	}
	return s.opts.Engine.Draining(r.Context())
}

// hclogAdapter lets promhttp log through hclog.
type hclogAdapter struct{ log hclog.Logger }

func (a hclogAdapter) Println(v ...any) { a.log.Error(fmt.Sprint(v...)) }

// mcpCollector exposes the MCP endpoint's session table.
type mcpCollector struct{ srv *mcp.Server }

var (
	mcpSessionsDesc = prometheus.NewDesc("switchyard_mcp_sessions", "Live MCP sessions (mcp.maxSessions caps them).", nil, nil)
	mcpEndedDesc    = prometheus.NewDesc("switchyard_mcp_sessions_closed_total",
		"MCP sessions the server closed, by reason: evicted (the least recently used idle one, for a new session over mcp.maxSessions) or expired (idle too long; one that sent nothing after initialize, after a minute).", []string{"reason"}, nil)
	mcpRefusedDesc = prometheus.NewDesc("switchyard_mcp_initialize_refused_total",
		"MCP initializes refused, by reason: full (mcp.maxSessions reached and every session has a call in progress) or rate (over the caller's mutation rate).", []string{"reason"}, nil)
)

func (c mcpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- mcpSessionsDesc
	ch <- mcpEndedDesc
	ch <- mcpRefusedDesc
}

func (c mcpCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.srv.SessionStats()
	ch <- prometheus.MustNewConstMetric(mcpSessionsDesc, prometheus.GaugeValue, float64(st.Live))
	ch <- prometheus.MustNewConstMetric(mcpEndedDesc, prometheus.CounterValue, float64(st.Evicted), "evicted")
	ch <- prometheus.MustNewConstMetric(mcpEndedDesc, prometheus.CounterValue, float64(st.Expired), "expired")
	ch <- prometheus.MustNewConstMetric(mcpRefusedDesc, prometheus.CounterValue, float64(st.RefusedFull), "full")
	ch <- prometheus.MustNewConstMetric(mcpRefusedDesc, prometheus.CounterValue, float64(st.RefusedRate), "rate")
}
