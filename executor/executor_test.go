package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func instanceCfg(id string, f *fakeInstance) executor.InstanceConfig {
	return executor.InstanceConfig{ID: id, URL: f.URL(), Token: f.token, Kind: executor.KindInstance}
}

// markDown makes an instance fail its health checks until it is unhealthy.
func markDown(t *testing.T, bn bundle, f *fakeInstance, id string) {
	t.Helper()
	f.set(func(f *fakeInstance) { f.down = true })
	for i := 0; i < 10; i++ {
		inst, err := bn.reg.CheckNow(context.Background(), id)
		require.NoError(t, err)
		if inst.Health == executor.HealthUnhealthy {
			return
		}
	}
	t.Fatal("instance never became unhealthy")
}

func TestNamedTabRunsOnTheInstanceThatOwnsIt(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "tok-a")
	b := newFakeInstance(t, "b", "tok-b", "TB")
	bn := setup(t, executor.Options{}, instanceCfg("a", a), instanceCfg("b", b))

	at := &attempt{id: "task-1", instance: "a", spec: &engine.TaskSpec{AgentID: "agent-9", TabID: "TB",
		Action: action("fill", "css:#name", `{"text":"Ada"}`)}}
	o := bn.exec.Execute(context.Background(), at)
	require.NoError(t, o.Err)
	require.Equal(t, "b", o.InstanceID, "the tab's owner wins over the placement")
	require.Equal(t, "TB", o.TabID)
	require.Equal(t, 200, o.HTTPStatus)
	require.JSONEq(t, `{"success":true,"result":{"kind":"fill","tab":"TB","instance":"b"}}`, string(o.Result))
	require.Equal(t, [][2]string{{"b", "TB"}}, at.startedWith())
	for _, p := range a.paths() {
		require.Equal(t, "GET /tabs", p, "only tab discovery went to the placed instance")
	}

	var sent fakeReq
	for _, r := range b.requests() {
		if r.Path == "/tabs/TB/action" {
			sent = r
		}
	}
	require.JSONEq(t, `{"kind":"fill","selector":"css:#name","text":"Ada"}`, sent.Body)
	require.Equal(t, "Bearer tok-b", sent.Auth, "the owner's token is used")
	require.Equal(t, "agent-9", sent.Agent)
	require.Equal(t, "task-1", sent.Task)
}

func TestTaskWithoutTabOpensOneOnThePlacedInstanceAndReportsIt(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	at := &attempt{id: "t", instance: "a", spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s1",
		Action: action("navigate", "", `{"url":"http://site.test/"}`)}}
	o := bn.exec.Execute(context.Background(), at)
	require.NoError(t, o.Err)
	require.Equal(t, "a", o.InstanceID)
	require.Equal(t, "a-tab1", o.TabID)
	require.Equal(t, [][2]string{{"a", "a-tab1"}}, at.startedWith())
	require.Equal(t, []string{"POST /tab", "POST /tabs/a-tab1/navigate"}, a.paths())
	require.JSONEq(t, `{"tabId":"a-tab1","url":"http://site.test/","title":"Page"}`, string(o.Result))
	require.Positive(t, o.TabTime, "opening the tab is measured")
	require.Positive(t, o.ActionTime, "and the action, apart")
}

func TestTabTimeAndActionTimeAreMeasuredApart(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	release := make(chan struct{})
	a.set(func(f *fakeInstance) { f.slow = release; f.canceled = make(chan struct{}) })
	// The instance holds the action for at least held from the moment it
	// has it: the action's time covers that, and the tab's part does not.
	const held = 30 * time.Millisecond
	done := make(chan engine.Outcome, 1)
	t0 := time.Now()
	go func() {
		done <- bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", spec: &engine.TaskSpec{AgentID: "x",
			Action: action("click", "#go", "")}})
	}()
	waitfor.Eventually(t, "the instance has the action", func() bool { return slices.Contains(a.paths(), "POST /tabs/a-tab1/action") })
	time.Sleep(held) // the instance is slow: it works on the action for held
	close(release)
	o := <-done
	took := time.Since(t0)
	require.NoError(t, o.Err)
	require.Positive(t, o.TabTime, "opening the tab is measured")
	require.GreaterOrEqual(t, o.ActionTime, held, "the action's time covers the instance's work")
	require.LessOrEqual(t, o.TabTime+o.ActionTime, took, "the two parts are within the attempt, one after the other")
}

func TestSessionTabIsReusedThenClosedWhenIdleAndTheSessionUnbound(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{IdleTabTimeout: time.Hour}, instanceCfg("a", a))
	spec := func(kind string) *engine.TaskSpec {
		return &engine.TaskSpec{AgentID: "x", SessionKey: "checkout", Action: action(kind, "#go", "")}
	}
	first := bn.exec.Execute(context.Background(), &attempt{id: "t1", instance: "a", spec: spec("click")})
	require.NoError(t, first.Err)
	// The engine binds the session to the reported tab; the next task comes
	// with it.
	second := bn.exec.Execute(context.Background(), &attempt{id: "t2", instance: first.InstanceID, tab: first.TabID, spec: spec("hover")})
	require.NoError(t, second.Err)
	require.Equal(t, first.TabID, second.TabID)
	require.Equal(t, []string{"POST /tab", "POST /tabs/a-tab1/action", "POST /tabs/a-tab1/action"}, a.paths(), "one tab for the session")

	require.Zero(t, bn.exec.ReapIdleTabs(time.Now()), "a tab used just now is not idle")
	require.Equal(t, 1, bn.exec.ReapIdleTabs(time.Now().Add(2*time.Hour)))
	require.Contains(t, a.paths(), "POST /tabs/a-tab1/close")
	require.Equal(t, []string{engine.ScopedSessionKey("x", "checkout")}, bn.sink.unboundSessions(), "the session is kept under its agent's scope")
	require.Zero(t, bn.exec.ReapIdleTabs(time.Now().Add(4*time.Hour)), "closed once")
}

func TestIdleTabsCloseByThemselves(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{IdleTabTimeout: 50 * time.Millisecond}, instanceCfg("a", a))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t1", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.NoError(t, o.Err)
	waitfor.CheckFor(t, func() error {
		if len(bn.sink.unboundSessions()) == 0 {
			return errors.New("session not unbound yet")
		}
		return nil
	})
	require.Contains(t, a.paths(), "POST /tabs/a-tab1/close")
}

func TestBusyTabIsNotClosedAsIdle(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	release := make(chan struct{})
	a.set(func(f *fakeInstance) { f.slow = release; f.canceled = make(chan struct{}) })
	bn := setup(t, executor.Options{IdleTabTimeout: time.Hour}, instanceCfg("a", a))
	done := make(chan engine.Outcome)
	go func() {
		done <- bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	}()
	waitfor.CheckFor(t, func() error {
		for _, p := range a.paths() {
			if strings.HasSuffix(p, "/action") {
				return nil
			}
		}
		return errors.New("action not sent yet")
	})
	require.Zero(t, bn.exec.ReapIdleTabs(time.Now().Add(2*time.Hour)), "the tab is in use")
	close(release)
	require.NoError(t, (<-done).Err)
}

func TestNamedTabResolutionErrorsArePermanentAndClear(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	b := newFakeInstance(t, "b", "", "TB")
	bn := setup(t, executor.Options{}, instanceCfg("a", a), instanceCfg("b", b))
	click := func(tab string) engine.Outcome {
		return bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", TabID: tab, Action: action("click", "#go", "")}})
	}

	o := click("NOWHERE")
	require.ErrorIs(t, o.Err, executor.ErrTabNotFound)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))

	require.NoError(t, click("TB").Err) // now cached on b
	require.NoError(t, bn.reg.Remove(context.Background(), "b"))
	o = click("TB")
	require.ErrorIs(t, o.Err, executor.ErrTabInstanceGone)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.Contains(t, o.Err.Error(), "instance b was removed")
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "a named tab must not be moved elsewhere")

	// An unhealthy instance may come back with the tab: the task waits, and
	// the wait is not charged to its attempt budget.
	markDown(t, bn, a, "a")
	o = click("TA")
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault)
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "a named tab must not be moved elsewhere")
	require.Contains(t, o.Err.Error(), "instance a is unhealthy")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
}

func TestSessionTabOnAnUnhealthyInstanceWaitsForIt(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	markDown(t, bn, a, "a")
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", tab: "TA",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "the instance may come back with the tab")
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "the session keeps its tab meanwhile")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
	require.Empty(t, a.paths(), "no request to an instance known to be down")
}

func TestSessionTabOnARemovedInstanceIsLost(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	require.NoError(t, bn.reg.Remove(context.Background(), "a"))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", tab: "TA",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.ErrorIs(t, o.Err, executor.ErrSessionLost)
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone, "the engine forgets the binding")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
}

func TestSessionTabThatVanishedFailsAtOnceWithSessionLost(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", tab: "CLOSED-ELSEWHERE",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.ErrorIs(t, o.Err, executor.ErrSessionLost, "not silently replaced by a blank tab")
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone, "the engine must forget the binding")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.Contains(t, o.Err.Error(), "SESSION_LOST")
	require.NotContains(t, o.Err.Error(), "instance gone", "the instance is fine: only its tab went")
	require.Equal(t, 404, o.HTTPStatus)
	require.Empty(t, o.TabID, "nothing binds to the vanished tab")
}

func TestMissingElementOnALiveSessionTabIsPermanent(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	a.set(func(f *fakeInstance) { f.fail["/action"] = 404 })
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", tab: "TA",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#missing", "")}})
	require.Error(t, o.Err)
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "the tab still exists")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
}

func TestUnreachableInstanceIsAnInstanceFaultAndUnhealthyAtOnce(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	a.srv.Close() // the instance dies
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a", tab: "TA",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.ErrorIs(t, o.Err, engine.ErrInstanceFault, "the attempt budget is not the instance's to spend")
	require.NotErrorIs(t, o.Err, engine.ErrInstanceGone, "the session keeps its tab: the instance may come back with it")
	inst, _ := bn.reg.Get(context.Background(), "a")
	require.Equal(t, executor.HealthUnhealthy, inst.Health, "unhealthy at once, not after N checks")
	require.Equal(t, policy.ClassTransient, engine.ClassOf(o.Err))
	info, _ := bn.sink.info("a")
	require.False(t, info.Healthy)
}

func TestErrorClassesFollowStatusFamilies(t *testing.T) {
	t.Parallel()
	cases := map[int]policy.ErrorClass{
		400: policy.ClassPermanent, 403: policy.ClassPermanent,
		404: policy.ClassPermanent, 422: policy.ClassPermanent,
		408: policy.ClassTransient, 409: policy.ClassTransient, 423: policy.ClassTransient, 429: policy.ClassTransient,
		500: policy.ClassTransient, 504: policy.ClassTransient,
		// 401, 502 and 503 are instance faults: see TestInstanceFaults….
	}
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	for status, class := range cases {
		a.set(func(f *fakeInstance) { f.fail["/action"] = status })
		o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("click", "#go", "")}})
		require.Error(t, o.Err, "status %d", status)
		require.Equal(t, class, engine.ClassOf(o.Err), "status %d", status)
		require.Equal(t, status, o.HTTPStatus)
		var ce *engine.ClassifiedError
		require.ErrorAs(t, o.Err, &ce)
		require.Equal(t, status, ce.HTTPStatus)
	}
}

func TestCancellationStopsTheForwardedRequestAfterTheAbortGrace(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	canceled := make(chan struct{})
	a.set(func(f *fakeInstance) { f.slow = make(chan struct{}); f.canceled = canceled })
	bn := setup(t, executor.Options{AbortGrace: time.Millisecond}, instanceCfg("a", a))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		waitfor.CheckFor(t, func() error {
			// Not on the first request: tab discovery may come before the action.
			if !slices.Contains(a.paths(), "POST /tabs/TA/action") {
				return errors.New("not sent")
			}
			return nil
		})
		cancel()
	}()
	o := bn.exec.Execute(ctx, &attempt{id: "t", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("click", "#slow", "")}})
	require.ErrorIs(t, o.Err, context.Canceled)
	require.Equal(t, policy.ClassCancelled, engine.ClassOf(o.Err))
	select {
	case <-canceled:
	case <-time.After(5 * time.Second):
		t.Fatal("the instance never saw the request end")
	}
	inst, _ := bn.reg.Get(context.Background(), "a")
	require.Equal(t, executor.HealthHealthy, inst.Health, "a cancellation says nothing about the instance")
	require.Zero(t, inst.InFlight)
}

func TestScreenshotBecomesAnArtifact(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	store := artifact.NewMemory()
	bn := setup(t, executor.Options{Artifacts: store}, instanceCfg("a", a))
	o := bn.exec.Execute(context.Background(), &attempt{id: "task-s", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("screenshot", "", `{"format":"png"}`)}})
	require.NoError(t, o.Err)
	var res struct {
		Artifact artifact.Ref `json:"artifact"`
		Kind     string       `json:"kind"`
	}
	require.NoError(t, json.Unmarshal(o.Result, &res))
	require.Equal(t, "screenshot", res.Kind)
	require.Equal(t, "image/png", res.Artifact.ContentType)
	meta, rc, err := store.Open(context.Background(), res.Artifact.ID)
	require.NoError(t, err)
	data, _ := io.ReadAll(rc)
	_ = rc.Close()
	require.Equal(t, "\x89PNG\r\n\x1a\nscreenshot-of-TA", string(data))
	require.Equal(t, "task-s", meta.TaskID)
	require.EqualValues(t, len(data), res.Artifact.Size)
	require.Less(t, len(o.Result), 300, "no image bytes inline")
}

func TestLargeAnswersBecomeArtifacts(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	big := `{"nodes":"` + strings.Repeat("x", 5000) + `"}`
	a.set(func(f *fakeInstance) { f.answer["/snapshot"] = big })
	store := artifact.NewMemory()
	bn := setup(t, executor.Options{Artifacts: store, MaxInlineResult: 1024}, instanceCfg("a", a))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("snapshot", "", "")}})
	require.NoError(t, o.Err)
	require.Contains(t, string(o.Result), `"artifact"`)
	require.Equal(t, 1, store.Len())

	a.set(func(f *fakeInstance) { f.answer["/snapshot"] = `{"nodes":[]}` })
	o = bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("snapshot", "", "")}})
	require.NoError(t, o.Err)
	require.JSONEq(t, `{"nodes":[]}`, string(o.Result), "small answers stay inline")
}

func TestReadsAndEvaluateUseTheirEndpoints(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	run := func(act *engine.Action) engine.Outcome {
		return bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: act}})
	}
	o := run(action("text", "#out", ""))
	require.NoError(t, o.Err)
	require.JSONEq(t, `{"text":"text of TA #out"}`, string(o.Result))
	o = run(action("evaluate", "", `{"expression":"1+2"}`))
	require.NoError(t, o.Err)
	require.JSONEq(t, `{"result":3}`, string(o.Result))
	o = run(action("navigate", "", `{}`))
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err), "navigate without a url")
	require.Equal(t, []string{"GET /tabs", "GET /tabs/TA/text", "POST /tabs/TA/evaluate"}, a.paths(), "discovery, then the two calls")
}

func TestClosingTheSessionTabUnbindsTheSession(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	first := bn.exec.Execute(context.Background(), &attempt{id: "t1", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("click", "#go", "")}})
	require.NoError(t, first.Err)
	o := bn.exec.Execute(context.Background(), &attempt{id: "t2", instance: "a", tab: first.TabID,
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Action: action("close", "", "")}})
	require.NoError(t, o.Err)
	require.Empty(t, o.TabID, "nothing binds to a closed tab")
	require.Equal(t, []string{engine.ScopedSessionKey("x", "s")}, bn.sink.unboundSessions())
}

func TestInstructionsGoToAChatInstance(t *testing.T) {
	t.Parallel()
	browser := newFakeInstance(t, "a", "")
	chat := newFakeInstance(t, "c", "tok-c")
	chat.set(func(f *fakeInstance) {
		f.chat = "event: progress\ndata: looking\n\ndata: {\"answer\":\"Example Domain\"}\n\n"
	})
	bn := setup(t, executor.Options{}, instanceCfg("a", browser),
		executor.InstanceConfig{ID: "c", URL: chat.URL(), Token: "tok-c", Kind: executor.KindChat})
	at := &attempt{id: "t", instance: "a", spec: &engine.TaskSpec{AgentID: "x", Instruction: "read the title"}}
	o := bn.exec.Execute(context.Background(), at)
	require.NoError(t, o.Err)
	require.Equal(t, "c", o.InstanceID, "an instruction placed on a browser goes to a chat instance")
	require.JSONEq(t, `{"answer":"Example Domain"}`, string(o.Result))
	reqs := chat.requests()
	last := reqs[len(reqs)-1]
	require.Equal(t, "/chat", last.Path)
	require.JSONEq(t, `{"instruction":"read the title"}`, last.Body)
	require.Equal(t, "Bearer tok-c", last.Auth)

	noChat := setup(t, executor.Options{}, instanceCfg("a", browser))
	o = noChat.exec.Execute(context.Background(), &attempt{id: "t", spec: &engine.TaskSpec{AgentID: "x", Instruction: "x"}})
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
}

func TestPinchTabServerTabsAndOpening(t *testing.T) {
	t.Parallel()
	srv := newFakeInstance(t, "srv", "", "S1")
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "srv", URL: srv.URL(), Kind: executor.KindServer})
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "other",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "S1", Action: action("click", "#go", "")}})
	require.NoError(t, o.Err)
	require.Equal(t, "srv", o.InstanceID)
	require.Contains(t, srv.paths(), "GET /instances/tabs", "server tabs come from /instances/tabs")

	o = bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "srv",
		spec: &engine.TaskSpec{AgentID: "x", Action: action("click", "#go", "")}})
	require.NoError(t, o.Err)
	require.Contains(t, srv.paths(), "POST /instances/inst_b1/tabs/open", "a tab opens in a running browser of the server")
}

func TestNoPlacementPicksAHealthyInstance(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "")
	b := newFakeInstance(t, "b", "")
	a.set(func(f *fakeInstance) { f.down = true })
	bn := setup(t, executor.Options{}, instanceCfg("a", a), instanceCfg("b", b))
	o := bn.exec.Execute(context.Background(), &attempt{id: "t",
		spec: &engine.TaskSpec{AgentID: "x", Action: action("click", "#go", "")}})
	require.NoError(t, o.Err)
	require.Equal(t, "b", o.InstanceID)
}

func TestTokensNeverAppearInLogsOrErrors(t *testing.T) {
	t.Parallel()
	const secret = "very-secret-token-1234"
	a := newFakeInstance(t, "a", "different-token", "TA") // answers 401 to our token
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	reg := executor.NewRegistry(executor.RegistryOptions{Logger: logger, HealthInterval: time.Hour})
	t.Cleanup(reg.Close)
	cfg := executor.InstanceConfig{ID: "a", URL: a.URL(), Token: secret}
	_, err := reg.Register(context.Background(), cfg)
	require.NoError(t, err)
	_, err = reg.CheckNow(context.Background(), "a")
	require.NoError(t, err)
	exec, err := executor.New(executor.Options{Registry: reg, Logger: logger})
	require.NoError(t, err)
	defer exec.Close()
	o := exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("click", "#go", "")}})
	require.Error(t, o.Err)
	logger.Info("config", "cfg", cfg)
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, o.Err.Error(), secret)
	inst, _ := reg.Get(context.Background(), "a")
	require.NotContains(t, inst.LastError, secret)
	require.True(t, inst.HasToken)
	require.Contains(t, cfg.String(), "[redacted]")
}

func TestKindsWithTheirOwnRoutesUseThem(t *testing.T) {
	t.Parallel()
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{}, instanceCfg("a", a))
	run := func(act *engine.Action) map[string]any {
		t.Helper()
		o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: act}})
		require.NoError(t, o.Err, act.Kind)
		var got map[string]any
		require.NoError(t, json.Unmarshal(o.Result, &got))
		return got
	}
	require.Equal(t, "back", run(action("back", "", ""))["op"])
	require.Equal(t, "forward", run(action("Forward", "", ""))["op"])
	got := run(action("reload", "", `{"dismissBanners":"true"}`))
	require.Equal(t, "dismissBanners=true", got["query"], "history options travel in the query")
	got = run(action("wait", "css:#done", `{"timeout":5000}`))
	require.Equal(t, map[string]any{"selector": "css:#done", "timeout": 5000.0}, got["body"])
	got = run(action("find", "", `{"query":"the login button","topK":3}`))
	require.Equal(t, map[string]any{"query": "the login button", "topK": 3.0}, got["body"])
	require.Equal(t, []string{"GET /tabs", "POST /tabs/TA/back", "POST /tabs/TA/forward", "POST /tabs/TA/reload",
		"POST /tabs/TA/wait", "POST /tabs/TA/find"}, a.paths(), "none of them goes to /action")

	// A click that may navigate says so in PinchTab's own field.
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
		spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("click", "css:a", `{"waitNav":true}`)}})
	require.NoError(t, o.Err)
	reqs := a.requests()
	require.JSONEq(t, `{"kind":"click","selector":"css:a","waitNav":true}`, reqs[len(reqs)-1].Body)
}

func TestAnInstructionOfASessionThatLostItsTabFailsWithSessionLost(t *testing.T) {
	t.Parallel()
	chat := newFakeInstance(t, "c", "")
	chat.set(func(f *fakeInstance) { f.chat = "data: {\"answer\":\"x\"}\n\n" })
	bn := setup(t, executor.Options{}, executor.InstanceConfig{ID: "c", URL: chat.URL(), Kind: executor.KindChat})
	o := bn.exec.Execute(context.Background(), &attempt{id: "t", tab: "T1", lostOn: "gone",
		spec: &engine.TaskSpec{AgentID: "x", SessionKey: "s", Instruction: "fill in the form"}})
	require.ErrorIs(t, o.Err, executor.ErrSessionLost)
	require.ErrorIs(t, o.Err, engine.ErrInstanceGone, "the engine forgets the lost binding")
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	for _, r := range chat.requests() {
		require.NotEqual(t, "/chat", r.Path, "no instruction was sent about a page that is gone")
	}
}

// A snapshot result carries at most params.maxNodes nodes (default
// executor.SnapshotMaxNodes) whichever instance read it: a PinchTab
// instance sends every node of the page, so the executor cuts them, and
// says so, as it does text.
func TestASnapshotIsBoundedByMaxNodesOnEveryInstance(t *testing.T) {
	t.Parallel()
	nodes := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString(`{"url":"https://example.com/","title":"big","nodes":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"ref":"e%d","role":"link","name":"item %d"}`, i, i)
		}
		fmt.Fprintf(&b, `],"count":%d%s}`, n, extra)
		return b.String()
	}
	a := newFakeInstance(t, "a", "", "TA")
	bn := setup(t, executor.Options{MaxInlineResult: 64 << 20}, instanceCfg("a", a))
	read := func(answer, params string) (engine.Outcome, map[string]any) {
		a.set(func(f *fakeInstance) { f.answer["/snapshot"] = answer })
		o := bn.exec.Execute(context.Background(), &attempt{id: "t", instance: "a",
			spec: &engine.TaskSpec{AgentID: "x", TabID: "TA", Action: action("snapshot", "", params)}})
		var res map[string]any
		if o.Err == nil {
			require.NoError(t, json.Unmarshal(o.Result, &res))
		}
		return o, res
	}

	o, res := read(nodes(executor.SnapshotMaxNodes+2000, ""), "")
	require.NoError(t, o.Err)
	require.Len(t, res["nodes"], executor.SnapshotMaxNodes)
	require.Equal(t, true, res["truncated"])
	require.EqualValues(t, executor.SnapshotMaxNodes+2000, res["totalNodes"])
	require.EqualValues(t, executor.SnapshotMaxNodes, res["count"])
	require.Equal(t, "big", res["title"], "the rest of the answer is kept")
	require.Equal(t, "e0", res["nodes"].([]any)[0].(map[string]any)["ref"], "the first nodes, in order")

	_, res = read(nodes(300, ""), `{"maxNodes": 5}`)
	require.Len(t, res["nodes"], 5)
	require.EqualValues(t, 300, res["totalNodes"])

	// An instance that cut its answer already says the page's count.
	_, res = read(nodes(300, `,"truncated":true,"totalNodes":200000`), `{"maxNodes": 10}`)
	require.Len(t, res["nodes"], 10)
	require.EqualValues(t, 200000, res["totalNodes"])

	small := nodes(3, "")
	o, _ = read(small, "")
	require.JSONEq(t, small, string(o.Result), "an answer within the bound is as the instance sent it")

	o, _ = read(small, `{"maxNodes": 0}`)
	require.Equal(t, policy.ClassPermanent, engine.ClassOf(o.Err))
	require.ErrorContains(t, o.Err, "snapshot's params.maxNodes must be an integer within 1..10000, got 0")
	require.ErrorContains(t, executor.CheckAction(action("snapshot", "", `{"maxNodes": 10001}`)), "params.maxNodes", "refused at submission too")
}
