package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// fakeInstance is a PinchTab-compatible instance in an httptest server. It
// records every request, holds a set of tabs, and can be told to fail.
type fakeInstance struct {
	t     *testing.T
	token string
	srv   *httptest.Server

	mu       sync.Mutex
	reqs     []fakeReq
	tabs     map[string]bool
	nextTab  int
	down     bool              // /health answers 503
	fail     map[string]int    // path suffix → status to answer
	slow     chan struct{}     // when set, actions wait for it (or the request's end)
	canceled chan struct{}     // closed when a slow action saw its request end
	answer   map[string]string // path suffix → body to answer
	chat     string            // the event stream /chat answers
	name     string
}

type fakeReq struct {
	Method, Path, Body, Auth, Agent, Task string
}

func newFakeInstance(t *testing.T, name, token string, tabs ...string) *fakeInstance {
	t.Helper()
	f := &fakeInstance{t: t, name: name, token: token, tabs: map[string]bool{}, fail: map[string]int{}, answer: map[string]string{}}
	for _, tab := range tabs {
		f.tabs[tab] = true
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeInstance) URL() string { return f.srv.URL }

func (f *fakeInstance) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeReq(nil), f.reqs...)
}

// paths returns "METHOD /path" of every request but the health checks and
// their tab listings (GETs made for no task).
func (f *fakeInstance) paths() []string {
	var out []string
	for _, r := range f.requests() {
		if r.Path != "/health" && (r.Method != http.MethodGet || r.Task != "") {
			out = append(out, r.Method+" "+r.Path)
		}
	}
	return out
}

func (f *fakeInstance) set(fn func(f *fakeInstance)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *fakeInstance) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, fakeReq{Method: r.Method, Path: r.URL.EscapedPath(), Body: string(body),
		Auth: r.Header.Get("Authorization"), Agent: r.Header.Get(pinchtab.HeaderAgent), Task: r.Header.Get(pinchtab.HeaderTask)})
	down, slow, canceled := f.down, f.slow, f.canceled
	var failStatus int
	var answer string
	for suffix, st := range f.fail {
		if strings.HasSuffix(r.URL.Path, suffix) {
			failStatus = st
		}
	}
	for suffix, a := range f.answer {
		if strings.HasSuffix(r.URL.Path, suffix) {
			answer = a
		}
	}
	f.mu.Unlock()

	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		reply(401, map[string]string{"error": "missing token", "code": "missing_token"})
		return
	}
	if failStatus != 0 {
		reply(failStatus, map[string]string{"error": "told to fail"}) // no code: the status decides
		return
	}
	if answer != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/health":
		if down {
			// A connection that breaks without an answer: a network failure.
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			reply(503, map[string]string{"error": "browser down"})
			return
		}
		f.mu.Lock()
		n := len(f.tabs)
		f.mu.Unlock()
		reply(200, map[string]any{"status": "ok", "tabs": n})
	case path == "/tabs" && r.Method == http.MethodGet:
		f.mu.Lock()
		var list []map[string]string
		for id := range f.tabs {
			list = append(list, map[string]string{"id": id, "url": "about:blank", "title": "", "type": "page"})
		}
		f.mu.Unlock()
		reply(200, map[string]any{"tabs": list})
	case path == "/instances/tabs":
		f.mu.Lock()
		var list []map[string]string
		for id := range f.tabs {
			list = append(list, map[string]string{"id": id, "instanceId": "inst_b1", "url": "about:blank"})
		}
		f.mu.Unlock()
		reply(200, list)
	case path == "/instances":
		reply(200, []map[string]string{{"id": "inst_b0", "status": "stopped"}, {"id": "inst_b1", "status": "running"}})
	case path == "/tab" || strings.HasSuffix(path, "/tabs/open"):
		f.mu.Lock()
		f.nextTab++
		id := fmt.Sprintf("%s-tab%d", f.name, f.nextTab)
		f.tabs[id] = true
		f.mu.Unlock()
		reply(200, map[string]string{"tabId": id, "url": "about:blank"})
	case path == "/chat":
		f.mu.Lock()
		stream := f.chat
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, stream)
	case strings.HasPrefix(path, "/tabs/"):
		rest := strings.TrimPrefix(path, "/tabs/")
		tab, op, _ := strings.Cut(rest, "/")
		f.mu.Lock()
		exists := f.tabs[tab]
		if exists && op == "close" {
			delete(f.tabs, tab)
		}
		f.mu.Unlock()
		if !exists {
			reply(404, map[string]string{"error": "tab " + tab + " not found", "code": "tab_not_found"})
			return
		}
		switch op {
		case "close":
			reply(200, map[string]bool{"closed": true})
		case "navigate":
			var req map[string]any
			_ = json.Unmarshal(body, &req)
			reply(200, map[string]any{"tabId": tab, "url": req["url"], "title": "Page"})
		case "text":
			reply(200, map[string]string{"text": "text of " + tab + " " + r.URL.Query().Get("selector")})
		case "screenshot":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\nscreenshot-of-" + tab))
		case "evaluate":
			reply(200, map[string]any{"result": 3})
		case "back", "forward", "reload", "wait", "find":
			var req map[string]any
			_ = json.Unmarshal(body, &req)
			reply(200, map[string]any{"op": op, "body": req, "query": r.URL.RawQuery})
		case "action":
			if slow != nil {
				select {
				case <-slow:
				case <-r.Context().Done():
					close(canceled)
					return
				}
			}
			var req map[string]any
			_ = json.Unmarshal(body, &req)
			reply(200, map[string]any{"success": true, "result": map[string]any{"kind": req["kind"], "tab": tab, "instance": f.name}})
		default:
			reply(404, map[string]string{"error": "no such endpoint"})
		}
	default:
		reply(404, map[string]string{"error": "no such endpoint"})
	}
}

// fakeSink records what the registry tells the engine.
type fakeSink struct {
	mu       sync.Mutex
	infos    map[string]engine.InstanceInfo
	removed  []string
	unbound  []string
	closed   []string // tabs a task closed (TabClosed)
	expired  []string // sessions told their binding went (ExpireSession), also in unbound
	setCalls int
}

func newFakeSink() *fakeSink { return &fakeSink{infos: map[string]engine.InstanceInfo{}} }

func (s *fakeSink) SetInstance(i engine.InstanceInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infos[i.ID] = i
	s.setCalls++
}

func (s *fakeSink) RemoveInstance(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.infos, id)
	s.removed = append(s.removed, id)
}

func (s *fakeSink) UnbindSession(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unbound = append(s.unbound, key)
}

func (s *fakeSink) TabClosed(_, tab, _, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = append(s.closed, tab)
}

func (s *fakeSink) ExpireSession(key, _, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unbound = append(s.unbound, key)
	s.expired = append(s.expired, key)
}

func (s *fakeSink) expiredSessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.expired...)
}

func (s *fakeSink) closedTabs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.closed...)
}

func (s *fakeSink) info(id string) (engine.InstanceInfo, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.infos[id]
	return i, ok
}

func (s *fakeSink) unboundSessions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unbound...)
}

// healthyPick returns a healthy instance the way the engine's placement
// would, preferring the ids in order.
func (s *fakeSink) healthyPick(ids ...string) string {
	for _, id := range ids {
		if i, ok := s.info(id); ok && i.Healthy {
			return id
		}
	}
	return ""
}

// attempt is an Attempt built the way the engine builds a Run.
type attempt struct {
	id       string
	spec     *engine.TaskSpec
	instance string
	tab      string
	lostOn   string

	mu      sync.Mutex
	started [][2]string
}

func (a *attempt) TaskID() string         { return a.id }
func (a *attempt) Spec() *engine.TaskSpec { return a.spec }
func (a *attempt) InstanceID() string     { return a.instance }
func (a *attempt) TabID() string          { return a.tab }

// LostSession is engine.Run's: set lostOn to play a session whose instance
// was removed.
func (a *attempt) LostSession() (string, bool) { return a.lostOn, a.lostOn != "" }
func (a *attempt) Started(inst, tab string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.started = append(a.started, [2]string{inst, tab})
}

func (a *attempt) startedWith() [][2]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][2]string(nil), a.started...)
}

func action(kind, selector, params string) *engine.Action {
	a := &engine.Action{Kind: kind, Selector: selector}
	if params != "" {
		a.Params = json.RawMessage(params)
	}
	return a
}

// bundle is the executor under test with its collaborators.
type bundle struct {
	reg  *executor.Registry
	exec *executor.Executor
	sink *fakeSink
}

func setup(t *testing.T, o executor.Options, insts ...executor.InstanceConfig) bundle {
	t.Helper()
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour, UnhealthyAfter: 2})
	t.Cleanup(reg.Close)
	sink := newFakeSink()
	reg.SetSink(sink)
	for _, cfg := range insts {
		_, err := reg.Register(context.Background(), cfg)
		require.NoError(t, err)
		// Wait for the first check, which the registry runs at once.
		waitfor.CheckFor(t, func() error {
			if inst, _ := reg.Get(context.Background(), cfg.ID); inst.Health == executor.HealthUnknown {
				return fmt.Errorf("instance %s not checked yet", cfg.ID)
			}
			return nil
		})
	}
	o.Registry = reg
	exec, err := executor.New(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	return bundle{reg: reg, exec: exec, sink: sink}
}
