package pull_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/pull"
)

// requireConflict checks that err is a CONFLICT on field that names its
// task, as a LEASE_LOST does.
func requireConflict(t *testing.T, err error, field string) {
	t.Helper()
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodeConflict, ee.Code, ee.Message)
	require.Equal(t, field, ee.Field, ee.Message)
	require.NotEmpty(t, ee.TaskID, "the task: %s", ee.Message)
}

// A worker whose completeTask answered an error after the completion was
// recorded resends it: the same completion answers as the first did, a
// different one is a CONFLICT naming what differs, and nothing changes.
// (A resend used to be LEASE_LOST, COMPLETED, which tells the worker its
// result was refused.)
func TestAResentCompletionAnswersAsTheFirstAndADifferentOneConflicts(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id, ls := leaseOne(t, h, m, time.Minute)
	got, err := m.Complete(ctx, ls.ID, json.RawMessage(`{"pages": 3, "urls": ["a", "b"]}`))
	require.NoError(t, err)
	require.Equal(t, id, got)

	got, err = m.Complete(ctx, ls.ID, json.RawMessage(`{"urls":["a","b"],"pages":3.0}`))
	require.NoError(t, err, "the same result, as JSON values")
	require.Equal(t, id, got)

	_, err = m.Complete(ctx, ls.ID, json.RawMessage(`{"pages": 4, "urls": ["a", "b"]}`))
	requireConflict(t, err, "result")
	_, err = m.Fail(ctx, ls.ID, "boom", "", true)
	requireConflict(t, err, "leaseId")
	_, err = m.Renew(ctx, ls.ID, time.Minute)
	lost(t, err, pull.EndCompleted)

	task := h.Get(id)
	require.Equal(t, engine.StateSucceeded, task.State)
	require.JSONEq(t, `{"pages": 3, "urls": ["a", "b"]}`, string(task.Result), "a resend changes nothing")
	require.Len(t, task.Attempts, 1)
}

// A resent failTask answers as the first did; one that differs in its
// error, code or retryable is a CONFLICT naming it.
func TestAResentFailureAnswersAsTheFirstAndADifferentOneConflicts(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id, ls := leaseOne(t, h, m, time.Minute)
	_, err := m.Fail(ctx, ls.ID, "upstream said 503", "upstream_503", false)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, h.State(id))

	got, err := m.Fail(ctx, ls.ID, "upstream said 503", "upstream_503", false)
	require.NoError(t, err)
	require.Equal(t, id, got)
	_, err = m.Fail(ctx, ls.ID, "upstream said 502", "upstream_503", false)
	requireConflict(t, err, "error")
	_, err = m.Fail(ctx, ls.ID, "upstream said 503", "upstream_502", false)
	requireConflict(t, err, "code")
	_, err = m.Fail(ctx, ls.ID, "upstream said 503", "upstream_503", true)
	requireConflict(t, err, "retryable")
	_, err = m.Complete(ctx, ls.ID, json.RawMessage(`1`))
	requireConflict(t, err, "leaseId")
	require.Len(t, h.Get(id).Attempts, 1)
}

// A worker may fail a task with a code the engine also gives (timeout,
// lease_expired, restart, instance_fault: plugins/ABI.md names them for
// retry policies to read). Its resend answers as the first did, as for any
// other code. (It used to be LEASE_LOST, FAILED: the record of such a
// failure was taken for the engine's.)
func TestAResentFailureWithAnEngineCodeAnswersAsTheFirst(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	for _, code := range []string{engine.CodeTimeout, engine.CodeLeaseExpired, engine.CodeRestart, engine.CodeInstanceFault} {
		id, ls := leaseOne(t, h, m, time.Minute)
		_, err := m.Fail(ctx, ls.ID, "upstream timed out", code, false)
		require.NoError(t, err, code)
		got, err := m.Fail(ctx, ls.ID, "upstream timed out", code, false)
		require.NoError(t, err, "the same failure, code %s", code)
		require.Equal(t, id, got)
		_, err = m.Fail(ctx, ls.ID, "upstream timed out again", code, false)
		requireConflict(t, err, "error")
		require.Len(t, h.Get(id).Attempts, 1, "a resend changes nothing")
	}
}

// A lease that ended otherwise than by its worker is lost to a resend as
// it was: expired, released.
func TestAResendOfALeaseThatEndedOtherwiseIsStillLost(t *testing.T) {
	t.Parallel()
	h, m := setup(t)
	ctx := context.Background()
	id, released := leaseOne(t, h, m, 10*time.Second)
	_, err := m.Release(ctx, released.ID, "busy")
	require.NoError(t, err)
	_, err = m.Complete(ctx, released.ID, json.RawMessage(`1`))
	lost(t, err, pull.EndReleased)
	_, err = m.Fail(ctx, released.ID, "released: busy", "", true)
	lost(t, err, pull.EndReleased)

	ls, err := m.Lease(ctx, "jobs", 1, 10*time.Second, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	h.Clock.Advance(10 * time.Second)
	waitState(t, h, id, engine.StateRetryWait)
	_, err = m.Fail(ctx, ls[0].ID, h.Get(id).Attempts[1].Error, engine.CodeLeaseExpired, true)
	lost(t, err, pull.EndExpired)
}

// The resend is answered from what the task records, so it works after a
// restart on a durable store, where the manager remembers no ended lease:
// the same completion answers as the first, a different one conflicts, and
// a lease id that was never issued is still lost.
func TestAResentCompletionIsAnsweredAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pull.db")
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	cfg := engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
	start := onSQLite(t, path, cfg, nil)
	eng, m, stop := start()
	task, err := eng.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj())
	require.NoError(t, err)
	other, err := eng.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj())
	require.NoError(t, err)
	timedOut, err := eng.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj())
	require.NoError(t, err)
	ls, err := m.Lease(ctx, "jobs", 3, time.Minute, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 3)
	done, failed, timeout := ls[0], ls[1], ls[2]
	_, err = m.Complete(ctx, done.ID, json.RawMessage(`{"ok": true}`))
	require.NoError(t, err)
	_, err = m.Fail(ctx, failed.ID, "no such page", "not_found", false)
	require.NoError(t, err)
	_, err = m.Fail(ctx, timeout.ID, "upstream timed out", engine.CodeTimeout, true)
	require.NoError(t, err)
	stop()

	eng, m, stop = start()
	defer stop()
	got, err := m.Complete(ctx, done.ID, json.RawMessage(`{ "ok" : true }`))
	require.NoError(t, err, "the same completion, after a restart")
	require.Equal(t, done.TaskID, got)
	_, err = m.Complete(ctx, done.ID, json.RawMessage(`{"ok": false}`))
	requireConflict(t, err, "result")
	got, err = m.Fail(ctx, failed.ID, "no such page", "not_found", false)
	require.NoError(t, err, "the same failure, after a restart")
	require.Equal(t, failed.TaskID, got)
	_, err = m.Fail(ctx, failed.ID, "no such page", "gone", false)
	requireConflict(t, err, "code")

	got, err = m.Fail(ctx, timeout.ID, "upstream timed out", engine.CodeTimeout, true)
	require.NoError(t, err, "the same failure with an engine's code, after a restart")
	require.Equal(t, timeout.TaskID, got)
	// The attempt records that its worker failed it, code timeout or not:
	// a resend that differs conflicts after the restart as before it.
	_, err = m.Fail(ctx, timeout.ID, "upstream timed out twice", engine.CodeTimeout, true)
	requireConflict(t, err, "error")

	forged := done.TaskID + ".1.AAAAAAAAAAAAAAAAAAAAAAAA"
	_, err = m.Complete(ctx, forged, json.RawMessage(`{"ok": true}`))
	lost(t, err, pull.EndUnknown)
	for _, id := range []string{task.ID, other.ID, timedOut.ID} {
		st, err := eng.Task(ctx, id)
		require.NoError(t, err)
		require.Len(t, st.Attempts, 1, "a resend changes nothing")
	}
}

// A worker's failure with a code the engine also gives is told from the
// engine's own by what the attempt records (who ended it), not by the
// manager's memory: after a restart on SQLite, a resend that differs from
// the worker's failure is a CONFLICT naming the field, the same resend
// answers as the first, and a resend of a lease the engine ended with such
// a code is LEASE_LOST, even repeating the engine's record word for word.
// (After a restart the first used to be LEASE_LOST, UNKNOWN, and the last
// was taken as its worker's.)
func TestAWorkersFailureWithAnEngineCodeIsToldFromTheEnginesAfterARestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pull.db")
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	cfg := engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
	clk := clock.NewFake(enginetest.Epoch)
	start := onSQLite(t, path, cfg, clk)
	eng, m, stop := start()
	byWorker, err := eng.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj())
	require.NoError(t, err)
	ls, err := m.Lease(ctx, "jobs", 1, time.Hour, 0, "w1")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	failed := ls[0]
	byEngine, err := eng.Submit(ctx, enginetest.Spec("a").Lane("jobs").Action("job").Obj())
	require.NoError(t, err)
	ls, err = m.Lease(ctx, "jobs", 1, 10*time.Second, 0, "w2")
	require.NoError(t, err)
	require.Len(t, ls, 1)
	expired := ls[0]
	require.Equal(t, byEngine.ID, expired.TaskID)

	_, err = m.Fail(ctx, failed.ID, "upstream timed out", engine.CodeTimeout, true)
	require.NoError(t, err)
	clk.Advance(10 * time.Second)
	waitfor.Eventually(t, "the lease of "+byEngine.ID+" expired", func() bool {
		task, err := eng.Task(ctx, byEngine.ID)
		return err == nil && len(task.Attempts) == 1 && !task.Attempts[0].EndedAt.IsZero()
	})
	require.NoError(t, eng.Sync(ctx))
	stop()

	eng, m, stop = start()
	defer stop()
	states := map[string]engine.State{}
	for _, id := range []string{byWorker.ID, byEngine.ID} {
		task, err := eng.Task(ctx, id)
		require.NoError(t, err)
		states[id] = task.State
	}
	rec, err := eng.Task(ctx, byWorker.ID)
	require.NoError(t, err)
	require.Equal(t, engine.EndedByWorker, rec.Attempts[0].EndedBy, "the store keeps who ended the attempt")
	_, err = m.Fail(ctx, failed.ID, "upstream timed out again", engine.CodeTimeout, true)
	requireConflict(t, err, "error")
	_, err = m.Fail(ctx, failed.ID, "upstream timed out", engine.CodeLeaseExpired, true)
	requireConflict(t, err, "code")
	_, err = m.Fail(ctx, failed.ID, "upstream timed out", engine.CodeTimeout, false)
	requireConflict(t, err, "retryable")
	_, err = m.Complete(ctx, failed.ID, json.RawMessage(`1`))
	requireConflict(t, err, "leaseId")
	got, err := m.Fail(ctx, failed.ID, "upstream timed out", engine.CodeTimeout, true)
	require.NoError(t, err, "the same failure answers as the first")
	require.Equal(t, byWorker.ID, got)

	rec, err = eng.Task(ctx, byEngine.ID)
	require.NoError(t, err)
	att := rec.Attempts[0]
	require.Equal(t, engine.EndedByEngine, att.EndedBy)
	require.Equal(t, engine.CodeLeaseExpired, att.Code)
	_, err = m.Fail(ctx, expired.ID, att.Error, att.Code, true)
	lost(t, err, pull.EndUnknown)
	_, err = m.Fail(ctx, expired.ID, "something else", engine.CodeLeaseExpired, true)
	lost(t, err, pull.EndUnknown)
	_, err = m.Complete(ctx, expired.ID, json.RawMessage(`1`))
	lost(t, err, pull.EndUnknown)

	for _, id := range []string{byWorker.ID, byEngine.ID} {
		task, err := eng.Task(ctx, id)
		require.NoError(t, err)
		require.Len(t, task.Attempts, 1, "a resend changes nothing")
		require.Equal(t, states[id], task.State, "a resend changes nothing")
	}
}

func TestSameResultComparesJSONValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{``, `null`, true},
		{``, ``, true},
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true},
		{`100`, `1e2`, true},
		{`100`, `100.0`, true},
		{`12345678901234567890`, `12345678901234567891`, false},
		{`{"a":1}`, `{"a":1,"b":null}`, false},
		{`[1,2]`, `[2,1]`, false},
		{`"x"`, `"y"`, false},
		{``, `{}`, false},
		{`true`, `"true"`, false},
	} {
		require.Equal(t, c.same, pull.SameResult(json.RawMessage(c.a), json.RawMessage(c.b)), "%s vs %s", c.a, c.b)
	}
}

// onSQLite returns a function that starts an engine and its pull manager on
// the SQLite file at path (clk nil: the real clock), and a function that
// stops them and closes the store: each start is a new process over the
// same file.
func onSQLite(t *testing.T, path string, cfg engine.Config, clk clock.Clock) func() (*engine.Engine, *pull.Manager, func()) {
	ctx := context.Background()
	return func() (*engine.Engine, *pull.Manager, func()) {
		st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
		require.NoError(t, err)
		eng, err := engine.New(engine.Options{Config: cfg, Store: st, Executor: enginetest.NewExecutor(), Clock: clk})
		require.NoError(t, err)
		require.NoError(t, eng.Start(ctx))
		m, err := pull.New(ctx, pull.Options{Engine: eng, Clock: clk})
		require.NoError(t, err)
		return eng, m, func() {
			m.Close()
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			require.NoError(t, eng.Shutdown(sctx))
			require.NoError(t, st.Close())
		}
	}
}
