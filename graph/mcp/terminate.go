// Terminating a session. A client ends its MCP session with DELETE /mcp
// (Mcp-Session-Id); the specification says the session is then
// terminated. The SDK's DELETE closes the session with
// ServerSession.Close, which stops new requests and waits for the handlers
// in flight to return, cancelling none of them (go-sdk v1.8.0:
// StreamableHTTPHandler.serveStatefulDELETE, jsonrpc2 Connection.Close;
// no option changes it). A browser tool call waits for its task, so the
// DELETE would wait for the browser, the task would run on for a client
// that has gone, and the call's stream would close unanswered.
//
// So the endpoint terminates the session's calls itself before handing the
// DELETE to the SDK: each call waiting for its task is cancelled as a
// client's notifications/cancelled cancels it (its task ends CANCELLED,
// reason sessionClosedReason), the handlers return, and the SDK's Close
// finds none left to wait for. Only the token user that opened the session
// may terminate it, as the SDK checks (another gets its 403 from the SDK,
// and nothing is cancelled).

package mcp

import (
	"context"
	"errors"
	"net/http"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// sessionClosedReason is the reason of a task whose MCP session its client
// terminated while the call waited.
const sessionClosedReason = "cancelled: the MCP client closed its session"

// errSessionClosed is the cause of a call's context when its session is
// terminated.
var errSessionClosed = errors.New(sessionClosedReason)

// sessionCalls are a live MCP session's calls waiting for their tasks.
type sessionCalls struct {
	owner  string // the token user that opened the session ("" without tokens)
	calls  map[*sessionCall]struct{}
	closed bool // terminated: a call that starts waiting now is cancelled at once
}

// own notes the token user of a request of the session, the first time
// one comes with a token (the SDK refuses another user's requests).
func (sc *sessionCalls) own(extra *sdk.RequestExtra) {
	if sc.owner == "" && extra != nil && extra.TokenInfo != nil {
		sc.owner = extra.TokenInfo.UserID
	}
}

// sessionCall is one call waiting for its task.
type sessionCall struct{ cancel context.CancelCauseFunc }

// enter notes a call of c's MCP session waiting for its task: the context
// it returns ends when the session is terminated (cause errSessionClosed);
// leave forgets the call.
func (s *Server) enter(ctx context.Context, c *caller) (_ context.Context, leave func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	call := &sessionCall{cancel: cancel}
	s.mu.Lock()
	sc := s.calls[c.mcpID]
	switch {
	case sc == nil: // not a live session: nothing terminates it but its own end
	case sc.closed:
		cancel(errSessionClosed)
	default:
		sc.calls[call] = struct{}{}
	}
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		if sc != nil {
			delete(sc.calls, call)
		}
		s.mu.Unlock()
		cancel(nil)
	}
}

// terminate cancels the calls of MCP session id, for a DELETE of the
// request r; the SDK then closes the session.
func (s *Server) terminate(id string, r *http.Request) {
	s.mu.Lock()
	sc := s.calls[id]
	if sc == nil || sc.closed {
		s.mu.Unlock()
		return
	}
	if s.opts.Auth.Enabled() {
		// The session's own token user only (the SDK refuses another,
		// 403). A session none of whose calls came yet has nothing to
		// cancel: its owner is noted before its first call waits.
		if ti := sdkauth.TokenInfoFromContext(r.Context()); sc.owner == "" || ti == nil || ti.UserID != sc.owner {
			s.mu.Unlock()
			return
		}
	}
	sc.closed = true
	cancels := make([]context.CancelCauseFunc, 0, len(sc.calls))
	for call := range sc.calls {
		cancels = append(cancels, call.cancel)
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errSessionClosed)
	}
}

// terminating wraps the SDK's handler: a DELETE of a session cancels its
// calls first.
func (s *Server) terminating(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(sessionIDHeader); r.Method == http.MethodDelete && id != "" {
			s.terminate(id, r)
		}
		next.ServeHTTP(w, r)
	})
}
