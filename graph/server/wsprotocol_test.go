package server_test

// The WebSocket protocols as their specifications read, over a real socket:
// graphql-transport-ws's error ends an operation (no complete follows it),
// its close codes (4400, 4401, 4408, 4409, 4429; 4403 is in authz_test.go),
// and text that is not UTF-8 closes the socket with 1007.

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/server"
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

// dialWS opens a graphql-transport-ws socket and sends nothing.
func dialWS(t *testing.T, ctx context.Context, b *bundle) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(b.base, "http")+"/graphql",
		&websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

// closedWith reads until the server closes the socket, and returns the
// close code and reason; messages before the close are returned too.
func closedWith(t *testing.T, ctx context.Context, ws *websocket.Conn) (websocket.StatusCode, string, []wsMsg) {
	t.Helper()
	var msgs []wsMsg
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			require.ErrorAs(t, err, &ce, "the server closes the socket")
			return ce.Code, ce.Reason, msgs
		}
		var m wsMsg
		require.NoError(t, json.Unmarshal(data, &m), string(data))
		msgs = append(msgs, m)
	}
}

func TestASubscribeUnderARunningOperationsIDClosesTheSocketWith4409(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialRaw(t, ctx, b)
	writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"subscription { stats { submitted } }"}}`)
	m := readMsg(t, ctx, ws)
	require.Equal(t, "next", m.Type, string(m.Payload))
	writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"subscription { stats { submitted } }"}}`)
	code, reason, _ := closedWith(t, ctx, ws)
	require.Equal(t, websocket.StatusCode(4409), code)
	require.Equal(t, "Subscriber for 1 already exists", reason)
}

func TestAnOperationsIDMayBeUsedAgainOnceTheClientCompletedIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialRaw(t, ctx, b)
	for range 3 {
		writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"subscription { stats { submitted } }"}}`)
		m := readMsg(t, ctx, ws)
		require.Equal(t, "next", m.Type, string(m.Payload))
		require.Equal(t, "1", m.ID)
		writeMsg(t, ctx, ws, `{"id":"1","type":"complete"}`)
	}
	// What the stopped subscriptions still had to say is not sent: the
	// next message for id 1 is the query's.
	writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	m := readMsg(t, ctx, ws)
	require.Equal(t, "next", m.Type)
	require.JSONEq(t, `{"data":{"__typename":"Query"}}`, string(m.Payload))
	require.Equal(t, wsMsg{ID: "1", Type: "complete"}, readMsg(t, ctx, ws))
	writeMsg(t, ctx, ws, `{"type":"ping"}`)
	require.Equal(t, "pong", readMsg(t, ctx, ws).Type, "nothing more for id 1")
}

func TestASubscribeBeforeConnectionAckClosesTheSocketWith4401(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialWS(t, ctx, b)
	writeMsg(t, ctx, ws, `{"id":"1","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	code, reason, msgs := closedWith(t, ctx, ws)
	require.Equal(t, websocket.StatusCode(4401), code)
	require.Equal(t, "Unauthorized", reason)
	require.Empty(t, msgs)
}

func TestASecondConnectionInitClosesTheSocketWith4429(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialRaw(t, ctx, b)
	writeMsg(t, ctx, ws, `{"type":"connection_init","payload":{}}`)
	code, reason, _ := closedWith(t, ctx, ws)
	require.Equal(t, websocket.StatusCode(4429), code)
	require.Equal(t, "Too many initialisation requests", reason)
}

func TestNoConnectionInitInTimeClosesTheSocketWith4408(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.server = func(so *server.Options) { so.WebSocketInitTimeout = 50 * time.Millisecond }
	})
	ctx := ctxFor(t)
	ws := dialWS(t, ctx, b)
	// A ping may come before connection_init; it does not stand for it.
	writeMsg(t, ctx, ws, `{"type":"ping"}`)
	code, reason, msgs := closedWith(t, ctx, ws)
	require.Equal(t, websocket.StatusCode(4408), code)
	require.Equal(t, "Connection initialisation timeout", reason)
	require.Equal(t, []wsMsg{{Type: "pong"}}, msgs)
}

func TestAPingBeforeConnectionInitIsAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	ws := dialWS(t, ctx, b)
	writeMsg(t, ctx, ws, `{"type":"ping"}`)
	require.Equal(t, "pong", readMsg(t, ctx, ws).Type)
	writeMsg(t, ctx, ws, `{"type":"pong"}`) // unasked: nothing to answer
	writeMsg(t, ctx, ws, `{"type":"connection_init"}`)
	require.Equal(t, "connection_ack", readMsg(t, ctx, ws).Type)
	writeMsg(t, ctx, ws, `{"id":"q","type":"subscribe","payload":{"query":"{ __typename }"}}`)
	require.Equal(t, "next", readMsg(t, ctx, ws).Type)
}

func TestAnInvalidMessageClosesTheSocketWith4400(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		msg     string
		acked   bool
		problem string
	}{
		{`nonsense`, false, "not a JSON object"},
		{`["connection_init"]`, false, "not a JSON object"},
		{`{"payload":{}}`, false, "no type"},
		{`{"type":"connection_init","payload":"token"}`, false, "the connection_init payload is not an object"},
		{`{"type":"hello"}`, true, `unknown type "hello"`},
		{`{"type":"next","id":"1","payload":{}}`, true, "next is the server's message"},
		{`{"type":"connection_ack"}`, true, "connection_ack is the server's message"},
		{`{"type":"subscribe","payload":{"query":"{ __typename }"}}`, true, "subscribe without an id"},
		{`{"type":"subscribe","id":"","payload":{"query":"{ __typename }"}}`, true, "subscribe without an id"},
		{`{"type":"subscribe","id":1,"payload":{"query":"{ __typename }"}}`, true, "subscribe without an id"},
		{`{"type":"subscribe","id":"1"}`, true, "subscribe without a payload object"},
		{`{"type":"subscribe","id":"1","payload":{}}`, true, "subscribe without a query"},
		{`{"type":"subscribe","id":"1","payload":{"query":"{ __typename }","variables":[]}}`, true, "subscribe's variables is not an object"},
		{`{"type":"complete"}`, true, "complete without an id"},
	} {
		ctx := ctxFor(t)
		var ws *websocket.Conn
		if c.acked {
			ws = dialRaw(t, ctx, b)
		} else {
			ws = dialWS(t, ctx, b)
		}
		writeMsg(t, ctx, ws, c.msg)
		code, reason, _ := closedWith(t, ctx, ws)
		require.Equal(t, websocket.StatusCode(4400), code, c.msg)
		require.Equal(t, "Invalid message received: "+c.problem, reason, c.msg)
	}
}
