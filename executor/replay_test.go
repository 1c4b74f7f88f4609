package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// sessionStep runs one task of session "s" in tab (the session's, or "" for
// its first task) and returns its outcome.
func sessionStep(t *testing.T, bn bundle, id, tab string, replay bool, act *engine.Action) engine.Outcome {
	t.Helper()
	return bn.exec.Execute(context.Background(), &attempt{id: id, instance: "p", tab: tab,
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", SessionReplay: replay, Action: act}})
}

func outText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var out struct{ Text string }
	require.NoError(t, json.Unmarshal(res, &out), string(res))
	return out.Text
}

func TestASessionThatAskedForReplayIsRebuiltInANewTab(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
		require.NoError(t, o.Err)
		first := o.TabID
		require.NoError(t, sessionStep(t, bn, "fill", first, true, action("fill", "#name", `{"text":"Ada"}`)).Err)
		require.NoError(t, sessionStep(t, bn, "read", first, true, action("title", "", "")).Err)
		d.CloseTab(first) // behind Switchyard's back: the page and its filled field are gone

		o = sessionStep(t, bn, "go", first, true, action("click", "#go", ""))
		require.NoError(t, o.Err, "replayed instead of SESSION_LOST")
		require.NotEqual(t, first, o.TabID, "in a new tab, which the session binds to")
		o = sessionStep(t, bn, "check", o.TabID, true, action("text", "#out", ""))
		require.NoError(t, o.Err)
		require.Equal(t, "Hello, Ada!", outText(t, o.Result), "the navigate and the fill were replayed before the click")
		require.Len(t, d.Tabs(), 1)
	})
}

func TestASessionWhoseFirstTaskDidNotAskForReplayIsLost(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{})
	o := sessionStep(t, bn, "open", "", false, action("navigate", "", `{"url":"http://site.test/form"}`))
	require.NoError(t, o.Err)
	require.NoError(t, sessionStep(t, bn, "fill", o.TabID, true, action("fill", "#name", `{"text":"Ada"}`)).Err)
	d.CloseTab(o.TabID)
	o = sessionStep(t, bn, "go", o.TabID, true, action("click", "#go", ""))
	require.ErrorIs(t, o.Err, executor.ErrSessionLost)
	require.ErrorContains(t, o.Err, "replay: the session's log is not complete")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.Empty(t, d.Tabs(), "no blank tab was left behind")
}

func TestAReplayThatFailsIsSessionLostAndLeavesNoTab(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{})
	o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
	require.NoError(t, o.Err)
	require.NoError(t, sessionStep(t, bn, "fill", o.TabID, true, action("fill", "#name", `{"text":"Ada"}`)).Err)
	d.CloseTab(o.TabID)
	d.SetPage("http://site.test/form", pinchtabtest.Page{Title: "Redesigned"}) // #name is gone from the page
	o = sessionStep(t, bn, "go", o.TabID, true, action("click", "#go", ""))
	require.ErrorIs(t, o.Err, executor.ErrSessionLost)
	require.ErrorContains(t, o.Err, "action 2 of 2 (fill) failed")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.Empty(t, d.Tabs(), "the replay's tab was closed")
	// The session starts over: its log went with the failure.
	o = sessionStep(t, bn, "again", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
	require.NoError(t, o.Err)
}

// TestRemovingTheInstanceOfAReplayedSessionRebuildsItElsewhere runs a
// session that asked for replay through the real engine: its instance is
// removed, and its next task runs on the other instance, on the page its
// earlier tasks built there again.
func TestRemovingTheInstanceOfAReplayedSessionRebuildsItElsewhere(t *testing.T) {
	t.Parallel()
	p, q := newDouble(t, pinchtabtest.ModeServer), newDouble(t, pinchtabtest.ModeServer)
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 20 * time.Millisecond})
	t.Cleanup(reg.Close)
	exec, err := executor.New(executor.Options{Registry: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec, Clock: clock.Real{}, TabLocator: reg, PlaceOnInstances: true})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	reg.SetSink(eng)
	ctx := context.Background()
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "p", URL: p.URL(), Token: doubleToken, Kind: executor.KindServer})
	require.NoError(t, err)
	run := func(a *engine.Action) *engine.Task {
		t.Helper()
		task, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", SessionReplay: true, Action: a})
		require.NoError(t, err)
		var got *engine.Task
		waitfor.CheckFor(t, func() error {
			got, _ = eng.Task(ctx, task.ID)
			if !got.State.Terminal() {
				return fmt.Errorf("state %s (%s)", got.State, got.Reason)
			}
			return nil
		})
		return got
	}
	require.Equal(t, engine.StateSucceeded, run(action("navigate", "", `{"url":"http://site.test/form"}`)).State)
	require.Equal(t, engine.StateSucceeded, run(action("fill", "#name", `{"text":"Ada"}`)).State)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "q", URL: q.URL(), Token: doubleToken, Kind: executor.KindServer})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "q"); inst.Health != executor.HealthHealthy {
			return errors.New("q is not healthy yet")
		}
		return nil
	})

	require.NoError(t, reg.Remove(context.Background(), "p"))

	got := run(action("click", "#go", ""))
	require.Equal(t, engine.StateSucceeded, got.State, got.Error)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, "q", got.Attempts[0].InstanceID)
	got = run(action("text", "#out", ""))
	require.Equal(t, engine.StateSucceeded, got.State, got.Error)
	require.Equal(t, "q", got.Attempts[0].InstanceID, "the session stays on its new tab")
	require.Equal(t, "Hello, Ada!", outText(t, got.Result))
}

func TestASessionToReplayWaitsForABrowserAsAnInstanceFault(t *testing.T) {
	t.Parallel()
	bn, _ := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{})
	o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
	require.NoError(t, o.Err)
	require.NoError(t, bn.reg.Remove(context.Background(), "p")) // the only browser
	o = sessionStep(t, bn, "go", o.TabID, true, action("click", "#go", ""))
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "not the session's fault: it waits for a browser")
	require.NotErrorIs(t, o.Err, executor.ErrSessionLost)
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "the lost binding stays, for the replay")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
	require.ErrorContains(t, o.Err, "no healthy browser instance has room")
}

func TestAReplayRepeatsAClickThatNavigatedWithoutSayingSo(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{})
	o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
	require.NoError(t, o.Err)
	tab := o.TabID
	o = sessionStep(t, bn, "next", tab, true, action("click", "#next", ""))
	require.ErrorContains(t, o.Err, "navigation_changed", "the click navigated without waitNav: the task fails")
	require.NoError(t, sessionStep(t, bn, "back", tab, true, action("back", "", "")).Err)
	d.CloseTab(tab)
	// The page went to /next and back: a replay must do the same, or its
	// back would leave the form.
	o = sessionStep(t, bn, "name", tab, true, action("fill", "#name", `{"text":"Ada"}`))
	require.NoError(t, o.Err, "the replay repeated the navigating click, with waitNav, then back")
}

// A close task naming a session's tab, from outside the session, loses the
// session as a close behind Switchyard's back does: replayed when it asked,
// SESSION_LOST when it did not. The session's own close ends it: its replay
// log goes, so that a later loss does not rebuild the closed page.
func TestAClosingTaskFromOutsideASessionLosesIt(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		closeTab := func(tab, session string) {
			t.Helper()
			o := bn.exec.Execute(context.Background(), &attempt{id: "close-" + tab, instance: "p",
				spec: &engine.TaskSpec{AgentID: "x", SessionKey: session, TabID: tab, Action: action("close", "", "")}})
			require.NoError(t, o.Err)
		}
		for _, replay := range []bool{true, false} {
			o := sessionStep(t, bn, "open", "", replay, action("navigate", "", `{"url":"http://site.test/form"}`))
			require.NoError(t, o.Err)
			first := o.TabID
			require.NoError(t, sessionStep(t, bn, "fill", first, replay, action("fill", "#name", `{"text":"Ada"}`)).Err)
			unbound := len(bn.sink.unboundSessions())
			closeTab(first, "")
			require.Len(t, bn.sink.unboundSessions(), unbound, "its binding stays: its next task finds the tab gone")
			o = sessionStep(t, bn, "go", first, replay, action("click", "#go", ""))
			if !replay {
				require.ErrorIs(t, o.Err, executor.ErrSessionLost, "not run in a blank tab")
				require.Empty(t, d.Tabs())
				continue
			}
			require.NoError(t, o.Err, "replayed instead of run in a blank tab")
			require.NotEqual(t, first, o.TabID)
			o = sessionStep(t, bn, "check", o.TabID, true, action("text", "#out", ""))
			require.NoError(t, o.Err)
			require.Equal(t, "Hello, Ada!", outText(t, o.Result))
			closeTab(o.TabID, "s") // the session's own: it ends
			require.Empty(t, d.Tabs())
			require.Contains(t, bn.sink.unboundSessions(), engine.ScopedSessionKey("x", "s"), "unbound: its next task starts over")
		}

		// After its own close the session starts over: a loss of its new
		// tab replays what it did since, not the closed page.
		o := sessionStep(t, bn, "reopen", "", true, action("title", "", ""))
		require.NoError(t, o.Err)
		d.CloseTab(o.TabID)
		o = sessionStep(t, bn, "again", o.TabID, true, action("url", "", ""))
		require.NoError(t, o.Err)
		require.NotContains(t, string(o.Result), "site.test", "nothing of the closed session was replayed")
	})
}

// TestASessionWhoseLogOutgrowsItsBytesIsNotReplayed: the replay log is
// bounded in bytes as well as in actions. A fill whose text would take the
// log past MaxReplayBytes marks the session not replayable (the session goes
// on in its tab), and a later replay fails with SESSION_LOST naming the
// bound; a session within it is replayed.
func TestASessionWhoseLogOutgrowsItsBytesIsNotReplayed(t *testing.T) {
	t.Parallel()
	const limit = 4 << 10
	fill := func(n int) *engine.Action {
		params, err := json.Marshal(map[string]string{"text": strings.Repeat("a", n)})
		require.NoError(t, err)
		return action("fill", "#name", string(params))
	}
	t.Run("past the bound", func(t *testing.T) {
		t.Parallel()
		bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{MaxReplayBytes: limit})
		o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
		require.NoError(t, o.Err)
		tab := o.TabID
		require.NoError(t, sessionStep(t, bn, "small", tab, true, fill(limit/2)).Err)
		o = sessionStep(t, bn, "large", tab, true, fill(limit/2))
		require.NoError(t, o.Err, "the fill itself runs: only the log is bounded")
		require.NoError(t, sessionStep(t, bn, "go", tab, true, action("click", "#go", "")).Err, "the session goes on in its tab")
		d.CloseTab(tab)

		o = sessionStep(t, bn, "again", tab, true, action("click", "#go", ""))
		require.ErrorIs(t, o.Err, executor.ErrSessionLost)
		require.ErrorContains(t, o.Err, fmt.Sprintf("its fill action would have brought its log to %d bytes, past the executor's maxReplayBytes (%d)",
			len("navigate")+len(`{"url":"http://site.test/form"}`)+2*(len("fill")+len("#name")+len(`{"text":""}`)+limit/2), limit))
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
		require.Empty(t, d.Tabs(), "no blank tab was left behind")
	})
	t.Run("within it", func(t *testing.T) {
		t.Parallel()
		bn, d := setupDouble(t, pinchtabtest.ModeBridge, executor.Options{MaxReplayBytes: limit})
		o := sessionStep(t, bn, "open", "", true, action("navigate", "", `{"url":"http://site.test/form"}`))
		require.NoError(t, o.Err)
		tab := o.TabID
		require.NoError(t, sessionStep(t, bn, "fill", tab, true, fill(limit/2)).Err)
		d.CloseTab(tab)
		o = sessionStep(t, bn, "go", tab, true, action("click", "#go", ""))
		require.NoError(t, o.Err, "replayed")
		require.NotEqual(t, tab, o.TabID)
	})
}
