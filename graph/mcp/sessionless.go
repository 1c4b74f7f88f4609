// A request without a session. The endpoint keeps sessions (Mcp-Session-Id),
// and the Streamable HTTP transport says a server that requires one should
// answer a request without it, other than initialize, with 400 Bad Request.
// The SDK (go-sdk v1.8.0) instead opens a session for the request, answers
// 200 with a JSON-RPC error of code 0 ("method "tools/call" is invalid
// during session initialization") and closes the session again: a client
// that lost or never kept the header is told neither what is wrong nor
// with a code JSON-RPC defines.
//
// So the endpoint answers such a request itself: 400, with a JSON-RPC
// error (-32600, invalid request) that says to initialize and send the
// session id it answers with. Only for the protocol versions that
// initialize (up to 2025-11-25): a client of a later version, which sends
// its version with each request and no session, is left to the SDK's own
// negotiation.

package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// protocolVersionHeader carries the client's protocol version on each
// request after initialize (Streamable HTTP, 2025-06-18 and later).
const protocolVersionHeader = "Mcp-Protocol-Version"

// firstSessionlessVersion is the first protocol version without
// initialize: its requests carry their version and need no session.
const firstSessionlessVersion = "2026-07-28"

// codeInvalidRequest is JSON-RPC's invalid request.
const codeInvalidRequest = -32600

// sessionless wraps the SDK's handler: a POST without a session whose
// request is not initialize (or ping) is refused 400. maxBody bounds the
// body it reads (the SDK refuses larger ones).
func sessionless(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(sessionIDHeader) != "" || r.Body == nil || !initializes(r.Header.Get(protocolVersionHeader)) {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := peekBody(r, maxBody)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		m, ok := sessionlessRequest(body)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{
			"code": codeInvalidRequest,
			"message": "Bad Request: " + m.Method + " needs a session: send initialize first, then its " + sessionIDHeader +
				" response header with every request (a session that ended answers 404: initialize again)"}})
	})
}

// initializes reports whether a request of the protocol version its header
// names belongs to a session that initialize opens: no header (a client
// before 2025-06-18, or one that sends none), or a version the SDK
// negotiates before 2026-07-28. Another version is the SDK's to answer.
func initializes(version string) bool {
	return version == "" || (version < firstSessionlessVersion && slices.Contains(sdk.SupportedProtocolVersions(), version))
}

// sessionlessRequest returns the request of a body that needs a session:
// one JSON-RPC request (a method and an id), not initialize or ping, that
// does not name its protocol version in _meta as a sessionless client's
// does.
func sessionlessRequest(body []byte) (rpcMessage, bool) {
	var m rpcMessage
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &m) != nil {
		return m, false
	}
	if m.Method == "" || idKey(m.ID) == "" || m.Method == "initialize" || m.Method == "ping" {
		return m, false
	}
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(m.Params) > 0 && json.Unmarshal(m.Params, &p) == nil {
		if _, ok := p.Meta["io.modelcontextprotocol/protocolVersion"]; ok {
			return m, false
		}
	}
	return m, true
}
