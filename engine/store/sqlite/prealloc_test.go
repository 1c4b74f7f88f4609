package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

// preallocSize is the log's size written out at open for checkpointPages of
// 4 KiB: the header, then a frame (a 24-byte header and the page) for each
// page and an eighth more.
func preallocSize(checkpointPages int64) int64 {
	return 32 + (checkpointPages+checkpointPages/8)*(4096+24)
}

// TestPreallocatedLogIsWrittenOut holds Options.PreallocateWAL to what it
// promises: at open the log's file has its size in blocks written, not a
// hole nor a size alone; what is committed over it reads back after a
// restart; and Close leaves no log behind, as without it.
func TestPreallocatedLogIsWrittenOut(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	opts := sqlite.Options{Path: path, Readers: 1, CacheMiB: 8, CheckpointPages: 200, PreallocateWAL: true}
	s := openWith(t, opts)
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, preallocSize(200), fi.Size(), "the log is written out to its checkpoint size at open")
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		require.GreaterOrEqual(t, st.Blocks*512, fi.Size(), "the log's blocks are allocated and written, not a hole")
	}

	// Enough commits to restart the log several times over the zeros.
	var seq uint64
	for range 40 {
		b := &engine.Batch{}
		for range 50 {
			seq++
			task := &engine.Task{ID: fmt.Sprintf("T%06d", seq), Seq: seq, State: engine.StateQueued,
				Spec: &engine.TaskSpec{AgentID: fmt.Sprint("agent-", seq%13), Lane: "main", Action: &engine.Action{Kind: "click"}}}
			b.Tasks = append(b.Tasks, task)
			b.Events = append(b.Events, engine.Event{Seq: seq, TaskID: task.ID, Type: engine.EventState, To: engine.StateQueued})
		}
		require.NoError(t, s.Commit(context.Background(), b))
	}
	require.NoError(t, s.Close())
	_, err = os.Stat(path + "-wal")
	require.ErrorIs(t, err, os.ErrNotExist, "Close checkpoints and removes the log, preallocated or not")

	s = openWith(t, opts)
	defer s.Close() //nolint:errcheck
	snap, err := s.Load(context.Background())
	require.NoError(t, err)
	require.Equal(t, seq, snap.LastSeq)
	require.Len(t, snap.Tasks, int(seq))
	fi, err = os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Equal(t, preallocSize(200), fi.Size(), "a reopened store writes its log out again")
}

// TestNormalSyncDoesNotPreallocate: with SyncNormal commits do not flush, so
// there is nothing for a written-out log to save.
func TestNormalSyncDoesNotPreallocate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := openWith(t, sqlite.Options{Path: path, Readers: 1, CacheMiB: 8, CheckpointPages: 200, PreallocateWAL: true, Sync: sqlite.SyncNormal})
	defer s.Close() //nolint:errcheck
	fi, err := os.Stat(path + "-wal")
	require.NoError(t, err)
	require.Less(t, fi.Size(), preallocSize(200))
}
