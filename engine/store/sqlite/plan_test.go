package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// queryPlan returns SQLite's plan for q, one line per step.
func queryPlan(t *testing.T, s *Store, q string, args []any) string {
	t.Helper()
	var lines []string
	require.NoError(t, s.read(context.Background(), func(r *reader) error {
		st, _, err := r.c.Prepare("EXPLAIN QUERY PLAN " + q)
		if err != nil {
			return err
		}
		defer st.Close() //nolint:errcheck
		bind(st, args)
		for st.Step() {
			lines = append(lines, st.ColumnText(3))
		}
		return st.Err()
	}))
	return strings.Join(lines, "\n")
}

// TestPagesUseTheirIndexAndNeverSort checks the plans of listings: each
// filter field is served by its index, and no page sorts the tasks it
// matches (a sort would read every match to return a page).
func TestPagesUseTheirIndexAndNeverSort(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), Options{Path: filepath.Join(t.TempDir(), "plan.db"), Readers: 1})
	require.NoError(t, err)
	defer s.Close() //nolint:errcheck
	for _, c := range []struct {
		f     engine.TaskFilter
		index string
	}{
		{engine.TaskFilter{}, ""},
		{engine.TaskFilter{AgentID: "a"}, "tasks_agent"},
		{engine.TaskFilter{Lane: "team"}, "tasks_lane"},
		{engine.TaskFilter{SessionKey: "s"}, "tasks_session"},
		{engine.TaskFilter{BatchID: "b"}, "tasks_batch"},
		{engine.TaskFilter{ParentID: "p"}, "tasks_parent"},
		{engine.TaskFilter{States: []engine.State{engine.StateQueued}}, "tasks_state"},
		{engine.TaskFilter{States: []engine.State{engine.StateQueued, engine.StateRetryWait, engine.StateParked}}, "tasks_state"},
		{engine.TaskFilter{IDs: []string{"x", "y"}}, ""},
		{engine.TaskFilter{AgentID: "a", States: []engine.State{engine.StateQueued, engine.StateFailed}}, ""},
		{engine.TaskFilter{Labels: map[string]string{"env": "prod"}}, ""},
	} {
		for _, order := range []engine.Order{engine.OldestFirst, engine.NewestFirst} {
			for _, after := range []uint64{0, 1000} {
				q, args := listSQL(engine.TaskQuery{Filter: c.f, Order: order, After: after, Limit: 50})
				plan := queryPlan(t, s, q, args)
				if len(c.f.IDs) == 0 { // with ids, the matches are at most the ids given: sorting them is fine
					require.NotContains(t, plan, "TEMP B-TREE", "filter %+v order %d: a page must not sort\n%s", c.f, order, plan)
				}
				if c.index != "" {
					require.Contains(t, plan, c.index, "filter %+v: served by its index\n%s", c.f, plan)
				}
			}
		}
	}
	plan := queryPlan(t, s, "SELECT seq FROM tasks WHERE ended_at < ? ORDER BY ended_at LIMIT ?", []any{int64(1), int64(10)})
	require.Contains(t, plan, "tasks_ended", "purges find ended tasks through their index")
	require.NotContains(t, plan, "TEMP B-TREE")
	plan = queryPlan(t, s, "SELECT seq FROM tasks WHERE agent = ? AND idem_key = ?", []any{"a", "k"})
	require.Contains(t, plan, "tasks_idem", "idempotency lookups use their index")
}
