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

func pullConfig() *engine.Config {
	jobs := engine.NewLane("jobs")
	jobs.Pull, jobs.MaxInFlight = true, 2
	return &engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
}

func TestAPullLaneDispatchesOnlyToWorkersUnderItsCeiling(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullConfig())
	ctx := context.Background()
	var ids []string
	for range 3 {
		ids = append(ids, h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Obj()).ID)
	}
	browser := h.Submit(enginetest.Spec("a").Obj())
	require.Equal(t, []string{browser.ID}, h.Exec.Started(), "the executor never sees a pull lane's task")
	require.Equal(t, engine.StateQueued, h.State(ids[0]))

	runs, err := h.Pull(ctx, "jobs", 10, 30*time.Second, "w1")
	require.NoError(t, err)
	require.Len(t, runs, 2, "the lane's ceiling bounds what a worker gets")
	require.Equal(t, ids[0], runs[0].TaskID(), "in the lane's order")
	got := h.Get(ids[0])
	require.Equal(t, engine.StateRunning, got.State)
	require.Equal(t, "leased by w1 for 30s", got.Reason)
	var reasons []string
	evs, _ := h.Events().Read(0, 100, nil)
	for _, ev := range evs {
		if ev.TaskID == ids[0] && ev.Type == engine.EventState {
			reasons = append(reasons, ev.From.String()+" → "+ev.To.String()+" "+ev.Reason)
		}
	}
	require.Equal(t, []string{"QUEUED → ASSIGNED leased by w1", "ASSIGNED → RUNNING leased by w1 for 30s"}, reasons[1:],
		"a lease says so from its first event, not dispatched")
	dl, _ := runs[0].Deadline()
	require.Equal(t, h.Clock.Now().Add(30*time.Second), dl)

	more, err := h.Pull(ctx, "jobs", 10, time.Second, "w2")
	require.NoError(t, err)
	require.Empty(t, more, "no room: nothing, and no error")

	_, err = h.Pull(ctx, "main", 1, time.Second, "w1")
	require.Equal(t, engine.CodeConflict, engineErr(t, err).Code)
	_, err = h.Pull(ctx, "nope", 1, time.Second, "w1")
	require.Equal(t, engine.CodeNotFound, engineErr(t, err).Code)

	runs[0].Finish(engine.Outcome{Result: []byte(`{"ok":true}`)})
	require.Equal(t, engine.StateSucceeded, h.State(ids[0]))
	more, err = h.Pull(ctx, "jobs", 10, time.Second, "w2")
	require.NoError(t, err)
	require.Len(t, more, 1, "a finished lease frees its slot")
}

func TestAnExpiredLeaseIsAFailedAttemptAndRenewingPostponesIt(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullConfig())
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Obj()).ID
	runs, err := h.Pull(ctx, "jobs", 1, 10*time.Second, "w1")
	require.NoError(t, err)
	r := runs[0]

	h.Clock.Advance(9 * time.Second)
	until, err := r.Extend(h.Clock.Now().Add(10 * time.Second))
	require.NoError(t, err)
	require.Equal(t, h.Clock.Now().Add(10*time.Second), until)
	h.Clock.Advance(9 * time.Second)
	require.Equal(t, engine.StateRunning, h.State(id), "renewed: still leased")

	h.Clock.Advance(time.Second)
	require.ErrorIs(t, r.Err(), context.DeadlineExceeded, "the lease ran out: the run's context says so")
	r.Finish(engine.Outcome{Err: engine.Transientf("lease expired")})
	got := h.Get(id)
	require.Equal(t, engine.StateRetryWait, got.State, "one attempt spent, the retry policy decides")
	require.Len(t, got.Attempts, 1)
	_, err = r.Extend(h.Clock.Now().Add(time.Minute))
	require.Equal(t, engine.CodeConflict, engineErr(t, err).Code, "an expired lease cannot be renewed")
}

func TestAReleasedLeaseQueuesAgainWithoutSpendingAnAttempt(t *testing.T) {
	t.Parallel()
	cfg := pullConfig()
	cfg.Lanes[1].Retry.MaxAttempts = 1
	h := enginetest.New(t, cfg)
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Obj()).ID
	for range 3 {
		runs, err := h.Pull(ctx, "jobs", 1, time.Minute, "w1")
		require.NoError(t, err)
		require.Len(t, runs, 1)
		runs[0].Finish(engine.Outcome{Release: true, Err: errors.New("worker shutting down")})
		require.Equal(t, engine.StateQueued, h.State(id))
	}
	runs, err := h.Pull(ctx, "jobs", 1, time.Minute, "w1")
	require.NoError(t, err)
	runs[0].Finish(engine.Outcome{Err: engine.Transientf("boom")})
	got := h.Get(id)
	require.Equal(t, engine.StateParked, got.State, "the one real attempt spent the budget of one")
	require.Len(t, got.Attempts, 4)
	require.Equal(t, "released: worker shutting down", got.Attempts[0].Error)
}

// A lease handed back at its task's deadline (in the lease grace, since a
// lease runs no later than the deadline) does not queue the task for the
// next pull: it expires at once, as the deadline's timer would expire it,
// and a pull made before that timer runs gets nothing, not a lease that is
// over before it begins.
func TestALeaseReleasedPastItsTasksDeadlineExpiresTheTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullConfig())
	ctx := context.Background()
	deadline := h.Clock.Now().Add(10 * time.Second)
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Deadline(deadline).Obj()).ID
	runs, err := h.Pull(ctx, "jobs", 1, time.Minute, "w1")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	h.Clock.Advance(10 * time.Second) // the lease runs out at the deadline; its grace runs on
	require.Equal(t, engine.StateRunning, h.State(id))
	runs[0].Finish(engine.Outcome{Release: true, Err: errors.New("worker stopping")})

	more, err := h.Pull(ctx, "jobs", 1, time.Minute, "w2")
	require.NoError(t, err)
	require.Empty(t, more, "nothing to lease: the task's deadline has passed")
	got := h.Get(id)
	require.Equal(t, engine.StateExpired, got.State)
	require.Equal(t, "deadline exceeded while queued", got.Reason)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, "released: worker stopping", got.Attempts[0].Error, "the release spent no attempt")
	var states []string
	evs, _ := h.Events().Read(0, 1<<10, nil)
	for _, ev := range evs {
		if ev.TaskID == id && ev.Type == engine.EventState {
			states = append(states, ev.To.String())
		}
	}
	require.Equal(t, []string{"QUEUED", "ASSIGNED", "RUNNING", "QUEUED", "EXPIRED"}, states)
}

// durableMemory is a memory store that says it is durable, and so keeps
// what a restart of an engine on it would find on disk.
type durableMemory struct{ *memory.Store }

func (durableMemory) Durable() bool { return true }

func TestALeaseSurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := durableMemory{memory.New(memory.Options{})}
	clk := clock.NewFake(enginetest.Epoch)
	start := func() *engine.Engine {
		e, err := engine.New(enginetest.Synchronous(engine.Options{Config: *pullConfig(), Store: st, Executor: enginetest.NewExecutor(), Clock: clk, Seed: 1}))
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		return e
	}
	e1 := start()
	task, err := e1.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("crawl").Obj())
	require.NoError(t, err)
	runs, err := e1.Pull(ctx, "jobs", 1, 10*time.Minute, "w1")
	require.NoError(t, err)
	lease := runs[0].LeaseID()
	got, err := e1.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, "leased by w1 for 10m0s", got.Reason)
	require.NoError(t, e1.Shutdown(ctx))

	// The worker's name and term were not stored: the reason says the lease
	// was resumed for the lane's timeout, and how it was made.
	const resumed = "lease resumed after a restart for 1m0s (the lane's timeout; the worker's own term is not kept): it was leased by w1 for 10m0s"
	e2 := start()
	got, err = e2.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State, "the worker may still be at it")
	require.Equal(t, resumed, got.Reason)
	require.NoError(t, e2.Shutdown(ctx))
	stored, err := st.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, resumed, stored.Reason, "the store has it")

	e2 = start()
	defer func() { _ = e2.Shutdown(context.Background()) }()
	got, err = e2.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State)
	require.Equal(t, resumed, got.Reason, "a lease resumed again says how it was made, not how it was resumed")
	held := e2.Leased("jobs")
	require.Len(t, held, 1)
	require.Equal(t, lease, held[0].LeaseID())
	require.Equal(t, 1, held[0].Attempt())
	more, err := e2.Pull(ctx, "jobs", 5, time.Minute, "w2")
	require.NoError(t, err)
	require.Empty(t, more, "the resumed lease still holds its task")
	held[0].Finish(engine.Outcome{Result: []byte(`1`)})
	got, err = e2.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateSucceeded, got.State)
}

func TestALeaseEndsNoLaterThanItsTasksDeadlineAndThePlanSaysWhoWaits(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullConfig())
	ctx := context.Background()
	deadline := h.Clock.Now().Add(20 * time.Second)
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Deadline(deadline).Obj()).ID
	h.Submit(enginetest.Spec("b").Lane("jobs").Action("crawl").Obj())

	plan, err := h.Plan(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, plan.Steps, "nothing of a pull lane is dispatched without a worker")
	require.Len(t, plan.Skipped, 2)
	require.Equal(t, "pull lane: waits for a worker to lease it", plan.Skipped[0].Reason)

	runs, err := h.Pull(ctx, "jobs", 1, time.Hour, "w1")
	require.NoError(t, err)
	require.Equal(t, id, runs[0].TaskID())
	dl, _ := runs[0].Deadline()
	require.Equal(t, deadline, dl, "the lease stops at the task's deadline")
	until, err := runs[0].Extend(h.Clock.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, deadline, until, "and so does a renewal")
	h.Clock.Advance(20 * time.Second)
	runs[0].Finish(engine.Outcome{Err: engine.Transientf("lease expired")})
	got := h.Get(id)
	require.Equal(t, engine.StateFailed, got.State)
	require.Contains(t, got.Reason, "deadline exceeded")
}

// A pull whose lane's heads are refused admission without leaving the
// lane's heaps (a ceiling check and the heaps disagreeing: an engine bug,
// made here by breaking the agent's bookkeeping) fails with an error that
// says so, under the native policy and a plugin's alike, instead of looping
// for ever under the engine's lock; what it leased before is handed back.
func TestAPullThatCannotProgressFailsInsteadOfLoopingForEver(t *testing.T) {
	t.Parallel()
	for _, native := range []bool{true, false} {
		h := enginetest.New(t, pullFairConfig())
		ctx := context.Background()
		if !native {
			require.NoError(t, h.SetFairness("favour", &favour{agents: []string{"bob"}}))
		}
		b := h.Submit(enginetest.Spec("bob").Lane("jobs").Action("crawl").Obj()).ID
		a := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj()).ID
		restore := engine.StrandAgentQueues(h.Engine, "alice")
		runs, err := h.Pull(ctx, "jobs", 2, time.Minute, "w1")
		require.ErrorContains(t, err, "a pull made no progress: lane \"jobs\"", "native %v", native)
		require.Empty(t, runs)
		require.Equal(t, engine.StateQueued, h.State(b), "native %v: what the pull leased is handed back", native)
		require.Empty(t, h.Leased("jobs"))
		require.Contains(t, h.Get(b).Attempts[0].Error, "released: the pull that leased it failed")
		restore()
		runs, err = h.Pull(ctx, "jobs", 2, time.Minute, "w1")
		require.NoError(t, err)
		require.ElementsMatch(t, []string{a, b}, runIDs(runs), "native %v", native)
	}
}
