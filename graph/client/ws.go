// Subscriptions over WebSocket, with either subprotocol: graphql-transport-ws
// (the graphql-ws npm library's protocol) or graphql-ws (the older
// subscriptions-transport-ws protocol).

package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// Subprotocols.
const (
	TransportWS = "graphql-transport-ws"
	LegacyWS    = "graphql-ws"
)

// Message is one result of a subscription.
type Message struct {
	Data   json.RawMessage `json:"data"`
	Errors Errors          `json:"errors,omitempty"`
}

// Conn is a WebSocket connection carrying subscriptions.
type Conn struct {
	ws       *websocket.Conn
	protocol string
	ack      json.RawMessage

	mu     sync.Mutex
	subs   map[string]*Subscription
	nextID int
	err    error // why the connection ended
	pongs  int
	buffer int

	// Pings counts the server's keepalives: pings (graphql-transport-ws)
	// and "ka" messages (graphql-ws).
	Pings atomic.Int64
	done  chan struct{}
	wmu   sync.Mutex
}

// DialOptions configure Dial.
type DialOptions struct {
	// Protocol is the subprotocol: TransportWS (default) or LegacyWS.
	Protocol string
	// Payload is the connection_init payload; default the client's headers
	// as an object of strings.
	Payload map[string]any
	// HTTPClient dials; default the client's.
	HTTPClient *http.Client
	// Buffer is how many messages a subscription holds before the
	// connection stops reading (default 64): a subscriber that does not read
	// makes the server wait, as a slow client would.
	Buffer int
}

// Dial opens a WebSocket to the endpoint and initialises the protocol.
func (c *Client) Dial(ctx context.Context, o DialOptions) (*Conn, error) {
	if o.Protocol == "" {
		o.Protocol = TransportWS
	}
	if o.Buffer <= 0 {
		o.Buffer = 64
	}
	if o.HTTPClient == nil {
		o.HTTPClient = c.httpClient()
	}
	u := "ws" + strings.TrimPrefix(c.URL, "http")
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: o.HTTPClient, HTTPHeader: c.Header.Clone(), Subprotocols: []string{o.Protocol},
	})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	if ws.Subprotocol() != o.Protocol {
		ws.CloseNow()
		return nil, fmt.Errorf("the server chose subprotocol %q, not %q", ws.Subprotocol(), o.Protocol)
	}
	ws.SetReadLimit(64 << 20)
	payload := o.Payload
	if payload == nil {
		payload = map[string]any{}
		for k := range c.Header {
			payload[k] = c.Header.Get(k)
		}
	}
	conn := &Conn{ws: ws, protocol: o.Protocol, subs: map[string]*Subscription{}, done: make(chan struct{}), buffer: o.Buffer}
	if err := conn.send(ctx, map[string]any{"type": "connection_init", "payload": payload}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	for {
		var m wireMessage
		if err := conn.read(ctx, &m); err != nil {
			ws.CloseNow()
			return nil, fmt.Errorf("waiting for connection_ack: %w", err)
		}
		switch m.Type {
		case "connection_ack":
			conn.ack = m.Payload
			go conn.readLoop()
			return conn, nil
		case "ka", "ping":
			conn.Pings.Add(1)
		case "connection_error":
			ws.CloseNow()
			return nil, fmt.Errorf("connection refused: %s", m.Payload)
		default:
			ws.CloseNow()
			return nil, fmt.Errorf("unexpected %q before connection_ack", m.Type)
		}
	}
}

type wireMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

func (c *Conn) read(ctx context.Context, m *wireMessage) error {
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, m)
}

func (c *Conn) send(ctx context.Context, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// Protocol returns the negotiated subprotocol.
func (c *Conn) Protocol() string { return c.protocol }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended (nil while it is open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// CloseStatus returns the WebSocket close status the server sent, or -1.
func (c *Conn) CloseStatus() websocket.StatusCode { return websocket.CloseStatus(c.Err()) }

// Ping sends a graphql-transport-ws ping; the server answers with a pong.
func (c *Conn) Ping(ctx context.Context) error {
	return c.send(ctx, map[string]any{"type": "ping"})
}

// SendRaw writes a raw message (for tests of limits).
func (c *Conn) SendRaw(ctx context.Context, data []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.Write(ctx, websocket.MessageText, data)
}

// Close ends the connection and its subscriptions.
func (c *Conn) Close() error {
	c.mu.Lock()
	subs := c.subs
	c.subs = map[string]*Subscription{}
	c.mu.Unlock()
	for _, s := range subs {
		s.finish(errors.New("connection closed")) // unblocks the reader
	}
	err := c.ws.Close(websocket.StatusNormalClosure, "")
	<-c.done
	return err
}

func (c *Conn) readLoop() {
	defer close(c.done)
	ctx := context.Background()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.end(err)
			return
		}
		var m wireMessage
		if err := json.Unmarshal(data, &m); err != nil {
			c.end(fmt.Errorf("undecodable message: %w", err))
			c.ws.CloseNow()
			return
		}
		switch m.Type {
		case "ka":
			c.Pings.Add(1)
		case "ping":
			c.Pings.Add(1)
			_ = c.send(ctx, map[string]any{"type": "pong"})
		case "pong":
			c.mu.Lock()
			c.pongs++
			c.mu.Unlock()
		case "next", "data":
			if s := c.sub(m.ID); s != nil {
				var msg Message
				if err := json.Unmarshal(m.Payload, &msg); err != nil {
					s.finish(fmt.Errorf("undecodable payload: %w", err))
					continue
				}
				select {
				case s.ch <- msg:
				case <-s.stopped:
				}
			}
		case "error":
			if s := c.sub(m.ID); s != nil {
				var errs Errors
				if err := json.Unmarshal(m.Payload, &errs); err != nil {
					var one Error
					_ = json.Unmarshal(m.Payload, &one)
					errs = Errors{&one}
				}
				s.finish(errs)
			}
		case "complete":
			if s := c.sub(m.ID); s != nil {
				s.finish(io.EOF)
			}
		}
	}
}

// Pongs returns how many pongs the server sent.
func (c *Conn) Pongs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pongs
}

func (c *Conn) sub(id string) *Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[id]
}

func (c *Conn) end(err error) {
	c.mu.Lock()
	c.err = err
	subs := c.subs
	c.subs = map[string]*Subscription{}
	c.mu.Unlock()
	for _, s := range subs {
		s.finish(fmt.Errorf("connection ended: %w", err))
	}
}

// Subscription is one running subscription.
type Subscription struct {
	conn    *Conn
	id      string
	ch      chan Message
	stopped chan struct{}
	once    sync.Once
	err     error
}

// Subscribe starts a subscription on the connection.
func (c *Conn) Subscribe(ctx context.Context, query string, vars map[string]any) (*Subscription, error) {
	if err := checkUTF8(query, vars); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.nextID++
	id := strconv.Itoa(c.nextID)
	s := &Subscription{conn: c, id: id, ch: make(chan Message, c.buffer), stopped: make(chan struct{})}
	c.subs[id] = s
	c.mu.Unlock()
	typ := "subscribe"
	if c.protocol == LegacyWS {
		typ = "start"
	}
	if err := c.send(ctx, map[string]any{"id": id, "type": typ, "payload": Request{Query: query, Variables: vars}}); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Subscription) finish(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.stopped)
		s.conn.mu.Lock()
		delete(s.conn.subs, s.id)
		s.conn.mu.Unlock()
	})
}

// Next returns the next message. At the end it returns io.EOF (the server
// completed the subscription), Errors (the server ended it with errors) or
// the connection's error.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	select {
	case m := <-s.ch:
		return m, nil
	default:
	}
	select {
	case m := <-s.ch:
		return m, nil
	case <-s.stopped:
		select {
		case m := <-s.ch:
			return m, nil
		default:
		}
		return Message{}, s.err
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Stop ends the subscription (complete or stop message).
func (s *Subscription) Stop(ctx context.Context) error {
	typ := "complete"
	if s.conn.protocol == LegacyWS {
		typ = "stop"
	}
	s.finish(errors.New("stopped"))
	return s.conn.send(ctx, map[string]any{"id": s.id, "type": typ})
}
