package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

func TestOpenRefusesGarbage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("not a database, just garbage bytes. "), 500), 0o644))
	_, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.Error(t, err, "garbage is an error, never an empty queue")
	require.Contains(t, err.Error(), "is not a SQLite database")
	require.Contains(t, err.Error(), path, "the error names the file")
}

func TestCorruptPagesFailAtOpenOrLoad(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := open(t, path)
	b := &engine.Batch{}
	for i := range 2000 {
		task := &engine.Task{ID: fmt.Sprintf("T%05d", i), Seq: uint64(i + 1), State: engine.StateQueued,
			Spec: &engine.TaskSpec{AgentID: "agent", Lane: "main", Action: &engine.Action{Kind: "click"}}}
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, engine.Event{Seq: uint64(i + 1), TaskID: task.ID, Type: engine.EventState, To: engine.StateQueued})
	}
	require.NoError(t, s.Commit(context.Background(), b))
	require.NoError(t, s.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Greater(t, len(data), 16*4096)
	// Keep the header page, scramble the rest.
	for i := 4096; i < len(data); i++ {
		data[i] = byte(i*7 + 13)
	}
	require.NoError(t, os.WriteFile(path, data, 0o644))
	s2, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err == nil {
		_, err = s2.Load(context.Background())
		_ = s2.Close()
	}
	require.Error(t, err, "a corrupt database is an error at open or load, never an empty queue")
	require.Contains(t, err.Error(), path)
}

func TestOpenRefusesAnotherApplicationsDatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "other.db")
	s := open(t, path)
	require.NoError(t, s.Close())
	// Rewrite the application id, as another program's file would have.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	copy(data[68:72], []byte{0, 0, 0, 7})
	require.NoError(t, os.WriteFile(path, data, 0o644))
	_, err = sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.ErrorContains(t, err, "another application's database")
}

func TestOpenRefusesAnUnwritableDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "switchyard.db")
	s := open(t, path)
	require.NoError(t, s.Close())
	// chattr +i binds root too (chmod does not).
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		if os.Geteuid() == 0 {
			t.Skipf("chattr +i unavailable here (%v: %s)", err, out)
		}
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
	} else {
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
	}
	_, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.Error(t, err, "a database that cannot be written is an error at open")
	require.Contains(t, err.Error(), path)
}

func TestOpenRefusesAPathUnderAFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	_, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(file, "switchyard.db")})
	require.Error(t, err)
}

func TestMigrationsAreRecordedAndReappliedNever(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := open(t, path)
	task := &engine.Task{ID: "T1", Seq: 1, State: engine.StateQueued, Spec: &engine.TaskSpec{AgentID: "a", Lane: "main"}}
	require.NoError(t, s.Commit(context.Background(), &engine.Batch{Tasks: []*engine.Task{task}, Events: []engine.Event{{Seq: 1, TaskID: "T1"}}}))
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "Close twice is harmless")
	s = open(t, path)
	defer s.Close() //nolint:errcheck
	snap, err := s.Load(context.Background())
	require.NoError(t, err)
	require.Len(t, snap.Tasks, 1, "reopening keeps the data: the migrations ran once")
	_, err = s.Task(context.Background(), "T1")
	require.NoError(t, err)
}

func TestCloseReleasesEverything(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s := open(t, path)
	task := &engine.Task{ID: "T1", Seq: 1, State: engine.StateQueued, Spec: &engine.TaskSpec{AgentID: "a", Lane: "main"}}
	require.NoError(t, s.Commit(context.Background(), &engine.Batch{Tasks: []*engine.Task{task}, Events: []engine.Event{{Seq: 1, TaskID: "T1"}}}))
	require.NoError(t, s.Close())
	_, err := s.Task(context.Background(), "T1")
	require.Error(t, err, "reads fail after Close")
	require.Error(t, s.Commit(context.Background(), &engine.Batch{Events: []engine.Event{{Seq: 2}}}), "commits fail after Close")
	if fi, err := os.Stat(path + "-wal"); err == nil {
		require.Zero(t, fi.Size(), "the log was checkpointed into the database")
	}
	// Everything is in the main file: a copy of it alone holds the data.
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	cp := filepath.Join(t.TempDir(), "copy.db")
	require.NoError(t, os.WriteFile(cp, data, 0o644))
	s2 := open(t, cp)
	defer s2.Close() //nolint:errcheck
	_, err = s2.Task(context.Background(), "T1")
	require.NoError(t, err)
}
