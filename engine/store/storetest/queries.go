package storetest

// Listing tasks: keyset pages, filters, counts and idempotency keys.

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

func testKeyset(t *testing.T, d Driver) {
	s := d.open(t)
	var all []*engine.Task
	batch := &engine.Batch{}
	for n := uint64(1); n <= 25; n++ {
		// Seqs with gaps, as in a real store where other events interleave.
		task := mkTask(n*3, "a")
		all = append(all, task)
		batch.Tasks = append(batch.Tasks, task)
		batch.Events = append(batch.Events, ev(n*3, task, 0, engine.StateQueued))
	}
	commit(t, s, batch)
	for _, order := range []engine.Order{engine.OldestFirst, engine.NewestFirst} {
		want := ids(all)
		if order == engine.NewestFirst {
			slices.Reverse(want)
		}
		var got []string
		var after uint64
		for page := 0; ; page++ {
			ts, err := s.Tasks(bg, engine.TaskQuery{Order: order, After: after, Limit: 7})
			require.NoError(t, err)
			require.LessOrEqual(t, len(ts), 7, "a page holds at most Limit tasks")
			if len(ts) == 0 {
				break
			}
			got = append(got, ids(ts)...)
			after = ts[len(ts)-1].Seq
			require.Less(t, page, 10, "pagination ends")
		}
		require.Equal(t, want, got, "order %d: pages walk every task once, in order", order)
	}
	// A cursor between seqs, and past either end.
	ts, err := s.Tasks(bg, engine.TaskQuery{Order: engine.OldestFirst, After: 10, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{id(12), id(15)}, ids(ts), "oldest first after 10")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, After: 10, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{id(9), id(6)}, ids(ts), "newest first before 10")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.OldestFirst, After: 75, Limit: 5})
	require.NoError(t, err)
	require.Empty(t, ts, "nothing after the newest")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, After: 3, Limit: 5})
	require.NoError(t, err)
	require.Empty(t, ts, "nothing before the oldest")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, Limit: 0})
	require.NoError(t, err)
	require.Empty(t, ts, "a zero limit returns nothing")
}

// filterWorld commits 72 tasks that differ in every filtered field and
// returns them in seq order.
func filterWorld(t *testing.T, s engine.Store) []*engine.Task {
	t.Helper()
	agents := []string{"a", "b", "ägent-ü"}
	lanes := []string{"main", "team"}
	states := []engine.State{engine.StateQueued, engine.StateWaiting, engine.StateRunning, engine.StateSucceeded,
		engine.StateFailed, engine.StateParked, engine.StateCancelled, engine.StateRetryWait}
	var all []*engine.Task
	b := &engine.Batch{Batches: []engine.BatchInfo{{ID: "B1", CreatedAt: epoch}, {ID: "B2", CreatedAt: epoch}}}
	for n := uint64(1); n <= 72; n++ {
		task := mkTask(n, agents[n%3])
		spec := *task.Spec
		spec.Lane = lanes[n%2]
		switch n % 4 {
		case 0:
			spec.SessionKey = "s1"
		case 1:
			spec.TabID = "s1" // no session key: the tab is the session
		case 2:
			spec.SessionKey, spec.TabID = "s2", "s1"
		}
		switch n % 5 {
		case 0:
			spec.BatchID = "B1"
		case 1:
			spec.BatchID = "B2"
		}
		if n%6 == 0 {
			spec.ParentID = id(n - 1)
		}
		spec.Labels = map[string]string{}
		if n%2 == 0 {
			spec.Labels["env"] = "prod"
		} else if n%3 == 0 {
			spec.Labels["env"] = "dev"
		}
		if n%7 < 3 {
			spec.Labels["team"] = "x"
		}
		task.Spec = &spec
		if st := states[n%8]; st != engine.StateQueued {
			task = with(task, func(c *engine.Task) { c.State = st })
			if st.Terminal() {
				task = ended(task, st, epoch.Add(time.Minute))
			}
		}
		all = append(all, task)
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, ev(n, task, 0, task.State))
	}
	commit(t, s, b)
	return all
}

func testFilters(t *testing.T, d Driver) {
	s := d.open(t)
	all := filterWorld(t, s)
	filters := []engine.TaskFilter{
		{},
		{AgentID: "a"}, {AgentID: "ägent-ü"}, {AgentID: "nobody"},
		{Lane: "team"}, {Lane: "main"},
		{SessionKey: "s1"}, {SessionKey: "s2"}, {SessionKey: "tab-that-is-not-a-session"},
		{BatchID: "B1"}, {BatchID: "B2"}, {BatchID: "B3"},
		{ParentID: id(5)}, {ParentID: id(6)},
		{States: []engine.State{engine.StateQueued}},
		{States: []engine.State{engine.StateSucceeded, engine.StateFailed, engine.StateCancelled}},
		{States: []engine.State{engine.StateExpired}},
		{IDs: []string{id(3), id(70), id(71), "missing"}},
		{Labels: map[string]string{"env": "prod"}},
		{Labels: map[string]string{"env": "prod", "team": "x"}},
		{Labels: map[string]string{"env": "dev", "team": "x"}},
		{Labels: map[string]string{"env": "staging"}},
		{Labels: map[string]string{"absent": ""}},
		{AgentID: "b", Lane: "main", SessionKey: "s1"},
		{AgentID: "a", States: []engine.State{engine.StateQueued, engine.StateParked}, Labels: map[string]string{"env": "prod"}},
		{BatchID: "B1", Lane: "team", States: []engine.State{engine.StateRunning, engine.StateSucceeded}},
		{IDs: []string{id(10), id(11), id(12)}, AgentID: "b"},
		{ParentID: id(11), BatchID: "B2", AgentID: "ägent-ü", Lane: "team", SessionKey: "s1",
			States: []engine.State{engine.StateWaiting}, Labels: map[string]string{"env": "prod", "team": "x"}},
	}
	for i, f := range filters {
		var want []string
		wantCounts := map[engine.State]int{}
		for _, task := range all {
			if f.Matches(task) {
				want = append(want, task.ID)
				wantCounts[task.State]++
			}
		}
		for _, order := range []engine.Order{engine.OldestFirst, engine.NewestFirst} {
			var got []string
			var after uint64
			for page := 0; page < 20; page++ {
				ts, err := s.Tasks(bg, engine.TaskQuery{Filter: f, Order: order, After: after, Limit: 7})
				require.NoError(t, err)
				if len(ts) == 0 {
					break
				}
				for _, task := range ts {
					require.True(t, f.Matches(task), "filter %d %+v: task %s does not match", i, f, task.ID)
				}
				got = append(got, ids(ts)...)
				after = ts[len(ts)-1].Seq
			}
			w := slices.Clone(want)
			if order == engine.NewestFirst {
				slices.Reverse(w)
			}
			if len(w) == 0 {
				w = nil
			}
			require.Equal(t, w, got, "filter %d %+v, order %d: every match, in order, across pages", i, f, order)
		}
		counts, err := s.CountTasks(bg, f)
		require.NoError(t, err)
		require.Equal(t, wantCounts, counts, "filter %d %+v: counts by state", i, f)
	}
}

func testIdempotency(t *testing.T, d Driver) {
	s := d.open(t)
	a := mkTask(1, "agent-1")
	a.Spec.IdempotencyKey = "order-42"
	b := mkTask(2, "agent-2")
	b.Spec.IdempotencyKey = "order-43"
	c := mkTask(3, "agent-1") // no key
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{a, b, c}, Events: []engine.Event{ev(1, a, 0, 1), ev(2, b, 0, 1), ev(3, c, 0, 1)}})
	got, err := s.FindIdempotent(bg, "agent-1", "order-42")
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	_, err = s.FindIdempotent(bg, "agent-2", "order-42")
	requireNotFound(t, err, "another agent's key")
	_, err = s.FindIdempotent(bg, "agent-1", "order-43")
	requireNotFound(t, err, "a key of another agent")
	_, err = s.FindIdempotent(bg, "agent-1", "")
	requireNotFound(t, err, "the empty key")
	// The key follows the task's latest snapshot.
	done := ended(a, engine.StateCancelled, epoch.Add(time.Second))
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{done}, Events: []engine.Event{ev(4, a, 1, engine.StateCancelled)}})
	got, err = s.FindIdempotent(bg, "agent-1", "order-42")
	require.NoError(t, err)
	requireTask(t, done, got)
}
