package executor_test

// Fidelity to a real PinchTab: the executor and the registry against
// pinchtabtest, a double built from PinchTab's documented API.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

const doubleToken = "double-secret"

// form is the tour's page: a name field, a button that greets, a link away.
var form = pinchtabtest.Page{Title: "Sign in", Elements: map[string]pinchtabtest.Element{
	"#name": {},
	"#go": {OnClick: func(p map[string]*pinchtabtest.Element) {
		p["#out"].Text = "Hello, " + p["#name"].Value + "!"
	}},
	"#out":  {},
	"#next": {Href: "http://site.test/next"},
}}

func newDouble(t *testing.T, mode pinchtabtest.Mode) *pinchtabtest.Server {
	d := pinchtabtest.New(t, pinchtabtest.Options{Mode: mode, Token: doubleToken})
	d.SetPage("http://site.test/form", form)
	d.SetPage("http://site.test/next", pinchtabtest.Page{Title: "Next"})
	return d
}

func kindOf(mode pinchtabtest.Mode) executor.Kind {
	if mode == pinchtabtest.ModeServer {
		return executor.KindServer
	}
	return executor.KindInstance
}

// setupDouble registers a double as instance "p" and waits for it to be
// healthy.
func setupDouble(t *testing.T, mode pinchtabtest.Mode, o executor.Options) (bundle, *pinchtabtest.Server) {
	d := newDouble(t, mode)
	bn := setup(t, o, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: kindOf(mode), Capacity: 8})
	return bn, d
}

func modes(t *testing.T, f func(t *testing.T, mode pinchtabtest.Mode)) {
	for name, mode := range map[string]pinchtabtest.Mode{"bridge": pinchtabtest.ModeBridge, "server": pinchtabtest.ModeServer} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, mode)
		})
	}
}

func TestHealthCountsTabsFromTheTabList(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		d.OpenTab("", "http://site.test/form")
		d.OpenTab("", "http://site.test/next")
		d.OpenTab("", "about:blank")
		inst, err := bn.reg.CheckNow(context.Background(), "p")
		require.NoError(t, err)
		require.Equal(t, executor.HealthHealthy, inst.Health)
		require.Equal(t, 2, inst.Tabs, "a server's /health has no tab count: the tab list has, and PinchTab lists no blank tab")
	})
}

func TestAnInstanceIsReadyOnlyWhenItsBrowserRuns(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		ctx := context.Background()
		d.SetPhase("", pinchtabtest.PhaseStarting)
		inst, _ := bn.reg.CheckNow(ctx, "p")
		require.Equal(t, executor.HealthUnhealthy, inst.Health, "one check is enough: the instance said so")
		require.Contains(t, inst.LastError, "start")
		o := bn.exec.Execute(ctx, &attempt{id: "t", instance: "p", spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "no attempt budget is spent on a starting browser")

		d.SetPhase("", pinchtabtest.PhaseRunning)
		inst, _ = bn.reg.CheckNow(ctx, "p")
		require.Equal(t, executor.HealthHealthy, inst.Health)
		o = bn.exec.Execute(ctx, &attempt{id: "t", instance: "p", spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		require.NoError(t, o.Err)
	})
}

func TestAWrongTokenIsAnInstanceFaultThatNamesThe401(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		d := newDouble(t, mode)
		tab := d.OpenTab("", "http://site.test/form")
		bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: "wrong", Kind: kindOf(mode)})
		inst, _ := bn.reg.Get(context.Background(), "p")
		require.Equal(t, executor.HealthUnhealthy, inst.Health, "/health answers without a token; the tab list does not")
		require.Contains(t, inst.LastError, "401")

		o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", InstanceID: "p", TabID: tab, Action: action("text", "#out", "")}})
		require.ErrorIs(t, o.Err, engine.ErrInstanceFault)
		require.Contains(t, o.Err.Error(), "unhealthy")
		require.Contains(t, o.Err.Error(), "401 Unauthorized [bad_token]", "the instance's own reason")
	})
}

func TestAFailingInstanceGoesUnhealthyAtOnceAndBackOnlyWhenItCanAct(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeServer, executor.Options{})
	ctx := context.Background()
	tab := d.OpenTab("", "http://site.test/form")
	run := func(tab string) engine.Outcome {
		return bn.exec.Execute(ctx, &attempt{id: "t", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", "")}})
	}
	require.NoError(t, run(tab).Err)
	other := d.OpenTab("", "http://site.test/form")
	// PinchTab shuts down gracefully: /health says ok for seconds more.
	d.SetPhase("", pinchtabtest.PhaseStopping)
	// A tab the executor has not seen yet is not listed while its browser
	// stops: not "no such tab", but the instance's fault.
	o := run(other)
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault)
	require.NotErrorIs(t, o.Err, executor.ErrTabNotFound)
	require.Contains(t, o.Err.Error(), "inst_0001 is stopping")

	// A server routes a tab to the running browser that has it: with none
	// running, it answers 404 for the tab. Not the tab's fault: the
	// instance's.
	o = run(tab)
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault)
	require.Contains(t, o.Err.Error(), "404 Not Found [error]", "PinchTab's own answer")
	require.Contains(t, o.Err.Error(), "stopping")
	inst, _ := bn.reg.Get(context.Background(), "p")
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "at once, not after N health checks")
	info, _ := bn.sink.info("p")
	require.False(t, info.Healthy, "the engine was told")
	inst, _ = bn.reg.CheckNow(ctx, "p")
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "an ok /health is not enough while the browser stops")

	d.SetPhase("", pinchtabtest.PhaseRunning)
	inst, _ = bn.reg.CheckNow(ctx, "p")
	require.Equal(t, executor.HealthHealthy, inst.Health)
}

func TestPinchTabsErrorCodesAndFlagClassify(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		tab := d.OpenTab("", "http://site.test/form")
		run := func(a *engine.Action) engine.Outcome {
			return bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "p",
				spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: a}})
		}
		// A text selector that matches nothing: PinchTab's 500, not retryable.
		o := run(action("text", "#missing", ""))
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
		require.Equal(t, 500, o.HTTPStatus)
		require.Contains(t, o.Err.Error(), "[error]: selector #missing: element not found (not retryable)")
		// The same on /action: a 400.
		o = run(action("click", "#missing", ""))
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
		require.Equal(t, 400, o.HTTPStatus)
		require.Contains(t, o.Err.Error(), "pinchtab click (POST /tabs/"+tab+"/action)", "the error names the kind of instance")
		// An unknown kind reaches /action and is refused without a code.
		o = run(action("levitate", "#go", ""))
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
		require.Contains(t, o.Err.Error(), "unknown action kind")

		// A click that navigates: PinchTab's 409 navigation_changed, final.
		o = run(action("click", "#next", ""))
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), "clicking again on the new page would fail")
		require.Contains(t, o.Err.Error(), "409 Conflict [navigation_changed]")
		require.Equal(t, "http://site.test/next", d.URLOf(tab))
		// Said to navigate, the same click is the success it is.
		require.NoError(t, run(action("back", "", "")).Err)
		require.Equal(t, "http://site.test/form", d.URLOf(tab))
		require.NoError(t, run(action("click", "#next", `{"waitNav":true}`)).Err)
		require.Equal(t, "http://site.test/next", d.URLOf(tab))
		require.NoError(t, run(action("back", "", "")).Err)
		require.NoError(t, run(action("forward", "", "")).Err)
		require.Equal(t, "http://site.test/next", d.URLOf(tab))
		require.NoError(t, run(action("reload", "", "")).Err)
		require.NoError(t, run(action("wait", "", `{"ms":10}`)).Err)
		require.NoError(t, run(action("find", "", `{"query":"the button"}`)).Err)
	})
}

func TestATabOpenedElsewhereIsFoundThroughTheFreshTabList(t *testing.T) {
	t.Parallel()
	// The server's cache never expires on this clock: only fresh=1 sees new tabs.
	d := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer, Token: doubleToken,
		Now: func() time.Time { return time.Unix(0, 0) }})
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: executor.KindServer})
	tab := d.OpenTab("", "http://site.test/form") // by another client, after the cache was filled
	o := bn.exec.Execute(context.Background(), &attempt{id: "t",
		spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("title", "", "")}})
	require.NoError(t, o.Err)
	require.Equal(t, "p", o.InstanceID)
	require.NotContains(t, d.Requests(), "GET /tabs/"+tab+"/url", "found in the fresh list, not by asking for the tab")
}

// throughTheEngine runs the real engine, with an instance-fault delay of
// 10 ms, over an executor whose registry has d as instance "p" of kind,
// checked every interval, and returns once "p" is healthy; hc is the
// registry's HTTP client.
func throughTheEngine(t *testing.T, d *pinchtabtest.Server, kind executor.Kind, interval time.Duration) (eng *engine.Engine, reg *executor.Registry, hc *http.Client) {
	t.Helper()
	hc = pinchtab.DefaultHTTPClient()
	reg = executor.NewRegistry(executor.RegistryOptions{HealthInterval: interval, RecheckAfter: 10 * time.Millisecond, HTTPClient: hc})
	t.Cleanup(reg.Close)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: kind})
	require.NoError(t, err)
	exec, err := executor.New(executor.Options{Registry: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	eng, err = engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec, Clock: clock.Real{}, TabLocator: reg,
		Config: engine.Config{InstanceFaultDelay: 10 * time.Millisecond}})
	require.NoError(t, err)
	require.NoError(t, eng.Start(context.Background()))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	reg.SetSink(eng)
	waitHealthy(t, reg)
	return eng, reg, hc
}

// waitHealthy waits until instance "p" is healthy.
func waitHealthy(t *testing.T, reg *executor.Registry) {
	t.Helper()
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "p"); inst.Health != executor.HealthHealthy {
			return fmt.Errorf("not healthy yet: %s (%s)", inst.Health, inst.LastError)
		}
		return nil
	})
}

// TestInstanceFaultsThroughTheEngineSpareTheRetryBudget runs a task through
// the real engine while its PinchTab server restarts: the attempts that meet
// the starting browser do not count, and the task succeeds once it runs.
func TestInstanceFaultsThroughTheEngineSpareTheRetryBudget(t *testing.T) {
	t.Parallel()
	d := newDouble(t, pinchtabtest.ModeServer)
	eng, _, _ := throughTheEngine(t, d, executor.KindServer, 20*time.Millisecond)
	tab := d.OpenTab("", "http://site.test/form")
	// The server stops its browser; the task is submitted meanwhile.
	d.SetPhase("", pinchtabtest.PhaseStopping)
	task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("title", "", ""),
		Retry: &engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		got, _ := eng.Task(context.Background(), task.ID)
		if len(got.Attempts) < 1 || got.Attempts[0].EndedAt.IsZero() {
			return fmt.Errorf("%d attempts so far, state %s", len(got.Attempts), got.State)
		}
		return nil
	})
	d.SetPhase("", pinchtabtest.PhaseRunning)
	var got *engine.Task
	waitfor.CheckFor(t, func() error {
		got, _ = eng.Task(context.Background(), task.ID)
		if got.State != engine.StateSucceeded {
			return fmt.Errorf("state %s (%s)", got.State, got.Reason)
		}
		return nil
	})
	require.Greater(t, len(got.Attempts), 1, "a second attempt, with a budget of one")
	require.Contains(t, got.Attempts[0].Error, "instance fault: ")
	require.Contains(t, got.Attempts[0].Error, "stopping")
}

func TestBrowserOSInstancesGetBrowserOSsBody(t *testing.T) {
	t.Parallel()
	b := pinchtabtest.NewBrowserOS(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "bos", URL: b.URL(), Kind: executor.KindChat, Dialect: executor.DialectBrowserOS})
	run := func(id string, labels map[string]string) engine.Outcome {
		return bn.exec.Execute(context.Background(), &attempt{id: id, instance: "bos",
			spec: &engine.TaskSpec{AgentID: "x", Instruction: "book a table for two", Labels: labels}})
	}
	o := run("task-1", nil)
	require.NoError(t, o.Err)
	require.JSONEq(t, `{"type":"finish","conversationId":"`+b.Received()[0].ConversationID+`","text":"done: book a table for two"}`, string(o.Result),
		"the last data line is the result")
	got := b.Received()[0]
	require.Equal(t, "book a table for two", got.Message)
	require.True(t, got.IsScheduledTask)
	require.Equal(t, "agent", got.Mode)
	require.False(t, got.SupportsImages)
	require.Equal(t, "browseros", got.Provider)

	// A retry of the same task continues its conversation; another task has its own.
	require.NoError(t, run("task-1", nil).Err)
	require.NoError(t, run("task-2", map[string]string{"llm.provider": "openai", "llm.model": "gpt-4o", "team": "ops"}).Err)
	all := b.Received()
	require.Equal(t, all[0].ConversationID, all[1].ConversationID)
	require.NotEqual(t, all[0].ConversationID, all[2].ConversationID)
	require.Equal(t, "openai", all[2].Provider, "the task's LLM configuration overrides the provider")
	require.Equal(t, "gpt-4o", all[2].Model)

	// The double is strict, as BrowserOS is: an unknown field is refused.
	o = run("task-3", map[string]string{"llm.temperature2": "hot"})
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.Equal(t, 400, o.HTTPStatus)
}

func TestTheGenericChatBodyIsNotBrowserOSs(t *testing.T) {
	t.Parallel()
	b := pinchtabtest.NewBrowserOS(t)
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "chat", URL: b.URL(), Kind: executor.KindChat})
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "chat",
		spec: &engine.TaskSpec{AgentID: "x", Instruction: "book a table"}})
	require.Equal(t, 400, o.HTTPStatus, "a real BrowserOS does not find its message in the generic body")
	require.Contains(t, o.Err.Error(), "unknown field")

	// Without a message, BrowserOS answers 400 too.
	resp, err := http.Post(b.URL()+"/chat", "application/json",
		strings.NewReader(`{"conversationId":"0d3c8a52-4a8b-5c1e-9f3e-2b7d6a1c9e40","isScheduledTask":true,"mode":"agent","supportsImages":false,"provider":"browseros"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestADialectIsForChatInstances(t *testing.T) {
	t.Parallel()
	reg := executor.NewRegistry(executor.RegistryOptions{})
	t.Cleanup(reg.Close)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "x", URL: "http://127.0.0.1:1", Kind: executor.KindServer, Dialect: executor.DialectBrowserOS})
	require.ErrorContains(t, err, "dialect")
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "y", URL: "http://127.0.0.1:1", Kind: executor.KindChat, Dialect: "klingon"})
	require.ErrorContains(t, err, "unknown chat dialect")
	_, err = executor.ParseDialect("browseros")
	require.NoError(t, err)
}

func TestTablessTasksReuseTabsAndTheTabCountStaysBounded(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{MaxIdleTabs: 2, IdleTabTimeout: time.Hour})
		ctx := context.Background()
		run := func(id string) engine.Outcome {
			return bn.exec.Execute(ctx, &attempt{id: id, instance: "p",
				spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		}
		for i := range 50 {
			require.NoError(t, run(fmt.Sprint("t", i)).Err)
		}
		require.Len(t, d.Tabs(), 1, "50 tab-less tasks one after another: one tab")

		// Five at once need five tabs; then the pool keeps two.
		release := d.Hold()
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				o := bn.exec.Execute(ctx, &attempt{id: fmt.Sprint("c", i), instance: "p",
					spec: &engine.TaskSpec{AgentID: "x", Action: action("press", "", `{"key":"Enter"}`)}})
				require.NoError(t, o.Err)
			})
		}
		waitfor.CheckFor(t, func() error {
			if now, _ := d.Running(); now < 5 {
				return fmt.Errorf("%d actions running", now)
			}
			return nil
		})
		require.Len(t, d.Tabs(), 5)
		release()
		wg.Wait()
		require.Len(t, d.Tabs(), 2, "idle tabs beyond maxIdleTabs are closed")

		// The idle timeout closes the rest.
		require.Equal(t, 2, bn.exec.ReapIdleTabs(time.Now().Add(2*time.Hour)))
		require.Empty(t, d.Tabs())
	})
}

func TestAPooledTabServesOneAttemptAtATime(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{MaxIdleTabs: 4, IdleTabTimeout: time.Hour})
		ctx := context.Background()
		// burst runs n tab-less actions at once and waits until all of them
		// are running on the instance; the returned func lets them end.
		burst := func(prefix string, n int) func() {
			release := d.Hold()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					o := bn.exec.Execute(ctx, &attempt{id: fmt.Sprint(prefix, i), instance: "p",
						spec: &engine.TaskSpec{AgentID: "x", Action: action("press", "", `{"key":"Enter"}`)}})
					require.NoError(t, o.Err)
				})
			}
			waitfor.CheckFor(t, func() error {
				if now, _ := d.Running(); now < n {
					return fmt.Errorf("%d of %d actions running", now, n)
				}
				return nil
			})
			return func() { release(); wg.Wait() }
		}
		burst("fill", 4)()
		require.Len(t, d.Tabs(), 4, "the pool holds four idle tabs")

		// Many tab-less attempts at once race for the four pooled tabs:
		// each tab goes to one of them, the others open their own.
		end := burst("race", 40)
		require.Equal(t, 1, d.MostInOneTab(), "two attempts ran in one tab at the same time")
		require.Len(t, d.Tabs(), 40, "one tab per running attempt")
		require.Zero(t, bn.exec.ReapIdleTabs(time.Now().Add(2*time.Hour)), "a busy tab is never reaped")
		end()
		require.Equal(t, 1, d.MostInOneTab())
		require.Len(t, d.Tabs(), 4, "the pool keeps maxIdleTabs")
	})
}

func TestALostSessionTabFailsTheTaskAtOnce(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		ctx := context.Background()
		o := bn.exec.Execute(ctx, &attempt{id: "open", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		require.NoError(t, o.Err)
		d.CloseTab(o.TabID) // behind Switchyard's back
		o = bn.exec.Execute(ctx, &attempt{id: "fill", instance: "p", tab: o.TabID,
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("fill", "#name", `{"text":"Ada"}`)}})
		require.ErrorIs(t, o.Err, executor.ErrSessionLost)
		require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
		require.Len(t, d.Tabs(), 0, "no blank tab was opened in its place")
	})
}

func TestCancelHoldsTheSlotUntilTheInstanceEndsTheAction(t *testing.T) {
	t.Parallel()
	d := pinchtabtest.New(t, pinchtabtest.Options{Token: doubleToken, IgnoreAbort: true})
	d.SetPage("http://site.test/form", form)
	bn := setup(t, executor.Options{AbortGrace: time.Hour}, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken})
	tab := d.OpenTab("", "http://site.test/form")
	release := d.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan engine.Outcome, 1)
	go func() {
		done <- bn.exec.Execute(ctx, &attempt{id: "t", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", "")}})
	}()
	waitfor.CheckFor(t, func() error {
		if now, _ := d.Running(); now != 1 {
			return errors.New("the action is not running yet")
		}
		return nil
	})
	cancel()
	// The instance keeps working: the attempt must not end before it does.
	select {
	case o := <-done:
		t.Fatalf("the attempt ended while the instance still ran its action: %v", o.Err)
	default:
	}
	inst, _ := bn.reg.Get(context.Background(), "p")
	require.Equal(t, 1, inst.InFlight, "the slot is held")
	release()
	o := <-done
	now, _ := d.Running()
	require.Zero(t, now, "the attempt ended after the instance confirmed the end of the action")
	require.NoError(t, o.Err, "the instance's answer is the attempt's")
	inst, _ = bn.reg.Get(context.Background(), "p")
	require.Zero(t, inst.InFlight)
}

func TestAServerWithoutARunningBrowserIsAnInstanceFault(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeServer, executor.Options{})
	// The browser restarts between two health checks.
	d.SetPhase("", pinchtabtest.PhaseStarting)
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "p",
		spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "not the task's attempt budget")
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone, "a tab-less task may go elsewhere")
	require.Contains(t, o.Err.Error(), "no running browser")
	inst, _ := bn.reg.Get(context.Background(), "p")
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "unhealthy at once")
}

func TestAnInstanceThatIsNotReadyIsBackSoonAfterItIs(t *testing.T) {
	t.Parallel()
	d := newDouble(t, pinchtabtest.ModeServer)
	d.SetPhase("", pinchtabtest.PhaseStarting)
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour, RecheckAfter: 10 * time.Millisecond})
	t.Cleanup(reg.Close)
	_, err := reg.Register(context.Background(), executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: executor.KindServer})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "p"); inst.Health != executor.HealthUnhealthy {
			return errors.New("not checked yet")
		}
		return nil
	})
	d.SetPhase("", pinchtabtest.PhaseRunning)
	// No health tick is due for an hour: the short recheck brings it back.
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "p"); inst.Health != executor.HealthHealthy {
			return fmt.Errorf("still %s", inst.Health)
		}
		return nil
	})
}

// TestRemovingAnInstanceFailsItsSessionsNextTaskWithSessionLost runs a
// session through the real engine and registry: once its instance is removed,
// a SESSION event says the session lost its tab, its next task fails at once
// with SESSION_LOST (no blank tab on the other instance), and the task after
// that starts over in a new tab.
func TestRemovingAnInstanceFailsItsSessionsNextTaskWithSessionLost(t *testing.T) {
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
	// The session starts on p, the only instance.
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "p", URL: p.URL(), Token: doubleToken, Kind: executor.KindServer})
	require.NoError(t, err)
	ended := func(id string) *engine.Task {
		var got *engine.Task
		waitfor.CheckFor(t, func() error {
			got, _ = eng.Task(ctx, id)
			if !got.State.Terminal() {
				return fmt.Errorf("state %s (%s)", got.State, got.Reason)
			}
			return nil
		})
		return got
	}
	open, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("navigate", "", `{"url":"http://site.test/form"}`)})
	require.NoError(t, err)
	require.Equal(t, engine.StateSucceeded, ended(open.ID).State)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "q", URL: q.URL(), Token: doubleToken, Kind: executor.KindServer})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "q"); inst.Health != executor.HealthHealthy {
			return errors.New("q is not healthy yet")
		}
		return nil
	})
	before := eng.Events().Last()

	require.NoError(t, reg.Remove(context.Background(), "p"))

	var said []engine.Event
	waitfor.CheckFor(t, func() error {
		evs, _ := eng.Events().Read(before, 100, nil)
		for _, ev := range evs {
			if ev.Type == engine.EventSession {
				said = append(said, ev)
			}
		}
		if len(said) == 0 {
			return errors.New("no SESSION event yet")
		}
		return nil
	})
	require.Len(t, said, 1)
	require.Equal(t, "s", said[0].SessionKey)
	require.Contains(t, said[0].Reason, "instance p was removed")

	fill, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("fill", "#name", `{"text":"Ada"}`)})
	require.NoError(t, err)
	got := ended(fill.ID)
	require.Equal(t, engine.StateFailed, got.State, "at once, not after the retry budget")
	require.Len(t, got.Attempts, 1)
	require.Contains(t, got.Error, "SESSION_LOST")
	require.Contains(t, got.Error, "its instance was removed")
	require.Empty(t, q.Tabs(), "no blank tab was opened in its place")

	again, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("navigate", "", `{"url":"http://site.test/form"}`)})
	require.NoError(t, err)
	got = ended(again.ID)
	require.Equal(t, engine.StateSucceeded, got.State, got.Error)
	require.Equal(t, "q", got.Attempts[0].InstanceID, "the session starts over on the instance that is left")
}

func TestATabLessTaskStepsOverPooledTabsItsInstanceLost(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{MaxIdleTabs: 4})
		ctx := context.Background()
		o := bn.exec.Execute(ctx, &attempt{id: "before", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		require.NoError(t, o.Err)
		stale := o.TabID
		// The browser restarts between two health checks: its tabs are
		// gone, the pooled one with them.
		d.SetPhase("", pinchtabtest.PhaseStarting)
		d.SetPhase("", pinchtabtest.PhaseRunning)
		require.Empty(t, d.Tabs())

		a := &attempt{id: "after", instance: "p", spec: &engine.TaskSpec{AgentID: "x", Action: action("title", "", "")}}
		o = bn.exec.Execute(ctx, a)
		require.NoError(t, o.Err, "the action never ran in the vanished tab: it runs in another")
		require.NotEqual(t, stale, o.TabID)
		require.Equal(t, []string{o.TabID}, d.Tabs())
		started := a.startedWith()
		require.Equal(t, [2]string{"p", o.TabID}, started[len(started)-1], "the attempt reports the tab it ran in")

		o2 := bn.exec.Execute(ctx, &attempt{id: "next", instance: "p", spec: &engine.TaskSpec{AgentID: "x", Action: action("title", "", "")}})
		require.NoError(t, o2.Err)
		require.Equal(t, o.TabID, o2.TabID, "the vanished tab left the pool; the new one joined it")
	})
}

func TestATaskNamingABlankTabFindsIt(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		// Opened behind Switchyard's back and still blank: PinchTab's tab
		// list does not show it, yet it is there.
		tab := d.OpenTab("", "")
		o := bn.exec.Execute(context.Background(), &attempt{id: "t",
			spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("url", "", "")}})
		require.NoError(t, o.Err)
		require.Equal(t, "p", o.InstanceID)
		require.Equal(t, tab, o.TabID)
	})
}

func TestABlankSessionTabIsNotTakenForLost(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, d := setupDouble(t, mode, executor.Options{})
		ctx := context.Background()
		o := bn.exec.Execute(ctx, &attempt{id: "first", instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("url", "", "")}})
		require.NoError(t, o.Err)
		// A route the instance lacks answers 404, as a vanished tab would;
		// the blank tab is not in the instance's list, but it is there.
		o = bn.exec.Execute(ctx, &attempt{id: "second", instance: "p", tab: o.TabID,
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("html", "", "")}})
		require.Error(t, o.Err)
		require.NotErrorIs(t, o.Err, executor.ErrSessionLost, "the session's tab is still there")
		require.Len(t, d.Tabs(), 1)
	})
}

func TestAPooledTabOfAStoppedBrowserWaitsForItsServer(t *testing.T) {
	t.Parallel()
	bn, d := setupDouble(t, pinchtabtest.ModeServer, executor.Options{MaxIdleTabs: 4})
	ctx := context.Background()
	title := func(id string) engine.Outcome {
		return bn.exec.Execute(ctx, &attempt{id: id, instance: "p", spec: &engine.TaskSpec{AgentID: "x", Action: action("title", "", "")}})
	}
	o := bn.exec.Execute(ctx, &attempt{id: "before", instance: "p",
		spec: &engine.TaskSpec{AgentID: "x", Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
	require.NoError(t, o.Err)
	stale := o.TabID
	// Its browser died between two health checks: the server answers 404
	// for the pooled tab.
	d.SetPhase("", pinchtabtest.PhaseStopped)
	o = title("while-stopped")
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "the server's fault, not the task's")
	require.Contains(t, o.Err.Error(), "is stopped")
	require.Contains(t, o.Err.Error(), "404 Not Found [error]", "the server's own answer")
	require.NotContains(t, o.Err.Error(), "not retryable", "it is retried as an instance fault, and says so")
	require.True(t, strings.HasSuffix(o.Err.Error(), "(instance fault)"), o.Err.Error())
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
	// The server starts a new browser: the pooled tab is gone for good.
	d.SetPhase("", pinchtabtest.PhaseStarting)
	d.SetPhase("", pinchtabtest.PhaseRunning)
	inst, err := bn.reg.CheckNow(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, executor.HealthHealthy, inst.Health)
	o = title("after")
	require.NoError(t, o.Err)
	require.NotEqual(t, stale, o.TabID)
}

func TestNewTabsSpreadOverAServersBrowsers(t *testing.T) {
	t.Parallel()
	d := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer, Token: doubleToken, Browsers: []string{"inst_a", "inst_b"}})
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: executor.KindServer, Capacity: 8})
	for _, session := range []string{"s1", "s2"} {
		o := bn.exec.Execute(context.Background(), &attempt{id: session, instance: "p",
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: session, Action: action("url", "", "")}})
		require.NoError(t, o.Err)
	}
	var opens []string
	for _, r := range d.Requests() {
		if strings.HasSuffix(r, "/tabs/open") {
			opens = append(opens, r)
		}
	}
	require.Equal(t, []string{"POST /instances/inst_a/tabs/open", "POST /instances/inst_b/tabs/open"}, opens,
		"each new tab goes to the browser with the fewest")
}

// TestAWaitThatRunsOutOfTimeFailsTheAttempt: PinchTab answers a wait whose
// condition was not met within its timeout 200 {"waited":false,"error"}. The
// attempt fails with the code wait_timeout, transient as an attempt whose
// time ran out, and its error carries the instance's own text; a wait that is
// met succeeds as before.
func TestAWaitThatRunsOutOfTimeFailsTheAttempt(t *testing.T) {
	t.Parallel()
	modes(t, func(t *testing.T, mode pinchtabtest.Mode) {
		bn, _ := setupDouble(t, mode, executor.Options{})
		ctx := context.Background()
		o := bn.exec.Execute(ctx, &attempt{id: "open", instance: "p", spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s",
			Action: action("navigate", "", `{"url":"http://site.test/form"}`)}})
		require.NoError(t, o.Err)
		tab := o.TabID

		o = bn.exec.Execute(ctx, &attempt{id: "met", instance: "p", tab: tab, spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s",
			Action: action("wait", "#name", `{"timeout":200}`)}})
		require.NoError(t, o.Err)
		require.Contains(t, string(o.Result), `"waited":true`)

		o = bn.exec.Execute(ctx, &attempt{id: "unmet", instance: "p", tab: tab, spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s",
			Action: action("wait", "#nothing-here", `{"timeout":200}`)}})
		require.Error(t, o.Err, "what it waited for never happened")
		require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err), "as an attempt whose time ran out")
		var coder engine.ErrorCoder
		require.ErrorAs(t, o.Err, &coder)
		require.Equal(t, "wait_timeout", coder.ErrorCode())
		require.Contains(t, o.Err.Error(), "timeout after 200ms waiting for selector", "the instance's own text")
		require.Equal(t, 200, o.HTTPStatus, "the instance answered the wait 200, as other failed attempts record its status")
		require.NotErrorIs(t, o.Err, engine.ErrInstanceFault)
		require.Equal(t, tab, o.TabID, "it ran in the session's tab, which stays bound")
	})
}

// TestAWorkflowStopsAtAWaitThatRanOutOfTime runs a wait and its dependent
// through the engine: the wait's attempts fail with wait_timeout and are
// retried by the retry policy; the dependent never runs.
func TestAWorkflowStopsAtAWaitThatRanOutOfTime(t *testing.T) {
	t.Parallel()
	d := newDouble(t, pinchtabtest.ModeBridge)
	d.OpenTab("", "http://site.test/form")
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour})
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
	_, err = reg.Register(ctx, executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Kind: executor.KindInstance})
	require.NoError(t, err)

	retry := &engine.RetryPolicy{MaxAttempts: 2, Backoff: time.Millisecond, Multiplier: 1, MaxBackoff: time.Millisecond}
	wait, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", Retry: retry, Exhausted: engine.ExhaustedFail,
		Action: action("wait", "#nothing-here", `{"timeout":200}`)})
	require.NoError(t, err)
	next, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "x", SessionKey: "s", DependsOn: []string{wait.ID},
		Action: action("fill", "#name", `{"text":"Ada"}`)})
	require.NoError(t, err)
	ended := func(id string) *engine.Task {
		var got *engine.Task
		waitfor.CheckFor(t, func() error {
			got, _ = eng.Task(ctx, id)
			if !got.State.Terminal() {
				return fmt.Errorf("state %s (%s)", got.State, got.Reason)
			}
			return nil
		})
		return got
	}
	got := ended(wait.ID)
	require.Equal(t, engine.StateFailed, got.State, got.Reason)
	require.Len(t, got.Attempts, 2, "transient: the retry policy retried it")
	for _, a := range got.Attempts {
		require.Equal(t, "wait_timeout", a.Code)
		require.Equal(t, policy.ClassTransient, a.Class)
		require.False(t, a.InstanceFault)
		require.Equal(t, 200, a.HTTPStatus, "the instance answered the wait 200")
		require.Contains(t, a.Error, "timeout after 200ms waiting for selector")
	}
	require.Contains(t, got.Error, "wait_timeout")
	after := ended(next.ID)
	require.NotEqual(t, engine.StateSucceeded, after.State)
	require.Empty(t, after.Attempts, "the dependent never ran on a page that was not ready")
}

// clickCounter scripts url on d as a page whose #go button counts its
// clicks: how often the action really ran.
func clickCounter(d *pinchtabtest.Server, url string) *atomic.Int32 {
	var n atomic.Int32
	d.SetPage(url, pinchtabtest.Page{Title: "Pay", Elements: map[string]pinchtabtest.Element{
		"#go": {OnClick: func(map[string]*pinchtabtest.Element) { n.Add(1) }},
	}})
	return &n
}

// actionsSent counts the action requests d received.
func actionsSent(d *pinchtabtest.Server) int {
	n := 0
	for _, r := range d.Requests() {
		if strings.HasPrefix(r, "POST /tabs/") && strings.HasSuffix(r, "/action") {
			n++
		}
	}
	return n
}

// waitEnded waits until the task is in a terminal state, or PARKED, and
// returns it.
func waitEnded(t *testing.T, eng *engine.Engine, id string) *engine.Task {
	t.Helper()
	var got *engine.Task
	waitfor.CheckFor(t, func() error {
		got, _ = eng.Task(context.Background(), id)
		if !got.State.Terminal() && got.State != engine.StateParked {
			return fmt.Errorf("state %s (%s), %d attempts", got.State, got.Reason, len(got.Attempts))
		}
		return nil
	})
	return got
}

// TestASingleAttemptActionIsNotRepeatedWhenItsInstanceFailedAfterTheRequest
// runs a click that allows a single attempt through the real engine while
// its instance fails after it got the request, in each of the ways PinchTab
// does: the click ran, so the task ends PARKED, saying so, and the click is
// never sent again.
func TestASingleAttemptActionIsNotRepeatedWhenItsInstanceFailedAfterTheRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mode   pinchtabtest.Mode
		fail   func(d *pinchtabtest.Server)
		reason string
	}{
		{"its process died mid-action", pinchtabtest.ModeBridge, (*pinchtabtest.Server).DieDuringNextAction, ": EOF"},
		{"it dropped the connection before answering", pinchtabtest.ModeBridge, (*pinchtabtest.Server).DropNextAnswer, ": EOF"},
		{"the browser behind the server died mid-action", pinchtabtest.ModeServer, (*pinchtabtest.Server).BrowserDiesDuringNextAction,
			"502 Bad Gateway [error]: instance unreachable: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newDouble(t, tc.mode)
			clicks := clickCounter(d, "http://site.test/pay")
			eng, _, _ := throughTheEngine(t, d, kindOf(tc.mode), time.Hour)
			tab := d.OpenTab("", "http://site.test/pay")
			tc.fail(d)
			task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", ""),
				Retry: &engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}})
			require.NoError(t, err)
			got := waitEnded(t, eng, task.ID)
			require.Equal(t, engine.StateParked, got.State, got.Reason)
			require.True(t, strings.HasPrefix(got.Reason, "retry budget spent: the instance failed after the request was sent, "+
				"so the action may have run and was not repeated (maxAttempts 1): instance p: instance fault after the request was sent: "+
				"pinchtab click (POST /tabs/"+tab+"/action): "), got.Reason)
			require.Contains(t, got.Reason, tc.reason, "the instance's own word")
			require.Len(t, got.Attempts, 1)
			require.False(t, got.Attempts[0].InstanceFault, "the attempt counts")
			require.Equal(t, int32(1), clicks.Load(), "the click ran once")
			require.Equal(t, 1, actionsSent(d), "and was sent once")
		})
	}
}

// TestASingleAttemptReadIsRunAgainWhenItsInstanceFailedAfterTheRequest: a
// read (text, screenshot) changes nothing in the browser, so a fault after
// its request was sent is forgiven even for a task that allows a single
// attempt: the read runs again and the task succeeds, where a click would
// have been parked (the test above).
func TestASingleAttemptReadIsRunAgainWhenItsInstanceFailedAfterTheRequest(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"text", "screenshot"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			d := newDouble(t, pinchtabtest.ModeBridge)
			eng, _, _ := throughTheEngine(t, d, executor.KindInstance, time.Hour)
			tab := d.OpenTab("", "http://site.test/form")
			d.DropReads(2)
			task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action(kind, "", ""),
				Retry: &engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}})
			require.NoError(t, err)
			got := waitEnded(t, eng, task.ID)
			require.Equal(t, engine.StateSucceeded, got.State, got.Reason)
			require.GreaterOrEqual(t, len(got.Attempts), 2, "the fault reached the engine")
			require.True(t, got.Attempts[0].InstanceFault, "forgiven: %s", got.Attempts[0].Error)
			require.Contains(t, got.Attempts[0].Error, "EOF", "the instance's own word")
			reads := 0
			for _, r := range d.Requests() {
				if strings.HasPrefix(r, "GET /tabs/"+tab+"/"+kind) {
					reads++
				}
			}
			require.GreaterOrEqual(t, reads, 3, "the read was sent again")
		})
	}
}

// TestATaskAllowedMoreAttemptsRetriesAnActionItsInstanceFailedAfter: a task
// allowed three attempts accepts that its action may run again. An attempt
// whose instance failed after the request stays an instance fault, which
// spends none of its budget.
func TestATaskAllowedMoreAttemptsRetriesAnActionItsInstanceFailedAfter(t *testing.T) {
	t.Parallel()
	d := newDouble(t, pinchtabtest.ModeBridge)
	clicks := clickCounter(d, "http://site.test/pay")
	eng, _, _ := throughTheEngine(t, d, executor.KindInstance, time.Hour)
	tab := d.OpenTab("", "http://site.test/pay")
	d.DropNextAnswer()
	task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", ""),
		Retry: &engine.RetryPolicy{MaxAttempts: 3, Backoff: time.Millisecond, Multiplier: 1}})
	require.NoError(t, err)
	got := waitEnded(t, eng, task.ID)
	require.Equal(t, engine.StateSucceeded, got.State, got.Reason)
	require.Len(t, got.Attempts, 2)
	require.True(t, got.Attempts[0].InstanceFault, "forgiven, as before")
	require.Contains(t, got.Attempts[0].Error, "instance fault: instance p: instance fault after the request was sent: ")
	require.Equal(t, int32(2), clicks.Load(), "it ran again, as a task allowed three attempts accepts")
}

// TestASingleAttemptActionWaitsOutFaultsThatNeverReachedTheBrowser: a
// restarting instance refuses the connection, then answers as PinchTab does
// while its browser starts; a draining one answers 503 browser_draining
// before it acts. Neither reached the browser: the attempts are forgiven
// for a task that allows one, which runs once the instance is back, once.
func TestASingleAttemptActionWaitsOutFaultsThatNeverReachedTheBrowser(t *testing.T) {
	t.Parallel()
	single := &engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}
	firstEnded := func(t *testing.T, eng *engine.Engine, id string) *engine.Task {
		t.Helper()
		var got *engine.Task
		waitfor.CheckFor(t, func() error {
			got, _ = eng.Task(context.Background(), id)
			if len(got.Attempts) < 1 || got.Attempts[0].EndedAt.IsZero() {
				return fmt.Errorf("%d attempts so far, state %s", len(got.Attempts), got.State)
			}
			return nil
		})
		return got
	}

	t.Run("a restart refused the connection", func(t *testing.T) {
		t.Parallel()
		d := newDouble(t, pinchtabtest.ModeBridge)
		// A tab-less task runs in a new tab, which here shows the button.
		clicks := clickCounter(d, "about:blank")
		eng, reg, hc := throughTheEngine(t, d, executor.KindInstance, time.Hour)
		d.Stop()
		// It has been down a while: the client has no connection to it
		// left (one the instance closed an instant before a request took
		// it would leave the request's fate unknown).
		hc.CloseIdleConnections()
		task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", Action: action("click", "#go", ""), Retry: single})
		require.NoError(t, err)
		got := firstEnded(t, eng, task.ID)
		require.True(t, got.Attempts[0].InstanceFault, got.Attempts[0].Error)
		require.Contains(t, got.Attempts[0].Error, "connection refused")
		require.NotContains(t, got.Attempts[0].Error, "after the request was sent")

		// It starts again: its browser launches first, and says so.
		require.NoError(t, d.Restart())
		reg.Kick("p")
		waitfor.CheckFor(t, func() error {
			if inst, _ := reg.Get(context.Background(), "p"); !strings.Contains(inst.LastError, "starting") {
				return fmt.Errorf("last error %q", inst.LastError)
			}
			return nil
		})
		d.SetPhase("", pinchtabtest.PhaseRunning)
		got = waitEnded(t, eng, task.ID)
		require.Equal(t, engine.StateSucceeded, got.State, got.Reason)
		require.Equal(t, int32(1), clicks.Load(), "the click ran once")
		require.Equal(t, 1, actionsSent(d), "and was sent once, to the live instance")
	})

	t.Run("a drain answered before acting", func(t *testing.T) {
		t.Parallel()
		d := newDouble(t, pinchtabtest.ModeBridge)
		clicks := clickCounter(d, "http://site.test/pay")
		eng, reg, _ := throughTheEngine(t, d, executor.KindInstance, time.Hour)
		tab := d.OpenTab("", "http://site.test/pay")
		seen, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("title", "", "")})
		require.NoError(t, err)
		require.Equal(t, engine.StateSucceeded, waitEnded(t, eng, seen.ID).State, "the executor knows the tab")

		d.SetPhase("", pinchtabtest.PhaseStopping) // its browser drains for a restart
		task, err := eng.Submit(context.Background(), engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", ""), Retry: single})
		require.NoError(t, err)
		got := firstEnded(t, eng, task.ID)
		require.True(t, got.Attempts[0].InstanceFault, got.Attempts[0].Error)
		require.Contains(t, got.Attempts[0].Error, "503 Service Unavailable [browser_draining]: browser restart in progress; retry shortly")
		require.NotContains(t, got.Attempts[0].Error, "after the request was sent")
		require.Equal(t, int32(0), clicks.Load())

		d.SetPhase("", pinchtabtest.PhaseRunning)
		reg.Kick("p")
		got = waitEnded(t, eng, task.ID)
		require.Equal(t, engine.StateSucceeded, got.State, got.Reason)
		require.Equal(t, int32(1), clicks.Load(), "the click ran once")
	})
}
