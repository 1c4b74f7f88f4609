package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// Two batches in flight at once both commit, in order, and a batch of the
// second that updates a task of the first lands after it.
func TestCommitAsyncPipelinesTwoBatches(t *testing.T) {
	t.Parallel()
	for _, copyMin := range []int{0, 1 << 30} {
		s := openStore(t, newSchema(t))
		s.SetCopyMin(copyMin)
		testPipelinesTwoBatches(t, s)
	}
}

func testPipelinesTwoBatches(t *testing.T, s *postgres.Store) {
	first := taskBatch(1, 50)
	second := taskBatch(51, 50)
	upd := *first.Tasks[0]
	upd.State, upd.Reason = engine.StateRunning, "started"
	second.Tasks = append(second.Tasks, &upd)
	second.Events = append(second.Events, engine.Event{Seq: 101, Type: engine.EventState, TaskID: upd.ID, AgentID: "agent",
		Lane: "main", From: engine.StateQueued, To: engine.StateRunning, Reason: "started"})

	_, w1 := s.CommitAsync(bg, first)
	_, w2 := s.CommitAsync(bg, second)
	require.NoError(t, w1())
	require.NoError(t, w2())

	got, err := s.Task(bg, upd.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State, "the second batch's update lands after the first batch's insert")
	_, err = s.Task(bg, second.Tasks[49].ID)
	require.NoError(t, err)
	evs, err := s.Events(bg, 0, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 101)
}

// When a batch fails, the batch sent behind it fails too and writes
// nothing; committed afterwards, its tasks are written as new ones.
func TestCommitAsyncFailureFailsTheBatchBehind(t *testing.T) {
	t.Parallel()
	for _, copyMin := range []int{0, 1 << 30} {
		// settled: the failed batch has ended before the one behind it is
		// handed over, but its caller has not yet waited for it.
		for _, settled := range []bool{false, true} {
			s := openStore(t, newSchema(t))
			s.SetCopyMin(copyMin)
			testFailureFailsTheBatchBehind(t, s, settled)
		}
	}
}

func testFailureFailsTheBatchBehind(t *testing.T, s *postgres.Store, settled bool) {
	require.NoError(t, s.Commit(bg, taskBatch(1, 10)))

	bad := taskBatch(5, 3, "X1", "X2", "X3") // seqs 5..7 do not follow 10
	behind := taskBatch(11, 5)
	d1, w1 := s.CommitAsync(bg, bad)
	if settled {
		<-d1
	}
	_, w2 := s.CommitAsync(bg, behind)
	require.Error(t, w1())
	require.Error(t, w2(), "it was sent after a batch that failed")
	_, err := s.Task(bg, behind.Tasks[0].ID)
	require.ErrorIs(t, err, engine.ErrNotFound, "nothing of it was written")

	require.NoError(t, s.Commit(bg, behind), "retried in order, it commits")
	for _, task := range behind.Tasks {
		got, err := s.Task(bg, task.ID)
		require.NoError(t, err)
		require.Equal(t, task.Seq, got.Seq)
	}
	evs, err := s.Events(bg, 0, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 15)
}

// TestAFailureUnderAnEarlierLeadershipDoesNotFailTheNext: an engine that
// loses its leadership with a failed batch in flight stops without taking
// that batch's outcome. When the same store leads again, under a later
// epoch, its first pipelined batch must not fail for a batch no engine will
// retry — else every commit of the new leadership would fail once and be
// retried, and the node would show as failing to commit.
func TestAFailureUnderAnEarlierLeadershipDoesNotFailTheNext(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	leases := pgxIdent(schema) + ".leases"
	admin(t, "INSERT INTO "+leases+" (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 1, now(), now(), now() + interval '1 hour')")
	s.SetFence("a", 1)
	require.NoError(t, s.Commit(bg, taskBatch(1, 10)))

	d1, w1 := s.CommitAsync(bg, taskBatch(5, 3, "X1", "X2", "X3")) // seqs 5..7 do not follow 10
	<-d1                                                           // it failed; its outcome is never taken before the next leadership

	admin(t, "UPDATE "+leases+" SET epoch = 2")
	s.SetFence("a", 2)
	next := taskBatch(11, 5)
	_, w2 := s.CommitAsync(bg, next)
	require.NoError(t, w2(), "the failure belonged to the earlier leadership")
	require.Error(t, w1(), "taken late, the earlier outcome is still the failure")
	got, err := s.Task(bg, next.Tasks[0].ID)
	require.NoError(t, err)
	require.Equal(t, next.Tasks[0].Seq, got.Seq)

	// Within one leadership a failure still fails the batch behind it.
	d3, w3 := s.CommitAsync(bg, taskBatch(5, 3, "Y1", "Y2", "Y3"))
	<-d3
	_, w4 := s.CommitAsync(bg, taskBatch(16, 2))
	require.Error(t, w3())
	require.Error(t, w4(), "sent after a failure of the same leadership")
}

// A batch that only adds rows takes the seq lock last: its rows are written
// while the transaction before it still runs, and it commits after that one
// (and fails if that one fails). A batch behind it that updates one of its
// tasks waits for it and lands after it.
func TestABatchThatOnlyAddsRowsIsWrittenWhileTheOneBeforeRuns(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema, func(o *postgres.Options) { o.MaxConns = 6 })
	s.SetCopyMin(0)
	require.NoError(t, s.Commit(bg, taskBatch(1, 10)))

	// An outside transaction holds task 1's status row: the batch that
	// updates it takes the seq lock and then waits.
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	holder, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer holder.Close(bg) //nolint:errcheck
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgxIdent(schema)+".task_status WHERE seq = 1 FOR UPDATE")
	require.NoError(t, err)

	first := updateBatch(taskBatch(1, 1).Tasks[0], 11)
	adds := taskBatch(12, 50)
	next := updateBatch(adds.Tasks[0], 62)
	_, w1 := s.CommitAsync(bg, first)
	_, w2 := s.CommitAsync(bg, adds)
	w3 := make(chan func() error, 1)
	go func() {
		_, w := s.CommitAsync(bg, next)
		w3 <- w
	}()

	// The adding batch has written into tasks (the earlier one writes
	// none there) and waits, as the earlier one does, for a transaction:
	// that one's, for the seq row.
	waitfor.Eventually(t, "the adding batch writes its rows, then waits for the seq lock", func() bool {
		var writing, waiting int
		err := holder.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
				WHERE c.relname = 'tasks' AND c.relnamespace = $1::regnamespace AND l.mode = 'RowExclusiveLock' AND l.granted),
			(SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted)`, pgxIdent(schema)).Scan(&writing, &waiting)
		require.NoError(t, err)
		return writing == 1 && waiting == 2
	})
	require.NoError(t, tx.Commit(ctx), "the outside transaction ends")

	require.NoError(t, w1())
	require.NoError(t, w2())
	require.NoError(t, (<-w3)())
	evs, err := s.Events(bg, 0, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 62)
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
	}
	got, err := s.Task(bg, adds.Tasks[0].ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State, "the update behind the adding batch lands after it")
	got, err = s.Task(bg, adds.Tasks[49].ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateQueued, got.State)
}

// updateBatch is a batch that starts task (a copy), with event seq.
func updateBatch(task *engine.Task, seq uint64) *engine.Batch {
	upd := *task
	upd.State, upd.Reason, upd.LastSeq = engine.StateRunning, "started", seq
	return &engine.Batch{Tasks: []*engine.Task{&upd}, Events: []engine.Event{{Seq: seq, Type: engine.EventState, TaskID: upd.ID,
		AgentID: "agent", Lane: "main", From: engine.StateQueued, To: engine.StateRunning, Reason: "started"}}}
}
