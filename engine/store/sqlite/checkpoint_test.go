package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// TestACommitDuringACheckpointDoesNotHoldTheLogBack: SQLite restarts the
// log only in a write transaction that begins with every frame copied, so a
// commit that lands while a checkpoint runs keeps the next commits
// appending (and kicking checkpoints). finishCheckpoint copies what landed,
// and the next commit restarts the log.
func TestACommitDuringACheckpointDoesNotHoldTheLogBack(t *testing.T) {
	t.Parallel()
	// No kicks: this test runs the checkpoint's steps itself.
	s, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "ckpt.db"), Readers: 1, CheckpointPages: 1 << 30})
	require.NoError(t, err)
	defer s.Close() //nolint:errcheck
	seq := uint64(0)
	commit := func() int64 {
		t.Helper()
		b := &engine.Batch{}
		for range 20 {
			seq++
			task := &engine.Task{ID: fmt.Sprintf("T%06d", seq), Seq: seq, State: engine.StateQueued,
				Spec: &engine.TaskSpec{AgentID: "agent", Lane: "main", Action: &engine.Action{Kind: "click"}}}
			b.Tasks = append(b.Tasks, task)
			b.Events = append(b.Events, engine.Event{Seq: seq, TaskID: task.ID, Type: engine.EventState, To: engine.StateQueued})
		}
		require.NoError(t, s.Commit(context.Background(), b))
		return s.walFrames.Load()
	}

	before := commit()
	// A commit that lands while a checkpoint runs: the checkpoint copies
	// what the log held when it began. A reader on that snapshot makes it
	// stop there, as the race does.
	rd := s.all[0].c
	require.NoError(t, rd.Exec("BEGIN; SELECT count(*) FROM tasks;"))
	landed := commit()
	nLog, nCkpt, err := s.ckpt.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
	require.NoError(t, err)
	require.Equal(t, before, int64(nCkpt), "the checkpoint copies the frames before the commit that landed")
	require.Equal(t, landed, int64(nLog))
	require.NoError(t, rd.Exec("COMMIT"))
	// The premise: left as it is, the next commit appends.
	after := commit()
	require.Greater(t, after, landed, "a commit after an incomplete checkpoint appends to the log")

	s.finishCheckpoint(nCkpt, nCkpt) // what the log held when the checkpoint began
	restarted := commit()
	require.Less(t, restarted, landed, "the commit after finishCheckpoint restarts the log from its start")
	snap, err := s.Load(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.Tasks, int(seq))
}

// TestTheWriterNeverCheckpoints: the writer's WAL hook replaces SQLite's
// automatic checkpoint, so no commit copies the log into the database
// itself; the background checkpointer does.
func TestTheWriterNeverCheckpoints(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "auto.db"), Readers: 1})
	require.NoError(t, err)
	defer s.Close() //nolint:errcheck
	auto, err := queryInt(s.w.c, "PRAGMA wal_autocheckpoint")
	require.NoError(t, err)
	require.Zero(t, auto, "SQLite's automatic checkpoint is off on the writer")
}
