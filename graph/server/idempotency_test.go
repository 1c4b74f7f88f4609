package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// An idempotency key reused for another request is a CONFLICT on the key,
// naming the task the key holds; the same request sent again answers with
// that task. In a batch, an item repeating an earlier item's key is refused
// at its own path, or reported replayed.
func TestAnIdempotencyKeyReusedForAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	ctx := ctxFor(t)
	title := map[string]any{"agentId": "x", "idempotencyKey": "K1", "action": map[string]any{"kind": "title"}}
	navigate := map[string]any{"agentId": "x", "idempotencyKey": "K1", "action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.com"}}}
	var first struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(ctx, submitQ, map[string]any{"in": title}, &first))
	e := gqlErr(t, b.c.Do(ctx, submitQ, map[string]any{"in": navigate}, nil))
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Equal(t, "input.idempotencyKey", e.Field(), e.Message)
	require.Equal(t, first.SubmitTask.ID, e.Extensions["taskId"], e.Message)
	var again struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(ctx, submitQ, map[string]any{"in": title}, &again))
	require.Equal(t, first.SubmitTask.ID, again.SubmitTask.ID, "the same request answers with the original")

	batchQ := `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted refused items { replayed task { id } error { code field taskId } } } }`
	var out struct {
		SubmitTasks struct {
			Accepted, Refused int
			Items             []struct {
				Replayed bool
				Task     *struct{ ID string }
				Error    *struct{ Code, Field, TaskID string }
			}
		}
	}
	k2 := func(in map[string]any) map[string]any {
		cp := map[string]any{}
		for k, v := range in {
			cp[k] = v
		}
		cp["idempotencyKey"] = "K2"
		return map[string]any{"task": cp}
	}
	require.NoError(t, b.c.Do(ctx, batchQ, map[string]any{"in": map[string]any{"items": []any{k2(title), k2(navigate), k2(title)}}}, &out))
	res := out.SubmitTasks
	require.Equal(t, 2, res.Accepted)
	require.Equal(t, 1, res.Refused)
	require.False(t, res.Items[0].Replayed)
	require.NotNil(t, res.Items[0].Task)
	require.Nil(t, res.Items[1].Task)
	require.NotNil(t, res.Items[1].Error)
	require.Equal(t, "CONFLICT", res.Items[1].Error.Code)
	require.Equal(t, "input.items.1.task.idempotencyKey", res.Items[1].Error.Field)
	require.Equal(t, res.Items[0].Task.ID, res.Items[1].Error.TaskID)
	require.True(t, res.Items[2].Replayed)
	require.Nil(t, res.Items[2].Error)
	require.Equal(t, res.Items[0].Task.ID, res.Items[2].Task.ID)
	require.EqualValues(t, 2, b.eng.Stats(context.Background()).Submitted, "K1's task and K2's")
}

// A submitTasks resent whole answers with the batchId of its first
// sending, whether it selects its items or only counts (which the server
// answers without reading the items' tasks).
func TestABatchResentWholeAnswersItsFirstBatchID(t *testing.T) {
	t.Parallel()
	b := setup(t, succeed)
	ctx := ctxFor(t)
	items := []any{
		map[string]any{"task": map[string]any{"agentId": "x", "idempotencyKey": "R1", "action": map[string]any{"kind": "title"}}},
		map[string]any{"task": map[string]any{"agentId": "x", "idempotencyKey": "R2", "action": map[string]any{"kind": "title"}}},
	}
	for _, sel := range []string{`batchId accepted items { replayed }`, `batchId accepted refused`} {
		t.Run(sel, func(t *testing.T) {
			q := `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { ` + sel + ` } }`
			var first, again struct {
				SubmitTasks struct {
					BatchID  *string
					Accepted int
				}
			}
			in := map[string]any{"in": map[string]any{"items": items}}
			require.NoError(t, b.c.Do(ctx, q, in, &first))
			require.NoError(t, b.c.Do(ctx, q, in, &again))
			require.NotNil(t, first.SubmitTasks.BatchID)
			require.NotNil(t, again.SubmitTasks.BatchID, "the resent batch names its first batch")
			require.Equal(t, *first.SubmitTasks.BatchID, *again.SubmitTasks.BatchID)
			require.Equal(t, 2, again.SubmitTasks.Accepted)
		})
		items = []any{ // the next selection sends new keys first
			map[string]any{"task": map[string]any{"agentId": "x", "idempotencyKey": "S1", "action": map[string]any{"kind": "title"}}},
			map[string]any{"task": map[string]any{"agentId": "x", "idempotencyKey": "S2", "action": map[string]any{"kind": "title"}}},
		}
	}
}
