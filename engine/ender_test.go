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

// An attempt records who ended it, whatever its error code says: a pushed
// lane's executor (its answer, its error, even one coded timeout), a pull
// lane's worker (an outcome marked ByWorker, even coded timeout), or the
// engine itself (a timeout, an expired lease, a cancellation, and an
// outcome of a pull lane's run not marked as its worker's).
func TestAnAttemptRecordsWhoEndedIt(t *testing.T) {
	t.Parallel()
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	h := enginetest.New(t, &engine.Config{LeaseGrace: time.Second, Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}})
	ctx := context.Background()
	once := engine.RetryPolicy{MaxAttempts: 1}
	endedBy := func(id string) engine.Ender {
		t.Helper()
		atts := h.Get(id).Attempts
		require.NotEmpty(t, atts)
		att := atts[len(atts)-1]
		require.False(t, att.EndedAt.IsZero(), "attempt %d of %s has ended", att.N, id)
		return att.EndedBy
	}

	ok := h.Submit(enginetest.Spec("a").Retry(once).Obj())
	require.Equal(t, engine.EndedByUnknown, h.Get(ok.ID).Attempts[0].EndedBy, "an attempt under way has no ender yet")
	require.NoError(t, h.Exec.Succeed(ok.ID, `{}`))
	require.Equal(t, engine.EndedByExecutor, endedBy(ok.ID))
	coded := h.Submit(enginetest.Spec("a").Retry(once).Obj())
	require.NoError(t, h.Exec.Finish(coded.ID, engine.Outcome{Err: engine.Transient(errors.New("upstream timed out")), Code: engine.CodeTimeout}))
	require.Equal(t, engine.CodeTimeout, h.Get(coded.ID).Attempts[0].Code)
	require.Equal(t, engine.EndedByExecutor, endedBy(coded.ID), "the executor's timeout is its own")

	timedOut := h.Submit(enginetest.Spec("a").Timeout(5 * time.Second).Retry(once).Obj())
	late := h.Exec.Run(timedOut.ID)
	h.Clock.Advance(5 * time.Second)
	require.Equal(t, engine.EndedByEngine, endedBy(timedOut.ID))
	late.Finish(engine.Outcome{Result: []byte(`{}`)})
	require.Equal(t, engine.EndedByEngine, endedBy(timedOut.ID), "a late answer changes nothing")

	cancelled := h.Submit(enginetest.Spec("a").Obj())
	_, err := h.Cancel(ctx, cancelled.ID, "not needed")
	require.NoError(t, err)
	require.NoError(t, h.Exec.Fail(cancelled.ID, context.Canceled))
	require.Equal(t, engine.EndedByEngine, endedBy(cancelled.ID))

	pull := func() *engine.Run {
		t.Helper()
		h.Submit(enginetest.Spec("a").Lane("jobs").Retry(once).Obj())
		runs, err := h.Pull(ctx, "jobs", 1, time.Minute, "w1")
		require.NoError(t, err)
		require.Len(t, runs, 1)
		return runs[0]
	}
	r := pull()
	r.Finish(engine.Outcome{Err: engine.Transient(errors.New("upstream timed out")), Code: engine.CodeTimeout, ByWorker: true})
	require.Equal(t, engine.EndedByWorker, endedBy(r.TaskID()), "the worker's failure, code timeout or not")
	r = pull()
	r.Finish(engine.Outcome{Result: []byte(`{}`), ByWorker: true})
	require.Equal(t, engine.EndedByWorker, endedBy(r.TaskID()))
	r = pull()
	r.Finish(engine.Outcome{Err: engine.Transientf("lease expired: w1 did not complete or renew it"), Code: engine.CodeLeaseExpired})
	require.Equal(t, engine.EndedByEngine, endedBy(r.TaskID()), "an outcome made for the worker's lease")
	r = pull()
	h.Clock.Advance(time.Minute + time.Second) // its lease and its grace: nobody finishes the run
	require.Equal(t, engine.EndedByEngine, endedBy(r.TaskID()))
	require.Equal(t, engine.CodeLeaseExpired, h.Get(r.TaskID()).Attempts[0].Code)
}

// An attempt interrupted by a restart is the engine's to have ended.
func TestAnInterruptedAttemptIsEndedByTheEngine(t *testing.T) {
	t.Parallel()
	start := processOn(t, memory.New(memory.Options{}), clock.NewFake(enginetest.Epoch))
	e1, _ := start()
	ctx := context.Background()
	running, err := e1.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	// The process dies here: no shutdown.

	e2, _ := start()
	got, err := e2.Task(ctx, running.ID)
	require.NoError(t, err)
	require.Equal(t, engine.CodeRestart, got.Attempts[0].Code)
	require.Equal(t, engine.EndedByEngine, got.Attempts[0].EndedBy)
}
