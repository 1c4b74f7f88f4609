package postgres_test

import (
	"fmt"
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
// by COPY (a large batch); the pipelined path (a small one) keeps it a row.
// Events reads both back as they were committed, in seq order.
func TestFirstEventsAreWrittenInTheTasksRows(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	small, large := taskBatch(1, 3), taskBatch(4, 600) // 1,200 new rows: COPY
	large.Events[1].Reason, large.Events[1].Webhook = "", true
	require.NoError(t, s.Commit(bg, small))
	require.NoError(t, s.Commit(bg, large))
	// The end of task 2, whose events are rows.
	end := taskBatch(2, 1)
	end.Tasks[0].State, end.Tasks[0].EndedAt = engine.StateSucceeded, time.Now()
	end.Events[0] = engine.Event{Seq: 604, At: time.Now().UTC(), Type: engine.EventState, TaskID: end.Tasks[0].ID,
		AgentID: "agent", Lane: "main", From: engine.StateQueued, To: engine.StateSucceeded, Attempt: 1, Reason: "done"}
	require.NoError(t, s.Commit(bg, end))

	require.Equal(t, 4, count(t, s, "SELECT count(*) FROM events"), "the small batch's and the end")
	require.Equal(t, 600, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
	want := append(append(append([]engine.Event(nil), small.Events...), large.Events...), end.Events...)
	requireEvents(t, s, want)
	after, err := s.Events(bg, 2, 3)
	require.NoError(t, err)
	require.Equal(t, []uint64{3, 4, 5}, []uint64{after[0].Seq, after[1].Seq, after[2].Seq}, "a page across both kinds")

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

// A task admitted again under an id the store holds (a submission applied
// twice): the pipelined statement skips its row (ON CONFLICT (id) DO
// NOTHING), and its first event, a row of events, is still read.
func TestASkippedTaskRowKeepsItsFirstEvent(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	require.NoError(t, s.Commit(bg, taskBatch(1, 1, "X")))
	require.NoError(t, s.Commit(bg, taskBatch(2, 1, "X")))
	evs, err := s.Events(bg, 0, 10)
	require.NoError(t, err)
	require.Len(t, evs, 2, "seq 2 is committed: a follower must read it")
}

// Events in tasks' rows and events rows interleaved seq by seq, written by
// both paths, with sessions, tabs, batches, keys and webhooks: every page.
func TestEventsPagesAcrossTasksRowsAndEventsRows(t *testing.T) {
	t.Parallel()
	for _, copyMin := range []int{1 << 30, 0} {
		t.Run(fmt.Sprint("copyMin=", copyMin), func(t *testing.T) {
			s := openStore(t, newSchema(t))
			s.SetCopyMin(copyMin)
			var all []engine.Event
			var prev *engine.Task
			seq := uint64(0)
			base := time.Unix(1700000000, 0).UTC()
			for round := range 6 {
				b := &engine.Batch{}
				for i := range 7 {
					seq++
					tk := &engine.Task{ID: fmt.Sprintf("T%d", seq), Seq: seq, State: engine.StateQueued, Reason: "submitted",
						CreatedAt: base, UpdatedAt: base, QueuedAt: base, LastSeq: seq, Position: -1,
						Spec: &engine.TaskSpec{AgentID: "a", Lane: "main", Action: &engine.Action{Kind: "click"}, SubmittedAt: base}}
					switch i % 4 {
					case 1:
						tk.Spec.SessionKey = "s1"
					case 2:
						tk.Spec.TabID = "tab9"
					case 3:
						tk.Spec.BatchID = "B1"
						tk.Spec.IdempotencyKey = fmt.Sprint("k", seq)
					}
					e := engine.Event{Seq: seq, At: base.Add(time.Duration(seq)), Type: engine.EventState, TaskID: tk.ID,
						AgentID: "a", Lane: "main", SessionKey: tk.Spec.Session(), BatchID: tk.Spec.BatchID,
						To: engine.State(1 + seq%3), Reason: []string{"", "submitted"}[seq%2], Webhook: seq%3 == 0}
					b.Tasks = append(b.Tasks, tk)
					b.Events = append(b.Events, e)
					all = append(all, e)
					if prev != nil && i%2 == 1 { // an event of the task before, between two admissions
						seq++
						e2 := engine.Event{Seq: seq, At: base.Add(time.Duration(seq)), Type: engine.EventReleased, TaskID: prev.ID,
							AgentID: "a", Lane: "main", SessionKey: prev.Spec.Session(), BatchID: prev.Spec.BatchID,
							From: 1, To: 1, Attempt: round, Reason: "r"}
						b.Events = append(b.Events, e2)
						all = append(all, e2)
					}
					prev = tk
				}
				if round%3 == 2 { // a lane event (no task)
					seq++
					e := engine.Event{Seq: seq, At: base, Type: engine.EventLane, Lane: "x", Reason: "lane"}
					b.Events = append(b.Events, e)
					all = append(all, e)
				}
				require.NoError(t, s.Commit(bg, b))
			}
			if copyMin == 0 {
				require.Positive(t, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
			}
			for after := 0; after <= len(all); after++ { // seqs run 1..len(all)
				for _, limit := range []int{1, 2, 3, 5, 100} {
					got, err := s.Events(bg, uint64(after), limit)
					require.NoError(t, err)
					want := all[after:min(after+limit, len(all))]
					require.Len(t, got, len(want), "after %d limit %d", after, limit)
					for i := range want {
						w, g := want[i], got[i]
						require.True(t, w.At.Equal(g.At))
						w.At, g.At = time.Time{}, time.Time{}
						require.Equal(t, w, g, "after %d limit %d", after, limit)
					}
				}
			}
		})
	}
}

// migratedTo5 makes a schema look migrated to version 5 from an earlier
// one, ago (rather than created at version 5, which no older build ever
// opened).
func migratedTo5(t *testing.T, schema, ago string) {
	q := pgxIdent(schema)
	admin(t, "UPDATE "+q+".switchyard_migrations SET applied_at = now() - interval '30 days' WHERE version < 5")
	admin(t, "UPDATE "+q+".switchyard_migrations SET applied_at = now() - interval '"+ago+"' WHERE version = 5")
}

// firstsInRows commits a batch large enough for COPY and reports
// whether its first events went in the tasks' rows.
func firstsInRows(t *testing.T, s *postgres.Store, first uint64) bool {
	t.Helper()
	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "new", Role: "leader", Version: "v1"}))
	before := count(t, s, "SELECT count(*) FROM events")
	require.NoError(t, s.Commit(bg, taskBatch(first, 600)))
	rows := count(t, s, "SELECT count(*) FROM events") - before
	require.Contains(t, []int{0, 600}, rows)
	return rows == 0
}

// A schema migrated to version 5 keeps first events in the events table,
// where a build before it reads them, until the migration is older than
// the window and no node of such a build (schema_version 0 in nodes) has
// reported within it. Events reads both kinds in one order.
func TestAnOlderNodeKeepsFirstEventsInTheEventsTable(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	q := pgxIdent(schema)
	require.True(t, firstsInRows(t, s, 1), "a schema created at version 5: no older build ever opened it")

	migratedTo5(t, schema, "1 minute")
	require.False(t, firstsInRows(t, s, 601), "migrated a minute ago: an older build may not have reported yet")
	migratedTo5(t, schema, "3 minutes")
	require.True(t, firstsInRows(t, s, 1201), "migrated three minutes ago, no older node heard of")

	admin(t, "INSERT INTO "+q+".nodes (id, heartbeat_at, version) VALUES ('old', now(), 'v0.9')")
	require.False(t, firstsInRows(t, s, 1801), "an older node reports")
	admin(t, "UPDATE "+q+".nodes SET heartbeat_at = now() - interval '1 minute' WHERE id = 'old'")
	require.False(t, firstsInRows(t, s, 2401), "it reported a minute ago")
	admin(t, "UPDATE "+q+".nodes SET heartbeat_at = now() - interval '3 minutes' WHERE id = 'old'")
	require.True(t, firstsInRows(t, s, 3001), "quiet for longer than the window")

	got, err := s.Events(bg, 0, 4000)
	require.NoError(t, err)
	require.Len(t, got, 3600)
	for i, e := range got {
		require.Equal(t, uint64(i+1), e.Seq)
	}
	nodes, err := s.Nodes(bg)
	require.NoError(t, err)
	versions := map[string]int{}
	for _, n := range nodes {
		versions[n.ID] = n.SchemaVersion
	}
	require.Equal(t, map[string]int{"new": 5, "old": 0}, versions, "a node reports the schema version its build knows")
}

// A store opened while a node of an older build reports keeps first events
// in the events table from its first commit.
func TestOpenSeesAnOlderNode(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	openStore(t, schema)
	migratedTo5(t, schema, "1 hour")
	admin(t, "INSERT INTO "+pgxIdent(schema)+".nodes (id, heartbeat_at) VALUES ('old', now())")
	s := openStore(t, schema)
	require.NoError(t, s.Commit(bg, taskBatch(1, 600)))
	require.Equal(t, 600, count(t, s, "SELECT count(*) FROM events"))
	require.Equal(t, 0, count(t, s, "SELECT count(*) FROM tasks WHERE first_at IS NOT NULL"))
}
