package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
)

func TestTransientFailuresBackOffThenPark(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("502 from instance"))))
		got := h.Get(task.ID)
		require.Equal(t, engine.StateRetryWait, got.State, "attempt %d", i+1)
		require.Equal(t, h.Clock.Now().Add(wait), got.NextRunAt)
		h.Clock.Advance(wait - time.Millisecond)
		require.Equal(t, engine.StateRetryWait, h.State(task.ID), "not before the backoff elapses")
		h.Clock.Advance(time.Millisecond)
		require.Equal(t, engine.StateAssigned, h.State(task.ID))
	}
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("502 from instance"))))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateParked, got.State, "four attempts is the default budget")
	require.Len(t, got.Attempts, 4)
	require.Contains(t, got.Reason, "retry budget spent")
	h.Clock.Advance(time.Hour)
	require.Equal(t, engine.StateParked, h.State(task.ID), "parked stays parked")

	reset, err := h.Reset(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateAssigned, h.State(reset.ID), "reset queues it with a fresh budget")
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("again"))))
	require.Equal(t, engine.StateRetryWait, h.State(task.ID))
}

func TestPermanentFailuresFailAtOnce(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Finish(task.ID, engine.Outcome{Err: engine.Permanent(errors.New("unknown action kind")), HTTPStatus: 400}))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateFailed, got.State)
	require.Equal(t, policy.ClassPermanent, got.Class)
	require.Equal(t, 400, got.Attempts[0].HTTPStatus)
	_, err := h.Reset(context.Background(), task.ID)
	require.Equal(t, engine.CodeConflict, engineErr(t, err).Code)
}

func TestPerTaskRetryPolicyOverridesTheLane(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: 10 * time.Millisecond, Multiplier: 1}).Obj())
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("x"))))
	require.Equal(t, h.Clock.Now().Add(10*time.Millisecond), h.Get(task.ID).NextRunAt)
	h.Clock.Advance(10 * time.Millisecond)
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("x"))))
	require.Equal(t, engine.StateParked, h.State(task.ID))
}

func TestAttemptTimeoutCancelsTheContextAndCountsAFailure(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Timeout(5 * time.Second).Obj())
	ctx := h.Exec.Context(task.ID)
	dl, ok := ctx.Deadline()
	require.True(t, ok)
	require.Equal(t, h.Clock.Now().Add(5*time.Second), dl)
	h.Clock.Advance(5 * time.Second)
	require.Error(t, ctx.Err(), "the timeout cancels the attempt's context")
	require.NoError(t, h.Exec.Fail(task.ID, ctx.Err()))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateRetryWait, got.State)
	require.Equal(t, policy.ClassTransient, got.Attempts[0].Class)
	require.Contains(t, got.Attempts[0].Error, "timed out")
	require.Equal(t, engine.CodeTimeout, got.Attempts[0].Code, "the attempt keeps the code the retry policy was given")
}

// codedErr is an executor's error with a code of its own (engine.ErrorCoder).
type codedErr struct{ code string }

func (e codedErr) Error() string     { return "the page navigated away" }
func (e codedErr) ErrorCode() string { return e.code }

// An attempt keeps the error code its retry policy was given: the
// executor's Outcome.Code, else an ErrorCoder in its error's chain, else
// one the engine makes; a success and a hand-back have none.
func TestAnAttemptKeepsTheErrorCodeItsRetryPolicyWasGiven(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	codeOf := func(o engine.Outcome) string {
		t.Helper()
		task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
		require.NoError(t, h.Exec.Finish(task.ID, o))
		return h.Get(task.ID).Attempts[0].Code
	}
	require.Equal(t, "tab_not_found", codeOf(engine.Outcome{Err: engine.Permanent(codedErr{"navigation_changed"}), Code: "tab_not_found"}),
		"the outcome's code comes first")
	require.Equal(t, "navigation_changed", codeOf(engine.Outcome{Err: engine.Transient(fmt.Errorf("click: %w", codedErr{"navigation_changed"}))}))
	require.Equal(t, engine.CodeInstanceFault, codeOf(engine.Outcome{Err: engine.Transient(fmt.Errorf("restarting: %w", engine.ErrInstanceFault))}))
	require.Empty(t, codeOf(engine.Outcome{Err: engine.Transient(errors.New("no code"))}))
	require.Empty(t, codeOf(engine.Outcome{Result: []byte(`{}`)}))
	require.Empty(t, codeOf(engine.Outcome{Release: true, Code: "draining"}), "a hand-back is not a failure")
}

// A cancelled task's attempt whose executor never returns ends when its
// lease expires, without an error code: no retry policy decides on it.
func TestALeaseThatExpiresAfterACancelLeavesNoErrorCode(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{LeaseGrace: 2 * time.Second})
	task := h.Submit(enginetest.Spec("a").Timeout(5 * time.Second).Obj())
	h.Exec.Run(task.ID) // the executor never returns
	_, err := h.Cancel(context.Background(), task.ID, "not needed")
	require.NoError(t, err)
	h.Clock.Advance(7 * time.Second)
	got := h.Get(task.ID)
	require.Equal(t, engine.StateCancelled, got.State)
	require.Equal(t, "lease expired", got.Attempts[0].Error)
	require.False(t, got.Attempts[0].EndedAt.IsZero(), "the lease ended the attempt")
	require.Empty(t, got.Attempts[0].Code)
}

func TestAnExpiredLeaseIsReclaimedAndALateCompletionIgnored(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{LeaseGrace: 2 * time.Second, Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}})
	task := h.Submit(enginetest.Spec("a").Timeout(5 * time.Second).Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: time.Minute}).Obj())
	other := h.Submit(enginetest.Spec("b").Obj())
	stuck := h.Exec.Run(task.ID)
	h.Clock.Advance(5 * time.Second)
	got := h.Get(task.ID)
	require.Equal(t, engine.StateRetryWait, got.State, "the attempt ends at its timeout")
	require.Equal(t, "timed out after 5s", got.Attempts[0].Error)
	require.Equal(t, engine.CodeTimeout, got.Attempts[0].Code)
	require.Equal(t, engine.StateQueued, h.State(other.ID), "a timed-out attempt still holds its slot")
	h.Clock.Advance(2 * time.Second)
	require.Equal(t, engine.StateAssigned, h.State(other.ID), "the reclaimed slot goes to the next task")
	require.EqualValues(t, 1, h.Stats(context.Background()).LeaseExpiry)
	got = h.Get(task.ID)
	require.Equal(t, engine.StateRetryWait, got.State)
	require.Equal(t, engine.CodeTimeout, got.Attempts[0].Code, "reclaiming the slot does not change how the attempt ended")

	stuck.Finish(engine.Outcome{})
	require.Equal(t, engine.StateRetryWait, h.State(task.ID), "a completion under a reclaimed lease changes nothing")
	require.EqualValues(t, 1, h.Stats(context.Background()).Stale)
	require.NoError(t, h.Sync(context.Background()))
	evs, _ := h.Events().Read(0, 1000, nil)
	require.Equal(t, engine.EventStale, evs[len(evs)-1].Type)
	require.Contains(t, evs[len(evs)-1].Reason, "ignored")
}

// An attempt ends at its timeout, coded timeout, and its retry policy
// decides at once: an answer the instance gives later, even a success,
// only releases the slot, which the attempt held until then so that the
// ceilings hold at the instance; the retry waits for that slot.
func TestAnAttemptEndsAtItsTimeoutWhateverTheInstanceAnswersLater(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{LeaseGrace: 10 * time.Second, Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}})
	task := h.Submit(enginetest.Spec("a").Timeout(time.Second).Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: 100 * time.Millisecond, Multiplier: 1}).Obj())
	late := h.Exec.Run(task.ID)
	h.Clock.Advance(time.Second)
	got := h.Get(task.ID)
	require.Equal(t, engine.StateRetryWait, got.State, "not RUNNING past its timeout")
	require.Equal(t, "retry in 100ms: timed out after 1s", got.Reason)
	require.Equal(t, engine.CodeTimeout, got.Attempts[0].Code)
	require.Equal(t, h.Clock.Now(), got.Attempts[0].EndedAt)
	h.Clock.Advance(100 * time.Millisecond)
	require.Equal(t, engine.StateQueued, h.State(task.ID), "its retry waits for the slot its timed-out attempt holds")
	other := h.Submit(enginetest.Spec("b").Obj())
	require.Equal(t, engine.StateQueued, h.State(other.ID), "the slot is held until the instance answers")

	h.Clock.Advance(2 * time.Second)
	late.Finish(engine.Outcome{Result: []byte(`{"late":true}`), ActionTime: 3 * time.Second})
	got = h.Get(task.ID)
	require.NotEqual(t, engine.StateSucceeded, got.State, "a late answer is no success")
	require.Nil(t, got.Result)
	require.Equal(t, engine.CodeTimeout, got.Attempts[0].Code)
	require.Equal(t, "timed out after 1s", got.Attempts[0].Error)
	require.Equal(t, 3*time.Second, got.Attempts[0].ActionTime, "the instance's own figure is kept")
	assigned := 0
	for _, id := range []string{task.ID, other.ID} {
		if h.State(id) == engine.StateAssigned {
			assigned++
		}
	}
	require.Equal(t, 1, assigned, "the released slot goes to one of the waiting tasks")
	// Run whichever got it, then the other: the retry is attempt 2.
	for range 2 {
		for _, id := range []string{task.ID, other.ID} {
			if h.State(id) == engine.StateAssigned {
				require.NoError(t, h.Exec.Finish(id, engine.Outcome{}))
			}
		}
	}
	got = h.Get(task.ID)
	require.Equal(t, engine.StateSucceeded, got.State)
	require.Len(t, got.Attempts, 2)
	require.Equal(t, engine.StateSucceeded, h.State(other.ID))
}

// A timed-out attempt whose retry budget is spent fails (or parks) at its
// timeout, not when the instance answers.
func TestATimedOutLastAttemptParksAtItsTimeout(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Timeout(time.Second).Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
	late := h.Exec.Run(task.ID)
	h.Clock.Advance(time.Second)
	require.Equal(t, engine.StateParked, h.State(task.ID))
	late.Finish(engine.Outcome{})
	got := h.Get(task.ID)
	require.Equal(t, engine.StateParked, got.State)
	require.Equal(t, "retry budget spent: timed out after 1s", got.Reason)
}

func TestADeadlineExpiresQueuedTasksAndBoundsRunningOnes(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	paused(t, h, "main", true)
	queued := h.Submit(enginetest.Spec("a").Deadline(h.Clock.Now().Add(time.Minute)).Obj())
	h.Clock.Advance(time.Minute)
	got := h.Get(queued.ID)
	require.Equal(t, engine.StateExpired, got.State)
	require.Equal(t, "deadline exceeded while queued", got.Reason)

	running := h.Submit(enginetest.Spec("a").Lane("team").Deadline(h.Clock.Now().Add(3 * time.Second)).Obj())
	ctx := h.Exec.Context(running.ID)
	dl, _ := ctx.Deadline()
	require.Equal(t, h.Clock.Now().Add(3*time.Second), dl, "the deadline comes before the lane's 60 s timeout")
	h.Clock.Advance(3 * time.Second)
	require.Error(t, ctx.Err())
	require.NoError(t, h.Exec.Fail(running.ID, ctx.Err()))
	got = h.Get(running.ID)
	require.Equal(t, engine.StateFailed, got.State, "no retry past the deadline")
	require.Contains(t, got.Reason, "deadline exceeded")
}

func TestCancellingARunningTaskFinishesOnceAndNeverRetries(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	ctx := h.Exec.Context(task.ID)
	got, err := h.Cancel(context.Background(), task.ID, "user asked")
	require.NoError(t, err)
	require.Equal(t, engine.StateCancelled, got.State)
	require.Error(t, ctx.Err(), "the executor's context is cancelled")
	var ce *engine.CancelledError
	require.True(t, errors.As(ctx.(*engine.Run).Cause(), &ce))
	require.Equal(t, "user asked", ce.Reason)
	require.Equal(t, 1, h.Stats(ctx).InFlight, "it holds its slot until the executor returns")

	// The executor returns with a transient error: no retry, no second end.
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("aborted"))))
	require.Equal(t, 0, h.Stats(ctx).InFlight)
	h.Clock.Advance(time.Hour)
	require.Equal(t, engine.StateCancelled, h.State(task.ID))
	require.Equal(t, []string{task.ID}, h.Exec.Started(), "never retried")

	require.NoError(t, h.Sync(context.Background()))
	evs, _ := h.Events().Read(0, 1000, nil)
	terminal := 0
	for _, ev := range evs {
		if ev.TaskID == task.ID && ev.Type == engine.EventState && ev.To.Terminal() {
			terminal++
		}
	}
	require.Equal(t, 1, terminal, "exactly one terminal event")
	require.Equal(t, engine.EventReleased, evs[len(evs)-1].Type)

	_, err = h.Cancel(context.Background(), task.ID, "again")
	require.Equal(t, engine.CodeConflict, engineErr(t, err).Code)
}

// TestAReleaseEventCarriesTheTimeOfTheRelease: a release changes no state,
// but it happens later than the cancellation or the timeout before it, and
// its event says when.
func TestAReleaseEventCarriesTheTimeOfTheRelease(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{LeaseGrace: 10 * time.Second})
	released := func(id string) []engine.Event {
		t.Helper()
		require.NoError(t, h.Sync(context.Background()))
		evs, _ := h.Events().Read(0, 1000, nil)
		var out []engine.Event
		for _, ev := range evs {
			if ev.TaskID == id && ev.Type == engine.EventReleased {
				out = append(out, ev)
			}
		}
		return out
	}
	lastState := func(id string) engine.Event {
		t.Helper()
		require.NoError(t, h.Sync(context.Background()))
		evs, _ := h.Events().Read(0, 1000, nil)
		var last engine.Event
		for _, ev := range evs {
			if ev.TaskID == id && ev.Type == engine.EventState {
				last = ev
			}
		}
		return last
	}

	// Cancelled, and its executor returns 3 s later.
	task := h.Submit(enginetest.Spec("a").Obj())
	cancelledAt := h.Clock.Now()
	_, err := h.Cancel(context.Background(), task.ID, "user asked")
	require.NoError(t, err)
	h.Clock.Advance(3 * time.Second)
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("aborted"))))
	evs := released(task.ID)
	require.Len(t, evs, 1)
	require.Equal(t, cancelledAt.Add(3*time.Second), evs[0].At, "the release's own time")
	require.Equal(t, engine.StateCancelled, lastState(task.ID).To)
	require.Equal(t, cancelledAt, lastState(task.ID).At, "the cancellation keeps its time")
	require.Equal(t, cancelledAt, h.Get(task.ID).UpdatedAt, "a release changes no state, nor the task's time")

	// Cancelled, and its executor never returns: the lease grace reclaims
	// the slot.
	task = h.Submit(enginetest.Spec("a").Obj())
	cancelledAt = h.Clock.Now()
	_, err = h.Cancel(context.Background(), task.ID, "")
	require.NoError(t, err)
	h.Clock.Advance(10 * time.Second) // the lease grace, from the cancellation
	evs = released(task.ID)
	require.Len(t, evs, 1)
	require.Contains(t, evs[0].Reason, "lease expired after cancellation")
	require.Equal(t, cancelledAt.Add(10*time.Second), evs[0].At)
	require.Equal(t, cancelledAt, h.Get(task.ID).UpdatedAt)

	// Timed out, and its instance confirms the end 2 s later.
	task = h.Submit(enginetest.Spec("a").Timeout(time.Second).Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
	h.Clock.Advance(time.Second)
	timedOutAt := h.Clock.Now()
	require.Equal(t, timedOutAt, lastState(task.ID).At)
	h.Clock.Advance(2 * time.Second)
	require.NoError(t, h.Exec.Fail(task.ID, context.DeadlineExceeded))
	evs = released(task.ID)
	require.Len(t, evs, 1)
	require.Contains(t, evs[0].Reason, "slot of timed-out attempt 1 released")
	require.Equal(t, timedOutAt.Add(2*time.Second), evs[0].At)
	require.Equal(t, timedOutAt, lastState(task.ID).At, "the timeout's events keep their time")

	// Timed out, and its executor never returns: the lease grace reclaims
	// the slot.
	task = h.Submit(enginetest.Spec("a").Timeout(time.Second).Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
	h.Clock.Advance(time.Second)
	timedOutAt = h.Clock.Now()
	h.Clock.Advance(10 * time.Second)
	evs = released(task.ID)
	require.Len(t, evs, 1)
	require.Contains(t, evs[0].Reason, "slot of timed-out attempt 1 reclaimed")
	require.Equal(t, timedOutAt.Add(10*time.Second), evs[0].At)
	require.Equal(t, timedOutAt, lastState(task.ID).At)
}

func TestCancelledTaskWhoseExecutorNeverReturnsIsReclaimedAfterTheGrace(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{LeaseGrace: time.Second})
	task := h.Submit(enginetest.Spec("a").Obj())
	_, err := h.Cancel(context.Background(), task.ID, "")
	require.NoError(t, err)
	require.Equal(t, 1, h.Stats(context.Background()).InFlight)
	h.Clock.Advance(time.Second)
	require.Equal(t, 0, h.Stats(context.Background()).InFlight)
	require.Equal(t, engine.StateCancelled, h.State(task.ID))
}

func TestCancelByFilter(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	paused(t, h, "main", true)
	a1 := h.Submit(enginetest.Spec("a").Obj())
	a2 := h.Submit(enginetest.Spec("a").Session("s").Obj())
	b1 := h.Submit(enginetest.Spec("b").Obj())
	got, err := h.CancelWhere(context.Background(), engine.TaskFilter{AgentID: "a"}, "agent retired")
	require.NoError(t, err)
	require.Equal(t, ids(a1, a2), got)
	require.Equal(t, engine.StateQueued, h.State(b1.ID))
	require.Equal(t, "agent retired", h.Get(a1.ID).Reason)
	_, err = h.CancelWhere(context.Background(), engine.TaskFilter{}, "")
	require.Equal(t, engine.CodeInvalidInput, engineErr(t, err).Code, "an empty filter would cancel everything")
}

func TestStopSession(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{SessionMaxInFlight: 2})
	r1 := h.Submit(enginetest.Spec("a").Session("s").Obj())
	r2 := h.Submit(enginetest.Spec("a").Session("s").Obj())
	q := h.Submit(enginetest.Spec("a").Session("s").Obj())
	got, err := h.StopSession(context.Background(), "s", false)
	require.NoError(t, err)
	require.Equal(t, []string{r1.ID}, got, "stop cancels the oldest running task")
	require.Equal(t, engine.StateAssigned, h.State(r2.ID))

	got, err = h.StopSession(context.Background(), "s", true)
	require.NoError(t, err)
	require.ElementsMatch(t, ids(r2, q), got)
	// Work for the session submitted before the cut-off and arriving late is refused.
	late := enginetest.Spec("a").Session("s").Obj()
	late.SubmittedAt = h.Clock.Now().Add(-time.Second)
	lt := h.Submit(late)
	require.Equal(t, engine.StateCancelled, lt.State)
	require.Equal(t, "session stopped", lt.Reason)
	fresh := h.Submit(enginetest.Spec("a").Session("s").Obj())
	require.NotEqual(t, engine.StateCancelled, fresh.State, "new work after the stop is welcome")
}

func TestInterruptCancelsTheSessionsRunningTaskAndJumpsAhead(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	running := h.Submit(enginetest.Spec("a").Session("s").Obj())
	queued := h.Submit(enginetest.Spec("a").Session("s").Obj())
	urgent := h.Submit(enginetest.Spec("a").Session("s").Interrupt().Obj())
	require.Equal(t, engine.StateCancelled, h.State(running.ID))
	require.Contains(t, h.Get(running.ID).Reason, "interrupted by task "+urgent.ID)
	require.NoError(t, h.Exec.Fail(running.ID, context.Canceled))
	require.Equal(t, engine.StateAssigned, h.State(urgent.ID), "it runs before the older queued task")
	require.Equal(t, engine.StateQueued, h.State(queued.ID))
}

func TestRetryTaskRunsAFailedTaskAgainAsANewTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Fail(task.ID, engine.Permanent(errors.New("nope"))))
	again, err := h.Retry(context.Background(), task.ID)
	require.NoError(t, err)
	require.NotEqual(t, task.ID, again.ID)
	require.Equal(t, task.ID, again.RetryOf)
	require.Equal(t, engine.StateFailed, h.State(task.ID), "terminal states never change")
	require.Equal(t, engine.StateAssigned, h.State(again.ID))

	backing := h.Submit(enginetest.Spec("b").Obj())
	require.NoError(t, h.Exec.Fail(backing.ID, engine.Transient(errors.New("x"))))
	_, err = h.Retry(context.Background(), backing.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateAssigned, h.State(backing.ID), "a task backing off runs at once")

	_, err = h.Retry(context.Background(), again.ID)
	require.Equal(t, engine.CodeConflict, engineErr(t, err).Code, "a running task cannot be retried")
	for _, st := range []engine.State{engine.StateRetryWait, engine.StateParked, engine.StateFailed,
		engine.StateCancelled, engine.StateExpired, engine.StateRejected} {
		require.Contains(t, err.Error(), st.String(), "the refusal names every state retryTask takes")
	}
}

// TestRetryTaskResubmitsTheOriginalsSpecWithoutItsKeyDependenciesAndBatch:
// what a resubmission keeps and drops, as the schema's retryTask says.
func TestRetryTaskResubmitsTheOriginalsSpecWithoutItsKeyDependenciesAndBatch(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	parent := h.Submit(enginetest.Spec("a").Obj())
	dep := h.Submit(enginetest.Spec("a").Obj())
	deadline := h.Clock.Now().Add(time.Hour)
	spec := enginetest.Spec("a").Lane("team").Session("s").Priority(engine.PriorityHigh).Action("click").
		Label("team", "x").Parent(parent.ID).DependsOn(dep.ID).Deadline(deadline).Timeout(3 * time.Second).
		Retry(engine.RetryPolicy{MaxAttempts: 1}).Idempotency("k").Obj()
	spec.Exhausted = engine.ExhaustedFail
	res, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: spec}}})
	require.NoError(t, err)
	require.NoError(t, res.Items[0].Err)
	orig := res.Items[0].Task
	require.NotEmpty(t, orig.Spec.BatchID)
	require.NoError(t, h.Exec.Succeed(dep.ID, `{}`))
	require.NoError(t, h.Exec.Fail(orig.ID, engine.Permanent(errors.New("nope"))))
	require.Equal(t, engine.StateFailed, h.State(orig.ID))

	again, err := h.Retry(ctx, orig.ID)
	require.NoError(t, err)
	require.Equal(t, orig.ID, again.RetryOf)
	got, want := again.Spec, h.Get(orig.ID).Spec
	require.Equal(t, want.AgentID, got.AgentID)
	require.Equal(t, "team", got.Lane)
	require.Equal(t, "s", got.SessionKey)
	require.Equal(t, engine.PriorityHigh, got.Priority)
	require.Equal(t, want.Action, got.Action)
	require.Equal(t, map[string]string{"team": "x"}, got.Labels)
	require.Equal(t, parent.ID, got.ParentID)
	require.True(t, deadline.Equal(got.Deadline), "a deadline still ahead is kept")
	require.Equal(t, 3*time.Second, got.Timeout)
	require.Equal(t, 1, got.Retry.MaxAttempts)
	require.Equal(t, engine.ExhaustedFail, got.Exhausted)
	require.Empty(t, got.IdempotencyKey, "the key keeps naming the original")
	require.Empty(t, got.DependsOn)
	require.Empty(t, got.BatchID)
	require.Len(t, h.Get(orig.ID).Attempts, 1)
	atts := h.Get(again.ID).Attempts
	require.Len(t, atts, 1, "a new task, with none of the original's attempts: only its own first, dispatched at once")
	require.Equal(t, 1, atts[0].N)
	same := h.Submit(spec)
	require.Equal(t, orig.ID, same.ID, "the key still names the original")
}

// TestRetryTaskRunsAnExpiredTaskAgainWithoutItsDeadline: an EXPIRED task's
// deadline has passed, so its resubmission runs without it rather than
// being refused for a deadline in the past.
func TestRetryTaskRunsAnExpiredTaskAgainWithoutItsDeadline(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	paused(t, h, "main", true)
	task := h.Submit(enginetest.Spec("a").Deadline(h.Clock.Now().Add(time.Minute)).Obj())
	h.Clock.Advance(time.Minute)
	require.Equal(t, engine.StateExpired, h.State(task.ID))
	paused(t, h, "main", false)

	again, err := h.Retry(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, task.ID, again.RetryOf)
	require.True(t, again.Spec.Deadline.IsZero(), "the deadline that passed is dropped")
	require.Equal(t, engine.StateAssigned, h.State(again.ID))
}

func TestRetentionPurgesOldTerminalTasks(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{Retention: time.Hour})
	task := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Succeed(task.ID, `{}`))
	paused(t, h, "team", true)
	keep := h.Submit(enginetest.Spec("a").Lane("team").Obj())
	h.Clock.Advance(59 * time.Minute)
	require.Equal(t, engine.StateSucceeded, h.State(task.ID))
	h.Clock.Advance(7 * time.Minute)
	_, err := h.Engine.Task(context.Background(), task.ID)
	require.Equal(t, engine.CodeNotFound, engineErr(t, err).Code)
	require.Equal(t, engine.StateQueued, h.State(keep.ID), "live tasks are never purged")
	require.EqualValues(t, 1, h.Stats(context.Background()).Purged)
}

func TestShutdownCancelsWhatRunsPastTheGrace(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	running := h.Submit(enginetest.Spec("a").Obj())
	paused(t, h, "team", true)
	queued := h.Submit(enginetest.Spec("a").Lane("team").Obj())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.NoError(t, h.Shutdown(ctx))
	require.Equal(t, engine.StateCancelled, h.State(running.ID))
	got := h.Get(running.ID)
	require.Equal(t, "shutdown", got.Reason)
	// Its executor never returned: the attempt ended at the shutdown, the
	// engine's end, and the record says so.
	require.Len(t, got.Attempts, 1)
	att := got.Attempts[0]
	require.False(t, att.EndedAt.IsZero(), "the attempt cancelled at the shutdown has ended")
	require.Equal(t, engine.EndedByEngine, att.EndedBy)
	require.Equal(t, "cancelled: shutdown", att.Error)
	require.Equal(t, engine.StateCancelled, h.State(queued.ID), "the memory store keeps nothing: queued work is cancelled too")
	// Its executor's late answer changes nothing of that.
	_ = h.Exec.Finish(running.ID, engine.Outcome{Result: []byte(`{}`)})
	require.Equal(t, engine.StateCancelled, h.State(running.ID))
	late := h.Get(running.ID).Attempts[0]
	require.Equal(t, engine.EndedByEngine, late.EndedBy)
	require.Equal(t, "cancelled: shutdown", late.Error)
	require.False(t, late.EndedAt.IsZero())
	_, err := h.Engine.Submit(context.Background(), enginetest.Spec("a").Obj())
	require.Equal(t, engine.CodeDraining, engineErr(t, err).Code)
}

// durableGate is a memory store that calls itself durable and holds each
// commit until released: it lets a test look at the engine between a
// submission and its commit.
type durableGate struct {
	*memory.Store
	release chan struct{}
	entered chan struct{} // if set, told of each commit as it reaches the gate
}

func (g durableGate) Durable() bool { return true }

func (g durableGate) Commit(ctx context.Context, b *engine.Batch) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.release
	return g.Store.Commit(ctx, b)
}

func TestWithADurableStoreATaskRunsOnlyOnceItsSubmissionAndAttemptAreCommitted(t *testing.T) {
	t.Parallel()
	gate := durableGate{Store: memory.New(memory.Options{}), release: make(chan struct{}), entered: make(chan struct{}, 1)}
	x := enginetest.NewExecutor()
	// What the store holds at the moment the executor is called.
	onDisk := make(chan *engine.Task, 1)
	x.Auto = func(run *engine.Run) engine.Outcome {
		stored, err := gate.Task(context.Background(), run.TaskID())
		assert.NoError(t, err)
		onDisk <- stored
		return engine.Outcome{Result: []byte(`{}`)}
	}
	e, err := engine.New(engine.Options{Store: gate, Executor: x})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background())) // an empty store: nothing to commit at start
	submitted := make(chan *engine.Task)
	go func() {
		task, err := e.Submit(context.Background(), enginetest.Spec("a").Obj())
		assert.NoError(t, err)
		submitted <- task
	}()
	<-gate.entered // the submission's commit waits at the gate
	require.Empty(t, x.Started(), "nothing runs while the submission is not durable")
	select {
	case <-submitted:
		t.Fatal("Submit returned before the commit")
	default:
	}
	// Let commits through one at a time. The attempt is recorded in the
	// submission's commit or in a later one; whichever it is, the executor
	// finds it on disk.
	var task *engine.Task
	for stored := (*engine.Task)(nil); stored == nil; {
		select {
		case gate.release <- struct{}{}:
		case task = <-submitted:
		case stored = <-onDisk:
			require.Equal(t, engine.StateAssigned, stored.State)
			require.Len(t, stored.Attempts, 1, "the attempt is on disk before it starts")
		case <-time.After(5 * time.Second):
			t.Fatal("the task never started")
		}
	}
	if task == nil {
		task = <-submitted
	}
	require.Equal(t, []string{task.ID}, x.Started())
	close(gate.release)
	require.NoError(t, e.Shutdown(context.Background()))
}

func TestWithADurableStoreARefusedOrRepeatedSubmissionAnswersAtOnce(t *testing.T) {
	t.Parallel()
	gate := durableGate{Store: memory.New(memory.Options{}), release: make(chan struct{})}
	close(gate.release) // commits pass
	x := enginetest.NewExecutor()
	// Attempts finish at once: a task left running would hold Shutdown.
	x.Auto = func(*engine.Run) engine.Outcome { return engine.Outcome{Result: []byte(`{}`)} }
	e, err := engine.New(engine.Options{Store: gate, Executor: x})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	defer func() { _ = e.Shutdown(context.Background()) }()
	first, err := e.Submit(context.Background(), enginetest.Spec("a").Idempotency("k").Obj())
	require.NoError(t, err)
	require.NoError(t, e.Sync(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	again, err := e.Submit(ctx, enginetest.Spec("a").Idempotency("k").Obj())
	require.NoError(t, err, "a repeated key answers with the original, without waiting for a commit that never comes")
	require.Equal(t, first.ID, again.ID)
	e.Drain(ctx)
	require.NoError(t, e.Sync(context.Background()))
	_, err = e.Submit(ctx, enginetest.Spec("a").Obj())
	require.True(t, engine.IsCode(err, engine.CodeDraining), "draining answers at once: %v", err)
}

func TestAChatTaskGetsTheChatTimeoutAndMayNotAskForMoreThanItsMaximum(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	spec := enginetest.Spec("x").Obj()
	spec.Action, spec.Instruction = nil, "summarise the page"
	chat := h.Submit(spec)
	click := h.Submit(enginetest.Spec("y").Obj())
	deadline := func(id string) time.Duration {
		t.Helper()
		r := h.Exec.Run(id)
		require.NotNil(t, r, "%s runs", id)
		d, _ := r.Deadline()
		return d.Sub(h.Clock.Now())
	}
	require.Equal(t, engine.DefaultChatTimeout, deadline(chat.ID), "a chat turn gets 120 s, not the lane's 60 s")
	require.Equal(t, engine.DefaultTimeout, deadline(click.ID))
	spec.Timeout = engine.DefaultChatMaxTimeout + time.Second
	_, err := h.Engine.Submit(context.Background(), spec)
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "more than 600 s is refused: %v", err)
}

// retryAnswer is a retry policy that gives one answer to every failure.
type retryAnswer policy.Action

func (a retryAnswer) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.Action(a)}
}

// A retry policy that parks or fails a task before its budget is spent is
// recorded as that policy's choice, naming it; "retry budget spent" stays
// for the budget itself.
func TestARetryPolicysEarlyParkOrFailNamesThePolicy(t *testing.T) {
	h := enginetest.New(t, nil)
	require.NoError(t, h.SetRetry("", "stopper", retryAnswer(policy.ActionPark)))
	parked := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Fail(parked.ID, engine.Transient(errors.New("502 from instance"))))
	got := h.Get(parked.ID)
	require.Equal(t, engine.StateParked, got.State)
	require.Equal(t, "parked by retry policy stopper: 502 from instance", got.Reason)

	failing := enginetest.Spec("b").Obj()
	failing.Exhausted = engine.ExhaustedFail
	failed := h.Submit(failing)
	require.NoError(t, h.Exec.Fail(failed.ID, engine.Transient(errors.New("503"))))
	got = h.Get(failed.ID)
	require.Equal(t, engine.StateFailed, got.State)
	require.Contains(t, got.Reason, "failed by retry policy stopper")
	require.Contains(t, got.Reason, "503")

	require.NoError(t, h.SetRetry("", "quitter", retryAnswer(policy.ActionFail)))
	quit := h.Submit(enginetest.Spec("c").Obj())
	require.NoError(t, h.Exec.Fail(quit.ID, engine.Transient(errors.New("captcha"))))
	require.Equal(t, "failed by retry policy quitter: captcha", h.Get(quit.ID).Reason)
}

// The attempt budget is the engine's: a retry policy that retries every
// failure at once is obeyed within the task's budget (its own maxAttempts,
// else its lane's, else the default of 4), and no attempt past it is
// started; the task becomes what its exhausted setting says, with a reason
// that says the budget was spent and that the policy asked for more.
func TestARetryPolicyCannotRetryPastTheAttemptBudget(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{Lanes: []engine.LaneConfig{
		{Name: "main", MaxInFlight: 4},
		{Name: "three", MaxInFlight: 4, Retry: engine.RetryPolicy{MaxAttempts: 3}, Exhausted: engine.ExhaustedFail},
	}}
	h := enginetest.New(t, &cfg)
	require.NoError(t, h.SetRetry("", "forever", retryAnswer(policy.ActionRetry)))
	// failUntilSettled fails every attempt of id with err until it stops
	// being retried, and returns the task; more attempts than any budget
	// fail the test.
	failUntilSettled := func(id string, err error) *engine.Task {
		t.Helper()
		for range 101 {
			if h.Exec.Run(id) == nil {
				return h.Get(id)
			}
			require.NoError(t, h.Exec.Fail(id, err))
		}
		t.Fatalf("%s: still retried after 101 attempts", id)
		return nil
	}

	lane := failUntilSettled(h.Submit(enginetest.Spec("a").Lane("three").Obj()).ID, engine.Transient(errors.New("no such element")))
	require.Len(t, lane.Attempts, 3, "the lane's maxAttempts is the ceiling: %s %q", lane.State, lane.Reason)
	require.Equal(t, engine.StateFailed, lane.State, "the lane's exhausted tasks fail")
	require.Equal(t, "retry budget of 3 attempts spent, though retry policy forever asked for another: no such element", lane.Reason)

	once := failUntilSettled(h.Submit(enginetest.Spec("b").Lane("three").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj()).ID,
		engine.Transient(errors.New("interrupted")))
	require.Len(t, once.Attempts, 1, "a task's own maxAttempts: 1 is at most once, whatever the policy says")
	require.Equal(t, engine.StateFailed, once.State)

	def := failUntilSettled(h.Submit(enginetest.Spec("c").Obj()).ID, engine.Permanent(errors.New("404")))
	require.Len(t, def.Attempts, engine.DefaultRetryPolicy().MaxAttempts, "a lane without a retry policy has the default budget")
	require.Equal(t, engine.StateParked, def.State, "the default exhausted setting parks")
	require.Equal(t, "retry budget of 4 attempts spent, though retry policy forever asked for another: 404", def.Reason)

	// An operator's reset gives the task a new budget, which the policy
	// spends as before.
	_, err := h.Reset(context.Background(), def.ID)
	require.NoError(t, err)
	def = failUntilSettled(def.ID, engine.Transient(errors.New("502")))
	require.Len(t, def.Attempts, 2*engine.DefaultRetryPolicy().MaxAttempts)
	require.Equal(t, engine.StateParked, def.State)
}

// retryLater is a retry policy that retries every failure after a second.
type retryLater struct{}

func (retryLater) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionRetry, DelayMs: 1000}
}

// A retry policy that retries a failure its executor called permanent
// ("… (not retryable)") is said to do so in the task's reason, which does
// not repeat the verdict it overrode; the attempt keeps its error.
func TestARetriedPermanentFailureIsNotCalledNotRetryable(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	require.NoError(t, h.SetRetry("", "later", retryLater{}))
	task := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Fail(task.ID, engine.Permanent(errors.New("500 Internal Server Error [error]: element not found (not retryable)"))))
	got := h.Get(task.ID)
	require.Equal(t, "retry in 1s by retry policy later, which retries a permanent failure: 500 Internal Server Error [error]: element not found", got.Reason)
	require.Equal(t, "500 Internal Server Error [error]: element not found (not retryable)", got.Attempts[0].Error)
}

// A batch's items labelled alike share the engine's copy of their labels;
// items labelled otherwise keep their own, and none is the caller's map.
func TestABatchKeepsOneCopyOfLabelsItsItemsShare(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	mine := map[string]string{"team": "x"}
	same := map[string]string{"team": "x"}
	spec := func(labels map[string]string) engine.TaskSpec {
		s := enginetest.Spec("a").Obj()
		s.Labels = labels
		return s
	}
	res, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{
		{Spec: spec(mine)}, {Spec: spec(same)}, {Spec: spec(nil)}, {Spec: spec(map[string]string{"team": "y"})}, {Spec: spec(mine)},
	}})
	require.NoError(t, err)
	var got []map[string]string
	for _, it := range res.Items {
		require.NoError(t, it.Err)
		got = append(got, h.Get(it.Task.ID).Spec.Labels)
	}
	require.Equal(t, []map[string]string{{"team": "x"}, {"team": "x"}, nil, {"team": "y"}, {"team": "x"}}, got)
	mine["team"], same["team"] = "changed", "changed"
	require.Equal(t, "x", got[0]["team"], "the engine keeps a copy, not the caller's map")
	require.Equal(t, "x", got[1]["team"])
	require.True(t, reflect.ValueOf(got[0]).UnsafePointer() == reflect.ValueOf(got[1]).UnsafePointer(), "the same labels share one copy")
	require.False(t, reflect.ValueOf(got[3]).UnsafePointer() == reflect.ValueOf(got[0]).UnsafePointer())
}

// The engine copies a batch's specs in blocks: each admitted task keeps a
// spec of its own, holding its item's values, whichever items around it
// were refused, and none of it is the caller's.
func TestABatchsTasksKeepSpecsOfTheirOwn(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	var items []engine.BatchItem
	for i := range 40 {
		s := enginetest.Spec(fmt.Sprintf("agent-%d", i)).Obj()
		s.Action.Selector = fmt.Sprintf("#item-%d", i)
		s.DependsOn = nil
		if i%13 == 3 || i == 16 || i == 17 {
			s.Priority = 9 // refused: a copy begun and left
		}
		items = append(items, engine.BatchItem{Spec: s})
	}
	res, err := h.SubmitBatch(context.Background(), engine.BatchSpec{Items: items})
	require.NoError(t, err)
	seen := map[*engine.TaskSpec]int{}
	for i, it := range res.Items {
		if items[i].Spec.Priority == 9 {
			require.Error(t, it.Err, "item %d", i)
			continue
		}
		require.NoError(t, it.Err, "item %d", i)
		got := h.Get(it.Task.ID).Spec
		require.Equal(t, fmt.Sprintf("agent-%d", i), got.AgentID)
		require.Equal(t, fmt.Sprintf("#item-%d", i), got.Action.Selector)
		if j, dup := seen[got]; dup {
			t.Fatalf("items %d and %d share one spec", j, i)
		}
		seen[got] = i
	}
	require.Len(t, seen, 40-4) // items 3, 16, 17 and 29 refused
	for i := range items {
		items[i].Spec.Action.Selector = "changed"
	}
	for i, it := range res.Items {
		if it.Err == nil {
			require.Equal(t, fmt.Sprintf("#item-%d", i), h.Get(it.Task.ID).Spec.Action.Selector, "the engine keeps a copy")
		}
	}
}

// A batch that asks for ids only gets each task's id and no snapshot;
// otherwise ItemResult.ID is the snapshot's id. Errors are the same
// either way, a task recorded REJECTED (QUEUE_FULL) included.
func TestABatchThatAsksForIDsOnlyGetsNoSnapshots(t *testing.T) {
	t.Parallel()
	for _, idsOnly := range []bool{false, true} {
		h := enginetest.New(t, &engine.Config{MaxInFlight: 1, MaxQueuedPerAgent: 2})
		items := []engine.BatchItem{{Key: "x", Spec: enginetest.Spec("a").Obj()}}
		for range 4 {
			items = append(items, engine.BatchItem{Spec: enginetest.Spec("a").Obj()})
		}
		bad := enginetest.Spec("a").Obj()
		bad.Priority = 9
		items = append(items, engine.BatchItem{Spec: bad})
		res, err := h.SubmitBatch(context.Background(), engine.BatchSpec{Items: items, IDsOnly: idsOnly})
		require.NoError(t, err)
		var codes []string
		for i, it := range res.Items {
			code := ""
			if ee := (*engine.Error)(nil); errors.As(it.Err, &ee) {
				code = string(ee.Code)
			}
			codes = append(codes, code)
			if i == len(items)-1 {
				require.Empty(t, it.ID, "a refused item has no task")
				require.Nil(t, it.Task)
				continue
			}
			require.NotEmpty(t, it.ID, "item %d", i)
			require.Equal(t, it.ID, h.Get(it.ID).ID)
			if idsOnly {
				require.Nil(t, it.Task, "item %d", i)
			} else {
				require.Equal(t, it.ID, it.Task.ID, "item %d", i)
			}
		}
		require.Equal(t, []string{"", "", "QUEUE_FULL", "QUEUE_FULL", "QUEUE_FULL", "INVALID_INPUT"}, codes, "ids only: %v", idsOnly)
	}
}
