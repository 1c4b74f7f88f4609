package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// These tests play a hostile tenant on a shared built-in Chromium: bob, with
// tasks of his own, tries to read what alice's tasks left in the browser —
// her page, what she typed into it, her cookies and storage — through every
// action kind that reads.

// tenant runs one agent's tasks the way the engine would: tab-less tasks
// placed on the instance, and a session's tasks in the tab its first task
// was given.
type tenant struct {
	agent string
	exec  *executor.Executor
	tabs  map[string][2]string // session → instance, tab
	n     int
}

func (tn *tenant) run(t *testing.T, session string, act *engine.Action) engine.Outcome {
	t.Helper()
	tn.n++
	bound := tn.tabs[session]
	inst := bound[0]
	if inst == "" {
		inst = "local"
	}
	o := tn.exec.Execute(context.Background(), &attempt{id: tn.agent + "-" + act.Kind + "-" + string(rune('a'+tn.n)), instance: inst, tab: bound[1],
		spec: &engine.TaskSpec{AgentID: tn.agent, SessionKey: session, Action: act}})
	if o.Err == nil && session != "" && bound[1] == "" {
		tn.tabs[session] = [2]string{o.InstanceID, o.TabID}
	}
	return o
}

func (tn *tenant) read(t *testing.T, session string, act *engine.Action) string {
	t.Helper()
	o := tn.run(t, session, act)
	require.NoError(t, o.Err, "%s: %s", tn.agent, act.Kind)
	return string(o.Result)
}

// blank reports whether a screenshot artifact shows one colour only: a blank
// page, not a form somebody filled.
func blank(t *testing.T, arts artifact.Store, result []byte) bool {
	t.Helper()
	var ref struct{ Artifact struct{ ID string } }
	require.NoError(t, json.Unmarshal(result, &ref), string(result))
	_, rc, err := arts.Open(context.Background(), ref.Artifact.ID)
	require.NoError(t, err)
	defer rc.Close()
	data, err := io.ReadAll(rc)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	b := img.Bounds()
	first := img.At(b.Min.X, b.Min.Y)
	r0, g0, b0, _ := first.RGBA()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r != r0 || g != g0 || bl != b0 {
				return false
			}
		}
	}
	return true
}

const secret = "ALICE-SECRET-COOKIE"

func isolationSite(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, formPage)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAnotherAgentFindsNothingOfAlicesInAPooledTab: alice's tab-less tasks
// leave a page with her secret in its URL, a filled field, a cookie and
// local storage; then bob's tab-less tasks, which the pool would have sent
// to her tab, read the page (evaluate, url, text, screenshot) and find a
// blank page; on her site, bob sees none of her cookies or storage. Alice's
// own next tab-less task starts on a blank page too.
func TestAnotherAgentFindsNothingOfAlicesInAPooledTab(t *testing.T) {
	t.Parallel()
	site := isolationSite(t)
	inst := startChromium(t)
	arts := artifact.NewMemory()
	bn := setup(t, executor.Options{Artifacts: arts, MaxIdleTabs: 4}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token(), Capacity: 4})
	alice := &tenant{agent: "alice", exec: bn.exec, tabs: map[string][2]string{}}
	bob := &tenant{agent: "bob", exec: bn.exec, tabs: map[string][2]string{}}

	// Alice, tab-less: her page, her field, her cookie and storage, in one
	// pooled tab (a tab-less task's tab goes back to the pool).
	o := alice.run(t, "", action("evaluate", "", `{"expression":"1"}`))
	require.NoError(t, o.Err)
	aliceTab := o.TabID
	o = alice.run(t, "", action("navigate", "", `{"url":"`+site+`/tour/sign-in?session=`+secret+`"}`))
	require.NoError(t, o.Err)
	require.Equal(t, aliceTab, o.TabID, "alice's tab-less tasks use her pooled tab")
	require.NoError(t, bn.exec.Execute(context.Background(), &attempt{id: "alice-fill", instance: "local", tab: aliceTab,
		spec: &engine.TaskSpec{AgentID: "alice", TabID: aliceTab, Action: action("fill", "css:#name", `{"text":"alice-card-4111111111111111"}`)}}).Err)
	require.NoError(t, bn.exec.Execute(context.Background(), &attempt{id: "alice-store", instance: "local", tab: aliceTab,
		spec: &engine.TaskSpec{AgentID: "alice", TabID: aliceTab, Action: action("evaluate", "",
			`{"expression":"document.cookie = 'sid=`+secret+`; path=/'; localStorage.setItem('card', '`+secret+`'); 1"}`)}}).Err)

	// Bob, tab-less, through every kind that reads.
	got := bob.read(t, "", action("evaluate", "", `{"expression":"location.href + ' | ' + (document.querySelector('#name')||{}).value"}`))
	require.NotContains(t, got, secret, "bob's evaluate read alice's page")
	require.NotContains(t, got, "alice-card", "bob's evaluate read alice's form")
	require.Contains(t, got, "about:blank")
	got = bob.read(t, "", action("url", "", ""))
	require.NotContains(t, got, secret, "bob's url read alice's page")
	got = bob.read(t, "", action("text", "", ""))
	require.NotContains(t, got, secret, "bob's text read alice's page")
	require.NotContains(t, got, "Greeter", "bob's text read alice's page")
	o = bob.run(t, "", action("screenshot", "", ""))
	require.NoError(t, o.Err)
	require.True(t, blank(t, arts, o.Result), "bob's screenshot shows a page, not a blank tab")
	require.NotEqual(t, aliceTab, o.TabID, "bob was given alice's tab")

	// Bob on alice's site, in a session of his own: none of her cookies or
	// storage.
	require.NoError(t, bob.run(t, "probe", action("navigate", "", `{"url":"`+site+`/tour/sign-in"}`)).Err)
	got = bob.read(t, "probe", action("evaluate", "", `{"expression":"document.cookie + ' | ' + localStorage.getItem('card')"}`))
	require.NotContains(t, got, secret, "bob read alice's cookie or storage on her site")

	// Alice's next tab-less task is in her pooled tab, blank, while her
	// cookie and storage are still hers.
	o = alice.run(t, "", action("evaluate", "", `{"expression":"location.href + ' | ' + (document.querySelector('#name')||{}).value"}`))
	require.NoError(t, o.Err)
	require.Equal(t, aliceTab, o.TabID, "alice's tab-less task reuses her pooled tab")
	require.Contains(t, string(o.Result), "about:blank", "a pooled tab starts blank")
	require.NotContains(t, string(o.Result), "alice-card")
	require.NoError(t, alice.run(t, "check", action("navigate", "", `{"url":"`+site+`/"}`)).Err)
	got = alice.read(t, "check", action("evaluate", "", `{"expression":"document.cookie + ' | ' + localStorage.getItem('card')"}`))
	require.Contains(t, got, "sid="+secret, "alice keeps her cookie")
	require.Contains(t, got, "| "+secret, "alice keeps her storage")
}

// TestBobCannotReachAlicesTabByItsID: a task of bob that names alice's tab
// (its id learnt somehow) finds no such tab: the built-in instance answers
// only alice's requests for the tabs of her browser context.
func TestBobCannotReachAlicesTabByItsID(t *testing.T) {
	t.Parallel()
	site := isolationSite(t)
	inst := startChromium(t)
	arts := artifact.NewMemory()
	bn := setup(t, executor.Options{Artifacts: arts}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token(), Capacity: 4})
	alice := &tenant{agent: "alice", exec: bn.exec, tabs: map[string][2]string{}}
	require.NoError(t, alice.run(t, "bank", action("navigate", "", `{"url":"`+site+`/?acct=ALICE-BANK"}`)).Err)
	tab := alice.tabs["bank"][1]

	for _, act := range []*engine.Action{
		action("evaluate", "", `{"expression":"location.href"}`),
		action("url", "", ""),
		action("text", "", ""),
		action("screenshot", "", ""),
		action("navigate", "", `{"url":"`+site+`/"}`),
		action("close", "", ""),
	} {
		o := bn.exec.Execute(context.Background(), &attempt{id: "bob-" + act.Kind, instance: "local", tab: tab,
			spec: &engine.TaskSpec{AgentID: "bob", TabID: tab, Action: act}})
		require.Error(t, o.Err, "bob's %s on alice's tab", act.Kind)
		require.Equal(t, 404, pinchtab.StatusOf(o.Err), "bob's %s: %v", act.Kind, o.Err)
		require.NotContains(t, string(o.Result), "ALICE-BANK")
	}
	got := alice.read(t, "bank", action("url", "", ""))
	require.Contains(t, got, "acct=ALICE-BANK", "alice's tab is still hers, untouched")
}
