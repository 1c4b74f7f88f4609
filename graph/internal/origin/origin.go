// Package origin decides which browser origins may call the API: the
// server's own, and those of api.allowedOrigins. GraphQL's WebSockets and
// /mcp check the same way.
package origin

import (
	"net/http"
	"net/url"
	"path"
	"strings"
)

// Allowed reports whether a request comes from an allowed origin: no Origin
// (not a browser), the server's own host, or a host (or "scheme://host")
// matching one of the patterns (path.Match syntax: "dash.example.com",
// "*.example.com", "https://tools.example.com"). It is coder/websocket's
// own check.
func Allowed(r *http.Request, patterns []string) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(r.Host, u.Host) {
		return true
	}
	return Listed(u, patterns)
}

// Listed reports whether an origin matches one of the patterns.
func Listed(u *url.URL, patterns []string) bool {
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(target)); err == nil && ok {
			return true
		}
	}
	return false
}
