// Request logging: one structured line per request at debug level (the hot
// path stays quiet by default), errors and slow requests at info.

package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"time"
)

// slowRequest is the duration past which a request is logged at info level.
const slowRequest = 2 * time.Second

// statusWriter records the status code of a response. It keeps what the
// transports need of the underlying writer: flushing (SSE) and hijacking
// (WebSocket).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the response writer cannot be hijacked")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		switch {
		case sw.status >= 500 || (took > slowRequest && sw.status != http.StatusSwitchingProtocols && r.Header.Get("Accept") != "text/event-stream"):
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", took, "remote", r.RemoteAddr)
		case s.log.IsDebug():
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", took, "remote", r.RemoteAddr)
		}
	})
}
