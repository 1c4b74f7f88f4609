// Security at the HTTP edge: who is calling (bearer tokens in the
// Authorization header; in the connection_init payload for WebSockets),
// the HTTP status of refused operations (401, 403, 429), the Host check that
// keeps a browser on another site from reaching a loopback server without
// authentication (DNS rebinding), and the per-connection subscription cap.
// What each identity may do is graph/auth's.

package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/internal/origin"
)

// CloseForbidden is the WebSocket close code of a connection_init without
// a valid token (graphql-transport-ws's "Forbidden").
const CloseForbidden = 4403

// writeUnauthenticated answers 401 with an UNAUTHENTICATED GraphQL error at
// once, and closes the connection: the request's body is never read (the
// HTTP server would otherwise read up to 256 KiB of it before answering, as
// slowly as the client sends it).
func writeUnauthenticated(w http.ResponseWriter) {
	body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
		"message":    auth.ErrUnauthenticated.Error() + ": send Authorization: Bearer <token>",
		"extensions": map[string]any{"code": auth.CodeUnauthenticated, "retryable": false},
	}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(body)
}

// authenticate puts the caller's identity in the request's context, or
// answers 401. WebSocket upgrades pass: their token comes in the
// connection_init payload (a browser cannot set headers on a WebSocket), or
// else in the upgrade's Authorization header, and wsInit checks it.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The client's address, for the audit log, is the request's
		// (logRequests: requestid.Request).
		ctx := r.Context()
		switch {
		case r.Header.Get("Upgrade") != "":
			if !originAllowed(r, s.opts.AllowedOrigins) {
				s.log.Debug("websocket refused: origin not allowed", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
				http.Error(w, "the Origin "+strconv.Quote(r.Header.Get("Origin"))+" may not open WebSockets here", http.StatusForbidden)
				return
			}
			ctx = context.WithValue(ctx, upgradeAuthKey{}, r.Header.Get("Authorization"))
		case r.Method == http.MethodOptions:
			// Answered by the transport, with nothing but the allowed methods.
		default:
			id, err := s.opts.Auth.AuthenticateHeader(r.Header.Get("Authorization"))
			if err != nil {
				writeUnauthenticated(w)
				return
			}
			ctx = auth.WithIdentity(ctx, id)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requireIdentity answers 401 for requests without a valid token (with
// authentication on): /metrics and /artifacts.
func (s *Server) requireIdentity(next http.Handler) http.Handler {
	return s.requireIdentityAs(writeUnauthenticated, next)
}

// requireIdentityAs is requireIdentity answering 401 with refuse (/mcp: as
// JSON-RPC).
func (s *Server) requireIdentityAs(refuse func(http.ResponseWriter), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.opts.Auth.AuthenticateHeader(r.Header.Get("Authorization"))
		if err != nil {
			refuse(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithIdentity(r.Context(), id)))
	})
}

type upgradeAuthKey struct{}

// wsInit authenticates a WebSocket at connection_init: the payload's
// Authorization ({"Authorization": "Bearer …"}, or under "headers"), else
// the upgrade request's header. Without a valid token the socket is closed
// with 4403.
func (s *Server) wsInit(ctx context.Context, payload transport.InitPayload) (context.Context, *transport.InitPayload, error) {
	header := payloadAuthorization(payload)
	if header == "" {
		header, _ = ctx.Value(upgradeAuthKey{}).(string)
	}
	id, err := s.opts.Auth.AuthenticateHeader(header)
	if err != nil {
		s.log.Debug("websocket refused: no valid token", "remote", auth.RemoteAddr(ctx))
		ctx = transport.WithWebsocketCloseCode(ctx, CloseForbidden)
		ctx = transport.AppendCloseReason(ctx, "Forbidden")
		return ctx, nil, errors.New("forbidden: " + auth.ErrUnauthenticated.Error())
	}
	ctx = auth.WithIdentity(ctx, id)
	return context.WithValue(ctx, connStateKey{}, &connState{}), nil, nil
}

// payloadAuthorization returns the Authorization of a connection_init
// payload, at its top level or under "headers", in either case.
func payloadAuthorization(p transport.InitPayload) string {
	if v := p.Authorization(); v != "" {
		return v
	}
	if h, ok := p["headers"].(map[string]any); ok {
		return transport.InitPayload(h).Authorization()
	}
	return ""
}

// connState is what a WebSocket connection keeps across its operations.
type connState struct {
	subs atomic.Int64 // subscriptions running
}

type connStateKey struct{}

// subscriptionCap refuses a subscription beyond the connection's limit
// (LIMIT); the count drops when a subscription ends.
type subscriptionCap struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = subscriptionCap{}

func (subscriptionCap) ExtensionName() string                   { return "SwitchyardSubscriptionCap" }
func (subscriptionCap) Validate(graphql.ExecutableSchema) error { return nil }

func (c subscriptionCap) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	st, ok := ctx.Value(connStateKey{}).(*connState)
	if !ok || oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return next(ctx)
	}
	if n := st.subs.Add(1); n > int64(c.max) {
		st.subs.Add(-1)
		err := limitGQLError("subscriptions", int(n), c.max, "this connection holds %d subscriptions already; the limit is %d (stop one, or open another connection)", c.max, c.max)
		return graphql.OneShot(&graphql.Response{Errors: gqlerror.List{err}})
	}
	// The operation's context ends with the subscription (stopped,
	// completed or its connection gone).
	context.AfterFunc(ctx, func() { st.subs.Add(-1) })
	return next(ctx)
}

// statusHint carries the HTTP status of an operation the gate refused, from
// the gate to the response writer of a plain HTTP request.
type statusHint struct {
	code       atomic.Int32
	retryAfter atomic.Int64 // nanoseconds
}

type statusHintKey struct{}

// refusalStatus is the HTTP status of a refusal code.
func refusalStatus(code string) int {
	switch code {
	case auth.CodeUnauthenticated:
		return http.StatusUnauthorized
	case auth.CodeForbidden:
		return http.StatusForbidden
	case auth.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	return 0
}

// refused is the gate's report of a refusal: the audit log and, for plain
// HTTP, the status.
func (s *Server) refused(ctx context.Context, r auth.Refusal) {
	s.audit.Refused(ctx, r)
	if h, ok := ctx.Value(statusHintKey{}).(*statusHint); ok {
		h.code.Store(int32(refusalStatus(r.Code)))
		h.retryAfter.Store(int64(r.RetryAfter))
	}
}

// withStatusHints lets the gate choose the status of plain HTTP responses.
func withStatusHints(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			next.ServeHTTP(w, r)
			return
		}
		h := &statusHint{}
		next.ServeHTTP(&hintWriter{ResponseWriter: w, hint: h}, r.WithContext(context.WithValue(r.Context(), statusHintKey{}, h)))
	})
}

// hintWriter replaces the 200 of a refused operation with its status.
type hintWriter struct {
	http.ResponseWriter
	hint    *statusHint
	written bool
}

func (w *hintWriter) WriteHeader(code int) {
	if !w.written {
		w.written = true
		if c := int(w.hint.code.Load()); c != 0 && (code == http.StatusOK || code == c) {
			code = c
			if d := time.Duration(w.hint.retryAfter.Load()); code == http.StatusTooManyRequests && d > 0 {
				w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
			}
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *hintWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *hintWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkHost refuses, while authentication is off, requests that reached a
// loopback address under a name that is not a loopback one: a page on
// another site that rebinds its DNS name to 127.0.0.1 would otherwise reach
// the API with the browser of whoever runs the server.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if s.opts.Auth.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if tcp, ok := local.(*net.TCPAddr); ok && tcp.IP.IsLoopback() && !loopbackHost(r.Host) {
			http.Error(w, "the Host "+strconv.Quote(r.Host)+" is not a loopback name: without authentication this server answers loopback names only", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header names a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// originAllowed reports whether a WebSocket upgrade comes from an allowed
// origin (origin.Allowed), checked before gqlgen so that a refusal is a
// clean 403.
func originAllowed(r *http.Request, patterns []string) bool { return origin.Allowed(r, patterns) }

// refusedInFull gives an operation that row-level checks refused in full
// the status of one the access table refused: when a plain HTTP response
// has a FORBIDDEN error and no root field has data, it is 403 and its data
// null (or absent, when the operation did not run). A response of which a part was allowed stays 200, with that part.
func refusedInFull(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	res := next(ctx)
	h, ok := ctx.Value(statusHintKey{}).(*statusHint)
	if !ok || res == nil || !hasCode(res.Errors, auth.CodeForbidden) || !noRootData(res.Data) {
		return res
	}
	h.code.CompareAndSwap(0, http.StatusForbidden)
	if len(res.Data) > 0 {
		res.Data = json.RawMessage("null")
	}
	return res
}

// hasCode reports whether one of errs has the code.
func hasCode(errs gqlerror.List, code string) bool {
	for _, e := range errs {
		if c, _ := e.Extensions["code"].(string); c == code {
			return true
		}
	}
	return false
}

// noRootData reports whether data is null or absent, or has only null
// fields.
func noRootData(data json.RawMessage) bool {
	if len(data) == 0 || string(data) == "null" {
		return true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil {
		return false
	}
	for _, v := range fields {
		if string(v) != "null" {
			return false
		}
	}
	return true
}
