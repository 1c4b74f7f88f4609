package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/sqlite"
)

func TestDBCheckAndRepair(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switchyard.db")
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	require.NoError(t, err)
	for seq := uint64(1); seq <= 6; seq += 2 {
		id := "T" + string(rune('0'+seq))
		require.NoError(t, s.Commit(context.Background(), &engine.Batch{
			Tasks:  []*engine.Task{{ID: id, Seq: seq, State: engine.StateQueued, Spec: &engine.TaskSpec{AgentID: "a", Lane: "main"}}},
			Events: []engine.Event{{Seq: seq, TaskID: id}, {Seq: seq + 1, TaskID: id}},
		}))
	}
	db := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"db"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, verb := range []string{"check", "repair"} {
		code, _, stderr := db(verb, "--db", path)
		require.Equal(t, 4, code, "a file a server owns is refused, with a status of its own (check's 1 is \"needs a repair\")")
		require.Contains(t, stderr, "in use by another process")
		require.NotContains(t, stderr, "database file of its own", "that advice is serve's")
	}
	require.NoError(t, s.Close())

	code, out, stderr := db("check", "--db", path)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, path+": consistent\n", out)

	// Two writers' leftovers: last_seq behind, and a chunk inside another.
	c, err := sqlite3.Open(path)
	require.NoError(t, err)
	require.NoError(t, c.Exec("UPDATE meta SET value = 2; INSERT INTO events(first_seq, last_seq, data) SELECT 4, 5, data FROM events WHERE first_seq = 3"))
	require.NoError(t, c.Close())

	code, out, stderr = db("check", "--db", path)
	require.Equal(t, 1, code, "check exits 1 when a repair would change something")
	require.Equal(t, "problem: events 4..5 overlap events 3..4 (two processes wrote the file at once?)\n"+
		"  `switchyard db repair` would delete events 4..5, keeping 3..4: the history of the tasks they belong to loses those events; the tasks themselves are unchanged\n"+
		"problem: meta.last_seq is 2 but stored seqs reach 6 (events up to 6, tasks up to 5): new events would collide with stored ones\n"+
		"  `switchyard serve` repairs this at start, as `switchyard db repair` would: set meta.last_seq to 6\n", out)
	require.Contains(t, stderr, "2 problem(s)")

	code, out, stderr = db("repair", "--db", path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "repaired: events 4..5 overlap events 3..4")
	require.Contains(t, out, "changed: set meta.last_seq to 6")
	require.Contains(t, out, path+": consistent (2 repair(s))")

	code, out, _ = db("check", "--db", path)
	require.Equal(t, 0, code)
	require.Equal(t, path+": consistent\n", out)

	code, _, stderr = db("check", "--db", filepath.Join(t.TempDir(), "missing.db"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no database at")
	code, _, _ = db("frobnicate")
	require.Equal(t, 2, code)
}
