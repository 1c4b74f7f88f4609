// Package requestid gives every HTTP request an id that matches what a
// client saw to the server's log: the caller's X-Request-Id when it sends a
// sane one (Valid), else one the server makes. The server makes it lazily,
// the first time something asks for it — an error whose detail was held
// back, a log line about the request — so that a request that logs nothing
// costs nothing more; the response's X-Request-Id carries it when it is
// known by the time the response's header is written.
package requestid

import (
	"context"
	"crypto/rand"
	"net/http"
	"sync/atomic"
)

// Header is the request's and the response's header of the id.
const Header = "X-Request-Id"

// MaxLen is the longest id a caller may send.
const MaxLen = 128

// Valid reports whether a caller's id is a sane one: 1 to MaxLen visible
// ASCII characters (no spaces, no control characters, nothing past 0x7e),
// so that it can go into a log line and a response header as it is.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// Given returns the caller's id in h: its one X-Request-Id value when it
// is Valid, as the header's own slice; nil otherwise (none, several, or one
// that is not sane: the server makes an id instead).
func Given(h http.Header) []string {
	if v := h[Header]; len(v) == 1 && Valid(v[0]) {
		return v
	}
	return nil
}

// New returns a fresh id: 26 random base32 characters.
func New() string { return rand.Text() }

// Request is what the server keeps of one HTTP request for its logs: its
// id and the client's address. The zero value has no id given; ID makes
// one. Safe for concurrent use once Init has returned.
type Request struct {
	// Remote is the client's address (http.Request.RemoteAddr).
	Remote string
	given  []string // the caller's id (Given), or nil
	made   atomic.Pointer[string]
}

// Init takes the caller's id (Given) and the client's address of r.
func (q *Request) Init(r *http.Request) {
	q.given = Given(r.Header)
	q.Remote = r.RemoteAddr
}

// ID returns the request's id, making it on first use when the caller gave
// none. A nil Request has none: "".
func (q *Request) ID() string {
	if q == nil {
		return ""
	}
	if q.given != nil {
		return q.given[0]
	}
	if p := q.made.Load(); p != nil {
		return *p
	}
	id := New()
	if q.made.CompareAndSwap(nil, &id) {
		return id
	}
	return *q.made.Load()
}

// Known returns the request's id if it is known — the caller's, or one
// already made — without making one.
func (q *Request) Known() string {
	if q == nil {
		return ""
	}
	if q.given != nil {
		return q.given[0]
	}
	if p := q.made.Load(); p != nil {
		return *p
	}
	return ""
}

// HeaderValue is the value of the response's X-Request-Id: the caller's
// (its own slice: echoing it allocates nothing), the one made, or nil when
// none is known yet.
func (q *Request) HeaderValue() []string {
	if q.given != nil {
		return q.given
	}
	if p := q.made.Load(); p != nil {
		return []string{*p}
	}
	return nil
}

type key struct{}

// With returns ctx carrying q.
func With(ctx context.Context, q *Request) context.Context {
	return context.WithValue(ctx, key{}, q)
}

// WithID returns ctx carrying a request whose id is id (a Valid one; else
// ctx carries a request whose id is made on first use): for a call that
// reaches its handler without its HTTP request's context, as an MCP tool's.
func WithID(ctx context.Context, id string) context.Context {
	q := &Request{}
	if Valid(id) {
		q.given = []string{id}
	}
	return With(ctx, q)
}

// From returns the request of ctx, or nil.
func From(ctx context.Context) *Request {
	q, _ := ctx.Value(key{}).(*Request)
	return q
}

// ID returns the id of ctx's request, making it if need be; "" when ctx
// carries no request.
func ID(ctx context.Context) string { return From(ctx).ID() }

// Known returns the id of ctx's request if it is known (Request.Known).
func Known(ctx context.Context) string { return From(ctx).Known() }
