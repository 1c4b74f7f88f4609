// The edge of /mcp: what readBody and the token check refuse there is
// answered as JSON-RPC, which an MCP client reads, not with GraphQL's
// {"errors": [...]}: a body that cannot be read as it is, 400 with a parse
// error (-32700); a body over the limit, 413, or one that did not arrive in
// time, 408, with an invalid request (-32600); no valid token, 401 with the
// bearer challenge and an invalid request. The id is null: the request was
// not read.
//
// A tool's arguments are the tool's to check (graph/mcp): a string in them
// that is not UTF-8 is answered as every argument that does not fit, a
// tool error (isError) naming the argument, so the model can correct it.

package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/internal/jsonutf8"
)

// JSON-RPC's error codes for a request that was not read.
const (
	rpcParseError     = -32700
	rpcInvalidRequest = -32600
)

// mcpEdge answers readBody's refusals on /mcp as JSON-RPC.
var mcpEdge = bodyEdge{refuse: writeRPCError, body: invalidUTF8InMCP}

// writeRPCError answers a request refused before the MCP handler saw it
// with a JSON-RPC error whose data carries the code and limit GraphQL's
// extensions would, and closes the connection: what is left of its body is
// not read.
func writeRPCError(w http.ResponseWriter, status int, parse bool, msg string, data map[string]any) {
	code := rpcInvalidRequest
	if parse {
		code = rpcParseError
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg, "data": data}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRPCUnauthenticated is writeUnauthenticated for /mcp.
func writeRPCUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
	writeRPCError(w, http.StatusUnauthorized, false, auth.ErrUnauthenticated.Error()+": send Authorization: Bearer <token>",
		map[string]any{"code": auth.CodeUnauthenticated, "retryable": false})
}

// invalidUTF8InMCP finds the first string of an MCP request body that is
// not UTF-8, but for those in the arguments of one tools/call message,
// which the tool reports (graph/mcp checks them before decoding them).
func invalidUTF8InMCP(body []byte) (string, bool) {
	var skip func([]string) bool
	if b := bytes.TrimSpace(body); len(b) > 0 && b[0] == '{' {
		var m struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method == "tools/call" {
			skip = func(path []string) bool {
				return len(path) >= 2 && path[0] == "params" && path[1] == "arguments"
			}
		}
	}
	return jsonutf8.CheckExcept(body, skip)
}
