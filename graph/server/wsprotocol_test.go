package server_test

// The WebSocket protocols as their specifications read, over a real socket:
// graphql-transport-ws's error ends an operation (no complete follows it),
// and text that is not UTF-8 closes the socket with 1007.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"
)

type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// dialRaw opens a graphql-transport-ws socket and completes its
// connection_init.
func dialRaw(t *testing.T, ctx context.Context, b *bundle) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	writeMsg(t, ctx, ws, `{"type":"connection_init","payload":{}}`)
	require.Equal(t, "connection_ack", readMsg(t, ctx, ws).Type)
	return ws
}

func writeMsg(t *testing.T, ctx context.Context, ws *websocket.Conn, m string) {
	t.Helper()
	require.NoError(t, ws.Write(ctx, websocket.MessageText, []byte(m)))
}

func readMsg(t *testing.T, ctx context.Context, ws *websocket.Conn) wsMsg {
	t.Helper()
	_, data, err := ws.Read(ctx)
	require.NoError(t, err)
	var m wsMsg
	require.NoError(t, json.Unmarshal(data, &m), string(data))
	return m
}

func TestAGraphQLTransportWSErrorIsNotFollowedByComplete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialRaw(t, ctx, b)

	for _, bad := range []string{
		`{"query":"subscription { noSuchField }"}`, // validation
		`{"query":"subscription {"}`,               // parse
	} {
		writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":`+bad+`}`)
		m := readMsg(t, ctx, ws)
		require.Equal(t, "error", m.Type, string(m.Payload))
		require.Equal(t, "1", m.ID)
		// The server answers messages in order: had it sent a complete
		// after the error, it would come before the pong.
		writeMsg(t, ctx, ws, `{"type":"ping"}`)
		require.Equal(t, "pong", readMsg(t, ctx, ws).Type, "nothing follows an error for its id")
	}

	// The id may be used again, and an operation that ends by itself
	// still completes.
	writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"subscription { stats { submitted } }"}}`)
	m := readMsg(t, ctx, ws)
	require.Equal(t, "next", m.Type, string(m.Payload))
	require.Equal(t, "1", m.ID)
	writeMsg(t, ctx, ws, `{"id":"1","type":"complete"}`)
	writeMsg(t, ctx, ws, `{"id":"2","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	for {
		m = readMsg(t, ctx, ws)
		if m.ID == "2" {
			break
		}
	}
	require.Equal(t, "next", m.Type)
	require.Equal(t, "complete", readMsg(t, ctx, ws).Type, "a query over the socket completes")
}

func TestWebSocketTextThatIsNotUTF8ClosesTheSocketWith1007(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialRaw(t, ctx, b)
	msg := []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription($a: String) { taskEvents(filter: {agentId: $a}) { seq } }","variables":{"a":"` + "\xff\xfe" + `"}}}`)
	require.NoError(t, ws.Write(ctx, websocket.MessageText, msg))
	_, _, err := ws.Read(ctx)
	require.Equal(t, websocket.StatusInvalidFramePayloadData, websocket.CloseStatus(err), "%v", err)
	var ce websocket.CloseError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "payload.variables.a: not valid UTF-8", ce.Reason)
}
