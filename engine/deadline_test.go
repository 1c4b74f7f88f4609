package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// A task whose deadline is at or before the engine clock's now is never
// dispatched nor leased, whatever queued it and whether or not its
// deadline's timer has run: it ends as that timer would end it.
//
// Several tests below act at a deadline's very instant, in a call scheduled
// on the fake clock before the task was submitted: the fake clock runs it
// at that instant ahead of the engine's own timer, which the submission
// armed later. Under the real clock the same happens when the caller's
// goroutine takes the engine's lock before the timer's goroutine does.

// stateTrail returns the states a task went through, from its events.
func stateTrail(t *testing.T, e *engine.Engine, id string) []string {
	t.Helper()
	evs, _ := e.Events().Read(0, 1<<12, nil)
	var states []string
	for _, ev := range evs {
		if ev.TaskID == id && ev.Type == engine.EventState {
			states = append(states, ev.To.String())
		}
	}
	return states
}

// oneSlot is a configuration whose only lane runs one task at a time.
func oneSlot() *engine.Config {
	main := engine.NewLane("main")
	main.MaxInFlight = 1
	return &engine.Config{Lanes: []engine.LaneConfig{main}}
}

// requireExpiredQueued checks that the task ended as its deadline's timer
// ends a QUEUED task, without an attempt more than it had.
func requireExpiredQueued(t *testing.T, h *enginetest.Harness, id string, attempts int) {
	t.Helper()
	got := h.Get(id)
	require.Equal(t, engine.StateExpired, got.State)
	require.Equal(t, "deadline exceeded while queued", got.Reason)
	require.Equal(t, "deadline exceeded while queued", got.Error)
	require.Len(t, got.Attempts, attempts, "no attempt at or past its deadline")
}

// A worker's pull at a queued task's deadline, before the deadline's timer
// has run, leases nothing: the task expires instead.
func TestAPullAtItsTasksDeadlineLeasesNothingEvenBeforeTheTimerRuns(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullConfig())
	ctx := context.Background()
	var runs []*engine.Run
	var perr error
	h.Clock.AfterFunc(10*time.Second, func() { runs, perr = h.Pull(ctx, "jobs", 1, time.Minute, "w1") })
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("crawl").Deadline(h.Clock.Now().Add(10 * time.Second)).Obj()).ID
	h.Clock.Advance(10 * time.Second)
	require.NoError(t, perr)
	require.Empty(t, runs, "the task's deadline has come")
	requireExpiredQueued(t, h, id, 0)
	require.Equal(t, []string{"QUEUED", "EXPIRED"}, stateTrail(t, h.Engine, id))
}

// A round of dispatch at a queued task's deadline (a slot freed at that
// instant), before the deadline's timer has run, does not dispatch it.
func TestARoundOfDispatchAtItsTasksDeadlineDoesNotDispatchIt(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, oneSlot())
	first := h.Submit(enginetest.Spec("a").Obj()).ID
	var ferr error
	h.Clock.AfterFunc(10*time.Second, func() { ferr = h.Exec.Succeed(first, `1`) })
	id := h.Submit(enginetest.Spec("a").Deadline(h.Clock.Now().Add(10 * time.Second)).Obj()).ID
	require.Equal(t, engine.StateQueued, h.State(id), "behind the lane's one slot")
	h.Clock.Advance(10 * time.Second)
	require.NoError(t, ferr)
	require.Equal(t, []string{first}, h.Exec.Started())
	requireExpiredQueued(t, h, id, 0)
}

// A task whose last dependency succeeds at its deadline is not dispatched:
// it expires as it queues.
func TestATaskWhoseDependencyEndsAtItsDeadlineExpiresAsItQueues(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	dep := h.Submit(enginetest.Spec("a").Obj()).ID
	var ferr error
	h.Clock.AfterFunc(10*time.Second, func() { ferr = h.Exec.Succeed(dep, `1`) })
	id := h.Submit(enginetest.Spec("a").DependsOn(dep).Deadline(h.Clock.Now().Add(10 * time.Second)).Obj()).ID
	require.Equal(t, engine.StateWaiting, h.State(id))
	h.Clock.Advance(10 * time.Second)
	require.NoError(t, ferr)
	require.Equal(t, []string{dep}, h.Exec.Started())
	requireExpiredQueued(t, h, id, 0)
	require.Equal(t, []string{"WAITING", "QUEUED", "EXPIRED"}, stateTrail(t, h.Engine, id))
}

// An operator's reset of a parked task, or retry of a task backing off, at
// the task's deadline does not dispatch it: it expires as it queues.
func TestAnOperatorsResetOrRetryAtATasksDeadlineExpiresIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		retry engine.RetryPolicy
		err   error // the attempt's
		verb  func(h *enginetest.Harness, id string) (*engine.Task, error)
		from  string
	}{
		{"reset of a parked task", engine.RetryPolicy{MaxAttempts: 1}, engine.Transient(errors.New("502 from instance")),
			func(h *enginetest.Harness, id string) (*engine.Task, error) { return h.Reset(context.Background(), id) }, "PARKED"},
		// An instance fault's retry waits InstanceFaultDelay, here past the
		// deadline: the built-in retry policy never backs off that far.
		{"retry of a task backing off", engine.RetryPolicy{MaxAttempts: 3}, engine.Transient(fmt.Errorf("%w: the browser crashed", engine.ErrInstanceFault)),
			func(h *enginetest.Harness, id string) (*engine.Task, error) { return h.Retry(context.Background(), id) }, "RETRY_WAIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := enginetest.New(t, &engine.Config{InstanceFaultDelay: time.Hour})
			var id string
			var got *engine.Task
			var verr error
			h.Clock.AfterFunc(10*time.Second, func() { got, verr = tc.verb(h, id) })
			id = h.Submit(enginetest.Spec("a").Retry(tc.retry).Deadline(h.Clock.Now().Add(10 * time.Second)).Obj()).ID
			require.NoError(t, h.Exec.Fail(id, tc.err))
			require.Equal(t, tc.from, h.State(id).String())
			h.Clock.Advance(10 * time.Second)
			require.NoError(t, verr)
			require.Equal(t, engine.StateExpired, got.State, "the verb's answer says so")
			require.Equal(t, []string{id}, h.Exec.Started(), "one attempt, before the deadline")
			requireExpiredQueued(t, h, id, 1)
			require.Equal(t, []string{"QUEUED", "ASSIGNED", tc.from, "QUEUED", "EXPIRED"}, stateTrail(t, h.Engine, id))
		})
	}
}

// A plan made as of a queued task's deadline does not list it as a step
// (dispatch would expire it), and changes nothing: the task waits for its
// deadline's timer.
func TestAPlanAsOfATasksDeadlineDoesNotDispatchItAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, oneSlot())
	ctx := context.Background()
	h.Submit(enginetest.Spec("a").Obj())
	deadline := h.Clock.Now().Add(10 * time.Second)
	id := h.Submit(enginetest.Spec("b").Deadline(deadline).Obj()).ID
	other := h.Submit(enginetest.Spec("c").Obj()).ID

	plan, err := h.PlanAt(ctx, 5, deadline.Add(-time.Millisecond))
	require.NoError(t, err)
	require.Len(t, plan.Steps, 2, "a plan looks past the lane's ceiling")
	require.Equal(t, id, plan.Steps[0].TaskID)
	before := h.Get(id)

	for range 2 { // a second plan finds what the first put back
		plan, err = h.PlanAt(ctx, 5, deadline)
		require.NoError(t, err)
		require.Len(t, plan.Steps, 1)
		require.Equal(t, other, plan.Steps[0].TaskID, "the task whose deadline has come is no step")
		require.Equal(t, before, h.Get(id), "a plan changes nothing")
	}
	h.Clock.Advance(10 * time.Second)
	requireExpiredQueued(t, h, id, 0)
}

// restartable is an engine on a durable store and a fake clock that can be
// stopped and started again on them.
type restartable struct {
	t     *testing.T
	cfg   *engine.Config
	store durableMemory
	clock *clock.Fake
	exec  *enginetest.Executor
}

func newRestartable(t *testing.T, cfg *engine.Config) *restartable {
	return &restartable{t: t, cfg: cfg, store: durableMemory{memory.New(memory.Options{})}, clock: clock.NewFake(enginetest.Epoch)}
}

func (r *restartable) start() *engine.Engine {
	r.t.Helper()
	r.exec = enginetest.NewExecutor()
	e, err := engine.New(enginetest.Synchronous(engine.Options{Config: *r.cfg, Store: r.store, Executor: r.exec, Clock: r.clock, Seed: 1}))
	require.NoError(r.t, err)
	require.NoError(r.t, e.Start(context.Background()))
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0) // attempts still under way are not waited for
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return e
}

// A queued task whose deadline passed while the engine was down expires at
// the restart: a pull made before the deadline's timer runs leases nothing.
func TestATaskQueuedPastItsDeadlineAcrossARestartExpiresAtTheRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRestartable(t, pullConfig())
	e1 := r.start()
	task, err := e1.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("crawl").Deadline(r.clock.Now().Add(10*time.Second)).Obj())
	require.NoError(t, err)
	require.NoError(t, e1.Shutdown(ctx))
	r.clock.Set(r.clock.Now().Add(time.Minute))

	e2 := r.start()
	runs, err := e2.Pull(ctx, "jobs", 1, time.Minute, "w1")
	require.NoError(t, err)
	require.Empty(t, runs, "the task's deadline passed during the downtime")
	got, err := e2.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateExpired, got.State)
	require.Equal(t, "deadline exceeded while queued", got.Reason)
}

// A task backing off across a restart is not dispatched at the restart when
// its deadline passed during the downtime: it ends as the first of its
// timers to fall due would have ended it.
func TestATaskBackingOffPastItsDeadlineAcrossARestartIsNotDispatched(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error // the attempt's
		state  engine.State
		reason string
		trail  []string // after the restart
	}{
		// The retry policy backs off 10 s, before the deadline.
		{"its backoff ended first", engine.Transient(errors.New("502 from instance")),
			engine.StateExpired, "deadline exceeded while queued", []string{"QUEUED", "EXPIRED"}},
		// An instance fault's retry waits InstanceFaultDelay, 30 s, past it.
		{"its deadline came first", engine.Transient(fmt.Errorf("%w: the browser crashed", engine.ErrInstanceFault)),
			engine.StateFailed, "deadline exceeded while retry_wait", []string{"FAILED"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := newRestartable(t, &engine.Config{InstanceFaultDelay: 30 * time.Second})
			e1 := r.start()
			retry := engine.RetryPolicy{MaxAttempts: 3, Backoff: 10 * time.Second, Multiplier: 1}
			task, err := e1.Submit(ctx, enginetest.Spec("a").Retry(retry).Deadline(r.clock.Now().Add(20*time.Second)).Obj())
			require.NoError(t, err)
			require.NoError(t, r.exec.Fail(task.ID, tc.err))
			require.Equal(t, engine.StateRetryWait, func() engine.State { got, _ := e1.Task(ctx, task.ID); return got.State }())
			require.NoError(t, e1.Shutdown(ctx))
			r.clock.Set(r.clock.Now().Add(time.Minute))

			e2 := r.start()
			require.Empty(t, r.exec.Started(), "nothing to dispatch after the restart")
			got, err := e2.Task(ctx, task.ID)
			require.NoError(t, err)
			require.Equal(t, tc.state, got.State)
			require.Equal(t, tc.reason, got.Reason)
			require.Len(t, got.Attempts, 1)
			require.Equal(t, tc.trail, stateTrail(t, e2, task.ID))
		})
	}
}

// A worker's lease whose task's deadline passed while the engine was down
// is not resumed at the restart (it would be a lease over before it
// resumed): its attempt counts as interrupted, as a pushed one's does, and
// the task fails for its deadline.
func TestALeaseIsNotResumedPastItsTasksDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRestartable(t, pullConfig())
	e1 := r.start()
	task, err := e1.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("crawl").Deadline(r.clock.Now().Add(10*time.Second)).Obj())
	require.NoError(t, err)
	runs, err := e1.Pull(ctx, "jobs", 1, time.Minute, "w1")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.NoError(t, e1.Shutdown(ctx))
	r.clock.Set(r.clock.Now().Add(time.Minute))

	e2 := r.start()
	require.Empty(t, e2.Leased("jobs"), "no lease resumed past its task's deadline")
	got, err := e2.Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, got.State)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, engine.CodeRestart, got.Attempts[0].Code, "interrupted")
	require.Equal(t, "deadline exceeded: "+got.Attempts[0].Error, got.Reason)
}
