package host_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// A retry plugin that faults is answered by its native fallback, and the
// task's reason must say so: the fallback parked the task, not the plugin,
// and why the plugin did not decide. So must the plugin's counts, by
// cause: a fault, then (the plugin closed) a closed plugin. Without it the
// reason read "parked by retry policy badretry", a decision the plugin
// never made.
func TestAFallbackDecisionIsNotPutDownToTheRetryPlugin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, host.Config{})
	p, err := rt.Load(ctx, "badretry", guests["badretry"], []byte(`{"mode": "ok"}`))
	require.NoError(t, err)
	require.NoError(t, p.Configure(ctx, []byte(`{"mode": "action"}`)))
	w, err := p.Retry(fixedRetry{}) // parks
	require.NoError(t, err)

	x := engine.ExecutorFunc(func(context.Context, *engine.Run) engine.Outcome {
		return engine.Outcome{Err: engine.Transientf("boom")}
	})
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "a", MaxInFlight: 4, Retry: engine.RetryPolicy{MaxAttempts: 5, Backoff: 1, Multiplier: 1, MaxBackoff: 1}}}}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{}), Executor: x})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	require.NoError(t, e.SetRetry("a", "badretry", w))

	parked := func() string {
		t.Helper()
		task, err := e.Submit(ctx, engine.TaskSpec{Lane: "a", AgentID: "x", Action: &engine.Action{Kind: "click"}})
		require.NoError(t, err)
		var reason string
		waitfor.Eventually(t, "the task is parked", func() bool {
			got, err := e.Task(ctx, task.ID)
			require.NoError(t, err)
			reason = got.Reason
			return got.State == engine.StateParked
		})
		require.Len(t, mustGet(t, e, task.ID).Attempts, 1, "parked at its first failure: by the fallback, not by a spent budget")
		return reason
	}

	reason := parked()
	require.Equal(t, "parked by the native fallback of retry policy badretry (badretry did not decide: it faulted: "+
		"invalid: retry_decide answered action 9 with delay 0 ms): boom", reason)
	require.False(t, strings.HasPrefix(reason, "parked by retry policy badretry"), "the plugin did not park it")
	st := p.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultInvalid])
	require.Equal(t, map[host.FallbackCause]uint64{host.FallbackFault: 1}, st.FallbacksBy)

	require.NoError(t, p.Close(ctx))
	require.Equal(t, "parked by the native fallback of retry policy badretry (badretry did not decide: it is closed): boom", parked())
	st = p.Stats()
	require.Equal(t, map[host.FallbackCause]uint64{host.FallbackFault: 1, host.FallbackClosed: 1}, st.FallbacksBy)
	require.Equal(t, uint64(2), st.Fallbacks)
	require.Equal(t, uint64(1), st.FaultTotal(), "a closed plugin is not at fault")
}

func mustGet(t *testing.T, e *engine.Engine, id string) *engine.Task {
	t.Helper()
	got, err := e.Task(context.Background(), id)
	require.NoError(t, err)
	return got
}

// A fairness plugin that faults or is quarantined is answered by its
// native fallback, and a plan's step says that the fallback picked, and
// why: a trap first — which, in a plan's preview, feeds no breaker — then
// the quarantine the breaker put the plugin in once a real decision
// faulted. The wrapper says why only when asked (PickExplained); Pick
// alone does not build the reason.
func TestAPlanSaysWhenTheFairnessPluginsFallbackPicked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// No quarantine ends during the test; an instance a fault broke is
	// rebuilt before the next decision.
	f := loadFaulty(t, host.Config{BreakerThreshold: 1, QuarantineBase: time.Hour, AwaitRebuilds: true})
	f.mode(t, "panic")
	// Lane a runs one task at a time, and its first runs until the test
	// ends: the two behind it wait, and the plan (which pretends the lane
	// has room) asks the policy which goes next.
	hold := make(chan struct{})
	e := twoLaneEngine(t, engine.ExecutorFunc(func(ctx context.Context, _ *engine.Run) engine.Outcome {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return engine.Outcome{}
	}))
	t.Cleanup(func() { close(hold) }) // before the engine's shutdown, which waits for the task
	_, err := e.UpdateLane(ctx, "a", engine.LaneUpdate{MaxInFlight: ptr(1)})
	require.NoError(t, err)
	for _, agent := range []string{"x", "y", "z"} {
		_, err = e.Submit(ctx, laneSpec("a", agent))
		require.NoError(t, err)
	}
	waitfor.Eventually(t, "the first task runs", func() bool { return e.Stats(ctx).InFlight == 1 })
	require.NoError(t, e.SetFairness("faulty", f.w))

	for range 2 { // previews: the breaker (threshold 1) is not fed
		plan, err := e.Plan(ctx, 1)
		require.NoError(t, err)
		require.Len(t, plan.Steps, 1)
		why := plan.Steps[0].Reason
		require.True(t, strings.HasPrefix(why, "native fallback of policy faulty (faulty did not decide: it faulted: trap: "), why)
		require.Equal(t, host.StateActive, f.p.Stats().State)
	}
	st := f.p.Stats()
	require.Equal(t, uint64(2), st.DryRunFaults)
	require.Zero(t, st.FaultTotal())

	_, fellBack := f.w.PickExplained(pickCtx(), f.cands, f.picks) // a real decision
	require.Contains(t, fellBack, "it faulted: trap: ")
	require.Equal(t, host.StateQuarantined, f.p.Stats().State)

	plan, err := e.Plan(ctx, 1)
	require.NoError(t, err)
	require.Len(t, plan.Steps, 1)
	why := plan.Steps[0].Reason
	require.True(t, strings.HasPrefix(why, "native fallback of policy faulty (faulty did not decide: quarantined for 1h0m0s: "), why)
	st = f.p.Stats()
	require.Equal(t, map[host.FallbackCause]uint64{host.FallbackFault: 3, host.FallbackBreaker: 1}, st.FallbacksBy)
	require.Equal(t, uint64(1), st.FaultTotal())

	n, fellBack := f.w.PickExplained(pickCtx(), f.cands, f.picks)
	require.Equal(t, 4, n)
	require.Contains(t, fellBack, "quarantined for 1h0m0s")
	require.Equal(t, 4, f.pick(), "Pick answers as PickExplained does")
	require.Equal(t, []uint32{7, 6, 5, 4}, f.picks)
}

func ptr[T any](v T) *T { return &v }

// On a pull lane, a fairness plugin that faults is overruled by its
// fallback for that decision, and its breaker quarantines it, as in pushed
// dispatch: a worker's lease is decided by the wrapper the lane's policy
// is, fallback and breaker included.
func TestAPullLanesFaultyFairnessPluginIsOverruledAndQuarantined(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt := newRuntime(t, host.Config{})
	p, err := rt.Load(ctx, "faulty", guests["faulty"], []byte(`{"mode": "ok"}`))
	require.NoError(t, err)
	require.NoError(t, p.Configure(ctx, []byte(`{"mode": "range"}`))) // picks out of range: an invalid answer
	w, err := p.Fairness(reverse{})                                   // the fallback serves the newest heads first
	require.NoError(t, err)

	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	cfg := engine.Config{AgingThreshold: -1, Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{}), Executor: engine.NoopExecutor{}})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		// No worker completes the leases taken here: Shutdown cancels them
		// at once instead of waiting out their minute.
		done, cancel := context.WithCancel(context.Background())
		cancel()
		_ = e.Shutdown(done)
	})
	require.NoError(t, e.SetFairness("faulty", w))
	submit := func(agent string) string {
		task, err := e.Submit(ctx, engine.TaskSpec{Lane: "jobs", AgentID: agent, Action: &engine.Action{Kind: "crawl"}})
		require.NoError(t, err)
		return task.ID
	}
	pull := func(max int) []string {
		runs, err := e.Pull(ctx, "jobs", max, time.Minute, "w1")
		require.NoError(t, err)
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.TaskID())
		}
		return ids
	}

	a1, a2, b1 := submit("alice"), submit("alice"), submit("bob")
	require.Equal(t, []string{b1, a1, a2}, pull(3), "the fallback's order (newest head first), not the native fair share's")
	st := p.Stats()
	require.Equal(t, uint64(2), st.Faults[host.FaultInvalid], "each decision of the lease faulted")
	require.Equal(t, map[host.FallbackCause]uint64{host.FallbackFault: 2}, st.FallbacksBy)

	// Three more faults make five, the breaker's threshold: quarantined,
	// the next lease is decided by the fallback without asking the plugin.
	for _, agent := range []string{"c", "d", "e"} {
		id := submit(agent)
		require.Equal(t, []string{id}, pull(1))
	}
	require.Equal(t, host.StateQuarantined, p.Stats().State)
	id := submit("f")
	require.Equal(t, []string{id}, pull(1))
	st = p.Stats()
	require.Equal(t, uint64(5), st.Faults[host.FaultInvalid], "a quarantined plugin is not asked")
	require.Equal(t, uint64(1), st.FallbacksBy[host.FallbackBreaker])
}
