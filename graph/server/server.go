// Package server is Switchyard's HTTP server: the GraphQL endpoint with all
// its transports and limits, the playground, health and readiness, Prometheus
// metrics and the artifacts of tasks.
//
//	/                 the GraphiQL playground (embedded assets, no CDN)
//	/dashboard/       the live dashboard (embedded assets, no CDN)
//	/graphql          GraphQL: POST and GET; WebSocket (graphql-transport-ws
//	                  and graphql-ws, keepalive ping/pong); Server-Sent Events
//	                  (POST with Accept: text/event-stream)
//	/healthz          200 while the process serves
//	/readyz           200 once the engine runs and, with a local instance, it
//	                  is healthy; 503 while draining
//	/metrics          Prometheus
//	/artifacts/{id}   screenshots, PDFs and large results of tasks
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/executor"
	"github.com/switchyard/switchyard/engine/executor/artifact"
	"github.com/switchyard/switchyard/engine/schedule"
	"github.com/switchyard/switchyard/graph/metrics"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/web/dashboard"
	"github.com/switchyard/switchyard/graph/web/playground"
	"github.com/switchyard/switchyard/plugins/manager"
)

// Options configure a Server.
type Options struct {
	Engine    *engine.Engine      // required, started
	Registry  *executor.Registry  // the instances; nil when the server manages none
	Artifacts artifact.Store      // where task artifacts are; nil serves none
	Plugins   *manager.Manager    // the policy plugins; nil answers their operations UNAVAILABLE
	Schedules *schedule.Scheduler // the schedules; nil answers their operations UNAVAILABLE
	Logger    hclog.Logger
	Version   string
	Limits    resolvers.Limits
	// KeepAlive is the interval of WebSocket keepalives (graphql-ws "ka"
	// messages; graphql-transport-ws pings, which the client must answer
	// within twice the interval) and SSE comments. Default 15 s.
	KeepAlive time.Duration
	// Ready, when set, is asked by /readyz besides the engine: the local
	// instance's health, for example. A non-nil error means not ready.
	Ready func() error
	// PlaygroundQuery fills the playground's editor on a first visit;
	// default DefaultPlaygroundQuery.
	PlaygroundQuery string
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
	opts     Options
	log      hclog.Logger
	resolver *resolvers.Resolver
	handler  http.Handler
	metrics  *prometheus.Registry

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
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.PlaygroundQuery == "" {
		opts.PlaygroundQuery = DefaultPlaygroundQuery
	}
	opts.Limits = opts.Limits.WithDefaults()
	s := &Server{opts: opts, log: opts.Logger.Named("http"), metrics: prometheus.NewRegistry()}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	s.metrics.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewCollector(opts.Engine, opts.Registry),
	)
	s.resolver = resolvers.New(resolvers.Options{
		Engine: opts.Engine, Registry: opts.Registry, Version: opts.Version, Limits: opts.Limits,
		Plugins: opts.Plugins, Schedules: opts.Schedules,
		Observer: metrics.NewSubscriptions(s.metrics), Logger: opts.Logger,
	})

	page, err := playground.Handler(playground.Options{Title: "Switchyard", Endpoint: "/graphql", DefaultQuery: opts.PlaygroundQuery})
	if err != nil {
		return nil, fmt.Errorf("server: playground: %w", err)
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "switchyard", Name: "http_requests_total",
		Help: "HTTP requests by handler and status code."}, []string{"handler", "code"})
	s.metrics.MustRegister(requests)
	count := func(name string, h http.Handler) http.Handler {
		return promhttp.InstrumentHandlerCounter(requests.MustCurryWith(prometheus.Labels{"handler": name}), h)
	}

	mux := http.NewServeMux()
	mux.Handle("/", page)
	if err := dashboard.Mount(mux, "/dashboard", dashboard.Options{Title: "Switchyard", Endpoint: "/graphql"}); err != nil {
		return nil, fmt.Errorf("server: dashboard: %w", err)
	}
	mux.Handle("/graphql", count("graphql", limitBody(opts.Limits.MaxBodyBytes, s.endOnShutdown(s.graphQL()))))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{ErrorLog: hclogAdapter{s.log}}))
	mux.Handle("GET /artifacts/{id}", count("artifacts", http.HandlerFunc(s.artifact)))
	s.handler = s.logRequests(mux)
	return s, nil
}

// graphQL returns the GraphQL handler: transports, limits, caches and the
// error presenter.
func (s *Server) graphQL() http.Handler {
	l := s.opts.Limits
	es := s.resolver.ExecutableSchema()
	srv := handler.New(es)
	readLimit := int64(l.MaxWebSocketPayloadBytes)
	srv.AddTransport(&transport.Websocket{
		Implementation:        wsImplementation{},
		KeepAlivePingInterval: s.opts.KeepAlive, // graphql-ws
		PingPongInterval:      s.opts.KeepAlive, // graphql-transport-ws
		InitTimeout:           30 * time.Second,
		PayloadReadLimit:      &readLimit,
		InitFunc: func(ctx context.Context, _ transport.InitPayload) (context.Context, *transport.InitPayload, error) {
			// Authentication (§9) will read the payload's Authorization here.
			return ctx, nil, nil
		},
		ErrorFunc: func(_ context.Context, err error) {
			s.log.Debug("websocket", "error", err)
		},
	})
	srv.AddTransport(transport.SSE{KeepAlivePingInterval: s.opts.KeepAlive})
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(&queryLimits{maxComplexity: l.MaxComplexity, maxDepth: l.MaxDepth})
	srv.AroundResponses(spliceResponses)
	srv.SetErrorPresenter(resolvers.PresentError)
	srv.SetRecoverFunc(func(ctx context.Context, p any) error {
		s.log.Error("panic in a resolver", "panic", p, "path", graphql.GetPath(ctx))
		return &gqlerror.Error{Message: "internal error", Extensions: map[string]any{"code": string(model.CodeInternal)}}
	})
	return srv
}

// endOnShutdown ties the context of streaming requests (WebSocket, SSE) to
// the server's life.
func (s *Server) endOnShutdown(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		defer cancel()
		r = r.WithContext(ctx)
		if r.Header.Get("Upgrade") != "" {
			r = withParking(r)
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
	s.http = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	return s.http.Serve(ln)
}

// Shutdown ends the WebSocket and SSE streams, stops accepting connections
// and waits for the requests in progress until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.endStreams()
	defer s.resolver.Close()
	if s.http == nil {
		return nil
	}
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

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var err error
	switch {
	case s.opts.Engine.Draining():
		err = errors.New("draining: new work is refused")
	case s.opts.Ready != nil:
		err = s.opts.Ready()
	}
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// hclogAdapter lets promhttp log through hclog.
type hclogAdapter struct{ log hclog.Logger }

func (a hclogAdapter) Println(v ...any) { a.log.Error(fmt.Sprint(v...)) }
