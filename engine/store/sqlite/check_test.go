package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

// fillStore commits n batches of one new task and two events each (seqs
// 2i-1 and 2i) and closes the store.
func fillStore(t *testing.T, path string, n int) {
	t.Helper()
	s := open(t, path)
	for i := 1; i <= n; i++ {
		seq := uint64(2*i - 1)
		task := &engine.Task{ID: fmt.Sprintf("T%05d", i), Seq: seq, State: engine.StateQueued,
			Spec: &engine.TaskSpec{AgentID: "agent", Lane: "main", Action: &engine.Action{Kind: "click", Selector: "#go"}}}
		require.NoError(t, s.Commit(context.Background(), &engine.Batch{Tasks: []*engine.Task{task}, Events: []engine.Event{
			{Seq: seq, TaskID: task.ID, Type: engine.EventState, To: engine.StateQueued},
			{Seq: seq + 1, TaskID: task.ID, Type: engine.EventState, From: engine.StateQueued, To: engine.StateQueued, Reason: "touched"},
		}}))
	}
	require.NoError(t, s.Close())
}

// editRows runs SQL on the file behind the store's back, as a second writer
// or a hand edit would.
func editRows(t *testing.T, path, sql string) {
	t.Helper()
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	require.NoError(t, c.Exec(sql))
	require.NoError(t, c.Close())
}

// The file of the issue: meta.last_seq=275 while the events reach 285 (two
// processes wrote it, each with its own last seq). An engine started on it
// numbered new events after 275 and every commit failed for ever. Open now
// raises last_seq to the highest stored seq, says so, and the engine starts
// and commits.
func TestOpenRepairsALastSeqBehindTheStoredEvents(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	fillStore(t, path, 143) // events 1..286
	editRows(t, path, "UPDATE meta SET value = 275 WHERE key = 'last_seq'; DELETE FROM events WHERE first_seq = 285; DELETE FROM tasks WHERE seq = 285")

	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, SkipCheck: true})
	require.NoError(t, err)
	fs, err := s.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, []sqlite.Finding{{
		Problem: "meta.last_seq is 275 but stored seqs reach 284 (events up to 284, tasks up to 283): new events would collide with stored ones",
		Repair:  "set meta.last_seq to 284", Certain: true,
	}}, fs)
	snap, err := s.Load(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 275, snap.LastSeq, "check changes nothing")
	require.NoError(t, s.Close())

	s = open(t, path)
	require.Equal(t, fs, s.Repaired(), "open repaired it and says what it changed")
	snap, err = s.Load(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 284, snap.LastSeq)

	e, err := engine.New(engine.Options{Store: s, Executor: engine.NoopExecutor{}})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	task, err := e.Submit(context.Background(), engine.TaskSpec{AgentID: "agent", Action: &engine.Action{Kind: "click", Selector: "#go"}})
	require.NoError(t, err, "the engine commits after the repaired last seq")
	require.Greater(t, task.Seq, uint64(284))
	require.NoError(t, e.Shutdown(context.Background()))
	require.NoError(t, s.Close())

	s = open(t, path)
	require.Empty(t, s.Repaired(), "nothing left to repair")
	require.NoError(t, s.Close())
}

// Overlapping event chunks cannot be settled without deleting events: Open
// refuses the file with an exact message, Check says what Repair would
// change, Repair changes it, and the file opens again.
func TestOpenRefusesOverlappingEventsAndRepairSettlesThem(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	fillStore(t, path, 3) // chunks 1..2, 3..4, 5..6
	editRows(t, path, "INSERT INTO events(first_seq, last_seq, data) SELECT 4, 5, data FROM events WHERE first_seq = 3")

	_, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.ErrorIs(t, err, sqlite.ErrInconsistent)
	require.EqualError(t, err, "sqlite store: database "+path+": the database's bookkeeping disagrees with its contents: "+
		"events 4..5 overlap events 3..4 (two processes wrote the file at once?); "+
		"`switchyard db check --db "+path+"` says what `switchyard db repair --db "+path+"` would change")

	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path, SkipCheck: true})
	require.NoError(t, err)
	want := []sqlite.Finding{{Problem: "events 4..5 overlap events 3..4 (two processes wrote the file at once?)",
		Repair: "delete events 4..5, keeping 3..4: the history of the tasks they belong to loses those events; the tasks themselves are unchanged"}}
	fs, err := s.Check(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, fs)
	fs, err = s.Repair(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, fs)
	fs, err = s.Check(context.Background())
	require.NoError(t, err)
	require.Empty(t, fs)
	require.NoError(t, s.Close())

	s = open(t, path)
	defer s.Close() //nolint:errcheck
	evs, err := s.Events(context.Background(), 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 6)
	for i, ev := range evs {
		require.EqualValues(t, i+1, ev.Seq, "the stream is whole and in order again")
	}
}
