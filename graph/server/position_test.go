package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// position is there for QUEUED tasks wherever a task is answered: the
// answer of submitTask and submitTasks, and the tasks list, as task(id)
// computes it.
func TestPositionIsGivenForQueuedTasksInSubmissionsAndLists(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		lanes := engine.DefaultLanes()
		for i := range lanes {
			lanes[i].Paused = true
		}
		o.config = engine.Config{Lanes: lanes}
	})
	ctx := ctxFor(t)
	var first struct{ SubmitTask struct{ Position *int } }
	require.NoError(t, b.c.Do(ctx, `mutation { submitTask(input: {agentId: "p", action: {kind: "click"}}) { position } }`, nil, &first))
	require.NotNil(t, first.SubmitTask.Position, "submitTask answers the position of a QUEUED task")
	require.Equal(t, 0, *first.SubmitTask.Position)

	var batch struct {
		SubmitTasks struct {
			Items []struct{ Task struct{ Position *int } }
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { submitTasks(input: {items: [
		{task: {agentId: "p", action: {kind: "click"}}},
		{task: {agentId: "p", action: {kind: "click"}, priority: HIGH}},
		{task: {agentId: "q", action: {kind: "click"}}}]}) { items { task { position } } } }`, nil, &batch))
	var got []int
	for _, it := range batch.SubmitTasks.Items {
		require.NotNil(t, it.Task.Position)
		got = append(got, *it.Task.Position)
	}
	require.Equal(t, []int{2, 0, 0}, got, "behind the first task and the HIGH one; the HIGH one goes first; q's queue is its own")

	var page struct {
		Tasks struct {
			Edges []struct {
				Node struct {
					ID       string
					Position *int
				}
			}
		}
	}
	require.NoError(t, b.c.Do(ctx, `{ tasks(first: 10) { edges { node { id ...P } } } } fragment P on Task { position }`, nil, &page))
	require.Len(t, page.Tasks.Edges, 4)
	for _, e := range page.Tasks.Edges {
		var one struct{ Task struct{ Position *int } }
		require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { position } }`, map[string]any{"id": e.Node.ID}, &one))
		require.NotNil(t, e.Node.Position, "the list gives the position")
		require.Equal(t, *one.Task.Position, *e.Node.Position, "the same as task(id)")
	}
}
