// Request limits, each refused with a typed error (extensions.code LIMIT):
// the query's depth and complexity (a gqlgen extension that runs after
// validation, before any resolver), and the size of an HTTP request body (a
// middleware that answers 413 before gqlgen reads anything). The WebSocket
// payload limit is the transport's read limit: a larger message closes the
// socket with status 1009 (message too big).

package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
)

// queryLimits refuses operations deeper or more complex than the limits.
type queryLimits struct {
	es            graphql.ExecutableSchema
	maxComplexity int
	maxDepth      int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*queryLimits)(nil)

func (l *queryLimits) ExtensionName() string { return "SwitchyardQueryLimits" }

func (l *queryLimits) Validate(es graphql.ExecutableSchema) error {
	l.es = es
	return nil
}

func (l *queryLimits) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	op := opCtx.Operation
	if op == nil {
		return nil
	}
	if d := depth(op.SelectionSet, 0); d > l.maxDepth {
		return limitGQLError("depth", d, l.maxDepth, "the operation is %d levels deep; the limit is %d", d, l.maxDepth)
	}
	if c := complexity.Calculate(ctx, l.es, op, opCtx.Variables); c > l.maxComplexity {
		return limitGQLError("complexity", c, l.maxComplexity, "the operation has complexity %d; the limit is %d (lists count once per item they may return: lower first/limit/max or select fewer fields)", c, l.maxComplexity)
	}
	return nil
}

// depth returns the depth of a selection set: 1 for a set of leaf fields.
// Introspection (__schema, __type) is exempt: GraphiQL's introspection query
// is deep by nature and cheap. guard bounds the recursion (validation has
// already refused cyclic fragments).
func depth(set ast.SelectionSet, guard int) int {
	if guard > 256 {
		return guard
	}
	d := 0
	for _, sel := range set {
		var sub int
		switch s := sel.(type) {
		case *ast.Field:
			if s.Name == "__schema" || s.Name == "__type" {
				continue
			}
			sub = 1 + depth(s.SelectionSet, guard+1)
		case *ast.InlineFragment:
			sub = depth(s.SelectionSet, guard+1)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				sub = depth(s.Definition.SelectionSet, guard+1)
			}
		}
		d = max(d, sub)
	}
	return d
}

func limitGQLError(limit string, value, maxValue int, format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	err.Extensions = map[string]any{"code": string(engine.CodeLimit), "limit": limit, "value": value, "max": maxValue, "retryable": false}
	return err
}

// uploadSlack is what a loadPlugin request carries besides the module's
// base64: the query text, the name and the configuration document.
const uploadSlack = 1 << 20

// bodyLimit is the request body limit of a request: limits.maxBodyBytes,
// or for an admin (who alone may call loadPlugin) on a server with plugins
// at least enough for the largest module loadPlugin takes
// (plugins.maxWasmBytes) in base64. A body is read before the GraphQL
// operation in it is known, so the limit follows who sends it.
// For anyone else, beyond says, should the body be over the limit, that an
// admin's may be larger: the body of a loadPlugin refused for its size
// would otherwise read as the module's fault, when it is the caller's role.
func (s *Server) bodyLimit(r *http.Request) (limit int, beyond string) {
	limit = s.opts.Limits.MaxBodyBytes
	if s.opts.Plugins == nil {
		return limit, ""
	}
	upload := max(limit, base64.StdEncoding.EncodedLen(s.opts.Plugins.MaxWasmBytes())+uploadSlack)
	if upload == limit {
		return limit, ""
	}
	nonAdmin, admin := s.bodyHints()
	if id := auth.FromContext(r.Context()); id == nil || id.Role != auth.RoleAdmin {
		return limit, nonAdmin
	}
	return upload, admin
}

// uploadHints makes the bodyHints of a server with plugins: built once, not
// per request.
func (s *Server) uploadHints() (nonAdmin, admin string) {
	maxWasm := s.opts.Plugins.MaxWasmBytes()
	upload := max(s.opts.Limits.MaxBodyBytes, base64.StdEncoding.EncodedLen(maxWasm)+uploadSlack)
	return " (an admin's request may have up to " + strconv.Itoa(upload) + ", for loadPlugin, which needs the role admin)",
		" (room for a module of plugins.maxWasmBytes, " + strconv.Itoa(maxWasm) + " bytes, in base64)"
}

// fixedBodyLimit is a body limit that is the same for every request.
func fixedBodyLimit(limit int) func(*http.Request) (int, string) {
	return func(*http.Request) (int, string) { return limit, "" }
}

// readBody reads the body of a request before its handler sees it, within
// three limits: its size (413 before reading anything when the declared
// length is over limit(r)), the time it takes to arrive (the connection's
// read deadline is timeout from now while the body is read, then cleared, so
// a body that trickles in is cut with 408 and the streams that follow it,
// SSE, are not), and its encoding: a string that is not UTF-8 is refused
// with INVALID_INPUT naming its place (encoding/json would rewrite it to
// U+FFFD, making different byte strings the same agent). edge answers the
// refusals in the endpoint's own shape (GraphQL's errors, JSON-RPC's) and
// says which strings to check. WebSocket upgrades have no body; their
// messages are checked by the adapter (wsConn).
func readBody(limit func(*http.Request) (int, string), timeout time.Duration, edge bodyEdge, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if edge.query != nil && r.Method == http.MethodGet && r.Header.Get("Upgrade") == "" {
			if field, ok := edge.query(r.URL.Query()); !ok {
				writeInvalidUTF8(w, edge, field)
				return
			}
		}
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		maxBytes, beyond := limit(r)
		if r.ContentLength > int64(maxBytes) {
			writeBodyLimit(w, edge, r.ContentLength, maxBytes, beyond)
			return
		}
		rc := http.NewResponseController(w)
		deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
		body, err := readAllSized(http.MaxBytesReader(w, r.Body, int64(maxBytes)), r.ContentLength)
		if deadline {
			_ = rc.SetReadDeadline(time.Time{})
		}
		var tooBig *http.MaxBytesError
		var netErr net.Error
		switch {
		case errors.As(err, &tooBig):
			writeBodyLimit(w, edge, -1, maxBytes, beyond)
			return
		case errors.As(err, &netErr) && netErr.Timeout():
			writeBodyTimeout(w, edge, timeout)
			return
		case err != nil:
			w.Header().Set("Connection", "close")
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if field, ok := edge.body(body); !ok {
			writeInvalidUTF8(w, edge, field)
			return
		}
		r.Body = &readBodyDone{Reader: bytes.NewReader(body), data: body}
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// bodyEdge is what readBody does differently for each endpoint.
type bodyEdge struct {
	// refuse answers a request refused before its handler saw it; parse
	// says the body cannot be read as it is (JSON-RPC's parse error), as
	// opposed to a request refused whole (its invalid request).
	refuse func(w http.ResponseWriter, status int, parse bool, msg string, ext map[string]any)
	// body finds the first string of a body that is not UTF-8 and that the
	// handler does not check itself.
	body func(body []byte) (string, bool)
	// query checks the parameters of a GET request; nil checks none.
	query func(url.Values) (string, bool)
}

// graphQLEdge answers as GraphQL does: {"errors": [...]}.
var graphQLEdge = bodyEdge{
	refuse: func(w http.ResponseWriter, status int, _ bool, msg string, ext map[string]any) {
		writeRequestError(w, status, msg, ext)
	},
	body:  invalidUTF8InJSON,
	query: invalidUTF8InQuery,
}

// readAllSized reads r to its end as io.ReadAll does, into a buffer made
// once for a body that declares its length (size ≥ 0): io.ReadAll starts
// at 512 bytes and grows by copying, which for a batch's body of some
// 20 KB allocated about twice its size, and every byte allocated brings
// the collector's next cycle nearer. One byte more than size leaves room
// for the read that meets the end; a body longer than it declared still
// reads whole (the buffer grows as io.ReadAll's would). The buffer made up
// front is at most presizeMax: a client that declares the body limit and
// then sends nothing, or trickles, holds no more than that of the server's
// memory until its bytes arrive.
func readAllSized(r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, min(size, presizeMax)+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// presizeMax bounds the buffer readAllSized makes before any byte has
// arrived: ten times a batch of 100 items.
const presizeMax = 256 << 10

// readBodyDone is a request body readBody has read: the POST transport
// decodes data as it is rather than reading it into a second copy.
type readBodyDone struct {
	*bytes.Reader
	data []byte
}

func (*readBodyDone) Close() error { return nil }

// bodyBytes returns what is left of a request's body.
func bodyBytes(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*readBodyDone); ok && b.Len() == len(b.data) {
		_, _ = b.Seek(0, io.SeekEnd)
		return b.data, nil
	}
	return io.ReadAll(r.Body)
}

// writeBodyTimeout answers 408: the body did not arrive within the limit.
func writeBodyTimeout(w http.ResponseWriter, edge bodyEdge, timeout time.Duration) {
	edge.refuse(w, http.StatusRequestTimeout, false, "the request body did not arrive within "+timeout.String(),
		map[string]any{"code": string(engine.CodeLimit), "limit": "bodyTimeout", "max": timeout.String(), "retryable": false})
}

// writeInvalidUTF8 answers 400 INVALID_INPUT for a string that is not UTF-8.
func writeInvalidUTF8(w http.ResponseWriter, edge bodyEdge, field string) {
	edge.refuse(w, http.StatusBadRequest, true, field+": not valid UTF-8 (strings must be UTF-8; invalid bytes are refused, not replaced)",
		map[string]any{"code": string(engine.CodeInvalidInput), "field": field, "retryable": false})
}

// writeRequestError answers a request refused before GraphQL saw it, and
// closes the connection: what is left of its body is not read.
func writeRequestError(w http.ResponseWriter, status int, msg string, ext map[string]any) {
	body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{"message": msg, "extensions": ext}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeBodyLimit answers 413: the body is over the limit; beyond, if not
// empty, says who may send more.
func writeBodyLimit(w http.ResponseWriter, edge bodyEdge, size int64, maxBytes int, beyond string) {
	msg := "the request body is larger than " + strconv.Itoa(maxBytes) + " bytes" + beyond
	if size >= 0 {
		msg = "the request body has " + strconv.FormatInt(size, 10) + " bytes; the limit is " + strconv.Itoa(maxBytes) + beyond
	}
	edge.refuse(w, http.StatusRequestEntityTooLarge, false, msg,
		map[string]any{"code": string(engine.CodeLimit), "limit": "bodySize", "max": maxBytes, "retryable": false})
}
