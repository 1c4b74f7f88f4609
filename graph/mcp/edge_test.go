package mcp_test

// What the edge of /mcp refuses, as an MCP client reads it: JSON-RPC, not
// GraphQL's {"errors": [...]}; and a tool's argument that is not UTF-8 is
// the tool's error, naming the argument, as any argument that does not fit.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/resolvers"
)

// rpcAnswer is a JSON-RPC response as the wire carries it.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  *struct {
		IsError           bool `json:"isError"`
		Content           []struct{ Text string }
		StructuredContent struct {
			Error map[string]any `json:"error"`
		} `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

func decodeAnswer(t *testing.T, out []string) rpcAnswer {
	t.Helper()
	require.Len(t, out, 1, "one answer")
	require.NotContains(t, out[0], `"errors"`, "not GraphQL's shape")
	var a rpcAnswer
	require.NoError(t, json.Unmarshal([]byte(out[0]), &a), out[0])
	require.Equal(t, "2.0", a.JSONRPC, out[0])
	return a
}

func TestAToolArgumentThatIsNotUTF8IsTheToolsErrorNamingTheArgument(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)
	for i, tc := range []struct {
		name, tool, args, field string
	}{
		{"a lone surrogate", "fill", `{"selector":"#q","text":"\ud800"}`, "text"},
		{"a lone surrogate after a good one", "fill", `{"selector":"#q","text":"ok \ud83d\ude00 \udc00"}`, "text"},
		{"bytes that are not UTF-8", "fill", "{\"selector\":\"#q\",\"text\":\"\xff\xfe\"}", "text"},
		{"Latin-1", "navigate", "{\"url\":\"https://example.com/\xfc\"}", "url"},
		{"a nested argument", "submit_task", `{"action":{"kind":"click","selector":"#\udfff"}}`, "action.selector"},
	} {
		msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(10+i) + `,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":` + tc.args + `}}`
		status, _, out := s.post(t, ctx, msg)
		require.Equal(t, http.StatusOK, status, "%s: %s", tc.name, out)
		a := decodeAnswer(t, out)
		require.Nil(t, a.Error, "%s: a tool error, not a protocol error: %s", tc.name, out)
		require.NotNil(t, a.Result, out)
		require.True(t, a.Result.IsError, "%s: %s", tc.name, out)
		e := a.Result.StructuredContent.Error
		require.Equal(t, "INVALID_INPUT", e["code"], "%s: %s", tc.name, out)
		require.Equal(t, tc.field, e["field"], "%s: %s", tc.name, out)
		require.Len(t, a.Result.Content, 1)
		require.Contains(t, a.Result.Content[0].Text, tc.field+": not valid UTF-8", tc.name)
	}
	require.Empty(t, b.tasks(t), "nothing was submitted")

	// The same call with good strings is not refused: only the bad ones
	// are.
	status, _, out := s.post(t, ctx, `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"fill","arguments":{"selector":"#q","text":"\ud83d\ude00 \ufffd"}}}`)
	require.Equal(t, http.StatusOK, status, out)
	require.False(t, decodeAnswer(t, out).Result.IsError, out)
}

func TestABodyThatIsNotUTF8ElsewhereIsAJSONRPCParseError(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	ctx := ctxFor(t)
	none := &rawSession{base: b.base}
	// A client's name is its agent: "\xff" and "\xfe" would both be U+FFFD.
	status, h, out := none.post(t, ctx, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"\xff\",\"version\":\"1\"}}}")
	require.Equal(t, http.StatusBadRequest, status, out)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Empty(t, h.Get("Mcp-Session-Id"), "no session was opened")
	a := decodeAnswer(t, out)
	require.Equal(t, "null", string(a.ID))
	require.NotNil(t, a.Error, out)
	require.Equal(t, -32700, a.Error.Code)
	require.Contains(t, a.Error.Message, "params.clientInfo.name: not valid UTF-8")
	require.Equal(t, "INVALID_INPUT", a.Error.Data["code"])

	// Outside a tool's arguments, within a session: a lone surrogate in
	// the name of the tool, and one in an argument of a call that is not
	// tools/call.
	s := openRaw(t, ctx, b)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fill\ud800","arguments":{"selector":"#q","text":"x"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fill","arguments":{"text":"\ud800"},"_meta":{"progressToken":"\udc00"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/read","params":{"uri":"switchyard://tasks/\ud800","arguments":{}}}`,
	} {
		status, _, out := s.post(t, ctx, msg)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", msg, out)
		a := decodeAnswer(t, out)
		require.NotNil(t, a.Error, out)
		require.Equal(t, -32700, a.Error.Code, out)
		require.Contains(t, a.Error.Message, "not valid UTF-8", out)
		require.NotContains(t, a.Error.Message, "arguments", "names the place outside the arguments: %s", out)
	}
	require.Empty(t, b.tasks(t))
}

func TestABodyOverTheLimitIsA413WithAJSONRPCError(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true, limits: resolvers.Limits{MaxBodyBytes: 64 << 10}})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)
	big := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fill","arguments":{"selector":"#q","text":"` +
		strings.Repeat("x", 80<<10) + `"}}}`
	for _, declared := range []bool{true, false} {
		var body io.Reader = strings.NewReader(big)
		if !declared {
			body = io.MultiReader(body) // no length: read until the limit
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/mcp", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var raw bytes.Buffer
		_, _ = raw.ReadFrom(res.Body)
		_ = res.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, "declared %v: %s", declared, raw.String())
		require.Equal(t, "application/json", res.Header.Get("Content-Type"))
		a := decodeAnswer(t, []string{raw.String()})
		require.Equal(t, "null", string(a.ID))
		require.NotNil(t, a.Error, raw.String())
		require.Equal(t, -32600, a.Error.Code)
		require.Contains(t, a.Error.Message, "65536")
		require.Equal(t, "LIMIT", a.Error.Data["code"])
		require.Equal(t, "bodySize", a.Error.Data["limit"])
	}
	require.Empty(t, b.tasks(t))
}

func TestWithoutATokenMCPAnswers401AsJSONRPC(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true, tokens: []auth.Token{{Name: "ada", Role: auth.RoleAgent, AgentID: "ada"}}})
	req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Equal(t, `Bearer realm="switchyard"`, res.Header.Get("WWW-Authenticate"))
	a := decodeAnswer(t, []string{raw.String()})
	require.NotNil(t, a.Error, raw.String())
	require.Equal(t, -32600, a.Error.Code)
	require.Equal(t, "UNAUTHENTICATED", a.Error.Data["code"])
}

// What the MCP SDK refuses itself (it writes plain text) is answered as
// JSON-RPC too: a body that is not JSON-RPC, an Accept header without both
// of its types, a session that is not known.
func TestTheSDKsOwnRefusalsAreJSONRPC(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	ctx := ctxFor(t)
	s := openRaw(t, ctx, b)
	status, h, out := s.post(t, ctx, `[1,2`)
	require.Equal(t, http.StatusBadRequest, status, out)
	require.Equal(t, "application/json", h.Get("Content-Type"))
	a := decodeAnswer(t, out)
	require.Equal(t, "null", string(a.ID))
	require.NotNil(t, a.Error, out)
	require.Equal(t, -32700, a.Error.Code)
	require.Contains(t, a.Error.Message, "malformed payload")
	require.Equal(t, "INVALID_INPUT", a.Error.Data["code"])

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Mcp-Session-Id", s.id)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, res.StatusCode, string(body))
	a = decodeAnswer(t, []string{string(body)})
	require.NotNil(t, a.Error, string(body))
	require.Equal(t, -32600, a.Error.Code)
	require.Contains(t, a.Error.Message, "Accept")

	gone := &rawSession{base: b.base, id: "no-such-session"}
	status, _, out = gone.post(t, ctx, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":{}}`)
	require.Equal(t, http.StatusNotFound, status, out)
	a = decodeAnswer(t, out)
	require.NotNil(t, a.Error, out)
	require.Equal(t, "NOT_FOUND", a.Error.Data["code"], out)
}
