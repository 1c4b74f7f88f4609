package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// These tests drive real headless Chromium through the executor, the way the
// engine does: attempts carry the placement and the session's bound tab, and
// the outcome's tab is what the next task of the session receives.

const formPage = `<!doctype html><html><head><title>Greeter</title></head><body>
<input id="name" type="text"> <button id="go" type="button">Go</button>
<div id="out"></div><div id="clicks">0</div>
<script>
let clicks = 0;
document.getElementById("go").addEventListener("click", () => {
  clicks++;
  document.getElementById("clicks").textContent = String(clicks);
  document.getElementById("out").textContent = "Hello, " + document.getElementById("name").value + "!";
});
</script></body></html>`

func testSite(t *testing.T) string {
	t.Helper()
	url, _ := testSiteWithBeacon(t)
	return url
}

// testSiteWithBeacon is testSite that also counts the requests a page makes
// to /beacon: a script that fetches it shows that it ran in the browser.
func testSiteWithBeacon(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var beacons atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/beacon" {
			beacons.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/big" {
			// 999,999 characters of text, then 😀 and é: the cut at
			// 1,000,000 falls after the emoji, never inside it.
			_, _ = io.WriteString(w, "<!doctype html><title>Big</title><body><pre>"+strings.Repeat("abcdefghi\n", 99_999)+"abcdefghi\U0001F600é</pre>")
			return
		}
		_, _ = io.WriteString(w, formPage)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &beacons
}

// startChromium starts the built-in Chromium with an action cap of 30 s:
// the cap bounds a request's whole answer, the probe of a hung page
// included, and a busy machine under the race detector takes many seconds
// to load a large page.
func startChromium(t *testing.T) *chromium.Instance {
	t.Helper()
	return startChromiumCapped(t, 30*time.Second)
}

// startChromiumCapped starts the built-in Chromium with an action cap of
// actionTimeout, skipping the test without Chromium.
func startChromiumCapped(t *testing.T, actionTimeout time.Duration) *chromium.Instance {
	t.Helper()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed (looked for /usr/bin/chromium and chromium on PATH): skipping the real-browser test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := chromium.Start(ctx, chromium.Options{ExecPath: path, ActionTimeout: actionTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// session plays the engine's part for one session: it passes the bound
// instance and tab to each attempt and binds what the outcome reports, and
// forgets the binding on ErrInstanceGone.
type session struct {
	key      string
	instance string
	tab      string
}

func (s *session) run(ctx context.Context, exec *executor.Executor, place string, act *engine.Action) engine.Outcome {
	inst := s.instance
	if inst == "" {
		inst = place
	}
	o := exec.Execute(ctx, &attempt{id: "task-" + act.Kind, instance: inst, tab: s.tab,
		spec: &engine.TaskSpec{AgentID: "agent-e2e", SessionKey: s.key, Action: act}})
	switch {
	case o.Err == nil:
		s.instance, s.tab = o.InstanceID, o.TabID
	case errors.Is(o.Err, engine.ErrInstanceGone):
		s.instance, s.tab = "", ""
	}
	return o
}

func textOf(t *testing.T, o engine.Outcome) string {
	t.Helper()
	require.NoError(t, o.Err)
	var res struct{ Text string }
	require.NoError(t, json.Unmarshal(o.Result, &res))
	return res.Text
}

func TestEndToEndFormInOneSessionTab(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "signup"}
	ctx := context.Background()

	steps := []*engine.Action{
		action("navigate", "", `{"url":"`+url+`"}`),
		action("fill", "css:#name", `{"text":"Ada"}`),
		action("click", "css:#go", ""),
	}
	var tabs []string
	for _, step := range steps {
		o := s.run(ctx, bn.exec, "local", step)
		require.NoError(t, o.Err, step.Kind)
		tabs = append(tabs, o.TabID)
	}
	o := s.run(ctx, bn.exec, "local", action("text", "#out", ""))
	require.Equal(t, "Hello, Ada!", textOf(t, o), "the session's tasks share the page's state")
	tabs = append(tabs, o.TabID)
	for _, tab := range tabs {
		require.Equal(t, tabs[0], tab, "every task of the session ran in the same tab")
	}

	// Another session gets its own tab, with its own page state.
	other := &session{key: "other"}
	o = other.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`))
	require.NoError(t, o.Err)
	require.NotEqual(t, tabs[0], o.TabID)
	o = other.run(ctx, bn.exec, "local", action("text", "#clicks", ""))
	require.Equal(t, "0", textOf(t, o))

	// A screenshot comes back as an artifact reference.
	o = s.run(ctx, bn.exec, "local", action("screenshot", "", ""))
	require.NoError(t, o.Err)
	require.Contains(t, string(o.Result), `"contentType":"image/png"`)
}

// TestRealChromiumAWaitThatRunsOutOfTimeFailsTheAttempt: the built-in
// Chromium answers, as PinchTab, 200 {"waited":false,"error"} when a wait's
// selector does not match in time; the attempt fails with wait_timeout.
func TestRealChromiumAWaitThatRunsOutOfTimeFailsTheAttempt(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "waits"}
	ctx := context.Background()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)

	o := s.run(ctx, bn.exec, "local", action("wait", "#name", `{"timeout":5000}`))
	require.NoError(t, o.Err, "a wait that is met")

	o = s.run(ctx, bn.exec, "local", action("wait", "#nothing-here", `{"timeout":300}`))
	require.Error(t, o.Err, "what it waited for never appeared")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
	var wt *pinchtab.WaitTimeoutError
	require.ErrorAs(t, o.Err, &wt)
	require.Equal(t, "wait_timeout", wt.ErrorCode())
	require.Equal(t, 200, o.HTTPStatus, "the instance answered the wait 200")
	require.Contains(t, o.Err.Error(), "timeout waiting for #nothing-here", "the instance's own text")
}

func TestCancellingMidActionStopsTheBrowserCall(t *testing.T) {
	t.Parallel()
	url, beacons := testSiteWithBeacon(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{AbortGrace: 100 * time.Millisecond}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "s"}
	require.NoError(t, s.run(context.Background(), bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)

	ctx, cancel := context.WithCancel(context.Background())
	at := &attempt{id: "slow", instance: s.instance, tab: s.tab, spec: &engine.TaskSpec{AgentID: "agent-e2e", SessionKey: "s", // the session's agent: its tab is its own
		Action: action("evaluate", "", `{"expression":"window.phase = 'started'; fetch('/beacon'); new Promise(() => {})"}`)}}
	done := make(chan engine.Outcome, 1)
	go func() { done <- bn.exec.Execute(ctx, at) }()
	waitfor.CheckFor(t, func() error {
		if beacons.Load() == 0 {
			return errors.New("the expression has not run in the browser yet")
		}
		return nil
	})
	cancel()
	var o engine.Outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling did not end the attempt")
	}
	require.Equal(t, policy.ClassCancelled, engine.ClassOf(o.Err))

	// The browser call was stopped: the tab answers the next task at once,
	// instead of being held until the instance's 30 s limit.
	quick, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer qcancel()
	o = s.run(quick, bn.exec, "local", action("evaluate", "", `{"expression":"window.phase"}`))
	require.NoError(t, o.Err)
	require.JSONEq(t, `{"result":"started"}`, string(o.Result))
}

func TestKilledInstanceIsMarkedUnhealthyAndWorkMovesToAHealthyOne(t *testing.T) {
	t.Parallel()
	url, beacons := testSiteWithBeacon(t)
	a, b := startChromium(t), startChromium(t)
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: 200 * time.Millisecond, RecheckAfter: 50 * time.Millisecond, UnhealthyAfter: 2})
	t.Cleanup(reg.Close)
	sink := newFakeSink()
	reg.SetSink(sink)
	for id, inst := range map[string]*chromium.Instance{"a": a, "b": b} {
		_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: id, URL: inst.URL(), Token: inst.Token()})
		require.NoError(t, err)
	}
	waitfor.CheckFor(t, func() error {
		if sink.healthyPick("a") == "" || sink.healthyPick("b") == "" {
			return errors.New("instances not healthy yet")
		}
		return nil
	})
	exec, err := executor.New(executor.Options{Registry: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })

	s := &session{key: "checkout"}
	ctx := context.Background()
	require.NoError(t, s.run(ctx, exec, "a", action("navigate", "", `{"url":"`+url+`"}`)).Err)
	require.Equal(t, "a", s.instance)

	// A long action is running on a when a dies.
	done := make(chan engine.Outcome, 1)
	go func() {
		done <- s.run(ctx, exec, "a", action("evaluate", "", `{"expression":"fetch('/beacon'); new Promise(r => setTimeout(r, 15000))"}`))
	}()
	waitfor.Eventually(t, "the long action runs in a's browser", func() bool { return beacons.Load() > 0 })
	require.NoError(t, a.Close())
	var o engine.Outcome
	select {
	case o = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the attempt on the killed instance did not end")
	}
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "the instance's fault, not the task's")
	require.ErrorIs(t, o.Err, engine.ErrMayHaveRun, "the expression had started: its connection broke after the request was sent")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err), "the task is retried")
	inst, _ := reg.Get(context.Background(), "a")
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "unhealthy at once, not after N checks")
	info, _ := sink.info("a")
	require.False(t, info.Healthy, "the engine was told")
	// The session's next action never reaches a: no doubt about it.
	o = s.run(ctx, exec, "a", action("click", "#go", ""))
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault)
	require.NotErrorIs(t, o.Err, engine.ErrMayHaveRun, o.Err.Error())

	// New work goes to a healthy instance, and the executor opens a tab there.
	s = &session{key: "checkout-2"}
	place := sink.healthyPick("a", "b")
	require.Equal(t, "b", place)
	o = s.run(ctx, exec, place, action("navigate", "", `{"url":"`+url+`"}`))
	require.NoError(t, o.Err)
	require.Equal(t, "b", o.InstanceID)
	require.NoError(t, s.run(ctx, exec, place, action("fill", "#name", `{"text":"Lin"}`)).Err)
	require.NoError(t, s.run(ctx, exec, place, action("click", "#go", "")).Err)
	require.Equal(t, "Hello, Lin!", textOf(t, s.run(ctx, exec, place, action("text", "#out", ""))))
}

func TestRealChromiumTablessTasksReuseOneTab(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	c, err := pinchtab.New(inst.URL(), inst.Token())
	require.NoError(t, err)
	before, err := c.Tabs(context.Background())
	require.NoError(t, err)
	for i := range 20 {
		o := bn.exec.Execute(context.Background(), &attempt{id: fmt.Sprint("t", i), instance: "local",
			spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"`+url+`"}`)}})
		require.NoError(t, o.Err)
	}
	after, err := c.Tabs(context.Background())
	require.NoError(t, err)
	require.Len(t, after, len(before)+1, "20 tab-less tasks, one pooled tab")
}

func TestRealChromiumLostSessionTabFailsWithSessionLost(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "s"}
	ctx := context.Background()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)
	c, err := pinchtab.New(inst.URL(), inst.Token())
	require.NoError(t, err)
	require.NoError(t, c.CloseTab(ctx, s.tab)) // behind Switchyard's back
	before, err := c.Tabs(ctx)
	require.NoError(t, err)

	o := s.run(ctx, bn.exec, "local", action("fill", "#name", `{"text":"Ada"}`))
	require.ErrorIs(t, o.Err, executor.ErrSessionLost)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), "failed at once, not retried in a blank tab")
	after, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Len(t, after, len(before), "no tab was opened in its place")
}

func TestRealChromiumLostSessionTabIsReplayedWhenTheSessionAskedForIt(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	ctx := context.Background()
	var tab string
	step := func(act *engine.Action) engine.Outcome {
		o := bn.exec.Execute(ctx, &attempt{id: "task-" + act.Kind, instance: "local", tab: tab,
			spec: &engine.TaskSpec{AgentID: "agent-e2e", SessionKey: "replayed", SessionReplay: true, Action: act}})
		if o.Err == nil {
			tab = o.TabID
		}
		return o
	}
	require.NoError(t, step(action("navigate", "", `{"url":"`+url+`"}`)).Err)
	require.NoError(t, step(action("fill", "#name", `{"text":"Grace"}`)).Err)
	require.Equal(t, "0", textOf(t, step(action("text", "#clicks", ""))))
	lost := tab
	c, err := pinchtab.New(inst.URL(), inst.Token())
	require.NoError(t, err)
	require.NoError(t, c.CloseTab(ctx, lost)) // behind Switchyard's back

	o := step(action("click", "#go", ""))
	require.NoError(t, o.Err, "replayed, not SESSION_LOST")
	require.NotEqual(t, lost, o.TabID)
	require.Equal(t, "Hello, Grace!", textOf(t, step(action("text", "#out", ""))), "the navigate and the fill were replayed in the new tab")
	require.Equal(t, "1", textOf(t, step(action("text", "#clicks", ""))), "the read was not replayed, and the click ran once")
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Len(t, tabs, 1, "one tab: the replay's")
}

// abortIgnorer is an instance that keeps working after the client went away:
// a proxy in front of the built-in instance that finishes every request it
// forwards. upstreamDone counts the answers the instance gave.
type abortIgnorer struct {
	srv          *httptest.Server
	started      atomic.Int32
	upstreamDone atomic.Int32
}

func newAbortIgnorer(t *testing.T, upstream string) *abortIgnorer {
	u, err := neturl.Parse(upstream)
	require.NoError(t, err)
	a := &abortIgnorer{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = func(*http.Response) error {
		a.upstreamDone.Add(1)
		return nil
	}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && r.URL.Path != "/tabs" {
			a.started.Add(1)
		}
		proxy.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func TestRealChromiumCancelHoldsTheSlotUntilTheInstanceEndsTheAction(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	ig := newAbortIgnorer(t, inst.URL())
	bn := setup(t, executor.Options{AbortGrace: time.Minute}, executor.InstanceConfig{ID: "local", URL: ig.srv.URL, Token: inst.Token()})
	s := &session{key: "s"}
	require.NoError(t, s.run(context.Background(), bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)

	ctx, cancel := context.WithCancel(context.Background())
	startedBefore := ig.started.Load()
	doneBefore := ig.upstreamDone.Load()
	type result struct {
		o            engine.Outcome
		upstreamDone int32
	}
	done := make(chan result, 1)
	go func() {
		o := s.run(ctx, bn.exec, "local", action("evaluate", "", `{"expression":"new Promise(r => setTimeout(() => r('finished'), 1500))"}`))
		done <- result{o, ig.upstreamDone.Load()}
	}()
	waitfor.CheckFor(t, func() error {
		if ig.started.Load() == startedBefore {
			return errors.New("the action has not reached the instance")
		}
		return nil
	})
	cancel()
	r := <-done
	require.Equal(t, doneBefore+1, r.upstreamDone, "the attempt ended only once the instance had answered")
	require.NoError(t, r.o.Err, "the instance's answer is the attempt's")
	require.JSONEq(t, `{"result":"finished"}`, string(r.o.Result))
	got, _ := bn.reg.Get(context.Background(), "local")
	require.Zero(t, got.InFlight)
}

// TestTheTextOfAPageIsBoundedByMaxChars: a text action's result carries at
// most params.maxChars characters (default executor.TextMaxChars), cut on
// a character, and says when it was cut and how long the text was.
func TestTheTextOfAPageIsBoundedByMaxChars(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{MaxInlineResult: 8 << 20}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "big"}
	ctx := context.Background()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`/big"}`)).Err)

	type textResult struct {
		Text       string
		Truncated  bool
		TotalChars int
	}
	read := func(params string) textResult {
		o := s.run(ctx, bn.exec, "local", action("text", "", params))
		require.NoError(t, o.Err)
		var r textResult
		require.NoError(t, json.Unmarshal(o.Result, &r))
		return r
	}
	r := read(``)
	require.True(t, r.Truncated)
	require.Equal(t, 1_000_001, r.TotalChars)
	require.Equal(t, executor.TextMaxChars, len([]rune(r.Text)))
	require.True(t, strings.HasSuffix(r.Text, "abcdefghi\U0001F600"), "cut after the emoji: %q", r.Text[len(r.Text)-12:])

	r = read(`{"maxChars": 12}`)
	require.Equal(t, textResult{Text: "abcdefghi\nab", Truncated: true, TotalChars: 1_000_001}, r)

	r = read(`{"maxChars": 1000000}`)
	require.Equal(t, 1_000_000, len([]rune(r.Text)))

	o := s.run(ctx, bn.exec, "local", action("text", "title", `{"maxChars": 5}`))
	require.NoError(t, o.Err, "a short text is not cut")
	require.NotContains(t, string(o.Result), "truncated\":true")

	o = s.run(ctx, bn.exec, "local", action("text", "", `{"maxChars": 0}`))
	require.Error(t, o.Err)
	require.ErrorContains(t, o.Err, "params.maxChars must be an integer within 1..1000000")
}

// TestErrorsOnTheBuiltInChromiumSaySo: an instance's error names the kind
// of instance the task ran on — "chromium click (POST …)" on the built-in
// Chromium, not "pinchtab click" (PinchTab's own are in
// TestPinchTabsErrorCodesAndFlagClassify).
func TestErrorsOnTheBuiltInChromiumSaySo(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromium(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "errors"}
	ctx := context.Background()
	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)

	o := s.run(ctx, bn.exec, "local", action("click", "#nope", ""))
	require.Error(t, o.Err)
	require.Contains(t, o.Err.Error(), "chromium click (POST /tabs/"+s.tab+"/action): 404 Not Found [element_not_found]")
	require.NotContains(t, o.Err.Error(), "pinchtab")

	o = s.run(ctx, bn.exec, "local", action("wait", "", `{"selector":"#never","timeout":100}`))
	require.Error(t, o.Err)
	require.Contains(t, o.Err.Error(), "chromium wait (POST /tabs/"+s.tab+"/wait): the condition was not met")
}

// TestRealChromiumAHungPageCostsItsSessionOneAttemptNotItsTab: a page whose
// script never yields holds its renderer; the built-in Chromium finds that
// out when an action's time runs out (the page then does not answer a
// trivial script either), closes the tab and answers page_unresponsive. The
// session's task fails at once for good (its page is lost; a retry in a
// blank tab could not do what it asked), and the session's next task runs
// in a new tab instead of timing out on the dead one. The instance's own
// cap is far above the attempt's timeout: each request says how long its
// attempt has left, and the instance answers within it.
func TestRealChromiumAHungPageCostsItsSessionOneAttemptNotItsTab(t *testing.T) {
	t.Parallel()
	url := testSite(t)
	inst := startChromiumCapped(t, 2*time.Minute)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token()})
	s := &session{key: "wedged"}
	ctx, cancelRun := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelRun()

	require.NoError(t, s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`)).Err)
	hungTab := s.tab
	o := s.run(ctx, bn.exec, "local", action("evaluate", "", `{"expression":"setTimeout(() => { for (;;) {} }, 0); 'armed'"}`))
	require.NoError(t, o.Err, "the script that hangs the page runs after the answer")

	start := time.Now()
	attemptCtx, cancelAttempt := context.WithTimeout(ctx, 12*time.Second)
	o = s.run(attemptCtx, bn.exec, "local", action("text", "#out", ""))
	cancelAttempt()
	require.Error(t, o.Err, "the page no longer answers")
	require.Less(t, time.Since(start), time.Minute, "the attempt ends by its timeout")
	var pe *pinchtab.Error
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "the error says the page stopped responding: %v", o.Err)
	require.Contains(t, o.Err.Error(), "stopped responding")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), "repeating the task on a blank tab cannot help the session")
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone, "the session's binding goes")
	require.NotContains(t, o.Err.Error(), "instance gone", "the instance is fine")
	require.Empty(t, s.tab, "the session is bound to no tab")

	// The session's next task gets a new tab, and works.
	o = s.run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`))
	require.NoError(t, o.Err, "the session goes on in a new tab")
	require.NotEqual(t, hungTab, o.TabID)
	o = s.run(ctx, bn.exec, "local", action("text", "#clicks", ""))
	require.Equal(t, "0", textOf(t, o))

	// A task that got its tab for itself loses nothing with it: it may run
	// again, in another tab.
	attemptCtx, cancelAttempt = context.WithTimeout(ctx, 12*time.Second)
	defer cancelAttempt()
	o = bn.exec.Execute(attemptCtx, &attempt{id: "task-loose", instance: "local",
		spec: &engine.TaskSpec{AgentID: "agent-e2e", Action: action("evaluate", "", `{"expression":"for (;;) {}"}`)}})
	require.Error(t, o.Err)
	require.ErrorAs(t, o.Err, &pe)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "%v", o.Err)
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err), "its retry runs in a new tab")
	require.Empty(t, o.TabID, "nothing binds to the closed tab")
	// The text says what happens: the task may run again, in a new tab;
	// the instance is fine.
	require.Contains(t, o.Err.Error(), "(the task may run again in a new tab)")
	require.NotContains(t, o.Err.Error(), "not retryable")
	require.NotContains(t, o.Err.Error(), "instance gone")

	o = (&session{}).run(ctx, bn.exec, "local", action("navigate", "", `{"url":"`+url+`"}`))
	require.NoError(t, o.Err, "the instance stays usable")
}
