package sqlite_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

// crashChildEnv makes the test binary a child that commits until killed;
// crashPreallocEnv has it open the store with a preallocated log.
const (
	crashChildEnv    = "SWITCHYARD_SQLITE_CRASH_CHILD"
	crashPreallocEnv = "SWITCHYARD_SQLITE_CRASH_PREALLOC"
)

// crashOptions are the options of both the child and the parent's checks:
// with the preallocated log, a small one, so that the kills find it in
// every state (appended to the zeros, restarted over earlier frames).
func crashOptions(path string, prealloc bool) sqlite.Options {
	if prealloc {
		return sqlite.Options{Path: path, PreallocateWAL: true, CheckpointPages: 100}
	}
	return sqlite.Options{Path: path}
}

// TestCrashChild is the child process of TestKilledProcessLosesNoCommit: it
// commits batches of tasks after what the database holds and prints the last
// seq of each batch once Commit has returned. It does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("only runs as the child of TestKilledProcessLosesNoCommit")
	}
	s, err := sqlite.Open(context.Background(), crashOptions(path, os.Getenv(crashPreallocEnv) != ""))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	snap, err := s.Load(context.Background())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	for seq := snap.LastSeq; ; {
		b := &engine.Batch{}
		for range 50 {
			seq++
			task := &engine.Task{ID: fmt.Sprintf("T%09d", seq), Seq: seq, State: engine.StateQueued,
				Spec: &engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(int(seq%7)), Lane: "main", Action: &engine.Action{Kind: "click"}}}
			b.Tasks = append(b.Tasks, task)
			b.Events = append(b.Events, engine.Event{Seq: seq, TaskID: task.ID, Type: engine.EventState, To: engine.StateQueued})
		}
		if err := s.Commit(context.Background(), b); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, seq)
		_ = out.Flush()
	}
}

// TestKilledProcessLosesNoCommit kills (SIGKILL) a process that commits in
// a loop, at several moments, and checks after each kill that every batch
// whose Commit had returned is in the database, whole, and that the
// database opens cleanly; with the default log, and with a preallocated one
// (zeros past its end, which recovery must read as the end).
func TestKilledProcessLosesNoCommit(t *testing.T) {
	t.Parallel()
	t.Run("default log", func(t *testing.T) { t.Parallel(); killCommitter(t, false) })
	t.Run("preallocated log", func(t *testing.T) { t.Parallel(); killCommitter(t, true) })
}

func killCommitter(t *testing.T, prealloc bool) {
	path := filepath.Join(t.TempDir(), "switchyard.db")
	committed := uint64(0)
	for round := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCrashChild$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		if prealloc {
			cmd.Env = append(cmd.Env, crashPreallocEnv+"=1")
		}
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(stdout)
		// Kill after a number of acknowledged commits that differs per round.
		for n := 0; n < 5+round*7 && lines.Scan(); n++ {
			v, err := strconv.ParseUint(lines.Text(), 10, 64)
			require.NoError(t, err, "child said %q", lines.Text())
			committed = v
		}
		require.NoError(t, cmd.Process.Kill())
		// Anything acknowledged before the kill took effect counts too.
		for lines.Scan() {
			if v, err := strconv.ParseUint(lines.Text(), 10, 64); err == nil {
				committed = v
			}
		}
		_ = cmd.Wait()

		s := openWith(t, crashOptions(path, prealloc))
		snap, err := s.Load(context.Background())
		require.NoError(t, err, "round %d: the database opens and loads after kill -9", round)
		require.GreaterOrEqual(t, snap.LastSeq, committed, "round %d: every acknowledged commit survived", round)
		require.Len(t, snap.Tasks, int(snap.LastSeq), "round %d: batches are whole: one task per event", round)
		for i, task := range snap.Tasks {
			require.Equal(t, uint64(i+1), task.Seq)
		}
		require.NoError(t, s.Close()) // the next child continues after what is stored
	}
}
