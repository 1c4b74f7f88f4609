package executor_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
)

// These tests play a hostile tenant on a shared PinchTab, whose instance API
// has no notion of agents: bob names the tabs Switchyard opened for alice.

// requireTabNotFound checks that an outcome is the refusal the built-in
// instance gives for another agent's tab: 404 tab_not_found, permanent.
func requireTabNotFound(t *testing.T, o engine.Outcome, what string) {
	t.Helper()
	require.Error(t, o.Err, what)
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(o.Err), "%s: %v", what, o.Err)
	require.Equal(t, http.StatusNotFound, o.HTTPStatus, what)
	var coder engine.ErrorCoder
	require.True(t, errors.As(o.Err, &coder), "%s: %v", what, o.Err)
	require.Equal(t, "tab_not_found", coder.ErrorCode(), what)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), what)
	require.Empty(t, o.Result, what)
}

// TestBobCannotDriveAlicesPinchTabTabsByTheirIDs: alice's session tab and her
// pooled tab hold her page and what she typed; bob's tasks that name either
// tab, through every kind that reads or acts, fail 404 tab_not_found, as on
// the built-in instance, and none of them reaches the instance. Alice's own
// tasks still work her tabs, and a tab Switchyard did not open (an
// operator's) is anybody's to name, as before.
func TestBobCannotDriveAlicesPinchTabTabsByTheirIDs(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		ctx := context.Background()
		run := func(id, agent, session, tab, bound string, act *engine.Action) engine.Outcome {
			return bn.exec.Execute(ctx, &attempt{id: id, instance: "p", tab: bound,
				spec: &engine.TaskSpec{AgentID: agent, SessionKey: session, TabID: tab, Action: act}})
		}

		// Alice: a session tab with her page and her card number in it,
		// and a pooled tab (tab-less, no session) on her page too.
		o := run("alice-1", "alice", "bank", "", "", action("navigate", "", `{"url":"http://site.test/form"}`))
		require.NoError(t, o.Err)
		session := o.TabID
		require.NoError(t, run("alice-2", "alice", "bank", "", session, action("fill", "#name", `{"text":"ALICE-4111"}`)).Err)
		o = run("alice-3", "alice", "", "", "", action("navigate", "", `{"url":"http://site.test/form"}`))
		require.NoError(t, o.Err)
		pooled := o.TabID
		require.NotEqual(t, session, pooled)

		kinds := []*engine.Action{
			action("evaluate", "", `{"expression":"document.title"}`),
			action("url", "", ""),
			action("title", "", ""),
			action("text", "", ""),
			action("text", "#name", ""),
			action("snapshot", "", ""),
			action("screenshot", "", ""),
			action("pdf", "", ""),
			action("find", "", `{"query":"name"}`),
			action("wait", "#name", `{"timeout":100}`),
			action("fill", "#name", `{"text":"BOB"}`),
			action("click", "#next", ""),
			action("navigate", "", `{"url":"http://site.test/next"}`),
			action("back", "", ""),
			action("reload", "", ""),
			action("close", "", ""),
		}
		before := len(d.Requests())
		for _, tab := range []string{session, pooled} {
			for _, act := range kinds {
				what := "bob's " + act.Kind + " on alice's tab " + tab
				requireTabNotFound(t, run("bob-"+act.Kind, "bob", "", tab, "", act), what)
				// Bob with a session of his own names her tab too.
				requireTabNotFound(t, run("bob-s-"+act.Kind, "bob", "mine", tab, "", act), what+" (bob's session)")
			}
		}
		for _, r := range d.Requests()[before:] {
			require.NotContains(t, r, session, "bob's task reached alice's session tab: %s", r)
			require.NotContains(t, r, pooled, "bob's task reached alice's pooled tab: %s", r)
		}
		require.Contains(t, d.Tabs(), session, "alice's session tab is still open")
		require.Equal(t, "http://site.test/form", d.URLOf(session), "alice's session tab was not navigated")

		// Alice's own tasks still work both her tabs, by id or by session.
		o = run("alice-4", "alice", "bank", "", session, action("evaluate", "", `{"expression":"1"}`))
		require.NoError(t, o.Err)
		o = run("alice-5", "alice", "", session, "", action("text", "#name", ""))
		require.NoError(t, o.Err)
		o = run("alice-6", "alice", "", pooled, "", action("url", "", ""))
		require.NoError(t, o.Err)

		// A tab Switchyard did not open is anybody's to name, as before.
		op := d.OpenTab("", "http://site.test/form")
		o = run("bob-op", "bob", "", op, "", action("fill", "#name", `{"text":"BOB"}`))
		require.NoError(t, o.Err, "bob's task on an operator's tab")
		o = run("alice-op", "alice", "", op, "", action("url", "", ""))
		require.NoError(t, o.Err, "alice's task on an operator's tab")
		require.True(t, strings.Contains(string(o.Result), "site.test/form"), string(o.Result))
	})
}

// TestARestoredSessionTabIsStillItsAgents: after a restart the executor
// learns its sessions' tabs from the engine's stored bindings
// (AdoptSessions); each stays its agent's, and bob's task that names one
// fails 404 tab_not_found, while alice's still works it.
func TestARestoredSessionTabIsStillItsAgents(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{})
	tab := d.OpenTab("", "http://site.test/form")
	bn.exec.AdoptSessions([]engine.SessionBinding{{SessionKey: engine.ScopedSessionKey("alice", "bank"), InstanceID: "p", TabID: tab}})

	o := bn.exec.Execute(context.Background(), &attempt{id: "bob", instance: "p",
		spec: &engine.TaskSpec{AgentID: "bob", TabID: tab, Action: action("text", "#name", "")}})
	requireTabNotFound(t, o, "bob's text on alice's restored session tab")
	o = bn.exec.Execute(context.Background(), &attempt{id: "alice", instance: "p", tab: tab,
		spec: &engine.TaskSpec{AgentID: "alice", SessionKey: "bank", Action: action("url", "", "")}})
	require.NoError(t, o.Err)
}

// TestAnInstructionCannotNameAnotherAgentsTab: a chat instance may drive the
// browser Switchyard opened alice's tab in; bob's instruction that names her
// tab fails 404 tab_not_found and never reaches the chat instance.
func TestAnInstructionCannotNameAnotherAgentsTab(t *testing.T) {
	t.Parallel()
	browser := newFakeInstance(t, "a", "")
	chat := newFakeInstance(t, "c", "")
	chat.set(func(f *fakeInstance) { f.chat = "data: {\"answer\":\"done\"}\n\n" })
	bn := setup(t, executor.Options{}, instanceCfg("a", browser),
		executor.InstanceConfig{ID: "c", URL: chat.URL(), Kind: executor.KindChat})
	o := bn.exec.Execute(context.Background(), &attempt{id: "alice", instance: "a",
		spec: &engine.TaskSpec{AgentID: "alice", SessionKey: "bank", Action: action("navigate", "", `{"url":"http://site.test/"}`)}})
	require.NoError(t, o.Err)
	tab := o.TabID

	o = bn.exec.Execute(context.Background(), &attempt{id: "bob", instance: "c",
		spec: &engine.TaskSpec{AgentID: "bob", TabID: tab, Instruction: "read the page"}})
	requireTabNotFound(t, o, "bob's instruction on alice's tab")
	for _, r := range chat.requests() {
		require.NotEqual(t, "/chat", r.Path, "bob's instruction reached the chat instance")
	}
	o = bn.exec.Execute(context.Background(), &attempt{id: "alice-chat", instance: "c",
		spec: &engine.TaskSpec{AgentID: "alice", TabID: tab, Instruction: "read the page"}})
	require.NoError(t, o.Err, "alice's instruction on her own tab")
}
