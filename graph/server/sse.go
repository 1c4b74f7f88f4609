package server

import (
	"net"
	"net/http"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"
)

// sseTransport is gqlgen's SSE transport, whose stream ends with its
// handler. gqlgen's keepalive goroutine stops only once the request's
// context is done, which net/http cancels after the handler has returned:
// a keepalive that fires in between writes and flushes a response that
// net/http is finishing or has finished, a nil-pointer panic that takes
// the process down. The writer it is given stops taking writes the moment
// the handler returns.
type sseTransport struct{ transport.SSE }

func (t sseTransport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	g := &endingWriter{ResponseWriter: w}
	defer g.end()
	t.SSE.Do(g, r, exec)
}

// endingWriter passes writes and flushes through until end, and drops
// them after.
type endingWriter struct {
	http.ResponseWriter
	mu    sync.Mutex
	ended bool
}

func (w *endingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return 0, net.ErrClosed
	}
	return w.ResponseWriter.Write(p)
}

func (w *endingWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.ended {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *endingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *endingWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}
