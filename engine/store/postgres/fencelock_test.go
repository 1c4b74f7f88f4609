package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A commit whose writes wait on a lock someone else holds on tasks (an
// operator's LOCK TABLE, a long migration) does not hold the lease row
// while it waits: the leader renews its lease meanwhile, and a takeover is
// not held up either; the commit, once the lock goes, goes through under
// the lease it still holds, and is refused, writing nothing, under one it
// lost. Before, the fence check came first and its FOR SHARE lock on the
// lease row lasted as long as the writes waited: the leader's renewal
// waited until its lease expired, and every other node's takeover with it.
// For the three ways a commit is written: one pipeline, one in flight
// behind another (CommitAsync) and COPY.
func TestACommitWaitingOnALockLeavesTheLeaseFree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		copy  bool
		async bool
	}{{name: "pipeline"}, {name: "async", async: true}, {name: "copy", copy: true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			schema := newSchema(t)
			s := openStore(t, schema)
			if c.copy {
				s.SetCopyMin(0)
			}
			leases, tasks := pgxIdent(schema)+".leases", pgxIdent(schema)+".tasks"
			admin(t, "INSERT INTO "+leases+" (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 7, now(), now(), now() + interval '1 hour')")
			s.SetFence("a", 7)
			require.NoError(t, s.Commit(bg, taskBatch(1, 1)))

			commit := func(first uint64) <-chan error {
				out := make(chan error, 1)
				go func() {
					b := taskBatch(first, 3)
					if !c.async {
						out <- s.Commit(bg, b)
						return
					}
					_, wait := s.CommitAsync(bg, b)
					out <- wait()
				}()
				return out
			}
			// Each step is bounded far above what it takes, only to end a
			// hang: the old order made the lease's UPDATE wait for the lock.
			lease := func(sql string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(bg, 30*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, databaseURL(t))
				require.NoError(t, err)
				defer conn.Close(ctx) //nolint:errcheck
				_, err = conn.Exec(ctx, sql)
				require.NoError(t, err, "the lease row is not held by a commit waiting on a lock")
			}

			// The lease renewed while a commit waits: the commit then goes through.
			unlock := lockTable(t, tasks)
			done := commit(2)
			waitLocked(t, schema)
			lease("UPDATE " + leases + " SET renewed_at = now(), expires_at = now() + interval '1 hour' WHERE node = 'a' AND epoch = 7")
			requirePending(t, done)
			unlock()
			require.NoError(t, <-done, "the commit goes through under the lease it still holds")
			_, err := s.Task(bg, "T00000002")
			require.NoError(t, err)

			// Taken over while a commit waits: the commit is refused and writes nothing.
			unlock = lockTable(t, tasks)
			done = commit(5)
			waitLocked(t, schema)
			lease("UPDATE " + leases + " SET node = 'b', epoch = 8")
			requirePending(t, done)
			unlock()
			err = <-done
			require.ErrorIs(t, err, postgres.ErrNotLeader)
			_, err = s.Task(bg, "T00000005")
			require.ErrorIs(t, err, engine.ErrNotFound, "a refused commit writes nothing")
		})
	}
}

// lockTable holds an EXCLUSIVE lock on table (which blocks writes, not
// reads) until the returned function is called (or the test ends).
func lockTable(t *testing.T, table string) (unlock func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE "+table+" IN EXCLUSIVE MODE")
	require.NoError(t, err)
	released := false
	unlock = func() {
		if !released {
			released = true
			require.NoError(t, tx.Commit(ctx))
			_ = conn.Close(ctx)
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// waitLocked waits until a backend waits for a lock on schema's tasks.
func waitLocked(t *testing.T, schema string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx) //nolint:errcheck
	waitfor.Eventually(t, "the commit waits for the lock on tasks", func() bool {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			JOIN pg_namespace ns ON ns.oid = c.relnamespace
			WHERE NOT l.granted AND c.relname = 'tasks' AND ns.nspname = $1`, schema).Scan(&n))
		return n > 0
	})
}

// requirePending requires that the commit has not returned yet.
func requirePending(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		require.Fail(t, fmt.Sprintf("the commit returned while tasks were locked: %v", err))
	default:
	}
}
