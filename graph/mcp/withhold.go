// No answer to a cancelled call. The MCP specification's cancellation
// utility says the receiver of notifications/cancelled should not send a
// response for the cancelled request; the SDK answers every request whose
// handler returns, cancelled or not, and nothing of the server's runs
// between the handler and that answer
// (github.com/modelcontextprotocol/go-sdk issue 1259). So the endpoint
// withholds it on the way out: it notes the calls in flight on each MCP
// session (their POSTs), marks a call when the session's client cancels
// it, and drops the response to a marked call from its POST's stream. The
// client's POST then ends without a response, as the client expects of a
// call it cancelled.
//
// A response that leaves before the cancellation arrives is sent (the
// specification allows for that race): the call then answers with its
// task as it ended (wait.go).

package mcp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// withholdCancelled: the endpoint withholds the responses to cancelled
// calls (the tests turn it off to see the answer such a call would send).
var withholdCancelled = true

// sessionIDHeader carries the MCP session's id (Streamable HTTP).
const sessionIDHeader = "Mcp-Session-Id"

// callKey is a call in flight: its MCP session and its JSON-RPC id (as
// compact JSON: 30 and "30" are different ids).
type callKey struct{ session, id string }

// inFlight is the calls in flight on the endpoint, each marked when its
// client cancels it.
type inFlight struct {
	mu    sync.Mutex
	calls map[callKey]*atomic.Bool
}

// rpcMessage is what is read of a JSON-RPC message from the client.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// idKey is the compact JSON of an id, or "" for no id (absent or null).
func idKey(id json.RawMessage) string {
	var b bytes.Buffer
	if len(id) == 0 || json.Compact(&b, id) != nil || b.String() == "null" {
		return ""
	}
	return b.String()
}

// messages reads a POST's JSON-RPC messages: one, or a batch.
func messages(body []byte) []rpcMessage {
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(body, &batch) != nil {
			return nil
		}
		out := make([]rpcMessage, 0, len(batch))
		for _, raw := range batch {
			var m rpcMessage
			if json.Unmarshal(raw, &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	var m rpcMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	return []rpcMessage{m}
}

// withhold wraps the SDK's handler; maxBody bounds the bodies it reads
// (the SDK refuses larger ones).
func withhold(next http.Handler, maxBody int64) http.Handler {
	f := &inFlight{calls: map[callKey]*atomic.Bool{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		session := r.Header.Get(sessionIDHeader)
		if r.Method != http.MethodPost || session == "" || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := peekBody(r, maxBody)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		var mine map[string]*atomic.Bool // this POST's calls
		for _, m := range messages(body) {
			id := idKey(m.ID)
			switch {
			case m.Method == "notifications/cancelled" && id == "":
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				if json.Unmarshal(m.Params, &p) == nil {
					f.cancel(callKey{session, idKey(p.RequestID)})
				}
			case m.Method != "" && id != "":
				if c := f.start(callKey{session, id}); c != nil {
					if mine == nil {
						mine = map[string]*atomic.Bool{}
					}
					mine[id] = c
				}
			}
		}
		if mine == nil {
			next.ServeHTTP(w, r)
			return
		}
		defer f.end(session, mine)
		next.ServeHTTP(&withholdingWriter{ResponseWriter: w, calls: mine}, r)
	})
}

// start notes a call in flight; nil if a call of the session with that id
// is in flight already.
func (f *inFlight) start(k callKey) *atomic.Bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.calls[k]; ok {
		return nil
	}
	c := &atomic.Bool{}
	f.calls[k] = c
	return c
}

// cancel marks a call in flight as cancelled by its client.
func (f *inFlight) cancel(k callKey) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.calls[k]; ok {
		c.Store(true)
	}
}

// end forgets a POST's calls.
func (f *inFlight) end(session string, calls map[string]*atomic.Bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range calls {
		delete(f.calls, callKey{session, id})
	}
}

// withholdingWriter drops the responses to its POST's cancelled calls.
// The SDK writes each message at once: a whole SSE event, or the JSON
// body.
type withholdingWriter struct {
	http.ResponseWriter
	calls map[string]*atomic.Bool
}

func (w *withholdingWriter) Write(p []byte) (int, error) {
	if w.cancelledResponse(p) {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushes).
func (w *withholdingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// cancelledResponse reports whether p is the response to a cancelled call:
// an SSE event whose data is, or a JSON body that is.
func (w *withholdingWriter) cancelledResponse(p []byte) bool {
	marked := false
	for _, c := range w.calls {
		if c.Load() {
			marked = true
			break
		}
	}
	if !marked {
		return false
	}
	data := bytes.TrimSpace(p)
	if len(data) > 0 && data[0] != '{' {
		// An SSE event: its data line (the SDK writes one).
		i := bytes.Index(p, []byte("data: "))
		if i < 0 || (i > 0 && p[i-1] != '\n') {
			return false
		}
		data = p[i+len("data: "):]
		if j := bytes.IndexByte(data, '\n'); j >= 0 {
			data = data[:j]
		}
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method != "" || (m.Result == nil && m.Error == nil) {
		return false
	}
	c, ok := w.calls[idKey(m.ID)]
	return ok && c.Load()
}

// peekBody reads r's body, up to maxBody bytes, for a wrapper of the SDK's
// handler to look at, and leaves it whole for the handler to read again.
// ok is false when the body could not be read or is larger than maxBody:
// the handler then answers it (the SDK refuses larger bodies itself).
func peekBody(r *http.Request, maxBody int64) (body []byte, ok bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	return body, err == nil && int64(len(body)) <= maxBody
}
