// Bounding the MCP sessions. Each session the SDK keeps costs memory and
// goroutines for as long as it lives, and the SDK keeps any number of them,
// each until it has been idle SessionTimeout (30 min): a client that opens
// a session per call (the MCP Inspector's --cli mode) or one that only
// sends initialize piles them up without end.
//
// So the endpoint keeps its own table of the sessions in front of the SDK's
// handler:
//
//   - At most MaxSessions live at once. An initialize that would open one
//     more closes the least recently used idle session first — idle: no
//     POST of it in flight and no call of it waiting for its task — whose
//     next request then gets the SDK's 404 (session not found), on which
//     a client initializes again (Streamable HTTP). When every session has
//     a call in progress, the initialize is refused: 503 with Retry-After
//     and a JSON-RPC error that says so. A call in progress is never
//     evicted.
//   - A session that never sends anything after its initialize (not even
//     notifications/initialized) is closed after InitTimeout (1 min); one
//     that did, after SessionTimeout idle, as the SDK does (its timer pauses
//     while a POST of the session is in flight).
//   - initialize takes one token of the caller's mutation rate (the token's,
//     or without tokens the one rate of every caller), as a mutation does:
//     over it, 429 with Retry-After and a JSON-RPC error (RATE_LIMITED,
//     retryAfterMs).
//
// A GET (the standalone SSE stream) is no call: it neither keeps a session
// from being evicted nor pauses its idle timer, as in the SDK.

package mcp

import (
	"bytes"
	"container/list"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
)

// DefaultMaxSessions is the default cap of live MCP sessions: an agent
// keeps one session, so a fleet of a thousand agents fits.
const DefaultMaxSessions = 1000

// DefaultInitTimeout closes a session that sent nothing after its
// initialize.
const DefaultInitTimeout = time.Minute

// fullRetryAfter is the wait a refused initialize is told when every
// session has a call in progress.
const fullRetryAfter = time.Second

// codeServerError is the JSON-RPC error of a refused initialize (the range
// reserved for implementation-defined server errors).
const codeServerError = -32000

// SessionStats are the numbers of the session table, for /metrics.
type SessionStats struct {
	Live int // MCP sessions open now (those being opened included)
	// Evicted counts the idle sessions closed to make room for a new one;
	// Expired those closed for idleness (uninitialized ones after
	// InitTimeout, the others after SessionTimeout).
	Evicted, Expired int64
	// RefusedFull counts the initializes refused because every session had
	// a call in progress; RefusedRate those over the caller's rate.
	RefusedFull, RefusedRate int64
}

// sessionEntry is one session of the table. Its fields are guarded by
// Server.mu.
type sessionEntry struct {
	id          string
	ss          *sdk.ServerSession
	elem        *list.Element // in Server.lru: front is the most recently used
	busy        int           // POSTs of the session in flight
	initialized bool          // a request came after initialize
	gone        bool          // being closed: its requests get 404
	timer       *time.Timer
	gen         uint64 // of the timer's arming: a stale firing does nothing
}

// sessionCounters are the counts of SessionStats.
type sessionCounters struct {
	evicted, expired, refusedFull, refusedRate atomic.Int64
}

// SessionStats returns the numbers of the session table.
func (s *Server) SessionStats() SessionStats {
	s.mu.Lock()
	live := s.opening
	for _, e := range s.table {
		if !e.gone {
			live++
		}
	}
	s.mu.Unlock()
	return SessionStats{Live: live, Evicted: s.counts.evicted.Load(), Expired: s.counts.expired.Load(),
		RefusedFull: s.counts.refusedFull.Load(), RefusedRate: s.counts.refusedRate.Load()}
}

// liveLocked returns the number of live sessions, those being opened
// included. s.mu is held.
func (s *Server) liveLocked() int { return s.lru.Len() + s.opening }

// idleLocked reports whether e has no call in progress. s.mu is held.
func (s *Server) idleLocked(e *sessionEntry) bool {
	if e.busy > 0 {
		return false
	}
	sc := s.calls[e.id]
	return sc == nil || len(sc.calls) == 0
}

// bounding wraps the SDK's handler with the session table.
func (s *Server) bounding(next http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sessionIDHeader)
		switch {
		case id != "":
			e, ok := s.enterSession(id, r.Method == http.MethodPost)
			if !ok {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			if e != nil && r.Method == http.MethodPost {
				defer s.leaveSession(e)
			}
			if r.Method != http.MethodDelete || e == nil {
				next.ServeHTTP(w, r)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r)
			if sw.status == http.StatusNoContent {
				s.dropSession(e, nil)
			}
		default:
			if m, ok := initializeRequest(r, maxBody); ok {
				s.open(w, r, next, m.ID)
				return
			}
			next.ServeHTTP(w, r)
		}
	})
}

// enterSession notes a request of session id: a POST keeps it busy (leave
// with leaveSession) and marks it used. ok is false for a session being
// closed; e is nil for a session the table does not know (the SDK answers).
func (s *Server) enterSession(id string, post bool) (e *sessionEntry, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e = s.table[id]
	if e == nil {
		return nil, true
	}
	if e.gone {
		return nil, false
	}
	if post {
		e.initialized = true
		e.busy++
		e.gen++ // no timer fires while busy
		if e.timer != nil {
			e.timer.Stop()
		}
		s.lru.MoveToFront(e.elem)
	}
	return e, true
}

// leaveSession ends a POST of e's session: it was used now, and its idle
// timer starts when it was the last.
func (s *Server) leaveSession(e *sessionEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.busy--
	if e.gone || s.table[e.id] != e {
		return
	}
	s.lru.MoveToFront(e.elem)
	if e.busy == 0 {
		s.armLocked(e)
	}
}

// armLocked starts e's idle timer. s.mu is held.
func (s *Server) armLocked(e *sessionEntry) {
	d := s.opts.SessionTimeout
	if !e.initialized {
		d = s.opts.InitTimeout
	}
	e.gen++
	gen := e.gen
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = time.AfterFunc(d, func() { s.expire(e, gen) })
}

// expire closes e's session, idle since its timer of arming gen started.
func (s *Server) expire(e *sessionEntry, gen uint64) {
	s.mu.Lock()
	if e.gen != gen || e.gone || s.table[e.id] != e {
		s.mu.Unlock()
		return
	}
	if !s.idleLocked(e) { // a call waits, its POST gone: not idle
		s.armLocked(e)
		s.mu.Unlock()
		return
	}
	s.goneLocked(e)
	s.mu.Unlock()
	s.counts.expired.Add(1)
	s.dropSession(e, e.ss)
}

// goneLocked takes e out of the sessions that count: its requests get 404
// until dropSession forgets it. s.mu is held.
func (s *Server) goneLocked(e *sessionEntry) {
	e.gone = true
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
	}
	s.lru.Remove(e.elem)
}

// dropSession closes ss (when not nil) and forgets e.
func (s *Server) dropSession(e *sessionEntry, ss *sdk.ServerSession) {
	if ss != nil {
		_ = ss.Close()
	}
	s.mu.Lock()
	if !e.gone {
		s.goneLocked(e)
	}
	if s.table[e.id] == e {
		delete(s.table, e.id)
	}
	s.mu.Unlock()
}

// open admits an initialize: within the caller's rate, and within
// MaxSessions, evicting the least recently used idle session if need be.
// rpcID is the initialize's id, for a refusal.
func (s *Server) open(w http.ResponseWriter, r *http.Request, next http.Handler, rpcID json.RawMessage) {
	name := auth.Anonymous().Name
	if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
		name = ti.UserID
	}
	if ok, wait := s.opts.Limiter.Take(name, 1); !ok {
		s.counts.refusedRate.Add(1)
		ms := auth.RetryAfterMs(wait)
		refuse(w, rpcID, http.StatusTooManyRequests, time.Duration(ms)*time.Millisecond, model.CodeRateLimited,
			fmt.Sprintf("%s is over its rate of mutations, which initialize counts against: retry in %s",
				auth.RateHolder(name), time.Duration(ms)*time.Millisecond), map[string]any{"retryAfterMs": ms})
		return
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		http.Error(w, "the server is shutting down", http.StatusServiceUnavailable)
		return
	}
	var victim *sessionEntry
	if s.liveLocked() >= s.opts.MaxSessions {
		for el := s.lru.Back(); el != nil; el = el.Prev() {
			if e := el.Value.(*sessionEntry); s.idleLocked(e) {
				victim = e
				break
			}
		}
		if victim == nil {
			s.mu.Unlock()
			s.counts.refusedFull.Add(1)
			refuse(w, rpcID, http.StatusServiceUnavailable, fullRetryAfter, engine.CodeLimit,
				fmt.Sprintf("Service Unavailable: the server keeps at most %d MCP sessions (mcp.maxSessions) and each has a call in progress: retry in %s",
					s.opts.MaxSessions, fullRetryAfter), map[string]any{"retryAfterMs": fullRetryAfter.Milliseconds()})
			return
		}
		s.goneLocked(victim)
	}
	s.opening++
	s.mu.Unlock()
	if victim != nil {
		s.counts.evicted.Add(1)
		s.log.Debug("evicted the least recently used idle MCP session", "session", victim.id, "max", s.opts.MaxSessions)
		s.terminateCalls(victim.id)
		s.dropSession(victim, victim.ss)
	}
	ow := &openingWriter{ResponseWriter: w, s: s}
	defer func() {
		s.mu.Lock()
		if !ow.counted {
			s.opening--
		}
		s.mu.Unlock()
		if e := ow.entry; e != nil {
			if e.ss.InitializeParams() == nil { // the SDK closed it: initialize failed
				s.dropSession(e, e.ss)
				return
			}
			s.leaveSession(e)
		}
	}()
	next.ServeHTTP(ow, r)
}

// opened enters the session the SDK answers an initialize with, before the
// client can learn its id: busy until the initialize's POST ends.
func (s *Server) opened(id string) *sessionEntry {
	var ss *sdk.ServerSession
	for c := range s.mcp.Sessions() {
		if c.ID() == id {
			ss = c
			break
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opening--
	if ss == nil || s.table[id] != nil {
		return nil
	}
	e := &sessionEntry{id: id, ss: ss, busy: 1}
	e.elem = s.lru.PushFront(e)
	s.table[id] = e
	if s.closing {
		s.goneLocked(e)
		go s.dropSession(e, ss)
	}
	return e
}

// terminateCalls cancels the calls of an evicted session that still wait
// for their tasks with no POST to answer (their client went away), so
// that closing it does not wait for them.
func (s *Server) terminateCalls(id string) {
	s.mu.Lock()
	sc := s.calls[id]
	var cancels []func(error)
	if sc != nil && !sc.closed {
		sc.closed = true
		for call := range sc.calls {
			cancels = append(cancels, call.cancel)
		}
	}
	s.mu.Unlock()
	for _, cancel := range cancels {
		cancel(errSessionClosed)
	}
}

// closeSessions closes the sessions of the table (at Close).
func (s *Server) closeSessions() {
	s.mu.Lock()
	var all []*sessionEntry
	for _, e := range s.table {
		if !e.gone {
			s.goneLocked(e)
			all = append(all, e)
		}
	}
	s.mu.Unlock()
	for _, e := range all {
		s.dropSession(e, e.ss)
	}
}

// openingWriter enters the session of an initialize's answer when its
// header is written.
type openingWriter struct {
	http.ResponseWriter
	s       *Server
	entry   *sessionEntry
	counted bool // opened ran: the reservation is spent
	wrote   bool
}

func (w *openingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if id := w.Header().Get(sessionIDHeader); id != "" && code == http.StatusOK {
			w.counted = true
			w.entry = w.s.opened(id)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *openingWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *openingWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *openingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusWriter notes the status of an answer.
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

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// refuse answers a refused initialize: status, Retry-After (whole seconds,
// rounded up) and a JSON-RPC error whose data carries the code, retryable
// (true) and retryAfterMs, as at the rest of the edge.
func refuse(w http.ResponseWriter, id json.RawMessage, status int, retry time.Duration, code engine.Code, msg string, data map[string]any) {
	data["code"], data["retryable"] = code, true
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": codeServerError, "message": msg, "data": data}})
}

// initializeRequest returns the initialize a POST without a session carries
// (its body is left to read again). maxBody bounds what it reads (the SDK
// refuses larger bodies).
func initializeRequest(r *http.Request, maxBody int64) (rpcMessage, bool) {
	var m rpcMessage
	if r.Method != http.MethodPost || r.Body == nil {
		return m, false
	}
	body, ok := peekBody(r, maxBody)
	if !ok {
		return m, false
	}
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &m) != nil {
		return m, false
	}
	return m, m.Method == "initialize"
}
