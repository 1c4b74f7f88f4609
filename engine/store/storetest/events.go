package storetest

// Events and Load: the log after a seq, the last seq, and what a restart finds.

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

func testEvents(t *testing.T, d Driver) {
	s := d.open(t)
	var all []engine.Event
	seq := uint64(0)
	// Commits of varied sizes, some larger than a driver's chunking.
	for _, size := range []int{1, 3, 300, 2, 700, 1} {
		b := &engine.Batch{}
		for range size {
			seq++
			task := mkTask(seq, fmt.Sprintf("agent-%d", seq%5))
			e := ev(seq, task, engine.StateQueued, engine.StateRunning)
			e.Attempt = int(seq % 4)
			switch seq % 9 {
			case 0:
				e.Type, e.TaskID, e.AgentID, e.SessionKey, e.BatchID, e.From, e.To = engine.EventLane, "", "", "", "", 0, 0
				e.Lane, e.Reason = "team", "lane team: inflight 40 → 50"
			case 1:
				e.At = time.Time{}
				e.Reason = "ünïcode ✓"
			}
			all = append(all, e)
			b.Events = append(b.Events, e)
		}
		commit(t, s, b)
	}
	for _, c := range []struct{ after, limit int }{
		{0, 5000}, {0, 1}, {3, 2}, {4, 300}, {150, 10}, {303, 700}, {304, 1}, {1000, 10}, {1006, 10}, {1007, 10}, {5000, 10}, {10, 0},
	} {
		evs, err := s.Events(bg, uint64(c.after), c.limit)
		require.NoError(t, err)
		lo := min(c.after, len(all))
		want := all[lo:min(lo+c.limit, len(all))]
		if len(want) == 0 {
			require.Empty(t, evs, "after %d limit %d", c.after, c.limit)
			continue
		}
		requireEvents(t, want, evs, "after %d limit %d", c.after, c.limit)
	}
	require.Equal(t, seq, load(t, s).LastSeq)
}

func testLoad(t *testing.T, d Driver) {
	s := d.open(t)
	b := &engine.Batch{Batches: []engine.BatchInfo{
		{ID: "B-live", Parallelism: 2, CreatedAt: epoch}, {ID: "B-ended", CreatedAt: epoch}, {ID: "B-empty", CreatedAt: epoch}}}
	var live []string
	for n := uint64(1); n <= 24; n++ {
		task := mkTask(n, "a")
		st := engine.State(n%11 + 1)
		task = with(task, func(c *engine.Task) { c.State = st })
		if st.Terminal() {
			task = ended(task, st, epoch)
		} else {
			live = append(live, task.ID)
		}
		spec := *task.Spec
		if st.Terminal() {
			spec.BatchID = "B-ended"
		} else if n%2 == 0 {
			spec.BatchID = "B-live"
		}
		task.Spec = &spec
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, ev(n, task, 0, st))
	}
	// Committed out of seq order: Load still returns seq order.
	slices.Reverse(b.Tasks)
	commit(t, s, b)
	check := func(st engine.Store) {
		snap := load(t, st)
		require.Equal(t, live, ids(snap.Tasks), "every live task, in seq order, and no terminal one")
		require.Len(t, snap.Batches, 1, "only the batches that have live tasks")
		require.Equal(t, "B-live", snap.Batches[0].ID)
		require.Equal(t, 2, snap.Batches[0].Parallelism)
		require.Equal(t, uint64(24), snap.LastSeq)
	}
	check(s)
	check(d.reopen(t, s))
}

func testLastSeqSurvives(t *testing.T, d Driver) {
	s := d.open(t)
	task := ended(mkTask(1, "a"), engine.StateSucceeded, epoch)
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{task}, Events: []engine.Event{ev(1, task, 0, engine.StateQueued), ev(2, task, engine.StateQueued, engine.StateSucceeded)}})
	n, err := s.Purge(bg, epoch.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(2), load(t, s).LastSeq, "the last seq outlives its events")
	s = d.reopen(t, s)
	require.Equal(t, uint64(2), load(t, s).LastSeq, "and a restart")
	next := mkTask(3, "a")
	require.Error(t, s.Commit(bg, &engine.Batch{Tasks: []*engine.Task{next}, Events: []engine.Event{ev(2, next, 0, engine.StateQueued)}}),
		"a purged seq cannot be reused")
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{next}, Events: []engine.Event{ev(3, next, 0, engine.StateQueued)}})
}
