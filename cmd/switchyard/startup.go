// Listening before the server is ready: `switchyard serve` binds its port
// first, so that a taken port fails at once and a load balancer (or a user's
// browser) gets an answer while the slow steps of a start run — launching
// the local browser, loading (or compiling) the WebAssembly policies.

package main

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// startup is the HTTP handler of a server that listens before it is ready.
// Until ready is called, /healthz answers 200, /readyz answers 503 with the
// step in progress, GraphQL requests get an UNAVAILABLE (retryable) error
// and browsers a page that reloads itself; then every request goes to the
// API's handler.
type startup struct {
	log hclog.Logger
	// onStep, when set, is called with each step as it starts, in the
	// goroutine that starts the server: tests hold a step there to look at
	// the server in the middle of its start.
	onStep func(step string)
	step   atomic.Pointer[string]
	api    atomic.Pointer[http.Handler]
}

// The slow steps of a start, as /readyz and the log name them.
const (
	stepStore   = "opening the store"
	stepBrowser = "starting the local browser"
	// Loading reads the compiled policies from the compilation cache, or
	// compiles them (seconds) when they are not in it: wazero's cache does
	// not say which, so the step's name is true either way.
	stepPolicies = "loading the WebAssembly policies (compiling them first if they are not in the cache yet)"
	stepPolicy   = "starting the native policies"
	stepAPI      = "starting the API"
)

func newStartup(log hclog.Logger, onStep func(string)) *startup {
	s := &startup{log: log, onStep: onStep}
	first := "starting"
	s.step.Store(&first)
	return s
}

// enter records and logs the step the start is in.
func (s *startup) enter(step string) {
	if s.api.Load() != nil {
		return // a leader elected later compiles its policies while the API serves
	}
	s.step.Store(&step)
	s.log.Info(step + "…")
	if s.onStep != nil {
		s.onStep(step)
	}
}

// ready hands every request from now on to the API.
func (s *startup) ready(api http.Handler) { s.api.Store(&api) }

func (s *startup) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if api := s.api.Load(); api != nil {
		(*api).ServeHTTP(w, r)
		return
	}
	step := *s.step.Load()
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	case "/readyz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, "not ready: %s\n", step)
	case "/graphql":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []any{map[string]any{
			"message":    "the server is starting: " + step,
			"extensions": map[string]any{"code": "UNAVAILABLE", "retryable": true},
		}}})
	case "/mcp":
		// A JSON-RPC error an MCP client can read, not the page for people.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
			"code": -32000, "message": "the server is starting: " + step + "; retry shortly",
		}})
	default:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = fmt.Fprintf(w, `<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" content="1">`+
			`<title>Switchyard is starting</title><p>Switchyard is starting: %s…</p><p>This page reloads until it is ready.</p>`,
			html.EscapeString(step))
	}
}

// httpServer is the HTTP server of `switchyard serve`: ReadHeaderTimeout
// ends slowloris headers.
func httpServer(h http.Handler, log hclog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          log.Named("http").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
}
