// Package dashboard serves Switchyard's live dashboard: a TypeScript and
// Preact single-page app, built from the npm registry with esbuild, embedded
// in the binary, and driven only by the public GraphQL API — queries and
// mutations over HTTP, the stats, taskEventFeed and instanceEvents
// subscriptions over WebSocket (graphql-transport-ws). It shows lanes,
// agents, instances, policies and plugins, throughput and dispatch-latency
// charts, a live task feed and a task detail view, and offers the actions an
// operator needs (cancel, stop a session, reset, pause or resume a lane,
// change a lane's ceiling), each one the mutation a client would send.
// It fits a phone's screen as well as a wide one (the header wraps, tables
// too wide for their panel scroll inside it; layout_test.go checks the
// boxes at 1400 and 420 px), and every timestamp shows the time of day with
// the whole date, time zone and UTC instant in its title.
//
// Authentication: the page has a token field. A token typed there is kept in
// the browser's localStorage and sent as `Authorization: Bearer <token>` on
// HTTP and as the connection_init payload of the WebSocket. With
// Options.AuthRequired the field asks for it.
//
// The page is configured by the server (title, endpoint, whether auth is on)
// through a JSON blob in index.html, and sent with a Content-Security-Policy
// that allows nothing but the server's own origin: the dashboard works with
// no network access beyond the server.
package dashboard

import (
	"embed"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/graph/web/spa"
)

// dist is the built dashboard; see generate.go.
//
//go:embed dist
var dist embed.FS

// Defaults for Options.
const (
	DefaultTitle    = "Switchyard"
	DefaultEndpoint = "/graphql"
)

// Options configure the dashboard page.
type Options struct {
	// Title names the server in the page's header and title. Default
	// DefaultTitle.
	Title string
	// Endpoint is the path of the GraphQL endpoint on the serving host
	// (HTTP, and WebSocket with the page's scheme turned into ws or wss).
	// Default DefaultEndpoint. It must be a path: the page may connect to
	// its own origin only.
	Endpoint string
	// AuthRequired makes the token field ask for a token.
	AuthRequired bool
}

// pageConfig is the JSON read by src/config.ts.
type pageConfig struct {
	Title        string `json:"title"`
	Endpoint     string `json:"endpoint"`
	AuthRequired bool   `json:"authRequired"`
}

// Handler returns an http.Handler serving the dashboard: the page at "/"
// (and "/index.html"), its assets under "assets/" with immutable caching, and
// THIRD_PARTY_LICENSES.txt. Mount it under a prefix with Mount, or with
// http.StripPrefix under a prefix that ends in "/": the page refers to its
// assets by relative URLs. It answers 404 for any other path and 405 for
// methods other than GET and HEAD.
func Handler(opts Options) (http.Handler, error) {
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	if !strings.HasPrefix(opts.Endpoint, "/") || strings.HasPrefix(opts.Endpoint, "//") {
		return nil, fmt.Errorf("dashboard: Options.Endpoint %q: want a path on the serving host", opts.Endpoint)
	}
	h, err := spa.Embedded(dist, "dashboard", opts.Title, pageConfig(opts), pageHeaders())
	if err != nil {
		return nil, err // not a nil *spa.Handler in a non-nil interface
	}
	return h, nil
}

// Mount serves the dashboard at prefix (e.g. "/dashboard") on mux: the page
// at prefix+"/", its files below, and a redirect from prefix itself.
func Mount(mux *http.ServeMux, prefix string, opts Options) error {
	h, err := Handler(opts)
	if err != nil {
		return err
	}
	prefix = strings.TrimSuffix(prefix, "/")
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	mux.Handle(prefix, http.RedirectHandler(prefix+"/", http.StatusMovedPermanently))
	return nil
}

// pageHeaders returns the security headers of the page. Unlike the
// playground (GraphiQL and Monaco need inline styles, workers and fonts), the
// dashboard needs nothing but its own script, stylesheet and origin: styles
// it sets at run time go through the CSSOM, which the policy allows.
func pageHeaders() http.Header {
	csp := []string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}
	return spa.PageHeaders(csp...)
}
