// Request logging: one structured line per request at debug level (the hot
// path stays quiet by default), errors and slow requests at info; and each
// request's id (internal/requestid), which those lines, the held-back
// errors' lines and the audit log carry, and the response's X-Request-Id
// header once it is known.

package server

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/switchyard/switchyard/internal/requestid"
)

// slowRequest is the duration past which a request is logged at info level.
const slowRequest = 2 * time.Second

// statusWriter records the status code of a response, and holds the
// request's id (one allocation for both). It keeps what the transports need
// of the underlying writer: flushing (SSE) and hijacking (WebSocket).
type statusWriter struct {
	http.ResponseWriter
	status int
	start  time.Time
	req    requestid.Request
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.stampID(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.stampID(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// stampID puts the request's id in the response's header, as the header is
// written: when it is known by then (the caller's, or made for an error
// held back, the audit log, a stream), and for a response that will be
// logged (a server error, a slow answer), whose id it makes. Otherwise the
// response goes without one, and nothing is made.
func (w *statusWriter) stampID(code int) {
	if code >= 500 || time.Since(w.start) > slowRequest {
		w.req.ID()
	}
	if v := w.req.HeaderValue(); v != nil {
		w.ResponseWriter.Header()[requestid.Header] = v
	}
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

// logRequests logs requests, and gives each its id: the request's context
// carries it (requestid.From), with the client's address for the audit
// log. At debug level, where every request is logged, the id is made at
// once, so that every response carries it.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, start: time.Now()}
		sw.req.Init(r)
		debug := s.log.IsDebug()
		if debug {
			sw.req.ID()
		}
		next.ServeHTTP(sw, r.WithContext(requestid.With(r.Context(), &sw.req)))
		took := time.Since(sw.start)
		switch {
		case sw.status >= 500 || (took > slowRequest && sw.status != http.StatusSwitchingProtocols && r.Header.Get("Accept") != "text/event-stream"):
			s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", took, "remote", r.RemoteAddr, "request_id", sw.req.ID())
		case debug:
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status, "took", took, "remote", r.RemoteAddr, "request_id", sw.req.ID())
		}
	})
}

// countRequests counts the requests of the route name in vec (labels
// handler and code), as promhttp.InstrumentHandlerCounter does, with the
// status logRequests' writer records: no writer of its own and no label map
// a request.
func countRequests(vec *prometheus.CounterVec, name string, next http.Handler) http.Handler {
	curried := vec.MustCurryWith(prometheus.Labels{"handler": name})
	var byCode sync.Map // status → prometheus.Counter
	fallback := promhttp.InstrumentHandlerCounter(curried, next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, ok := w.(*statusWriter)
		if !ok {
			fallback(w, r)
			return
		}
		next.ServeHTTP(w, r)
		code := sw.status
		if code == 0 {
			code = http.StatusOK // nothing written: net/http answers 200
		}
		c, ok := byCode.Load(code)
		if !ok {
			c, _ = byCode.LoadOrStore(code, curried.WithLabelValues(strconv.Itoa(code)))
		}
		c.(prometheus.Counter).Inc()
	})
}
