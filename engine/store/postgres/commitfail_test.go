package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A leader whose commits cannot go through (here another session holds a
// lock on the events table, as a long migration or a stuck maintenance job
// would) is visible and bounded as on SQLite: CommitError turns non-nil
// once a commit has taken longer than the commit timeout, callers get
// UNAVAILABLE within it, and both recover on their own when the lock goes.
func TestALeaderThatCannotCommitIsVisibleAndBounded(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	admin(t, "INSERT INTO "+pgxIdent(schema)+".leases (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 1, now(), now(), now() + interval '1 hour')")
	s.SetFence("a", 1)
	const timeout = 300 * time.Millisecond
	e, err := engine.New(engine.Options{Config: engine.Config{CommitTimeout: timeout}, Store: s, Executor: engine.NoopExecutor{}})
	require.NoError(t, err)
	require.NoError(t, e.Start(bg))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	spec := func(key string) engine.TaskSpec {
		return engine.TaskSpec{AgentID: "a", IdempotencyKey: key, Action: &engine.Action{Kind: "click", Selector: "#go"}}
	}
	_, err = e.Submit(bg, spec("before"))
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	locker, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer locker.Close(bg) //nolint:errcheck
	tx, err := locker.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgxIdent(schema)+".events IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	start := time.Now()
	_, err = e.Submit(bg, spec("during"))
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.Less(t, time.Since(start), 10*time.Second, "bounded by the commit timeout, not by the lock")
	waitfor.Eventually(t, "the stalled commit makes the engine unavailable", func() bool { return e.CommitError() != nil })
	require.ErrorContains(t, e.CommitError(), "in progress")
	require.True(t, e.Stats(ctx).CommitFailing)

	require.NoError(t, tx.Rollback(ctx))
	waitfor.Eventually(t, "recovers once the lock goes", func() bool { return e.CommitError() == nil })
	again, err := e.Submit(bg, spec("during"))
	require.NoError(t, err)
	got, err := s.Task(bg, again.ID)
	require.NoError(t, err, "the submission made during the stall was committed")
	require.Equal(t, "during", got.Spec.IdempotencyKey)
}
