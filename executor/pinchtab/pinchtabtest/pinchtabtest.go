// Package pinchtabtest is a test double of PinchTab, built from its public
// documentation (docs/endpoints.md, docs/reference/health.md, tabs.md): an
// HTTP server that answers PinchTab's routes with PinchTab's shapes, in either
// of its two modes, so that Switchyard's tests meet the protocol a real
// PinchTab speaks rather than the one Switchyard would like.
//
//   - ModeBridge is a single browser: GET /health → {"status":"ok","tabs":N},
//     N counting every tab (503 {"status":"error","reason"} while its browser
//     starts, 503 {"status":"draining","retryAfterSeconds"} while it
//     restarts), GET /tabs, POST /tab {"action":"new"}.
//   - ModeServer is the dashboard in front of browsers: GET /health → the
//     dashboard envelope {"status":"ok","mode":"dashboard","instances",
//     "defaultInstance":{"id","status"}} with no tab count, which says "ok"
//     while the default browser is "starting" and while the server shuts
//     down; GET /instances; GET /instances/tabs answered from a cache of
//     TabCacheTTL (1.5 s) unless ?fresh=1, which the tab routes that change
//     tabs drop, and opening a tab does not; POST /instances/{id}/tabs/open;
//     POST /shutdown.
//
// Both serve the tab routes: navigate, back, forward, reload, action (the
// interaction kinds, with waitNav), wait, find, text, title, url, snapshot,
// evaluate, screenshot, pdf and close. Their tab lists (GET /tabs,
// GET /instances/tabs) leave out the tabs that show no page (about:blank,
// chrome://…), as PinchTab's do: a tab just opened blank is not listed until
// it is navigated, though it is there (its routes answer, and a bridge's
// /health counts it). A wait for a selector that matches nothing answers,
// as PinchTab, 200 {"waited":false,"error":"timeout after …"} at once. Errors
// are PinchTab's bodies, {"error","code"} plus
// "retryable": true only when a retry can help: a text selector that matches
// nothing is 500 [error]; the same on /action is 400 [error]; a click that
// navigates without waitNav is 409 [navigation_changed]; an unknown action
// kind is 400 [error]; a tab that is not there is 404 [error] ("tab … not
// found"), but 500 [error] on close; a route that does not exist is a plain
// text 404; a tab route for a browser that is not running is 404 [error]
// ("tab \"…\" not found") on a server, which finds the tab in no running
// browser, and 503 [browser_draining] (retryable) on a bridge; opening a tab
// in a server's browser that is not running is 503 [error]. With a token set, every route,
// GET /health included, wants it (401 [missing_token] / [bad_token]).
//
// Pages are scripted (Page): elements addressed by "#id" or "css:#id", whose
// text and value the interactions change, and links that navigate. Actions,
// navigations and evaluations can be held (Hold) to test cancellation and
// timeouts, and an instance that keeps working after the client went away
// (Options.IgnoreAbort) is one flag away.
//
// It dies and comes back as PinchTab does. A bridge whose browser drains
// for a restart (PhaseStopping) answers its tab routes, before acting, 503
// [browser_draining] "browser restart in progress; retry shortly" with
// Retry-After and details.retryAfterSeconds, as PinchTab's
// writeBridgeUnavailable. A process that dies (Stop, or DieDuringNextAction,
// which first carries the action out and reads it whole) drops its
// connections without an answer, and every later connection is refused until
// it starts again (Restart) on the same address, its browser starting afresh
// without its tabs. A browser behind a server that dies while it acts
// (BrowserDiesDuringNextAction) leaves the server to answer as PinchTab's
// proxy does when its request to the browser breaks: 502 [error]
// "instance unreachable: Post "…": EOF".
package pinchtabtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Mode is what the double plays: a bridge or a server.
type Mode int

// Modes.
const (
	ModeBridge Mode = iota // a single browser (Switchyard kind "instance")
	ModeServer             // the dashboard in front of browsers (kind "pinchtab")
)

// Phase is the life stage of the double's (default) browser.
type Phase string

// Phases, as PinchTab names its instances' states.
const (
	PhaseStarting Phase = "starting" // the browser is launching: no action can run
	PhaseRunning  Phase = "running"
	PhaseStopping Phase = "stopping" // shutting down: /health still answers on a server
	PhaseStopped  Phase = "stopped"  // shut down, the server's last word before it stops answering
)

// TabCacheTTL is how long a server answers GET /instances/tabs from its cache.
const TabCacheTTL = 1500 * time.Millisecond

// Options configures a Server.
type Options struct {
	Mode  Mode
	Token string // "" accepts requests without one
	// Browsers are the ids of the browsers behind a server (default
	// ["inst_0001"]); the first is the default instance. A bridge has one.
	Browsers []string
	// IgnoreAbort makes actions run to their end even when the client went
	// away, as some instances do.
	IgnoreAbort bool
	// Now is the clock of the tab cache (default time.Now).
	Now func() time.Time
}

// Element is an element of a scripted page.
type Element struct {
	Text  string
	Value string
	// Href, when set, makes a click navigate the tab there.
	Href string
	// OnClick runs when the element is clicked, with the page's elements.
	OnClick func(page map[string]*Element)
	// Dialog, when set, is the JavaScript dialog a click on the element
	// opens (after OnClick).
	Dialog *Dialog
}

// Dialog is a JavaScript dialog of a scripted page. As PinchTab does, a
// click that opens one answers 500 dialog_blocking, naming it, unless the
// click's "dialogAction" answers it; POST /tabs/{id}/dialog answers an open
// one ({"type","message","handled":true}), or is a 400 when none is.
type Dialog struct {
	Type    string // alert, confirm, prompt
	Message string
	// OnAnswer runs when the dialog is answered, with the page's elements.
	OnAnswer func(page map[string]*Element, accepted bool)
}

// Page is a scripted page: what a tab shows once navigated to its URL.
type Page struct {
	Title    string
	Elements map[string]Element // by "#id"
}

type tab struct {
	id, browser string
	history     []string
	at          int
	elems       map[string]*Element
	title       string
	dialog      *Dialog // open, not answered yet
}

func (t *tab) url() string { return t.history[t.at] }

// Server is the double. Its methods are safe for concurrent use.
type Server struct {
	opts Options
	srv  *httptest.Server

	mu         sync.Mutex
	phase      map[string]Phase // by browser
	tabs       map[string]*tab
	order      []string // tab ids in opening order
	next       int
	pages      map[string]Page
	cache      []tabJSON
	cacheAt    time.Time
	hold       chan struct{} // actions wait for it when not nil
	running    int
	maxRunning int
	inTab      map[string]int // actions running now, by tab
	maxInTab   int            // the most ever running at once in one tab
	requests   []string
	down       bool
	// dieNext makes the next action end its process (DieDuringNextAction);
	// dropNext its connection (DropNextAnswer); browserDiesNext its
	// browser behind a server (BrowserDiesDuringNextAction).
	dieNext, dropNext, browserDiesNext bool
	// dropReads is how many of the next reads (GET text, title, url,
	// snapshot, screenshot, pdf) close their connection unanswered
	// (DropReads).
	dropReads int
	addr      string // where it listens, again after Restart
	cleanup   func(func())
}

// New starts a double; it stops with the test.
func New(t interface {
	Helper()
	Cleanup(func())
}, o Options) *Server {
	t.Helper()
	if len(o.Browsers) == 0 {
		o.Browsers = []string{"inst_0001"}
	}
	if o.Mode == ModeBridge {
		o.Browsers = o.Browsers[:1]
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	s := &Server{opts: o, phase: map[string]Phase{}, tabs: map[string]*tab{}, pages: map[string]Page{}, cleanup: t.Cleanup}
	for _, b := range o.Browsers {
		s.phase[b] = PhaseRunning
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.addr = s.srv.Listener.Addr().String()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the double's base URL; it stays the same across Restart.
func (s *Server) URL() string { return "http://" + s.addr }

// Close stops the server: every later request fails to connect.
func (s *Server) Close() { s.server().Close() }

func (s *Server) server() *httptest.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Stop ends the double's process: its connections drop without an answer,
// and every later connection is refused (ECONNREFUSED), until Restart.
func (s *Server) Stop() {
	srv := s.server()
	_ = srv.Listener.Close()
	srv.CloseClientConnections()
}

// Restart starts the double's process again on the same address after Stop
// (or DieDuringNextAction), as PinchTab comes back after a crash or a
// restart: its browsers are starting (PhaseStarting: SetPhase to
// PhaseRunning when their launch is over) and have none of their tabs.
func (s *Server) Restart() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("pinchtabtest: listen on %s again: %w", s.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	_ = srv.Listener.Close()
	srv.Listener = ln
	s.mu.Lock()
	s.tabs = map[string]*tab{}
	s.cache = nil
	for b := range s.phase {
		s.phase[b] = PhaseStarting
	}
	s.dieNext, s.dropNext, s.browserDiesNext, s.dropReads = false, false, false, 0
	s.srv = srv
	s.mu.Unlock()
	srv.Start()
	s.cleanup(srv.Close)
	return nil
}

// DieDuringNextAction makes the double's process die during the next action
// (POST /tabs/{id}/action, navigate or evaluate): the action is read whole and
// carried out, then the connection drops before any answer, and the double
// is stopped (Stop) until Restart. The client cannot know whether the
// action ran; it did.
func (s *Server) DieDuringNextAction() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dieNext = true
}

// DropNextAnswer makes the double close the connection of the next action
// (POST /tabs/{id}/action, navigate or evaluate) once it has carried it
// out, without an answer, and stay up with its tabs: as a PinchTab bridge's
// HTTP server does to an action that outlives its write timeout (60 s).
func (s *Server) DropNextAnswer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropNext = true
}

// DropReads makes the double close the connection of each of the next n
// reads (GET /tabs/{id}/text, title, url, snapshot, screenshot or pdf)
// without an answer, and stay up with its tabs: as a PinchTab bridge's HTTP
// server does to a read that outlives its write timeout (60 s; a huge
// page's text or snapshot). Go's HTTP client sends a GET that met a broken
// kept-alive connection once more on its own: n = 2 makes sure its caller
// sees the fault.
func (s *Server) DropReads(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropReads = n
}

// dropNextRead is droppedRead for a route that does not hold s.mu.
func (s *Server) dropNextRead(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.droppedRead(w)
}

// droppedRead ends a read as DropReads asked, and reports whether it did
// (under s.mu).
func (s *Server) droppedRead(w http.ResponseWriter) bool {
	if s.dropReads == 0 {
		return false
	}
	s.dropReads--
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
	return true
}

// BrowserDiesDuringNextAction makes the default browser behind a server
// (ModeServer) die during the next action: the action is carried out, the
// server's request to the browser breaks, and the server answers as
// PinchTab's proxy does then, 502 [error] "instance unreachable: Post
// "…": EOF". The browser is then starting again
// (PhaseStarting), without its tabs.
func (s *Server) BrowserDiesDuringNextAction() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.browserDiesNext = true
}

// died ends an action that has been carried out as DieDuringNextAction,
// DropNextAnswer or BrowserDiesDuringNextAction asked, and reports whether
// it did.
func (s *Server) died(w http.ResponseWriter, r *http.Request, t *tab) bool {
	s.mu.Lock()
	die, drop, browserDies := s.dieNext, s.dropNext, s.browserDiesNext && s.opts.Mode == ModeServer
	switch {
	case die:
		s.dieNext = false
	case drop:
		s.dropNext = false
	case browserDies:
		s.browserDiesNext = false
		for id, x := range s.tabs {
			if x.browser == t.browser {
				delete(s.tabs, id)
			}
		}
		s.phase[t.browser] = PhaseStarting
		s.cache = nil
	}
	s.mu.Unlock()
	switch {
	case die, drop:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		if die {
			s.Stop()
		}
		return true
	case browserDies:
		// PinchTab's proxy.Forward: httpx.Error(w, 502, fmt.Errorf("instance
		// unreachable: %w", err)), err being the *url.Error of its request to
		// the browser's bridge.
		fail(w, http.StatusBadGateway, "error", fmt.Sprintf("instance unreachable: Post %q: EOF", "http://127.0.0.1:9868"+r.URL.Path), false)
		return true
	}
	return false
}

// SetPage scripts what url shows.
func (s *Server) SetPage(url string, p Page) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages[url] = p
}

// SetPhase sets the phase of a browser ("" is the default one). A browser
// that starts again has lost its tabs, as a restarted browser has.
func (s *Server) SetPhase(browser string, p Phase) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if browser == "" {
		browser = s.opts.Browsers[0]
	}
	if p == PhaseStarting {
		for id, t := range s.tabs {
			if t.browser == browser {
				delete(s.tabs, id)
			}
		}
	}
	s.phase[browser] = p
}

// SetDown makes every request fail without an answer (a broken connection),
// or answer again.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// OpenTab opens a tab in a browser ("" the default one) behind the client's
// back, and returns its id.
func (s *Server) OpenTab(browser, url string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if browser == "" {
		browser = s.opts.Browsers[0]
	}
	return s.openLocked(browser, url).id
}

// CloseTab closes a tab behind the client's back (a user, a crash); the
// server's tab cache does not notice.
func (s *Server) CloseTab(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tabs, id)
}

// Tabs returns the ids of the open tabs, in opening order.
func (s *Server) Tabs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range s.order {
		if _, ok := s.tabs[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// URLOf returns the URL a tab shows.
func (s *Server) URLOf(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.tabs[id]; ok {
		return t.url()
	}
	return ""
}

// Hold makes actions (POST /tabs/{id}/action), navigations and evaluations
// wait until the returned func is called: a slow page or script.
func (s *Server) Hold() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.hold = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.hold == ch {
				s.hold = nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Running returns the actions running now and the most ever running at once.
func (s *Server) Running() (now, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running, s.maxRunning
}

// MostInOneTab returns the most actions ever running at once in one tab.
// A browser tab runs one action at a time: more than 1 means two attempts
// were given the same tab.
func (s *Server) MostInOneTab() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInTab
}

// Requests returns "METHOD /path" of every request but GET /health.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// tabJSON is a tab as PinchTab lists it.
type tabJSON struct {
	ID         string `json:"id"`
	InstanceID string `json:"instanceId,omitempty"`
	URL        string `json:"url"`
	Title      string `json:"title"`
	Type       string `json:"type"`
}

func (s *Server) openLocked(browser, url string) *tab {
	s.next++
	id := fmt.Sprintf("%032X", s.next) // PinchTab's tab ids are CDP target ids
	if url == "" {
		url = "about:blank"
	}
	t := &tab{id: id, browser: browser, history: []string{url}}
	s.loadLocked(t)
	s.tabs[id] = t
	s.order = append(s.order, id)
	return t
}

// loadLocked gives a tab the elements of the page it shows now.
func (s *Server) loadLocked(t *tab) {
	p := s.pages[t.url()]
	t.title = p.Title
	t.elems = make(map[string]*Element, len(p.Elements))
	for k, e := range p.Elements {
		t.elems[k] = &e
	}
}

// transient reports whether PinchTab leaves a tab showing url out of its
// tab lists: a blank or new tab page, the browser's own pages, files.
func transient(url string) bool {
	if url == "about:blank" {
		return true
	}
	for _, p := range []string{"chrome://", "chrome-extension://", "devtools://", "file://"} {
		if strings.HasPrefix(url, p) {
			return true
		}
	}
	return false
}

// countLocked counts the open tabs of a running browser, listed or not.
func (s *Server) countLocked(browser string) int {
	n := 0
	for _, t := range s.tabs {
		if t.browser == browser && s.phase[browser] == PhaseRunning {
			n++
		}
	}
	return n
}

func (s *Server) listLocked() []tabJSON {
	out := []tabJSON{}
	for _, id := range s.order {
		t, ok := s.tabs[id]
		if !ok || s.phase[t.browser] != PhaseRunning || transient(t.url()) {
			continue
		}
		j := tabJSON{ID: id, URL: t.url(), Title: t.title, Type: "page"}
		if s.opts.Mode == ModeServer {
			j.InstanceID = t.browser
		}
		out = append(out, j)
	}
	return out
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// draining answers as a PinchTab bridge whose browser drains or restarts
// (its writeBridgeUnavailable), before it acts.
func draining(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	reply(w, http.StatusServiceUnavailable, map[string]any{"error": "browser restart in progress; retry shortly",
		"code": "browser_draining", "retryable": true, "details": map[string]any{"retryAfterSeconds": 1}})
}

// fail answers PinchTab's error body: {"error","code"}, and "retryable": true
// only when a retry can help.
func fail(w http.ResponseWriter, status int, code, msg string, retryable bool) {
	body := map[string]any{"error": msg, "code": code}
	if retryable {
		body["retryable"] = true
	}
	reply(w, status, body)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	if r.URL.Path != "/health" {
		s.requests = append(s.requests, r.Method+" "+r.URL.Path)
	}
	s.mu.Unlock()
	if down {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	if tok := s.opts.Token; tok != "" {
		switch got := r.Header.Get("Authorization"); {
		case got == "":
			fail(w, http.StatusUnauthorized, "missing_token", "missing token", false)
			return
		case got != "Bearer "+tok:
			fail(w, http.StatusUnauthorized, "bad_token", "bad token", false)
			return
		}
	}
	if r.Method == http.MethodGet && r.URL.Path == "/health" {
		s.health(w)
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			fail(w, http.StatusBadRequest, "error", "decode: "+err.Error(), false)
			return
		}
	}
	path := r.URL.Path
	switch {
	case s.opts.Mode == ModeBridge && r.Method == http.MethodGet && path == "/tabs":
		s.mu.Lock()
		if p := s.phase[s.opts.Browsers[0]]; p != PhaseRunning {
			s.mu.Unlock()
			draining(w)
			return
		}
		list := s.listLocked()
		s.mu.Unlock()
		reply(w, http.StatusOK, map[string]any{"tabs": list})
	case s.opts.Mode == ModeBridge && r.Method == http.MethodPost && path == "/tab":
		if a, _ := req["action"].(string); a != "new" {
			fail(w, http.StatusBadRequest, "error", "action must be new or focus", false)
			return
		}
		s.openTab(w, s.opts.Browsers[0], req)
	case s.opts.Mode == ModeServer && r.Method == http.MethodGet && path == "/instances":
		s.mu.Lock()
		list := []map[string]any{}
		for _, b := range s.opts.Browsers {
			list = append(list, map[string]any{"id": b, "status": string(s.phase[b]), "profileName": "default", "headless": true})
		}
		s.mu.Unlock()
		reply(w, http.StatusOK, list)
	case s.opts.Mode == ModeServer && r.Method == http.MethodGet && path == "/instances/tabs":
		s.mu.Lock()
		now := s.opts.Now()
		if r.URL.Query().Get("fresh") == "1" || s.cache == nil || now.Sub(s.cacheAt) >= TabCacheTTL {
			s.cache, s.cacheAt = s.listLocked(), now
		}
		list := s.cache
		s.mu.Unlock()
		reply(w, http.StatusOK, list)
	case s.opts.Mode == ModeServer && r.Method == http.MethodPost && strings.HasPrefix(path, "/instances/") && strings.HasSuffix(path, "/tabs/open"):
		b := strings.TrimSuffix(strings.TrimPrefix(path, "/instances/"), "/tabs/open")
		s.mu.Lock()
		p, ok := s.phase[b]
		s.mu.Unlock()
		switch {
		case !ok:
			fail(w, http.StatusNotFound, "error", fmt.Sprintf("instance %q not found", b), false)
		case p != PhaseRunning:
			fail(w, http.StatusServiceUnavailable, "error", fmt.Sprintf("instance %q is not running (status: %s)", b, p), false)
		default:
			s.openTab(w, b, req)
		}
	case s.opts.Mode == ModeServer && r.Method == http.MethodPost && path == "/shutdown":
		s.mu.Lock()
		for b := range s.phase {
			s.phase[b] = PhaseStopping
		}
		s.mu.Unlock()
		reply(w, http.StatusOK, map[string]string{"status": "shutting down"})
	case strings.HasPrefix(path, "/tabs/"):
		id, op, _ := strings.Cut(strings.TrimPrefix(path, "/tabs/"), "/")
		s.tabRoute(w, r, id, op, req)
	default:
		http.NotFound(w, r) // Go's mux: "404 page not found", text/plain
	}
}

func (s *Server) health(w http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	def := s.opts.Browsers[0]
	if s.opts.Mode == ModeServer {
		// The dashboard answers ok whatever its browsers do.
		reply(w, http.StatusOK, map[string]any{
			"status": "ok", "mode": "dashboard", "version": "double", "uptime": 1, "authRequired": s.opts.Token != "",
			"profiles": 1, "instances": len(s.opts.Browsers), "agents": 0, "restartRequired": false,
			"defaultInstance": map[string]string{"id": def, "status": string(s.phase[def])},
		})
		return
	}
	switch s.phase[def] {
	case PhaseStarting:
		reply(w, http.StatusServiceUnavailable, map[string]any{"status": "error", "reason": "browser initialization failed: starting"})
	case PhaseStopping:
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusServiceUnavailable, map[string]any{"status": "draining", "retryAfterSeconds": 1})
	default:
		reply(w, http.StatusOK, map[string]any{"status": "ok", "tabs": s.countLocked(def)})
	}
}

func (s *Server) openTab(w http.ResponseWriter, browser string, req map[string]any) {
	url, _ := req["url"].(string)
	s.mu.Lock()
	if p := s.phase[browser]; p != PhaseRunning {
		s.mu.Unlock()
		draining(w)
		return
	}
	// A server drops its cached tab list after the tab routes that change
	// tabs (navigate, back, forward, reload, close), not after opening one
	// through /instances/{id}/tabs/open: only ?fresh=1 lists that tab at once.
	t := s.openLocked(browser, url)
	out := map[string]string{"tabId": t.id, "url": t.url(), "title": t.title}
	s.mu.Unlock()
	reply(w, http.StatusOK, out)
}

// element finds sel ("#id", "css:#id") on a tab.
func element(t *tab, sel string) (*Element, bool) {
	sel = strings.TrimPrefix(sel, "css:")
	e, ok := t.elems[sel]
	return e, ok
}

func (s *Server) tabRoute(w http.ResponseWriter, r *http.Request, id, op string, req map[string]any) {
	s.mu.Lock()
	t, ok := s.tabs[id]
	var phase Phase
	if ok {
		phase = s.phase[t.browser]
	}
	s.mu.Unlock()
	switch {
	case !ok && r.Method+" "+op == "POST close":
		fail(w, http.StatusInternalServerError, "error", "tab "+id+" not found", false)
		return
	case !ok:
		fail(w, http.StatusNotFound, "error", "tab "+id+" not found", false)
		return
	case phase != PhaseRunning && s.opts.Mode == ModeServer:
		// The server routes a tab to the running browser that lists it;
		// none does, so it answers as for a tab that is nowhere.
		fail(w, http.StatusNotFound, "error", fmt.Sprintf("tab %q not found", id), false)
		return
	case phase != PhaseRunning:
		draining(w)
		return
	}
	str := func(k string) string { v, _ := req[k].(string); return v }
	q := r.URL.Query()
	switch r.Method + " " + op {
	case "POST navigate":
		u := str("url")
		if u == "" {
			fail(w, http.StatusBadRequest, "error", "url required", false)
			return
		}
		if strings.HasPrefix(u, "data:") {
			fail(w, http.StatusBadRequest, "error", "invalid URL scheme: data", false)
			return
		}
		end := s.begin(t)
		ok := s.await(r)
		end()
		if !ok {
			return
		}
		s.mu.Lock()
		t.history = append(t.history[:t.at+1], u)
		t.at++
		s.loadLocked(t)
		s.cache = nil
		out := map[string]string{"tabId": id, "url": u, "title": t.title}
		s.mu.Unlock()
		if s.died(w, r, t) {
			return
		}
		reply(w, http.StatusOK, out)
	case "POST back", "POST forward", "POST reload":
		s.mu.Lock()
		switch {
		case op == "back" && t.at > 0:
			t.at--
		case op == "forward" && t.at < len(t.history)-1:
			t.at++
		}
		s.loadLocked(t)
		s.cache = nil
		out := map[string]string{"tabId": id, "url": t.url()}
		s.mu.Unlock()
		reply(w, http.StatusOK, out)
	case "POST action":
		s.action(w, r, t, req)
	case "POST wait":
		sel := str("selector")
		if sel == "" && req["ms"] == nil && str("text") == "" && str("url") == "" && str("load") == "" && str("fn") == "" {
			fail(w, http.StatusBadRequest, "error", "one of selector, text, url, load, fn, or ms is required", false)
			return
		}
		s.mu.Lock()
		_, found := element(t, sel)
		s.mu.Unlock()
		if sel != "" && !found {
			// As PinchTab: 200, not an error status; it says so in the
			// body, having waited for the whole timeout (10 s by
			// default; the double does not wait).
			timeout := 10_000
			if ms, ok := req["timeout"].(float64); ok {
				timeout = min(max(int(ms), 100), 30_000)
			}
			reply(w, http.StatusOK, map[string]any{"waited": false, "elapsed": timeout,
				"error": fmt.Sprintf("timeout after %dms waiting for selector", timeout)})
			return
		}
		reply(w, http.StatusOK, map[string]any{"waited": true, "elapsed": 1, "match": sel})
	case "POST find":
		if str("query") == "" {
			fail(w, http.StatusBadRequest, "error", "query required", false)
			return
		}
		reply(w, http.StatusOK, map[string]any{"best_ref": "e1", "confidence": "high", "score": 0.9, "matches": []any{}})
	case "GET text", "GET title", "GET url":
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.droppedRead(w) {
			return
		}
		switch op {
		case "title", "url":
			reply(w, http.StatusOK, map[string]string{"tabId": id, "url": t.url(), "title": t.title})
		default:
			sel := q.Get("selector")
			if sel == "" {
				var b strings.Builder
				for _, e := range t.elems {
					b.WriteString(e.Text)
				}
				reply(w, http.StatusOK, map[string]string{"url": t.url(), "title": t.title, "text": b.String()})
				return
			}
			e, ok := element(t, sel)
			if !ok {
				// PinchTab's text endpoint answers an unmatched selector with a 500.
				fail(w, http.StatusInternalServerError, "error", "selector "+sel+": element not found", false)
				return
			}
			reply(w, http.StatusOK, map[string]string{"url": t.url(), "title": t.title, "text": e.Text})
		}
	case "GET snapshot":
		if s.dropNextRead(w) {
			return
		}
		reply(w, http.StatusOK, map[string]any{"url": t.url(), "title": t.title, "nodes": []any{}, "count": 0})
	case "POST evaluate":
		if str("expression") == "" {
			fail(w, http.StatusBadRequest, "error", "expression required", false)
			return
		}
		end := s.begin(t)
		ok := s.await(r)
		end()
		if !ok || s.died(w, r, t) {
			return
		}
		reply(w, http.StatusOK, map[string]any{"result": nil})
	case "GET screenshot":
		if s.dropNextRead(w) {
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n" + id))
	case "GET pdf", "POST pdf":
		if r.Method == http.MethodGet && s.dropNextRead(w) {
			return
		}
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write([]byte("%PDF-1.4 " + id))
	case "POST dialog":
		action := str("action")
		if action != "accept" && action != "dismiss" {
			fail(w, http.StatusBadRequest, "error", "action must be 'accept' or 'dismiss'", false)
			return
		}
		s.mu.Lock()
		d := t.dialog
		t.dialog = nil
		if d != nil && d.OnAnswer != nil {
			d.OnAnswer(t.elems, action == "accept")
		}
		s.mu.Unlock()
		if d == nil {
			fail(w, http.StatusBadRequest, "error", "no dialog open on tab "+id, false)
			return
		}
		reply(w, http.StatusOK, map[string]any{"type": d.Type, "message": d.Message, "handled": true})
	case "POST close":
		s.mu.Lock()
		delete(s.tabs, id)
		s.cache = nil
		s.mu.Unlock()
		reply(w, http.StatusOK, map[string]any{"closed": true})
	default:
		http.NotFound(w, r)
	}
}

// interactions are the action kinds the double knows.
var interactions = map[string]bool{
	"click": true, "dblclick": true, "type": true, "fill": true, "press": true, "hover": true, "focus": true,
	"select": true, "scroll": true, "scrollintoview": true, "check": true, "uncheck": true, "drag": true,
	"mouse-move": true, "mouse-down": true, "mouse-up": true, "mouse-wheel": true,
	"keyboard-type": true, "keyboard-inserttext": true, "keydown": true, "keyup": true,
}

// begin counts an action running in t until the returned func is called.
func (s *Server) begin(t *tab) (end func()) {
	s.mu.Lock()
	s.running++
	s.maxRunning = max(s.maxRunning, s.running)
	if s.inTab == nil {
		s.inTab = make(map[string]int)
	}
	s.inTab[t.id]++
	s.maxInTab = max(s.maxInTab, s.inTab[t.id])
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.running--
		if s.inTab[t.id]--; s.inTab[t.id] == 0 {
			delete(s.inTab, t.id)
		}
		s.mu.Unlock()
	}
}

// await waits while actions are held (Hold). It reports false when the
// client went away first, unless the double ignores aborts.
func (s *Server) await(r *http.Request) bool {
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold == nil {
		return true
	}
	if s.opts.IgnoreAbort {
		<-hold
		return true
	}
	select {
	case <-hold:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) action(w http.ResponseWriter, r *http.Request, t *tab, req map[string]any) {
	kind, _ := req["kind"].(string)
	if !interactions[kind] {
		fail(w, http.StatusBadRequest, "error", "unknown action kind: "+kind, false)
		return
	}
	defer s.begin(t)()
	if !s.await(r) {
		return
	}
	sel, _ := req["selector"].(string)
	if sel == "" {
		sel, _ = req["ref"].(string)
	}
	dialogAction, _ := req["dialogAction"].(string)
	if dialogAction != "" && dialogAction != "accept" && dialogAction != "dismiss" {
		fail(w, http.StatusBadRequest, "error", "dialogAction must be 'accept' or 'dismiss'", false)
		return
	}
	s.mu.Lock()
	e, ok := element(t, sel)
	if sel != "" && !ok {
		s.mu.Unlock()
		fail(w, http.StatusBadRequest, "error", "selector "+sel+": element not found", false)
		return
	}
	if d := t.dialog; d != nil && kind == "click" {
		s.mu.Unlock()
		dialogBlocking(w, d)
		return
	}
	navigated := false
	var opened *Dialog
	switch kind {
	case "fill", "type":
		text, _ := req["text"].(string)
		if kind == "type" {
			text = e.Value + text
		}
		e.Value = text
	case "click":
		if e != nil && e.OnClick != nil {
			e.OnClick(t.elems)
		}
		if e != nil && e.Dialog != nil {
			if dialogAction != "" {
				if e.Dialog.OnAnswer != nil {
					e.Dialog.OnAnswer(t.elems, dialogAction == "accept")
				}
			} else {
				t.dialog, opened = e.Dialog, e.Dialog
			}
		}
		if e != nil && e.Href != "" {
			t.history = append(t.history[:t.at+1], e.Href)
			t.at++
			s.loadLocked(t)
			s.cache = nil
			navigated = true
		}
	}
	s.mu.Unlock()
	if s.died(w, r, t) {
		return
	}
	if opened != nil {
		dialogBlocking(w, opened)
		return
	}
	if navigated {
		if wait, _ := req["waitNav"].(bool); !wait {
			fail(w, http.StatusConflict, "navigation_changed", "unexpected page navigation while executing click", false)
			return
		}
	}
	reply(w, http.StatusOK, map[string]any{"success": true, "result": map[string]any{"kind": kind}})
}

// dialogBlocking answers a click a dialog holds up, as PinchTab does.
func dialogBlocking(w http.ResponseWriter, d *Dialog) {
	reply(w, http.StatusInternalServerError, map[string]any{
		"error": fmt.Sprintf("click blocked by JavaScript dialog (%s: %q) — use --dialog-action accept|dismiss", d.Type, d.Message),
		"code":  "dialog_blocking",
		"details": map[string]any{
			"suggestion":     "use --dialog-action accept or --dialog-action dismiss",
			"dialog_type":    d.Type,
			"dialog_message": d.Message,
		},
	})
}
