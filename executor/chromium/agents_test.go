package chromium_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// Each agent's tabs are in a browser context of its own: a cookie set in
// alice's tab is not in bob's on the same site, and a tab of alice's — one
// she opened, or a popup her page opened — answers bob's requests 404, as a
// tab that does not exist, while a request for no agent (the executor's
// own) still reaches it.
func TestEachAgentHasABrowserContextOfItsOwn(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	as := func(agent string) context.Context {
		return pinchtab.WithRequestInfo(context.Background(), pinchtab.RequestInfo{AgentID: agent, TaskID: "t-" + agent})
	}
	open := func(agent string) string {
		t.Helper()
		tab, err := c.OpenTab(as(agent), site.URL)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.CloseTab(context.Background(), tab.TabID) })
		return tab.TabID
	}
	eval := func(agent, tab, expr string) string {
		t.Helper()
		res, err := c.Evaluate(as(agent), tab, expr, nil)
		require.NoError(t, err)
		return field[string](t, res, "result")
	}

	alice, bob := open("alice"), open("bob")
	eval("alice", alice, `document.cookie = "sid=ALICE; path=/"; localStorage.setItem("k", "ALICE"); "ok"`)
	require.Equal(t, "sid=ALICE|ALICE", eval("alice", open("alice"), `document.cookie + "|" + localStorage.getItem("k")`),
		"alice's tabs share her context")
	require.Equal(t, "|null", eval("bob", bob, `document.cookie + "|" + localStorage.getItem("k")`),
		"bob's tab sees alice's cookie or storage")

	_, err := c.Evaluate(as("bob"), alice, `location.href`, nil)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err), "bob reached alice's tab: %v", err)
	_, err = c.Read(as("bob"), alice, "url", nil)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err), "bob read alice's tab's URL: %v", err)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(c.CloseTab(as("bob"), alice)), "bob closed alice's tab")
	_, err = c.Read(context.Background(), alice, "url", nil)
	require.NoError(t, err, "a request for no agent reaches any tab")

	// A popup alice's page opens is hers too.
	eval("alice", alice, `document.body.insertAdjacentHTML("beforeend", '<a id="pop" target="_blank" href="?popup=1">pop</a>'); "ok"`)
	_, err = c.Act(as("alice"), alice, pinchtab.Action{Kind: "click", Selector: "css:#pop"})
	require.NoError(t, err)
	var popup string
	waitfor.CheckFor(t, func() error {
		tabs, err := c.Tabs(context.Background())
		if err != nil {
			return err
		}
		for _, tb := range tabs {
			if strings.Contains(tb.URL, "popup=1") {
				popup = tb.ID
				return nil
			}
		}
		return errors.New("the popup is not listed yet")
	})
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), popup) })
	_, err = c.Read(as("bob"), popup, "url", nil)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err), "bob reached alice's popup: %v", err)
	raw, err := c.Read(as("alice"), popup, "url", nil)
	require.NoError(t, err)
	var u struct{ URL string }
	require.NoError(t, json.Unmarshal(raw, &u))
	require.Contains(t, u.URL, "popup=1")
}

// An agent's browser context outlives its last tab by AgentContextIdle: alice,
// back within the period, finds her cookie and storage; bob, back after it,
// finds a new, empty context, his old one disposed. An agent with a tab open
// keeps its context however long. The sweep is driven with a chosen now; the
// instance's own loop, at a quarter of an hour, never runs in the test.
func TestAnIdleAgentsBrowserContextIsDisposed(t *testing.T) {
	t.Parallel()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed: skipping the real-browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := chromium.Start(ctx, chromium.Options{ExecPath: path, ActionTimeout: 20 * time.Second, AgentContextIdle: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	c := client(t, inst)
	as := func(agent string) context.Context {
		return pinchtab.WithRequestInfo(context.Background(), pinchtab.RequestInfo{AgentID: agent, TaskID: "t-" + agent})
	}
	open := func(agent string) string {
		t.Helper()
		tab, err := c.OpenTab(as(agent), site.URL)
		require.NoError(t, err)
		return tab.TabID
	}
	eval := func(agent, tab, expr string) string {
		t.Helper()
		res, err := c.Evaluate(as(agent), tab, expr, nil)
		require.NoError(t, err)
		return field[string](t, res, "result")
	}
	// close closes a tab as the executor does (a request for no agent) and
	// waits until the browser no longer lists it.
	closeTab := func(tab string) {
		t.Helper()
		require.NoError(t, c.CloseTab(context.Background(), tab))
		waitfor.CheckFor(t, func() error {
			tabs, err := c.Tabs(context.Background())
			if err != nil {
				return err
			}
			for _, tb := range tabs {
				if tb.ID == tab {
					return errors.New("the closed tab is still listed")
				}
			}
			return nil
		})
	}
	const read = `document.cookie + "|" + localStorage.getItem("k")`
	for _, agent := range []string{"alice", "bob", "carol"} {
		tab := open(agent)
		eval(agent, tab, `document.cookie = "sid=`+agent+`; path=/"; localStorage.setItem("k", "`+agent+`"); "ok"`)
		if agent == "carol" {
			continue // carol keeps a tab open
		}
		closeTab(tab)
	}
	start := time.Now()

	n, err := inst.DisposeIdleContexts(start.Add(30 * time.Minute))
	require.NoError(t, err)
	require.Zero(t, n, "a context was disposed within the idle period")
	alice := open("alice")
	require.Equal(t, "sid=alice|alice", eval("alice", alice, read), "alice, back within the period, lost her cookie or storage")

	n, err = inst.DisposeIdleContexts(start.Add(time.Hour + time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n, "bob's context, idle for the period, is the one disposed (alice and carol have tabs)")
	bob := open("bob")
	require.Equal(t, "|null", eval("bob", bob, read), "bob, back after the period, found his old cookie or storage")
	carol := open("carol")
	require.Equal(t, "sid=carol|carol", eval("carol", carol, read), "carol, who kept a tab, lost her cookie or storage")

	// Alice leaves: her context goes once she has had no tab for the period,
	// counted from her last tab's close.
	closeTab(alice)
	left := time.Now()
	n, err = inst.DisposeIdleContexts(left.Add(59 * time.Minute))
	require.NoError(t, err)
	require.Zero(t, n)
	n, err = inst.DisposeIdleContexts(left.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n, "alice's context, idle for the period, is disposed")
	require.Equal(t, "|null", eval("alice", open("alice"), read), "alice's cookie outlived her disposed context")
	_, err = c.Evaluate(as("bob"), carol, "1", nil)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err), "bob reached carol's tab after the sweeps: %v", err)
}
