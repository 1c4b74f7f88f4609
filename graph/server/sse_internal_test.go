package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/testserver"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/stretchr/testify/require"
)

// recorder is a response writer that counts what it is given once its
// handler has returned (net/http's own would panic by then).
type recorder struct {
	mu       sync.Mutex
	header   http.Header
	body     strings.Builder
	returned atomic.Bool
	late     atomic.Int64
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(int)     {}
func (r *recorder) Write(p []byte) (int, error) {
	if r.returned.Load() {
		r.late.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.Write(p)
}
func (r *recorder) Flush() {
	if r.returned.Load() {
		r.late.Add(1)
	}
}

// TestAnSSEStreamTakesNoWriteAfterItsHandlerReturns: gqlgen's keepalive
// goroutine stops when the request's context is done, which net/http
// cancels only after the handler has returned; a keepalive in between
// wrote to a finished response, a panic that ended the process. Here the
// context stays open after the stream ends and the keepalive ticks every
// millisecond: nothing may reach the writer once the handler is back.
func TestAnSSEStreamTakesNoWriteAfterItsHandlerReturns(t *testing.T) {
	srv := testserver.New()
	srv.AddTransport(sseTransport{transport.SSE{KeepAlivePingInterval: time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/graphql", strings.NewReader(`{"query":"{ name }"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	w := &recorder{header: http.Header{}}
	srv.ServeHTTP(w, req)
	w.returned.Store(true)
	w.mu.Lock()
	require.Contains(t, w.body.String(), "event: complete")
	w.mu.Unlock()
	time.Sleep(100 * time.Millisecond) // about a hundred keepalives, were they let through
	require.Zero(t, w.late.Load(), "writes or flushes after the handler returned")
}
