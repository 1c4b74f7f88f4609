// The graphql-transport-ws protocol's rules that gqlgen's transport does not
// keep (github.com/enisdenjo/graphql-ws, PROTOCOL.md), kept by the adapter
// (wsConn), which sees every message both ways:
//
//   - a message that is not one of the protocol's client messages, or not
//     as the protocol describes it, closes the socket with 4400;
//   - subscribe before connection_ack: 4401 Unauthorized;
//   - no connection_init within the init timeout: 4408;
//   - subscribe under the id of an operation that is still running: 4409
//     Subscriber for <id> already exists (gqlgen would run both, and the
//     client's complete would stop only the second);
//   - a second connection_init: 4429 Too many initialisation requests;
//   - ping and pong may come before connection_init (answered here: gqlgen
//     reads nothing but connection_init first).
//
// (4403 Forbidden is wsInit's.) Each operation runs in gqlgen under an id
// of the connection's own, never reused: so an id the client completed may
// be used again at once, and what gqlgen still sends for the operation it
// stopped (a last next, its complete) is not sent — the protocol's
// complete from the client means nothing more for that operation. An error
// ends an operation too: the complete gqlgen sends after some errors is not
// sent.

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The graphql-transport-ws close codes.
const (
	closeBadRequest     = 4400
	closeUnauthorized   = 4401
	closeInitTimeout    = 4408
	closeSubscriberDup  = 4409
	closeTooManyInits   = 4429
	maxCloseReasonBytes = 123 // RFC 6455: a close frame's payload is at most 125 bytes, 2 of them the code
)

// protoMessage is a graphql-transport-ws message from a client, as read to
// check it.
type protoMessage struct {
	Type    json.RawMessage `json:"type"`
	ID      json.RawMessage `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// subscribePayload is what is checked of a subscribe message's payload.
type subscribePayload struct {
	Query         json.RawMessage `json:"query"`
	Variables     json.RawMessage `json:"variables"`
	OperationName json.RawMessage `json:"operationName"`
	Extensions    json.RawMessage `json:"extensions"`
}

// protoVerdict is what the adapter does with a client's message.
type protoVerdict int

const (
	protoForward protoVerdict = iota // to gqlgen (data, maybe rewritten)
	protoSkip                        // dropped here: read the next message
	protoPong                        // a ping before connection_ack: answered here
	protoClosed                      // the socket is closing
)

// jsonKind is the kind of a JSON value: '"', '{', '[', 'n' (null), 't' or
// 'f', a digit or '-'; 0 for an absent value.
func jsonKind(v json.RawMessage) byte {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// checkMessage returns the message's type and id, or why it is not a
// graphql-transport-ws client message.
func checkMessage(data []byte) (kind, id string, m protoMessage, problem string) {
	if err := json.Unmarshal(data, &m); err != nil || jsonKind(data) != '{' {
		return "", "", m, "Invalid message received: not a JSON object"
	}
	if jsonKind(m.Type) != '"' || json.Unmarshal(m.Type, &kind) != nil {
		return "", "", m, "Invalid message received: no type"
	}
	switch kind {
	case "connection_init", "ping", "pong":
		if k := jsonKind(m.Payload); k != 0 && k != '{' && k != 'n' {
			return kind, "", m, "Invalid message received: the " + kind + " payload is not an object"
		}
		return kind, "", m, ""
	case "subscribe", "complete":
		if jsonKind(m.ID) != '"' || json.Unmarshal(m.ID, &id) != nil || id == "" {
			return kind, "", m, "Invalid message received: " + kind + " without an id"
		}
		if kind == "complete" {
			return kind, id, m, ""
		}
		var p subscribePayload
		if jsonKind(m.Payload) != '{' || json.Unmarshal(m.Payload, &p) != nil {
			return kind, id, m, "Invalid message received: subscribe without a payload object"
		}
		if jsonKind(p.Query) != '"' {
			return kind, id, m, "Invalid message received: subscribe without a query"
		}
		for _, f := range []struct {
			name string
			v    json.RawMessage
			want byte
		}{{"variables", p.Variables, '{'}, {"operationName", p.OperationName, '"'}, {"extensions", p.Extensions, '{'}} {
			if k := jsonKind(f.v); k != 0 && k != 'n' && k != f.want {
				return kind, id, m, "Invalid message received: subscribe's " + f.name + " is not " + map[byte]string{'{': "an object", '"': "a string"}[f.want]
			}
		}
		return kind, id, m, ""
	case "connection_ack", "next", "error":
		return kind, "", m, "Invalid message received: " + kind + " is the server's message"
	}
	return kind, "", m, fmt.Sprintf("Invalid message received: unknown type %.40q", kind)
}

// closeReason cuts a close reason to what a close frame holds, on a rune
// boundary.
func closeReason(s string) string {
	if len(s) <= maxCloseReasonBytes {
		return s
	}
	s = s[:maxCloseReasonBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// admit applies the protocol to a client's message: it forwards it to gqlgen
// (a subscribe or complete under the operation's own id), answers or drops
// it, or closes the socket.
func (w *wsConn) admit(data []byte) ([]byte, protoVerdict) {
	kind, id, m, problem := checkMessage(data)
	if problem != "" {
		_ = w.WriteClose(closeBadRequest, closeReason(problem))
		return nil, protoClosed
	}
	out, verdict, code, reason := w.apply(kind, id, m, data)
	if code != 0 {
		_ = w.WriteClose(code, closeReason(reason))
		return nil, protoClosed
	}
	return out, verdict
}

// apply updates the connection's state with a valid client message, and
// says what to do with it: forward it (maybe rewritten), skip it, answer
// it with a pong, or close the socket with code and reason.
func (w *wsConn) apply(kind, id string, m protoMessage, data []byte) (out []byte, v protoVerdict, code int, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch kind {
	case "connection_init":
		if w.initSeen {
			return nil, protoClosed, closeTooManyInits, "Too many initialisation requests"
		}
		w.initSeen = true
		if w.initTimer != nil {
			w.initTimer.Stop()
		}
	case "ping", "pong":
		if !w.acked { // gqlgen reads connection_init first: answered here
			if kind == "ping" {
				return nil, protoPong, 0, ""
			}
			return nil, protoSkip, 0, ""
		}
	case "subscribe":
		if !w.acked {
			return nil, protoClosed, closeUnauthorized, "Unauthorized"
		}
		if _, ok := w.active[id]; ok {
			return nil, protoClosed, closeSubscriberDup, "Subscriber for " + id + " already exists"
		}
		w.nextOp++
		op := strconv.FormatUint(w.nextOp, 10)
		if w.active == nil {
			w.active, w.ops = map[string]string{}, map[string]string{}
		}
		w.active[id], w.ops[op] = op, id
		return withID(m, op), protoForward, 0, ""
	case "complete":
		op, ok := w.active[id]
		if !ok {
			return nil, protoSkip, 0, "" // not running: nothing to stop
		}
		delete(w.active, id)
		delete(w.ops, op) // what gqlgen still sends for it is not sent
		return withID(m, op), protoForward, 0, ""
	}
	return data, protoForward, 0, ""
}

// withID is message m under another id (its payload as it came).
func withID(m protoMessage, id string) []byte {
	b, _ := json.Marshal(protoMessage{Type: m.Type, ID: jsonString(id), Payload: m.Payload})
	return b
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// outgoing maps a server's message for operation op (gqlgen's id) to the
// client's id, and reports false for messages not to send: those of an
// operation the client completed or that ended with an error.
func (w *wsConn) outgoing(kind, op string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kind == "connection_ack" {
		w.acked = true
	}
	if op == "" {
		return "", true
	}
	id, ok := w.ops[op]
	if !ok {
		return "", false
	}
	if kind == "error" || kind == "complete" {
		delete(w.ops, op)
		delete(w.active, id)
	}
	return id, true
}
