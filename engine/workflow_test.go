package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

func TestDependentsRunOnlyAfterTheirDependenciesSucceed(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	a := h.Submit(enginetest.Spec("x").Obj())
	b := h.Submit(enginetest.Spec("x").Obj())
	c := h.Submit(enginetest.Spec("x").DependsOn(a.ID, b.ID).Obj())
	require.Equal(t, engine.StateWaiting, c.State)
	require.NoError(t, h.Exec.Succeed(a.ID, `{}`))
	require.Equal(t, engine.StateWaiting, h.State(c.ID))
	require.Equal(t, 1, h.Get(c.ID).Unmet)
	require.NoError(t, h.Exec.Succeed(b.ID, `{}`))
	require.Equal(t, engine.StateAssigned, h.State(c.ID))
}

func TestABackingOffDependencyKeepsDependentsWaitingAndAFailureCascades(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	a := h.Submit(enginetest.Spec("x").Obj())
	b := h.Submit(enginetest.Spec("x").DependsOn(a.ID).Obj())
	c := h.Submit(enginetest.Spec("x").DependsOn(b.ID).Obj())
	require.NoError(t, h.Exec.Fail(a.ID, engine.Transient(errors.New("flaky"))))
	require.Equal(t, engine.StateRetryWait, h.State(a.ID))
	require.Equal(t, engine.StateWaiting, h.State(b.ID), "a retry is not a failure")
	h.Clock.Advance(time.Second)
	require.NoError(t, h.Exec.Fail(a.ID, engine.Permanent(errors.New("gone for good"))))
	require.Equal(t, engine.StateCancelled, h.State(b.ID))
	require.Equal(t, "dependency "+a.ID+" failed", h.Get(b.ID).Reason)
	require.Equal(t, engine.StateCancelled, h.State(c.ID), "the cascade is transitive")
	require.Equal(t, "dependency "+b.ID+" cancelled", h.Get(c.ID).Reason)
}

func TestAParkedDependencyCancelsItsDependentsAndAResetRunsItAlone(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	a := h.Submit(enginetest.Spec("x").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
	b := h.Submit(enginetest.Spec("x").DependsOn(a.ID).Obj())
	require.NoError(t, h.Exec.Fail(a.ID, engine.Transient(errors.New("x"))))
	require.Equal(t, engine.StateParked, h.State(a.ID))
	require.Equal(t, engine.StateCancelled, h.State(b.ID), "nothing waits on a parked task")
	require.Equal(t, "dependency "+a.ID+" parked", h.Get(b.ID).Reason)
	c := h.Submit(enginetest.Spec("x").DependsOn(a.ID).Obj())
	require.Equal(t, engine.StateCancelled, c.State, "a new dependent of a parked task is cancelled at once")
	_, err := h.Reset(context.Background(), a.ID)
	require.NoError(t, err)
	require.NoError(t, h.Exec.Succeed(a.ID, `{}`))
	require.Equal(t, engine.StateSucceeded, h.State(a.ID))
	require.Equal(t, engine.StateCancelled, h.State(b.ID), "a terminal state never changes: the reset does not revive dependents")
}

func TestExhaustedFailEndsTheTaskFailedWhereParkWouldPark(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Exhausted: engine.ExhaustedFail}, {Name: "cw", MaxInFlight: 4}}}
	h := enginetest.New(t, &cfg)
	once := engine.RetryPolicy{MaxAttempts: 1}
	a := h.Submit(enginetest.Spec("x").Retry(once).Obj())
	p := h.Submit(enginetest.Spec("x").Retry(once).Obj())
	require.NoError(t, h.Exec.Fail(a.ID, engine.Transient(errors.New("500"))))
	require.Equal(t, engine.StateFailed, h.State(a.ID), "the lane says fail")
	require.Equal(t, "retry budget spent: 500", h.Get(a.ID).Reason)
	b := h.Submit(enginetest.Spec("x").Lane("cw").Retry(once).Obj())
	require.NoError(t, h.Exec.Fail(b.ID, engine.Transient(errors.New("500"))))
	require.Equal(t, engine.StateParked, h.State(b.ID), "park is the default")
	spec := enginetest.Spec("x").Lane("cw").Retry(once).Obj()
	spec.Exhausted = engine.ExhaustedFail
	c := h.Submit(spec)
	require.NoError(t, h.Exec.Fail(c.ID, engine.Transient(errors.New("500"))))
	require.Equal(t, engine.StateFailed, h.State(c.ID), "a task's own choice overrides its lane's")
	spec = enginetest.Spec("x").Retry(once).Obj()
	spec.Exhausted = engine.ExhaustedPark
	require.NoError(t, h.Exec.Fail(p.ID, engine.Transient(errors.New("500"))))
	require.Equal(t, engine.StateFailed, h.State(p.ID))
	d := h.Submit(spec)
	require.NoError(t, h.Exec.Fail(d.ID, engine.Transient(errors.New("500"))))
	require.Equal(t, engine.StateParked, h.State(d.ID))
	spec.Exhausted = "later"
	_, err := h.Engine.Submit(context.Background(), spec)
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "an unknown mode is refused: %v", err)
}

func TestAParkedTaskEndsItsBatchAndAResetDoesNotReopenIt(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	once := engine.RetryPolicy{MaxAttempts: 1}
	res, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{
		{Key: "a", Spec: enginetest.Spec("x").Retry(once).Obj()},
		{Key: "b", Spec: enginetest.Spec("x").Obj()},
	}})
	require.NoError(t, err)
	a, b := res.Items[0].Task.ID, res.Items[1].Task.ID
	require.NoError(t, h.Exec.Fail(a, engine.Transient(errors.New("x"))))
	require.Equal(t, engine.StateParked, h.State(a))
	bs, err := h.Batch(ctx, res.BatchID)
	require.NoError(t, err)
	require.False(t, bs.Done, "b still runs")
	require.NoError(t, h.Exec.Succeed(b, `{}`))
	bs, err = h.Batch(ctx, res.BatchID)
	require.NoError(t, err)
	require.True(t, bs.Done, "a parked task counts as ended for its batch")
	require.False(t, bs.Info.EndedAt.IsZero(), "the batch's end is recorded")
	ended := bs.Info.EndedAt
	_, err = h.Reset(ctx, a)
	require.NoError(t, err)
	require.NoError(t, h.Exec.Succeed(a, `{}`))
	bs, err = h.Batch(ctx, res.BatchID)
	require.NoError(t, err)
	require.Equal(t, ended, bs.Info.EndedAt, "an ended batch stays ended")
	require.Equal(t, 2, bs.Counts[engine.StateSucceeded])
}

func TestADependencyThatAlreadyFailedCancelsTheNewTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	a := h.Submit(enginetest.Spec("x").Obj())
	require.NoError(t, h.Exec.Fail(a.ID, engine.Permanent(errors.New("x"))))
	require.NoError(t, h.Sync(context.Background())) // a leaves memory: the store answers
	b := h.Submit(enginetest.Spec("x").DependsOn(a.ID).Obj())
	require.Equal(t, engine.StateCancelled, b.State)
	require.Equal(t, "dependency "+a.ID+" failed", b.Reason)
}

func TestABatchMayFormADAGButNotACycle(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	res, err := h.SubmitBatch(context.Background(), engine.BatchSpec{Items: []engine.BatchItem{
		{Key: "leaf", Spec: enginetest.Spec("x").DependsOn("mid").Obj()},
		{Key: "root", Spec: enginetest.Spec("x").Obj()},
		{Key: "mid", Spec: enginetest.Spec("x").DependsOn("root").Obj()},
	}})
	require.NoError(t, err)
	for _, it := range res.Items {
		require.NoError(t, it.Err)
	}
	leaf, root, mid := res.Items[0].Task, res.Items[1].Task, res.Items[2].Task
	require.Equal(t, []string{mid.ID}, leaf.Spec.DependsOn, "keys resolve to ids")
	require.Equal(t, engine.StateAssigned, h.State(root.ID))
	require.Equal(t, engine.StateWaiting, h.State(mid.ID))
	require.NoError(t, h.Exec.Succeed(root.ID, `{}`))
	require.NoError(t, h.Exec.Succeed(mid.ID, `{}`))
	require.Equal(t, engine.StateAssigned, h.State(leaf.ID))

	res, err = h.SubmitBatch(context.Background(), engine.BatchSpec{Items: []engine.BatchItem{
		{Key: "a", Spec: enginetest.Spec("x").DependsOn("b").Obj()},
		{Key: "b", Spec: enginetest.Spec("x").DependsOn("a").Obj()},
		{Key: "ok", Spec: enginetest.Spec("x").Obj()},
		{Key: "after", Spec: enginetest.Spec("x").DependsOn("a").Obj()},
	}})
	require.NoError(t, err)
	for _, i := range []int{0, 1} {
		ee := engineErr(t, res.Items[i].Err)
		require.Equal(t, engine.CodeCycle, ee.Code)
		require.ElementsMatch(t, []string{"a", "b"}, ee.IDs)
		require.Nil(t, res.Items[i].Task)
	}
	require.NoError(t, res.Items[2].Err, "a bad item does not sink the others")
	require.Equal(t, engine.CodeInvalidInput, engineErr(t, res.Items[3].Err).Code)
}

func TestPlanShowsTheNextDecisionsAndWhyQueuesWait(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 1, AgingThreshold: -1, AgentMaxInFlight: 1})
	running := h.Submit(enginetest.Spec("a").Tab("T").Obj())
	a2 := h.Submit(enginetest.Spec("a").Obj())
	b1 := h.Submit(enginetest.Spec("b").Tab("T").Obj()) // a named tab is one session, whoever names it
	c1 := h.Submit(enginetest.Spec("c").Obj())
	c2 := h.Submit(enginetest.Spec("c").Obj())
	paused(t, h, "team", true)
	h.Submit(enginetest.Spec("d").Lane("team").Obj())
	before := h.Stats(context.Background())

	p, err := h.Plan(context.Background(), 10)
	require.NoError(t, err)
	var planned []string
	for _, s := range p.Steps {
		planned = append(planned, s.TaskID)
		require.Equal(t, "fair share", s.Reason)
	}
	// a is at its ceiling (1), b waits for tab T, c's first task goes,
	// then c is at its ceiling too.
	require.Equal(t, []string{c1.ID}, planned)
	reasons := map[string]string{}
	for _, s := range p.Skipped {
		reasons[s.Lane+"/"+s.AgentID] = s.Reason
	}
	require.Equal(t, "agent at its ceiling (1/1)", reasons["main/a"])
	require.Contains(t, reasons["main/b"], "session busy")
	require.Equal(t, "agent at its ceiling (1/1)", reasons["main/c"], "its first task counts in the plan")
	require.Equal(t, "lane paused", reasons["team/d"])

	// The plan changed nothing.
	require.Equal(t, before, h.Stats(context.Background()))
	require.Equal(t, engine.StateQueued, h.State(c1.ID))
	require.NoError(t, h.Exec.Succeed(running.ID, `{}`))
	// The real decision is the planned one... now that a has room again, a2
	// (older head) goes first; the plan said c1 because a was at its ceiling.
	require.Equal(t, []string{a2.ID}, h.Exec.Running())
	_, _ = b1, c2
}

func TestRestartRecoversQueuedWorkAndCountsInterruptedAttempts(t *testing.T) {
	t.Parallel()
	store, clk := memory.New(memory.Options{}), clock.NewFake(enginetest.Epoch)
	start := processOn(t, store, clk)
	e1, x1 := start()
	ctx := context.Background()
	running, err := e1.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	p := true
	_, err = e1.UpdateLane(ctx, "team", engine.LaneUpdate{Paused: &p})
	require.NoError(t, err)
	queued, err := e1.Submit(ctx, enginetest.Spec("a").Lane("team").Obj())
	require.NoError(t, err)
	waiting, err := e1.Submit(ctx, enginetest.Spec("a").DependsOn(running.ID).Obj())
	require.NoError(t, err)
	require.Equal(t, []string{running.ID}, x1.Running())
	lastSeq := e1.Stats(ctx).LastSeq
	// The process dies here: no shutdown; the store is all that remains.

	e2, x2 := start()
	got, err := e2.Task(ctx, running.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRetryWait, got.State, "the interrupted attempt counts and follows the retry policy")
	require.Len(t, got.Attempts, 1)
	require.Equal(t, "interrupted: the server stopped while it ran", got.Attempts[0].Error)
	require.Equal(t, engine.CodeRestart, got.Attempts[0].Code)
	clk.Advance(time.Second)
	require.Equal(t, []string{running.ID}, x2.Running())

	q, err := e2.Task(ctx, queued.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateQueued, q.State)
	team, err := e2.Lane(ctx, "team")
	require.NoError(t, err)
	require.True(t, team.Config.Paused, "the live lane change survived")
	w, err := e2.Task(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateWaiting, w.State)
	require.NoError(t, x2.Succeed(running.ID, `{}`))
	w, err = e2.Task(ctx, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateAssigned, w.State, "the dependency link survived")
	require.Greater(t, e2.Stats(ctx).LastSeq, lastSeq, "seqs continue")
}

// A batch ends once: a batch that ended with a task PARKED (settled, not
// terminal) is recovered as ended, so that the end of that task after a
// restart does not announce the batch's end (and fire its webhook) again.
func TestABatchThatEndedBeforeARestartDoesNotEndAgain(t *testing.T) {
	t.Parallel()
	store, clk := memory.New(memory.Options{}), clock.NewFake(enginetest.Epoch)
	start := processOn(t, store, clk)
	batchEnds := func(e *engine.Engine, id string) int {
		evs, _ := e.Events().Read(0, 1<<16, nil)
		n := 0
		for _, ev := range evs {
			if ev.Type == engine.EventBatch && ev.BatchID == id {
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	e1, x1 := start()
	parks := enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj()
	parks.Exhausted = engine.ExhaustedPark
	res, err := e1.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: parks}, {Spec: enginetest.Spec("b").Obj()}}})
	require.NoError(t, err)
	parked, done := res.Items[0].Task.ID, res.Items[1].Task.ID
	require.NoError(t, x1.Fail(parked, engine.Transient(errors.New("down"))))
	require.NoError(t, x1.Succeed(done, `{}`))
	got, err := e1.Task(ctx, parked)
	require.NoError(t, err)
	require.Equal(t, engine.StateParked, got.State)
	require.Equal(t, 1, batchEnds(e1, res.BatchID), "every task settled: the batch ended")
	// The process dies here: no shutdown; the store is all that remains.

	e2, _ := start()
	_, err = e2.Cancel(ctx, parked, "given up")
	require.NoError(t, err)
	require.Zero(t, batchEnds(e2, res.BatchID), "the batch ended again after the restart")
	info, err := store.Batch(ctx, res.BatchID)
	require.NoError(t, err)
	require.False(t, info.EndedAt.IsZero())
}

// processOn returns a function that starts an engine over store and clk
// with an executor of its own: each call is a new process over the same
// store, and an engine left unstopped is a process that died.
func processOn(t *testing.T, store engine.Store, clk clock.Clock) func() (*engine.Engine, *enginetest.Executor) {
	return func() (*engine.Engine, *enginetest.Executor) {
		x := enginetest.NewExecutor()
		e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: x, Clock: clk}))
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		return e, x
	}
}
