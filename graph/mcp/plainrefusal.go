package mcp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
)

// codeParseError is JSON-RPC's error code for a body that is not JSON.
const codeParseError = -32700

// jsonRPCRefusals answers the MCP SDK's own refusals, which it writes as
// plain text (http.Error: a body that is not JSON-RPC, an Accept header
// without both of its types, an unknown session, a method other than
// POST, GET and DELETE), as JSON-RPC errors with a null id, as every
// other refusal of /mcp is answered: an MCP client reads JSON-RPC, and
// some fail on a plain-text body before they show its message.
func jsonRPCRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pw := &plainRefusal{ResponseWriter: w}
		next.ServeHTTP(pw, r)
		pw.finish()
	})
}

// plainRefusal holds back a plain-text error answer, to write it again as
// JSON-RPC; anything else goes through as it is written.
type plainRefusal struct {
	http.ResponseWriter
	status int // a held refusal's status; 0 while none is held
	text   bytes.Buffer
}

func (p *plainRefusal) WriteHeader(code int) {
	if code >= 400 && p.status == 0 && strings.HasPrefix(p.Header().Get("Content-Type"), "text/plain") {
		p.status = code
		return
	}
	p.ResponseWriter.WriteHeader(code)
}

func (p *plainRefusal) Write(b []byte) (int, error) {
	if p.status != 0 {
		return p.text.Write(b)
	}
	return p.ResponseWriter.Write(b)
}

// FlushError passes a stream's flushes on (SSE answers are not refusals),
// through whatever wraps the connection's writer.
func (p *plainRefusal) FlushError() error {
	if p.status != 0 {
		return nil
	}
	return http.NewResponseController(p.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (p *plainRefusal) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// finish writes a held refusal as a JSON-RPC error: a parse error for a
// body that could not be read as JSON-RPC, an invalid request otherwise,
// the text as its message and the code GraphQL's extensions would carry
// in its data.
func (p *plainRefusal) finish() {
	if p.status == 0 {
		return
	}
	msg := strings.TrimSpace(p.text.String())
	code := codeInvalidRequest
	if strings.HasPrefix(msg, "malformed payload") {
		code = codeParseError
	}
	data := map[string]any{"code": string(engine.CodeInvalidInput), "retryable": false}
	switch p.status {
	case http.StatusNotFound:
		data["code"] = string(engine.CodeNotFound)
	case http.StatusForbidden:
		data["code"] = auth.CodeForbidden
	}
	if p.status >= 500 {
		data["code"], data["retryable"] = string(model.CodeInternal), true
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg, "data": data}})
	h := p.Header()
	h.Del("X-Content-Type-Options")
	h.Del("Content-Length")
	h.Set("Content-Type", "application/json")
	p.ResponseWriter.WriteHeader(p.status)
	_, _ = p.ResponseWriter.Write(body)
}

// Flush is FlushError for those who assert http.Flusher.
func (p *plainRefusal) Flush() { _ = p.FlushError() }
