package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// restartTask is what the session-restart test reads of a task.
type restartTask struct {
	ID       string
	State    string
	Error    *string
	Result   json.RawMessage
	Attempts []struct{ InstanceID, TabID string }
}

// A session's binding survives a restart of the server on a SQLite file:
// the session's next task runs in its own tab when the tab is still on its
// instance, and fails with SESSION_LOST when it is not (with sessionReplay
// too: the replay log was in memory), never in a new blank tab.
func TestASessionKeepsItsTabAcrossARestartOrIsLost(t *testing.T) {
	t.Parallel()
	browser := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer})
	db := filepath.Join(t.TempDir(), "switchyard.db")
	ctx := context.Background()

	submit := func(c *client.Client, session string, replay bool, action string) string {
		t.Helper()
		var out struct{ SubmitTask struct{ ID string } }
		require.NoError(t, c.Do(ctx, `mutation($s: String!, $r: Boolean!, $a: ActionInput!) {
			submitTask(input: {agentId: "a", sessionKey: $s, sessionReplay: $r, action: $a}) { id } }`,
			map[string]any{"s": session, "r": replay, "a": json.RawMessage(action)}, &out))
		return out.SubmitTask.ID
	}
	wait := func(c *client.Client, id string) restartTask {
		t.Helper()
		var out struct{ Task restartTask }
		waitfor.CheckForWithin(t, serveStartTimeout, func() error {
			require.NoError(t, c.Do(ctx, `query($id: ID!) { task(id: $id) { id state error result attempts { instanceId tabId } } }`,
				map[string]any{"id": id}, &out))
			switch out.Task.State {
			case "SUCCEEDED", "FAILED", "PARKED", "CANCELLED":
				return nil
			}
			return fmt.Errorf("task %s has not ended: %+v", id, out.Task)
		})
		return out.Task
	}
	navigate := func(url string) string { return `{"kind": "navigate", "params": {"url": "` + url + `"}}` }
	const readURL = `{"kind": "url"}`
	tabOf := func(tk restartTask) string {
		t.Helper()
		require.NotEmpty(t, tk.Attempts)
		return tk.Attempts[len(tk.Attempts)-1].TabID
	}

	server, stop := serveOn(t, db)
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(ctx, `mutation($u: String!) { registerInstance(input: {id: "pt", url: $u, kind: PINCHTAB}) { id } }`,
		map[string]any{"u": browser.URL()}, nil))
	kept := wait(c, submit(c, "kept", false, navigate("https://example.test/kept")))
	require.Equal(t, "SUCCEEDED", kept.State, "%+v", kept)
	lost := wait(c, submit(c, "lost", true, navigate("https://example.test/lost")))
	require.Equal(t, "SUCCEEDED", lost.State, "%+v", lost)
	keptTab, lostTab := tabOf(kept), tabOf(lost)
	stop()

	// While the server is down, the instance loses one session's tab.
	require.Contains(t, browser.Tabs(), keptTab, "stopping the server leaves sessions' tabs open")
	browser.CloseTab(lostTab)

	server, stop = serveOn(t, db)
	defer stop()
	c = client.New(server + "/graphql")

	again := wait(c, submit(c, "kept", false, readURL))
	require.Equal(t, "SUCCEEDED", again.State, "%+v", again)
	require.Equal(t, keptTab, tabOf(again), "the session runs in its own tab after the restart")
	require.Contains(t, string(again.Result), "https://example.test/kept")

	gone := wait(c, submit(c, "lost", true, readURL))
	require.Equal(t, "FAILED", gone.State, "%+v", gone)
	require.NotNil(t, gone.Error)
	require.Contains(t, *gone.Error, "SESSION_LOST")
	require.Contains(t, *gone.Error, "the server restarted since the session's first task, and the replay log is kept in memory only",
		"replay says why it could not happen")

	// Then the session starts over, in a new tab.
	fresh := wait(c, submit(c, "lost", true, readURL))
	require.Equal(t, "SUCCEEDED", fresh.State, "%+v", fresh)
	require.NotEqual(t, lostTab, tabOf(fresh))
}

// A session never used again after a restart does not keep its binding and
// its tab for ever: its restored binding follows the idle rule of the
// sessions bound since (executor.idleTabTimeout), after which its tab is
// closed, its binding dropped, and a SESSION event says so. Its next task
// then starts over in a new tab rather than failing.
func TestASessionUnusedAfterARestartExpiresAfterTheIdleTimeout(t *testing.T) {
	t.Parallel()
	browser := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer})
	dir := t.TempDir()
	db := filepath.Join(dir, "switchyard.db")
	ctx := context.Background()
	sessions := func(server string) sessionTasks { return sessionTasks{t, client.New(server + "/graphql")} }
	inSession := func(act map[string]any) map[string]any {
		return map[string]any{"agentId": "a", "sessionKey": "idle", "action": act}
	}

	server, stop := serveOn(t, db)
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(ctx, `mutation($u: String!) { registerInstance(input: {id: "pt", url: $u, kind: PINCHTAB}) { id } }`,
		map[string]any{"u": browser.URL()}, nil))
	nav := sessions(server).run(inSession(map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.test/idle"}}))
	require.Equal(t, "SUCCEEDED", nav.State, "%+v", nav)
	tab := nav.tab()
	stop()
	require.Contains(t, browser.Tabs(), tab, "stopping the server leaves sessions' tabs open")

	// Restarted with a short idle timeout, and the session is not used.
	conf := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("executor:\n  idleTabTimeout: 300ms\n"), 0o600))
	server, stop = serveOn(t, db, "--config", conf)
	defer stop()
	c = client.New(server + "/graphql")
	reason := waitSessionEvent(t, c, "idle")
	require.Contains(t, reason, tab)
	require.Contains(t, reason, "since the server restarted")
	require.Contains(t, reason, "idleTabTimeout")
	require.NotContains(t, browser.Tabs(), tab, "the tab is closed before the event")

	next := sessions(server).run(inSession(map[string]any{"kind": "url"}))
	require.Equal(t, "SUCCEEDED", next.State, "the binding is gone: the session starts over, %+v", next)
	require.NotEqual(t, tab, next.tab())
	require.NotContains(t, string(next.Result), "https://example.test/idle")
}
