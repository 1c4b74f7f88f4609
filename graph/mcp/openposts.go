package mcp

import (
	"context"
	"net/http"
	"sync"
)

// openPosts counts the POST requests an MCP handler is serving, so that a
// shutdown can wait until their answers are written.
type openPosts struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to zero; nil while nobody waits
}

// counting counts next's POST requests while they are served.
func (f *openPosts) counting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		f.mu.Lock()
		f.n++
		f.mu.Unlock()
		defer f.done()
		next.ServeHTTP(w, r)
	})
}

func (f *openPosts) done() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// wait returns when no POST is being served, or when ctx ends.
func (f *openPosts) wait(ctx context.Context) {
	f.mu.Lock()
	if f.n == 0 {
		f.mu.Unlock()
		return
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
