package engine_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

// fault is an attempt that ended because its instance refused the token.
func fault() error {
	return engine.Transient(fmt.Errorf("pinchtab navigate: 401 Unauthorized [bad_token]: %w", engine.ErrInstanceFault))
}

func TestInstanceFaultsDoNotConsumeTheAttemptBudget(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{InstanceFaultDelay: 2 * time.Second})
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: 10 * time.Millisecond, Multiplier: 1}).Obj())
	for i := range 5 {
		require.NoError(t, h.Exec.Fail(task.ID, fault()), "fault %d", i+1)
		got := h.Get(task.ID)
		require.Equal(t, engine.StateRetryWait, got.State, "an instance fault is retried whatever the attempt budget")
		require.Equal(t, h.Clock.Now().Add(2*time.Second), got.NextRunAt, "after the instance-fault delay")
		require.Contains(t, got.Attempts[i].Error, "instance fault: ")
		require.Contains(t, got.Attempts[i].Error, "401 Unauthorized [bad_token]", "the instance's own reason is kept")
		require.Contains(t, got.Reason, "bad_token")
		h.Clock.Advance(2 * time.Second)
	}
	// The task's own failures still have their whole budget: 2 attempts.
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("flaky"))))
	require.Equal(t, engine.StateRetryWait, h.State(task.ID))
	h.Clock.Advance(10 * time.Millisecond)
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("flaky"))))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateParked, got.State)
	require.Len(t, got.Attempts, 7)
}

func TestInstanceFaultsBeyondTheirBudgetCountLikeAnyFailure(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{InstanceFaultBudget: 2, InstanceFaultDelay: time.Second})
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: 10 * time.Millisecond, Multiplier: 1}).Obj())
	for range 2 {
		require.NoError(t, h.Exec.Fail(task.ID, fault()))
		h.Clock.Advance(time.Second)
	}
	// The budget is spent: the third fault is the task's first counted failure,
	// the fourth its second and last.
	require.NoError(t, h.Exec.Fail(task.ID, fault()))
	require.Equal(t, engine.StateRetryWait, h.State(task.ID))
	require.Equal(t, h.Clock.Now().Add(10*time.Millisecond), h.Get(task.ID).NextRunAt, "the lane's backoff, not the fault delay")
	h.Clock.Advance(10 * time.Millisecond)
	require.NoError(t, h.Exec.Fail(task.ID, fault()))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateParked, got.State, "nothing waits for ever on a dead instance")
	require.Contains(t, got.Reason, "bad_token")
}

func TestNoInstanceFaultBudgetCountsEveryFault(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{InstanceFaultBudget: -1})
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}).Obj())
	require.NoError(t, h.Exec.Fail(task.ID, fault()))
	require.Equal(t, engine.StateParked, h.State(task.ID))
}

func TestASessionStaysWithItsTabWhileItsInstanceIsUnhealthy(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 2, Healthy: true})
	h.SetInstance(engine.InstanceInfo{ID: "i2", Capacity: 2, Healthy: true})
	first := h.Submit(enginetest.Spec("a").Session("s").Instance("i1").Obj())
	require.NoError(t, h.Exec.Finish(first.ID, engine.Outcome{InstanceID: "i1", TabID: "T1"}))

	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 2, Healthy: false})
	next := h.Submit(enginetest.Spec("a").Session("s").Obj())
	starts := h.Exec.Starts()
	last := starts[len(starts)-1]
	require.Equal(t, next.ID, last.TaskID)
	require.Equal(t, "i1", last.InstanceID, "the session's page is on i1: not silently moved to i2")
	require.Equal(t, "T1", last.TabID)
}

func TestTheInstanceFaultFlagCountsNotTheMessage(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{InstanceFaultBudget: 5, InstanceFaultDelay: time.Second})
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 2, Backoff: 10 * time.Millisecond, Multiplier: 1}).Obj())
	// A task's own failure whose text happens to read like a fault is the
	// task's: it spends the budget.
	require.NoError(t, h.Exec.Fail(task.ID, engine.Transient(errors.New("instance fault: said the page"))))
	got := h.Get(task.ID)
	require.False(t, got.Attempts[0].InstanceFault)
	require.Equal(t, h.Clock.Now().Add(10*time.Millisecond), got.NextRunAt, "the lane's backoff: a counted failure")
	h.Clock.Advance(10 * time.Millisecond)
	// A real fault is flagged and forgiven.
	require.NoError(t, h.Exec.Fail(task.ID, fault()))
	got = h.Get(task.ID)
	require.True(t, got.Attempts[1].InstanceFault)
	require.Equal(t, engine.StateRetryWait, got.State)
	require.Equal(t, h.Clock.Now().Add(time.Second), got.NextRunAt, "the instance-fault delay")
	require.Contains(t, got.Reason, "instance fault 1/5")
}

func TestAnAttemptKeepsTheExecutorsTabAndActionTimes(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Finish(task.ID, engine.Outcome{TabTime: 3 * time.Millisecond, ActionTime: 40 * time.Millisecond}))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateSucceeded, got.State)
	require.Equal(t, 3*time.Millisecond, got.Attempts[0].TabTime)
	require.Equal(t, 40*time.Millisecond, got.Attempts[0].ActionTime)
	require.False(t, got.Attempts[0].InstanceFault)
}

// sentFault is an attempt that ended because its instance died after the
// request was sent: the action may have run.
func sentFault() error {
	return engine.Transient(fmt.Errorf("instance p: %w %w: pinchtab click (POST /tabs/T1/action): EOF", engine.ErrInstanceFault, engine.ErrMayHaveRun))
}

// mayHaveRun is the start of the reason of a single-attempt task whose
// instance failed after the request was sent.
const mayHaveRun = "the instance failed after the request was sent, so the action may have run and was not repeated (maxAttempts 1): "

func TestAFaultAfterTheRequestWasSentEndsASingleAttemptTask(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		exhausted engine.Exhausted
		state     engine.State
	}{
		{"parked by default", "", engine.StateParked},
		{"failed when its exhausted tasks fail", engine.ExhaustedFail, engine.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := enginetest.New(t, &engine.Config{InstanceFaultDelay: time.Second})
			spec := enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}).Obj()
			spec.Exhausted = tc.exhausted
			task := h.Submit(spec)
			// A fault that certainly did not reach the instance is forgiven,
			// as for every task: the instance was restarting.
			require.NoError(t, h.Exec.Fail(task.ID, fault()))
			require.Equal(t, engine.StateRetryWait, h.State(task.ID))
			h.Clock.Advance(time.Second)
			// One after the request was sent is not: the click may have
			// happened, and a retry would click again.
			require.NoError(t, h.Exec.Fail(task.ID, sentFault()))
			got := h.Get(task.ID)
			require.Equal(t, tc.state, got.State)
			require.Equal(t, "retry budget spent: "+mayHaveRun+"instance p: instance fault after the request was sent: pinchtab click (POST /tabs/T1/action): EOF", got.Reason)
			require.Len(t, got.Attempts, 2)
			require.True(t, got.Attempts[0].InstanceFault)
			require.False(t, got.Attempts[1].InstanceFault, "it counts")
			require.True(t, strings.HasPrefix(got.Attempts[1].Error, mayHaveRun), got.Attempts[1].Error)
			require.Equal(t, engine.CodeInstanceFault, got.Attempts[1].Code)
			require.Len(t, h.Exec.Starts(), 2, "never started again")
		})
	}
}

func TestALanesSingleAttemptIsPromisedAtMostOnceToo(t *testing.T) {
	t.Parallel()
	lanes := engine.DefaultLanes()
	lanes[0].Retry = engine.RetryPolicy{MaxAttempts: 1, Backoff: time.Millisecond, Multiplier: 1}
	h := enginetest.New(t, &engine.Config{Lanes: lanes, InstanceFaultDelay: time.Second})
	task := h.Submit(enginetest.Spec("a").Lane(lanes[0].Name).Obj())
	require.NoError(t, h.Exec.Fail(task.ID, sentFault()))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateParked, got.State)
	require.Contains(t, got.Reason, mayHaveRun)
}

func TestAFaultAfterTheRequestWasSentIsForgivenATaskAllowedMoreAttempts(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{InstanceFaultDelay: time.Second})
	task := h.Submit(enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 3, Backoff: 10 * time.Millisecond, Multiplier: 1}).Obj())
	for i := range 4 {
		require.NoError(t, h.Exec.Fail(task.ID, sentFault()))
		got := h.Get(task.ID)
		require.Equal(t, engine.StateRetryWait, got.State, "fault %d: a task allowed three attempts accepts a repeat", i+1)
		require.Equal(t, h.Clock.Now().Add(time.Second), got.NextRunAt, "after the instance-fault delay")
		require.True(t, got.Attempts[i].InstanceFault)
		require.True(t, strings.HasPrefix(got.Attempts[i].Error, "instance fault: "), got.Attempts[i].Error)
		require.Contains(t, got.Reason, "instance fault "+strconv.Itoa(i+1)+"/30")
		h.Clock.Advance(time.Second)
	}
}
