package postgres_test

// Test plumbing: the database URL (or a skip), a schema per test that is
// dropped when the test ends, and stores opened on it.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/pgtest"
)

// databaseURL returns the test database's URL, or skips the test.
func databaseURL(t testing.TB) string { return pgtest.URL(t) }

// newSchema returns a fresh schema, dropped when the test ends.
func newSchema(t testing.TB) string { return pgtest.Schema(t) }

// openStore opens a store on schema, closed when the test ends.
func openStore(t testing.TB, schema string, opts ...func(*postgres.Options)) *postgres.Store {
	t.Helper()
	o := postgres.Options{URL: databaseURL(t), Schema: schema, MaxConns: 4, PollInterval: 500 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	s, err := postgres.Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// admin runs a statement on its own connection.
func admin(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer c.Close(ctx) //nolint:errcheck
	_, err = c.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

// taskBatch returns a batch of n new QUEUED tasks with one event each, the
// first with seq first; ids are prefix + seq unless ids are given.
func taskBatch(first uint64, n int, ids ...string) *engine.Batch {
	b := &engine.Batch{}
	now := time.Now().UTC()
	for i := range n {
		seq := first + uint64(i)
		id := fmt.Sprintf("T%08d", seq)
		if i < len(ids) {
			id = ids[i]
		}
		t := &engine.Task{ID: id, Seq: seq, State: engine.StateQueued, Reason: "submitted", CreatedAt: now, UpdatedAt: now,
			QueuedAt: now, LastSeq: seq, Position: -1,
			Spec: &engine.TaskSpec{AgentID: "agent", Lane: "main", Action: &engine.Action{Kind: "click"}, SubmittedAt: now}}
		b.Tasks = append(b.Tasks, t)
		b.Events = append(b.Events, engine.Event{Seq: seq, At: now, Type: engine.EventState, TaskID: id, AgentID: "agent",
			Lane: "main", To: engine.StateQueued, Reason: "submitted"})
	}
	return b
}

// cutter cuts a store off the database (pgtest.Cutter).
type cutter = pgtest.Cutter

// withCutter routes a store's connections through c.
func withCutter(c *cutter) func(*postgres.Options) {
	return func(o *postgres.Options) { o.ConfigurePool = c.Configure }
}

func pgxIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
