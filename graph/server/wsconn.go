// The WebSocket connections under gqlgen's transport. They are
// coder/websocket connections, as with gqlgen's default adapter, except that
// the data of a response is copied to the socket once, never re-encoded.
//
// gqlgen encodes a subscription's response twice after executing it: the
// transport marshals the graphql.Response (whose data is already JSON), then
// the adapter marshals the protocol message around it, and encoding/json
// scans and copies every byte of the data each time; for a busy
// subscription that is most of the server's work. So:
//
//   - a response interceptor (spliceResponses) parks the data of a response
//     on its connection and leaves a number, its ticket, in its place, so
//     that the transport marshals {"data":7} instead of the data;
//   - the adapter (wsConn.WriteJSON) writes the protocol message by hand and
//     puts the parked data back in place of the ticket.
//
// Responses with errors or extensions, and any message the adapter does not
// recognise, go through encoding/json unchanged.

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"

	"github.com/switchyard/switchyard/internal/jsonstr"
)

// wsImplementation accepts WebSocket connections for gqlgen's transport.
type wsImplementation struct {
	accept websocket.AcceptOptions
	// initTimeout closes a connection that sends no connection_init within
	// it (4408); 0: no limit.
	initTimeout time.Duration
}

var _ transport.WebsocketImplementation = wsImplementation{}

func (i wsImplementation) Accept(w http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	for k, vs := range o.ResponseHeader {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	opts := i.accept
	for _, p := range o.Subprotocols {
		if !slices.Contains(opts.Subprotocols, p) {
			opts.Subprotocols = append(opts.Subprotocols, p)
		}
	}
	c, err := websocket.Accept(w, r, &opts)
	if err != nil {
		return nil, err
	}
	conn := &wsConn{c: c, transportWS: c.Subprotocol() == transportWS}
	if i.initTimeout > 0 {
		conn.mu.Lock()
		conn.initTimer = time.AfterFunc(i.initTimeout, conn.initTimedOut)
		conn.mu.Unlock()
	}
	if p, ok := r.Context().Value(parkingKey{}).(*parking); ok {
		conn.parked = p
	}
	if h, ok := r.Context().Value(acceptedKey{}).(*accepted); ok {
		h.conn.Store(conn)
	}
	return conn, nil
}

// accepted holds the connection accepted for a request, so that it is
// closed when the transport returns: gqlgen leaves a socket open when its
// connection_init payload is not an object.
type accepted struct{ conn atomic.Pointer[wsConn] }

type acceptedKey struct{}

// withAccepted gives a WebSocket request a place for its connection.
func withAccepted(r *http.Request) (*http.Request, *accepted) {
	h := &accepted{}
	return r.WithContext(context.WithValue(r.Context(), acceptedKey{}, h)), h
}

// abandon closes the connection if the transport left it open.
func (h *accepted) abandon() {
	c := h.conn.Load()
	if c == nil {
		return
	}
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if !closing {
		if c.transportWS {
			_ = c.WriteClose(closeBadRequest, "Invalid message received")
			return
		}
		_ = c.WriteClose(int(websocket.StatusProtocolError), "invalid message")
	}
}

// parking holds the data of a connection's responses between the
// interceptor and the adapter.
type parking struct {
	mu     sync.Mutex
	next   uint64
	data   map[uint64]json.RawMessage
	closed bool
}

type parkingKey struct{}

// withParking gives a WebSocket request a parking for its responses.
func withParking(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), parkingKey{}, &parking{data: map[uint64]json.RawMessage{}}))
}

// park keeps data and returns its ticket.
func (p *parking) park(data json.RawMessage) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, false
	}
	p.next++
	p.data[p.next] = data
	return p.next, true
}

func (p *parking) take(ticket uint64) (json.RawMessage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d, ok := p.data[ticket]
	delete(p.data, ticket)
	return d, ok
}

func (p *parking) close() {
	p.mu.Lock()
	p.closed = true
	p.data = nil
	p.mu.Unlock()
}

// spliceResponses is the response interceptor that parks the data of
// responses sent over WebSocket.
func spliceResponses(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	res := next(ctx)
	p, ok := ctx.Value(parkingKey{}).(*parking)
	if !ok || res == nil || len(res.Errors) > 0 || len(res.Extensions) > 0 || len(res.Data) < 2 || res.HasNext != nil ||
		res.Label != "" || res.Path != nil {
		return res
	}
	ticket, ok := p.park(res.Data)
	if !ok {
		return res
	}
	res.Data = strconv.AppendUint(nil, ticket, 10)
	return res
}

// ticketOf returns the ticket of a payload that is exactly {"data":N}.
func ticketOf(payload []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(payload, []byte(`{"data":`))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return n, err == nil
}

// wsConn adapts a coder/websocket connection to gqlgen's transport.
type wsConn struct {
	c      *websocket.Conn
	parked *parking // nil when responses are not parked
	// transportWS: the connection speaks graphql-transport-ws, whose rules
	// the adapter keeps (wsprotocol.go).
	transportWS bool

	mu        sync.Mutex
	deadline  *time.Timer
	initTimer *time.Timer // until connection_init
	closing   bool
	closeDone chan struct{}

	// graphql-transport-ws (wsprotocol.go):
	initSeen, acked bool
	// active maps the ids of the client's running operations to gqlgen's
	// ids for them, ops the other way; nextOp numbers gqlgen's ids.
	active, ops map[string]string
	nextOp      uint64
}

// transportWS is the graphql-transport-ws subprotocol's name.
const transportWS = "graphql-transport-ws"

// initTimedOut closes a connection that sent no connection_init in time.
func (w *wsConn) initTimedOut() {
	w.mu.Lock()
	seen := w.initSeen
	w.mu.Unlock()
	if !seen {
		_ = w.WriteClose(closeInitTimeout, "Connection initialisation timeout")
	}
}

// legacyInit notes a graphql-ws (subscriptions-transport-ws) connection_init.
func (w *wsConn) legacyInit(data []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.initSeen {
		return
	}
	var m struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(data, &m) == nil && m.Type == "connection_init" {
		w.initSeen = true
		if w.initTimer != nil {
			w.initTimer.Stop()
		}
	}
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

func (w *wsConn) NextReader() (int, io.Reader, error) {
	for {
		typ, data, err := w.read()
		if err != nil {
			return typ, nil, err
		}
		if !w.transportWS {
			w.legacyInit(data)
			return typ, bytes.NewReader(data), nil
		}
		out, verdict := w.admit(data)
		switch verdict {
		case protoForward:
			return typ, bytes.NewReader(out), nil
		case protoClosed:
			return typ, nil, transport.ErrWebsocketClosed
		case protoPong:
			if err := w.c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"pong"}`)); err != nil {
				return typ, nil, err
			}
		}
	}
}

// read reads a client's message: text must be UTF-8 (else the socket is
// closed with 1007).
func (w *wsConn) read() (int, []byte, error) {
	typ, data, err := w.c.Read(context.Background())
	if err != nil {
		switch websocket.CloseStatus(err) {
		case websocket.StatusNormalClosure, websocket.StatusNoStatusRcvd:
			return int(typ), nil, transport.ErrWebsocketClosed
		}
		return int(typ), nil, err
	}
	if field, ok := invalidUTF8InJSON(data); !ok {
		// RFC 6455 says text is UTF-8; 1007 is its close code for
		// text that is not.
		reason := field + ": not valid UTF-8"
		if len(reason) > 120 {
			reason = reason[:120]
		}
		_ = w.WriteClose(int(websocket.StatusInvalidFramePayloadData), reason)
		return int(typ), nil, transport.ErrWebsocketClosed
	}
	return int(typ), data, nil
}

// mapOutgoing gives a graphql-transport-ws message of gqlgen's the client's
// id of its operation, and reports false for a message not to send
// (wsprotocol.go).
func (w *wsConn) mapOutgoing(v any) bool {
	if !w.transportWS {
		return true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return true
	}
	rv = rv.Elem()
	f := fieldsOf(rv.Type())
	if !f.ok {
		return true
	}
	idv := rv.Field(f.id)
	id, send := w.outgoing(rv.Field(f.kind).String(), idv.String())
	if send && id != "" && idv.CanSet() {
		idv.SetString(id)
	}
	return send
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func (w *wsConn) WriteJSON(v any) error {
	if !w.mapOutgoing(v) {
		return nil
	}
	bp := bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			bufs.Put(bp)
		}
	}()
	data, ok := appendMessage((*bp)[:0], v, w.parked)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
	} else {
		*bp = data
	}
	return w.c.Write(context.Background(), websocket.MessageText, data)
}

// messageFields are the field indexes of a protocol message type: a struct
// with Payload (json.RawMessage), ID and Type (strings), as both of gqlgen's
// subprotocols have.
type messageFields struct {
	ok                bool
	payload, id, kind int
}

var messageTypes sync.Map // reflect.Type → messageFields

func fieldsOf(t reflect.Type) messageFields {
	if f, ok := messageTypes.Load(t); ok {
		return f.(messageFields)
	}
	f := messageFields{}
	p, okP := t.FieldByName("Payload")
	id, okI := t.FieldByName("ID")
	k, okK := t.FieldByName("Type")
	f.ok = okP && okI && okK && p.Type == reflect.TypeOf(json.RawMessage(nil)) &&
		id.Type.Kind() == reflect.String && k.Type.Kind() == reflect.String &&
		len(p.Index) == 1 && len(id.Index) == 1 && len(k.Index) == 1
	if f.ok {
		f.payload, f.id, f.kind = p.Index[0], id.Index[0], k.Index[0]
	}
	messageTypes.Store(t, f)
	return f
}

// appendMessage writes a protocol message: {"type","id","payload"} with the
// payload as it is (gqlgen encoded it with encoding/json: valid and compact),
// and a parked response's data in place of its ticket.
func appendMessage(b []byte, v any, parked *parking) ([]byte, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return b, false
	}
	rv = rv.Elem()
	f := fieldsOf(rv.Type())
	if !f.ok {
		return b, false
	}
	b = append(b, `{"type":`...)
	b = jsonstr.Append(b, rv.Field(f.kind).String(), true)
	if id := rv.Field(f.id).String(); id != "" {
		b = append(b, `,"id":`...)
		b = jsonstr.Append(b, id, true)
	}
	if p := rv.Field(f.payload).Bytes(); len(p) > 0 {
		b = append(b, `,"payload":`...)
		if ticket, ok := ticketOf(p); ok && parked != nil {
			if data, ok := parked.take(ticket); ok {
				b = append(b, `{"data":`...)
				b = append(b, data...)
				return append(b, '}', '}'), true
			}
		}
		b = append(b, p...)
	}
	return append(b, '}'), true
}

func (w *wsConn) WriteClose(code int, message string) error {
	w.stopDeadline()
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return nil
	}
	w.closing = true
	w.closeDone = make(chan struct{})
	done := w.closeDone
	w.mu.Unlock()
	// Close waits for the peer's close frame (up to 5 s): not in the
	// transport's way.
	go func() {
		defer close(done)
		_ = w.c.Close(websocket.StatusCode(code), message)
	}()
	return nil
}

func (w *wsConn) Close() error {
	w.stopDeadline()
	if w.parked != nil {
		w.parked.close()
	}
	w.mu.Lock()
	closing := w.closing
	w.mu.Unlock()
	if closing {
		return nil // the close handshake owns the connection
	}
	return w.c.CloseNow()
}

func (w *wsConn) Subprotocol() string { return w.c.Subprotocol() }

func (w *wsConn) SetReadLimit(limit int64) { w.c.SetReadLimit(limit) }

// SetReadDeadline closes the connection at the deadline (coder/websocket
// reads take a context, not a deadline); the zero time clears it.
func (w *wsConn) SetReadDeadline(t time.Time) error {
	w.mu.Lock()
	if w.deadline != nil {
		w.deadline.Stop()
		w.deadline = nil
	}
	if t.IsZero() {
		w.mu.Unlock()
		return nil
	}
	d := time.Until(t)
	if d <= 0 {
		w.mu.Unlock()
		return w.c.CloseNow()
	}
	w.deadline = time.AfterFunc(d, func() { _ = w.c.CloseNow() })
	w.mu.Unlock()
	return nil
}

func (w *wsConn) stopDeadline() {
	w.mu.Lock()
	if w.deadline != nil {
		w.deadline.Stop()
		w.deadline = nil
	}
	if w.initTimer != nil {
		w.initTimer.Stop()
	}
	w.mu.Unlock()
}
