package pull_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/pull"
)

func setup(t *testing.T) (*enginetest.Harness, *pull.Manager) {
	t.Helper()
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	h := enginetest.New(t, &engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}})
	m, err := pull.New(context.Background(), pull.Options{Engine: h.Engine, Clock: h.Clock})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return h, m
}

func lost(t *testing.T, err error, end pull.End) {
	t.Helper()
	var le *pull.LostError
	require.ErrorAs(t, err, &le)
	require.Equal(t, end, le.End, le.Reason)
}

// waitState waits for the goroutine that ends an expired or cancelled
// lease to have finished the attempt.
func waitState(t *testing.T, h *enginetest.Harness, id string, want engine.State) {
	t.Helper()
	waitfor.Eventually(t, "task "+id+" is "+want.String(), func() bool { return h.State(id) == want })
}

func TestALeaseRunsOutOnTheEnginesClockAndSaysSo(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	ls, err := m.Lease(ctx, "jobs", 1, 10*time.Second, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, h.Clock.Now().Add(10*time.Second), ls[0].ExpiresAt)
	l, ok := m.Of(id)
	require.True(t, ok)
	require.Empty(t, l.ID, "a task's lease shows no id")
	require.Equal(t, "w1", l.Worker)

	h.Clock.Advance(10 * time.Second)
	waitState(t, h, id, engine.StateRetryWait)
	got := h.Get(id)
	require.Contains(t, got.Attempts[0].Error, "lease expired: w1 did not complete or renew it")
	_, err = m.Renew(ctx, ls[0].ID, time.Minute)
	lost(t, err, pull.EndExpired)
	_, err = m.Complete(ctx, ls[0].ID, []byte(`1`))
	lost(t, err, pull.EndExpired)
	_, ok = m.Of(id)
	require.False(t, ok)
}

func TestAWorkerLearnsOfACancelOnItsNextCallAndItsResultIsNotTaken(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	ls, err := m.Lease(ctx, "jobs", 1, 5*time.Second, 0, "w1")
	require.NoError(t, err)
	_, err = h.Cancel(ctx, id, "not needed")
	require.NoError(t, err)
	_, err = m.Lookup(ls[0].ID) // the cancel is on the run at once: no waiting
	lost(t, err, pull.EndCancelled)
	require.Contains(t, err.Error(), "not needed")
	_, err = m.Complete(ctx, ls[0].ID, []byte(`1`))
	lost(t, err, pull.EndCancelled)
	require.Equal(t, engine.StateCancelled, h.State(id))
}

func TestBadArgumentsAreTypedAndLeaseNothing(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id := h.Submit(enginetest.Spec("a").Lane("jobs").Action("job").Obj()).ID
	for _, c := range []struct {
		max          int
		leaseFor, wt time.Duration
		field        string
	}{
		{0, time.Minute, 0, "max"}, {101, time.Minute, 0, "max"},
		{1, 999 * time.Millisecond, 0, "leaseForMs"}, {1, 25 * time.Hour, 0, "leaseForMs"},
		{1, time.Minute, -time.Second, "waitMs"}, {1, time.Minute, 61 * time.Second, "waitMs"},
	} {
		_, err := m.Lease(ctx, "jobs", c.max, c.leaseFor, c.wt, "w")
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), "%+v", c)
		require.Equal(t, engine.CodeInvalidInput, ee.Code)
		require.Equal(t, c.field, ee.Field)
	}
	require.Equal(t, engine.StateQueued, h.State(id))
	_, err := m.Complete(ctx, "garbage", nil)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, "leaseId", ee.Field)
}

func TestClosingAnswersAWaitingCallAtOnce(t *testing.T) {
	t.Parallel()
	_, m := setup(t)
	done := make(chan error, 1)
	go func() {
		ls, err := m.Lease(context.Background(), "jobs", 1, time.Minute, time.Minute, "w")
		if err == nil && len(ls) != 0 {
			err = errors.New("leased something from an empty lane")
		}
		done <- err
	}()
	m.Close()
	require.NoError(t, <-done)
}
