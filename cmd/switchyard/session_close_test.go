package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// sessionTasks submits tasks to a server over GraphQL and waits for their end.
type sessionTasks struct {
	t *testing.T
	c *client.Client
}

type endedTask struct {
	State    string
	Error    *string
	Result   json.RawMessage
	Attempts []struct {
		TabID *string
		Error *string
	}
}

// run submits one task and returns it once it ended.
func (s sessionTasks) run(input map[string]any) endedTask {
	s.t.Helper()
	ctx := context.Background()
	var sub struct{ SubmitTask struct{ ID string } }
	require.NoError(s.t, s.c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
		map[string]any{"in": input}, &sub))
	var out struct{ Task endedTask }
	waitfor.CheckForWithin(s.t, time.Minute, func() error {
		require.NoError(s.t, s.c.Do(ctx, `query($id: ID!) { task(id: $id) { state error result attempts { tabId error } } }`,
			map[string]any{"id": sub.SubmitTask.ID}, &out))
		switch out.Task.State {
		case "SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "REJECTED":
			return nil
		}
		return fmt.Errorf("task %v did not end: %+v", input, out.Task)
	})
	return out.Task
}

func (e endedTask) tab() string {
	if n := len(e.Attempts); n > 0 && e.Attempts[n-1].TabID != nil {
		return *e.Attempts[n-1].TabID
	}
	return ""
}

func (e endedTask) text(t *testing.T) string {
	t.Helper()
	require.Equal(t, "SUCCEEDED", e.State, "%+v", e)
	var r struct{ Text string }
	require.NoError(t, json.Unmarshal(e.Result, &r), "%s", e.Result)
	return r.Text
}

// A close task that names a session's tab, from outside the session, takes
// the session's page away as closing the tab behind Switchyard's back does:
// the session's next task fails with SESSION_LOST (or replays the session if
// it asked), never runs in a blank tab. A close of the session's own ends it
// cleanly: its next task starts over in a new tab.
func TestClosingASessionsTabThroughATask(t *testing.T) {
	t.Parallel()
	if _, ok := chromium.Find(); !ok {
		t.Skip("chromium is not installed: skipping (apt-get install chromium)")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><input id="name"><p id="seen">page</p>`))
	}))
	t.Cleanup(site.Close)
	s := startServe(t, "--listen", "127.0.0.1:0", "--store", "memory", "--shutdown-grace", "100ms")
	tasks := sessionTasks{t, client.New(s.URL)}
	action := func(kind, selector string, params map[string]any) map[string]any {
		a := map[string]any{"kind": kind}
		if selector != "" {
			a["selector"] = selector
		}
		if params != nil {
			a["params"] = params
		}
		return a
	}
	inSession := func(key string, replay bool, act map[string]any) map[string]any {
		return map[string]any{"agentId": "closer", "sessionKey": key, "sessionReplay": replay, "action": act}
	}
	build := func(key string, replay bool) string {
		t.Helper()
		nav := tasks.run(inSession(key, replay, action("navigate", "", map[string]any{"url": site.URL})))
		require.Equal(t, "SUCCEEDED", nav.State, "%+v", nav)
		require.Equal(t, "page", tasks.run(inSession(key, replay, action("text", "#seen", nil))).text(t))
		return nav.tab()
	}
	closeFromOutside := func(key, tab string) {
		t.Helper()
		// A task of the session's agent, of no session (another agent's
		// task finds no such tab: the built-in Chromium serves an agent's
		// tabs to that agent's tasks only).
		closed := tasks.run(map[string]any{"agentId": "closer", "tabId": tab, "action": action("close", "", nil)})
		require.Equal(t, "SUCCEEDED", closed.State, "%+v", closed)
		// Said at once, before any task of the session runs.
		reason := waitSessionEvent(t, tasks.c, key)
		require.Contains(t, reason, tab)
		require.Contains(t, reason, "closed by a close task")
	}

	// Without replay: SESSION_LOST, then the session starts over.
	tab := build("plain", false)
	closeFromOutside("plain", tab)
	lost := tasks.run(inSession("plain", false, action("text", "#seen", nil)))
	require.Equal(t, "FAILED", lost.State, "not run in a blank tab: %+v", lost)
	require.NotNil(t, lost.Error)
	require.Contains(t, *lost.Error, "SESSION_LOST")
	require.Contains(t, *lost.Error, tab)
	require.Contains(t, *lost.Error, "closed by a close task")
	again := tasks.run(inSession("plain", false, action("url", "", nil)))
	require.Equal(t, "SUCCEEDED", again.State, "the session starts over: %+v", again)
	require.NotEqual(t, tab, again.tab())

	// With replay: the session is rebuilt in a new tab.
	tab = build("replayed", true)
	closeFromOutside("replayed", tab)
	replayed := tasks.run(inSession("replayed", true, action("text", "#seen", nil)))
	require.Equal(t, "page", replayed.text(t), "the navigate was replayed: %+v", replayed)
	require.NotEqual(t, tab, replayed.tab())

	// The session closes its own tab: it ended, and its next task starts
	// over in a new blank tab, as a new session would.
	tab = build("own", true)
	own := tasks.run(inSession("own", true, action("close", "", nil)))
	require.Equal(t, "SUCCEEDED", own.State, "%+v", own)
	fresh := tasks.run(inSession("own", true, action("url", "", nil)))
	require.Equal(t, "SUCCEEDED", fresh.State, "%+v", fresh)
	require.NotEqual(t, tab, fresh.tab())
	require.True(t, strings.Contains(string(fresh.Result), "about:blank"), "a new session, nothing replayed: %s", fresh.Result)
}

// waitSessionEvent waits for the first SESSION event of a session, reading
// the server's event stream from its start, and returns its reason.
func waitSessionEvent(t *testing.T, c *client.Client, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveStartTimeout)
	defer cancel()
	stream, err := c.SubscribeSSE(ctx, `subscription($k: String!) {
		taskEvents(filter: {kinds: [SESSION], sessionKey: $k}, after: 0) { kind sessionKey reason } }`,
		map[string]any{"k": key})
	require.NoError(t, err)
	defer stream.Close()
	for {
		m, err := stream.Next()
		require.NoError(t, err, "no SESSION event for session %s", key)
		require.Empty(t, m.Errors)
		var ev struct {
			TaskEvents struct{ Kind, SessionKey, Reason string }
		}
		require.NoError(t, json.Unmarshal(m.Data, &ev), "%s", m.Data)
		if ev.TaskEvents.Kind == "SESSION" {
			require.Equal(t, key, ev.TaskEvents.SessionKey)
			return ev.TaskEvents.Reason
		}
	}
}

// The same through PinchTab (its test double, a server): a close task of no
// session that names a session's tab is announced at once with a SESSION
// event; the session's next task fails with SESSION_LOST, saying who closed
// the tab, or, for a session that asked, replays it in a new tab.
func TestClosingASessionsTabThroughATaskOnPinchTab(t *testing.T) {
	t.Parallel()
	browser := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer})
	s := startServe(t, "--listen", "127.0.0.1:0", "--store", "memory", "--no-local-instance", "--shutdown-grace", "100ms")
	c := client.New(s.URL)
	require.NoError(t, c.Do(context.Background(), `mutation($u: String!) { registerInstance(input: {id: "pt", url: $u, kind: PINCHTAB}) { id } }`,
		map[string]any{"u": browser.URL()}, nil))
	tasks := sessionTasks{t, c}
	inSession := func(key string, replay bool, act map[string]any) map[string]any {
		return map[string]any{"agentId": "closer", "sessionKey": key, "sessionReplay": replay, "action": act}
	}
	navigate := func(url string) map[string]any {
		return map[string]any{"kind": "navigate", "params": map[string]any{"url": url}}
	}
	readURL := map[string]any{"kind": "url"}

	for _, replay := range []bool{false, true} {
		key := "plain"
		if replay {
			key = "replayed"
		}
		page := "https://example.test/" + key
		nav := tasks.run(inSession(key, replay, navigate(page)))
		require.Equal(t, "SUCCEEDED", nav.State, "%+v", nav)
		tab := nav.tab()
		require.Contains(t, browser.Tabs(), tab)

		// A task of the session's agent, of no session (another agent's
		// task finds no such tab: the executor serves the tabs it opened
		// for an agent to that agent's tasks only, on PinchTab too).
		closed := tasks.run(map[string]any{"agentId": "closer", "tabId": tab, "action": map[string]any{"kind": "close"}})
		require.Equal(t, "SUCCEEDED", closed.State, "%+v", closed)
		require.NotContains(t, browser.Tabs(), tab)
		reason := waitSessionEvent(t, c, key)
		require.Contains(t, reason, tab)
		require.Contains(t, reason, "closed by a close task")
		require.Contains(t, reason, "of no session")

		next := tasks.run(inSession(key, replay, readURL))
		if !replay {
			require.Equal(t, "FAILED", next.State, "not run in a blank tab: %+v", next)
			require.NotNil(t, next.Error)
			require.Contains(t, *next.Error, "SESSION_LOST")
			require.Contains(t, *next.Error, "closed by a close task")
			require.Len(t, next.Attempts, 1, "at once, not after the retry budget")
			continue
		}
		require.Equal(t, "SUCCEEDED", next.State, "replayed: %+v", next)
		require.Contains(t, string(next.Result), page, "the navigate was replayed")
		require.NotEqual(t, tab, next.tab())
	}
}
