package postgres_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

// count runs a count(*) query on the store's pool.
func count(t *testing.T, s *postgres.Store, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool().QueryRow(bg, sql).Scan(&n))
	return n
}

// requireEvents reads every event back and holds it to want, field by field.
func requireEvents(t *testing.T, s *postgres.Store, want []engine.Event) {
	t.Helper()
	got, err := s.Events(bg, 0, len(want)+10)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		w, g := want[i], got[i]
		require.True(t, w.At.Equal(g.At), "event %d: at %v, want %v", w.Seq, g.At, w.At)
		w.At, g.At = time.Time{}, time.Time{}
		require.Equal(t, w, g, "event %d", w.Seq)
	}
}

// A new task's first event is written in its row, not as a row of events,
// by the pipelined path (a small batch) and by COPY (a large one), and
// Events reads it back as it was committed, in seq order with the events
// that are rows.
func TestFirstEventsAreWrittenInTheTasksRows(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	small, large := taskBatch(1, 3), taskBatch(4, 600) // 1,200 new rows: COPY
	small.Events[1].Reason, small.Events[1].Webhook = "", true
	require.NoError(t, s.Commit(bg, small))
	require.NoError(t, s.Commit(bg, large))
	// The end of task 2, whose events are rows.
	end := taskBatch(2, 1)
	end.Tasks[0].State, end.Tasks[0].EndedAt = engine.StateSucceeded, time.Now()
	end.Events[0] = engine.Event{Seq: 604, At: time.Now().UTC(), Type: engine.EventState, TaskID: end.Tasks[0].ID,
		AgentID: "agent", Lane: "main", From: engine.StateQueued, To: engine.StateSucceeded, Attempt: 1, Reason: "done"}
	require.NoError(t, s.Commit(bg, end))

	require.Equal(t, 1, count(t, s, "SELECT count(*) FROM events"), "only the end is a row of events")
	require.Equal(t, 603, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
	want := append(append(append([]engine.Event(nil), small.Events...), large.Events...), end.Events...)
	requireEvents(t, s, want)
	after, err := s.Events(bg, 2, 2)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4}, []uint64{after[0].Seq, after[1].Seq}, "a page after a seq")

	// Purging a task takes its first event with it.
	n, err := s.Purge(bg, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got, err := s.Events(bg, 0, 1000)
	require.NoError(t, err)
	require.Len(t, got, 602)
	for _, e := range got {
		require.NotEqual(t, end.Tasks[0].ID, e.TaskID)
	}
}

// While a node of a build that reads first events from the events table
// only (schema version 0 in nodes) has reported lately, commits keep first
// events there; once it has been quiet for the window, they go in the
// tasks' rows. Events reads both kinds in one order.
func TestAnOlderNodeKeepsFirstEventsInTheEventsTable(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	q := pgxIdent(schema)
	admin(t, "INSERT INTO "+q+".nodes (id, heartbeat_at, version) VALUES ('old', now(), 'v0.9')")
	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "new", Role: "leader", Version: "v1"}))
	first := taskBatch(1, 2)
	require.NoError(t, s.Commit(bg, first))
	require.Equal(t, 2, count(t, s, "SELECT count(*) FROM events"), "the older node reads them there")
	require.Equal(t, 0, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))

	admin(t, "UPDATE "+q+".nodes SET heartbeat_at = now() - interval '3 minutes' WHERE id = 'old'")
	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "new", Role: "leader", Version: "v1"}))
	second := taskBatch(3, 2)
	require.NoError(t, s.Commit(bg, second))
	require.Equal(t, 2, count(t, s, "SELECT count(*) FROM events"))
	require.Equal(t, 2, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
	requireEvents(t, s, append(first.Events, second.Events...))

	var version int
	require.NoError(t, s.Pool().QueryRow(bg, "SELECT schema_version FROM nodes WHERE id = 'new'").Scan(&version))
	require.Equal(t, 5, version, "a node reports the schema version its build knows")
}

// A store opened while a node of an older build reports keeps first events
// in the events table from its first commit.
func TestOpenSeesAnOlderNode(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openStore(t, schema)
	admin(t, "INSERT INTO "+pgxIdent(schema)+".nodes (id, heartbeat_at) VALUES ('old', now())")
	s := openStore(t, schema)
	require.NoError(t, s.Commit(bg, taskBatch(1, 600)))
	require.Equal(t, 600, count(t, s, "SELECT count(*) FROM events"))
	require.Equal(t, 0, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
}
