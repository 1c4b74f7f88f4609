package mcp

import (
	"net/http"
	"net/url"

	"github.com/switchyard/switchyard/graph/internal/origin"
)

// crossOrigin refuses what a page on another site makes a visitor's
// browser send (Sec-Fetch-Site, Origin: net/http's CrossOriginProtection,
// 403), except from the origins of api.allowedOrigins, which may call
// tools as they may open GraphQL WebSockets (origin.Listed). MCP clients
// that are not browsers send neither header.
func crossOrigin(h http.Handler, allowed []string) http.Handler {
	protected := http.NewCrossOriginProtection().Handler(h)
	if len(allowed) == 0 {
		return protected
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err == nil && u.Host != "" && origin.Listed(u, allowed) {
				h.ServeHTTP(w, r)
				return
			}
		}
		protected.ServeHTTP(w, r)
	})
}
