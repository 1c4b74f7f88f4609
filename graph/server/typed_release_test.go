package server_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/poison"
)

// The room a batch read typed is read into goes back to a pool once the
// response is written, and the next batch is read into it (as the
// resolver's room for the items' actions is reused): each response still
// names its own items' keys and tasks, and every task the engine keeps
// still carries the agent, instruction or action, and labels its own
// item gave.
// The same query is sent round after round, so that from the second on
// the body decoder reads the input typed (the query is cached by then).
// Released room is reused as in production here: poisoning (which keeps
// it out of the pool under tests, internal/poison) is off, so the test
// does not run in parallel with those that rely on it.
func TestBatchesReadIntoReusedRoomKeepTheirOwnValues(t *testing.T) {
	t.Cleanup(poison.Set(false))
	b := setup(t)
	const q = `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) {
		accepted items { index key task { id agentId instruction labels { key value } } } } }`
	type sent struct {
		key, agent, instruction, label string
		action                         bool
	}
	byID := map[string]sent{}
	for round := range 6 {
		items := []map[string]any{}
		var want []sent
		for i := range 5 + round { // batches of different sizes
			s := sent{
				key:         fmt.Sprintf("r%d-i%d", round, i),
				agent:       fmt.Sprintf("agent-%d", (round+i)%3),
				instruction: fmt.Sprintf("round %d item %d", round, i),
				label:       fmt.Sprintf("v%d-%d", round, i%2),
				action:      i%2 == 1,
			}
			want = append(want, s)
			task := map[string]any{
				"agentId": s.agent,
				"labels":  []map[string]any{{"key": "round", "value": fmt.Sprint(round)}, {"key": "k", "value": s.label}},
			}
			if i%2 == 0 {
				task["instruction"] = s.instruction
			} else {
				task["action"] = map[string]any{"kind": "click", "selector": s.instruction, "params": map[string]any{"n": i}}
			}
			items = append(items, map[string]any{"key": s.key, "task": task})
		}
		res, _, err := b.c.Raw(ctxFor(t), client.Request{Query: q, Variables: map[string]any{"in": map[string]any{"items": items}}})
		require.NoError(t, err)
		require.Empty(t, res.Errors)
		var out struct {
			SubmitTasks struct {
				Accepted int
				Items    []struct {
					Index int
					Key   *string
					Task  struct {
						ID, AgentID, Instruction string
						Labels                   []struct{ Key, Value string }
					}
				}
			}
		}
		require.NoError(t, json.Unmarshal(res.Data, &out))
		require.Equal(t, len(want), out.SubmitTasks.Accepted, "round %d", round)
		for i, it := range out.SubmitTasks.Items {
			w := want[i]
			require.NotNil(t, it.Key, "round %d item %d: its key", round, i)
			require.Equal(t, w.key, *it.Key, "round %d item %d", round, i)
			require.Equal(t, w.agent, it.Task.AgentID)
			if i%2 == 0 {
				require.Equal(t, w.instruction, it.Task.Instruction)
			}
			require.ElementsMatch(t, []struct{ Key, Value string }{{"round", fmt.Sprint(round)}, {"k", w.label}}, it.Task.Labels)
			byID[it.Task.ID] = w
		}
	}
	require.Len(t, byID, 5+6+7+8+9+10)
	for id, w := range byID {
		task, err := b.eng.Task(ctxFor(t), id)
		require.NoError(t, err)
		require.Equal(t, w.agent, task.Spec.AgentID, "task %s", id)
		if w.action {
			require.NotNil(t, task.Spec.Action, "task %s", id)
			require.Equal(t, "click", task.Spec.Action.Kind, "task %s", id)
			require.Equal(t, w.instruction, task.Spec.Action.Selector, "task %s", id)
		} else {
			require.Equal(t, w.instruction, task.Spec.Instruction, "task %s", id)
		}
		require.Equal(t, w.label, task.Spec.Labels["k"], "task %s", id)
	}
}
