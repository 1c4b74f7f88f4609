// Package playground serves the GraphiQL playground: GraphiQL 5 (React,
// Monaco) built from the npm registry with esbuild, embedded in the binary,
// wired to Switchyard's GraphQL endpoint over HTTP and to its subscriptions
// over WebSocket (graphql-transport-ws, npm graphql-ws client).
//
// Authentication: the page has no token of its own. A user types
// {"Authorization": "Bearer <token>"} in GraphiQL's headers editor; it is
// sent as HTTP headers with queries and mutations, and as the
// connection_init payload of the WebSocket for subscriptions. With
// Options.AuthRequired the headers editor opens with that template.
//
// The page is configured by the server: Handler fills a JSON blob in
// index.html (endpoints, default query, whether auth is on) and sets a
// Content-Security-Policy that allows no origin but the server's own (and
// the endpoints', when they are absolute URLs on another origin).
package playground

import (
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchyard/switchyard/graph/web/spa"
)

// dist is the built playground; see generate.go.
//
//go:embed dist
var dist embed.FS

// Defaults for Options.
const (
	DefaultTitle    = "Switchyard"
	DefaultEndpoint = "/graphql"
)

// Options configure the playground page.
type Options struct {
	// Title is the page title and the name shown in GraphiQL's header.
	// Default DefaultTitle.
	Title string
	// Endpoint is the GraphQL HTTP endpoint: a path on the serving host
	// (resolved by the browser against the page's URL) or an absolute
	// http(s) URL. Default DefaultEndpoint.
	Endpoint string
	// SubscriptionEndpoint is the graphql-transport-ws endpoint: a path or
	// an absolute ws(s) or http(s) URL. Default: Endpoint, with the page's
	// scheme turned into ws or wss.
	SubscriptionEndpoint string
	// DefaultQuery fills the query editor of a new tab, and of the first
	// tab on a browser's first visit (GraphiQL keeps tabs in localStorage
	// after that). Empty: GraphiQL's own welcome text.
	DefaultQuery string
	// AuthRequired opens the headers editor with an Authorization template
	// ({"Authorization": "Bearer <token>"}) for the user to complete.
	AuthRequired bool
}

// pageConfig is the JSON read by src/config.js: Options with JSON names.
type pageConfig struct {
	Title                string `json:"title"`
	Endpoint             string `json:"endpoint"`
	SubscriptionEndpoint string `json:"subscriptionEndpoint,omitempty"`
	DefaultQuery         string `json:"defaultQuery,omitempty"`
	AuthRequired         bool   `json:"authRequired"`
}

// Handler returns an http.Handler serving the playground: the page at "/"
// (and "/index.html"), its assets under "assets/" with immutable caching, and
// THIRD_PARTY_LICENSES.txt. Mount it at "/" or, with http.StripPrefix, under
// a prefix that ends in "/": the page refers to its assets by relative URLs.
// It answers 404 for any other path and 405 for methods other than GET and
// HEAD.
func Handler(opts Options) (http.Handler, error) {
	opts = withDefaults(opts)
	connect, err := connectSources(opts)
	if err != nil {
		return nil, err
	}
	h, err := spa.Embedded(dist, "playground", opts.Title, pageConfig(opts), pageHeaders(connect))
	if err != nil {
		return nil, err // not a nil *spa.Handler in a non-nil interface
	}
	return h, nil
}

func withDefaults(opts Options) Options {
	if opts.Title == "" {
		opts.Title = DefaultTitle
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	return opts
}

// connectSources validates the endpoints and returns the origins, besides
// the page's own, that the page must be allowed to connect to.
func connectSources(opts Options) ([]string, error) {
	var sources []string
	check := func(field, raw string, schemes ...string) error {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("playground: Options.%s %q: %w", field, raw, err)
		}
		if u.Scheme == "" && u.Host == "" {
			return nil // relative to the page: same origin
		}
		for _, s := range schemes {
			if u.Scheme == s && u.Host != "" {
				sources = append(sources, u.Scheme+"://"+u.Host)
				return nil
			}
		}
		return fmt.Errorf("playground: Options.%s %q: want a path or an absolute %s URL", field, raw, strings.Join(schemes, "/"))
	}
	if err := check("Endpoint", opts.Endpoint, "http", "https"); err != nil {
		return nil, err
	}
	if opts.SubscriptionEndpoint != "" {
		if err := check("SubscriptionEndpoint", opts.SubscriptionEndpoint, "ws", "wss", "http", "https"); err != nil {
			return nil, err
		}
	}
	// An absolute http(s) endpoint used for subscriptions too is reached
	// with the matching ws(s) scheme.
	for _, s := range sources {
		if rest, ok := strings.CutPrefix(s, "http"); ok {
			sources = append(sources, "ws"+rest)
		}
	}
	return sources, nil
}

// pageHeaders returns the security headers of the page: scripts, styles,
// fonts, workers and connections from the server itself (and the endpoints'
// origins), nothing else; no framing, no referrer.
func pageHeaders(connect []string) http.Header {
	csp := []string{
		"default-src 'none'",
		"script-src 'self'",
		// GraphiQL and Monaco set inline styles and insert <style> elements.
		"style-src 'self' 'unsafe-inline'",
		"font-src 'self' data:",
		"img-src 'self' data:",
		"worker-src 'self'",
		"connect-src " + strings.Join(append([]string{"'self'"}, connect...), " "),
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}
	return spa.PageHeaders(csp...)
}
