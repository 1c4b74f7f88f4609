package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
)

// GoClaw's debounce through a running server: a lane configured with a
// window collapses a burst of tasks to one session into its last task; the
// others are cancelled naming it, and only the last reaches the instance.
func TestDebounceCollapsesABurstToOneSession(t *testing.T) {
	t.Parallel()
	inst := newFleetInstance(t, 0)
	c := serveWithConfig(t, `
instances:
  - {id: solo, url: "`+inst.srv.URL+`/solo"}
engine:
  lanes:
    - {name: chat, debounce: 10s}
`)
	ctx := context.Background()
	submit := func(session string) (id, state, reason string) {
		t.Helper()
		var out struct {
			SubmitTask struct {
				ID, State, Reason string
				NextRunAt         *time.Time
			}
		}
		require.NoError(t, c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id state reason nextRunAt } }`,
			map[string]any{"in": map[string]any{"agentId": "bot", "lane": "chat", "sessionKey": session,
				"action": map[string]any{"kind": "click", "selector": "css:#send"}}}, &out))
		if out.SubmitTask.State == "WAITING" {
			require.NotNil(t, out.SubmitTask.NextRunAt, "a held task says when it queues")
		}
		return out.SubmitTask.ID, out.SubmitTask.State, out.SubmitTask.Reason
	}
	start := time.Now()
	var burst []string
	for range 3 {
		id, state, reason := submit("group-1")
		require.Equal(t, "WAITING", state)
		require.Equal(t, "debounce: held 10s for newer tasks of its session", reason)
		burst = append(burst, id)
	}
	other, _, _ := submit("group-2")
	require.Less(t, time.Since(start), 10*time.Second, "the burst must fit in the window for this test to mean anything")

	for i, id := range burst[:2] {
		got := readTask(t, c, id)
		require.Equal(t, "CANCELLED", got.State)
		require.Equal(t, "debounced: superseded by "+burst[i+1], got.Reason)
	}
	last := waitState(t, c, burst[2], "SUCCEEDED")
	require.Empty(t, last.Error)
	waitState(t, c, other, "SUCCEEDED")
	require.Equal(t, 0, inst.count(burst[0]))
	require.Equal(t, 0, inst.count(burst[1]))
	require.Equal(t, 1, inst.count(burst[2]), "the last of the burst runs, once")
	require.Equal(t, 1, inst.count(other), "another session's task is its own burst")

	// The window is the lane's, read and changed through the API.
	var lane struct{ Lane struct{ DebounceMs int } }
	require.NoError(t, c.Do(ctx, `{ lane(name: "chat") { debounceMs } }`, nil, &lane))
	require.Equal(t, 10000, lane.Lane.DebounceMs)
	err := c.Do(ctx, `mutation { updateLane(name: "chat", input: {debounceMs: 60001}) { name } }`, nil, nil)
	var gqlErr client.Errors
	require.True(t, errors.As(err, &gqlErr), "%v", err)
	require.Equal(t, "INVALID_INPUT", gqlErr[0].Code())
	require.Equal(t, "input.debounceMs", gqlErr[0].Field())
	var off struct{ UpdateLane struct{ DebounceMs int } }
	require.NoError(t, c.Do(ctx, `mutation { updateLane(name: "chat", input: {debounceMs: 0}) { debounceMs } }`, nil, &off))
	require.Zero(t, off.UpdateLane.DebounceMs)
	_, state, _ := submit("group-1")
	require.NotEqual(t, "WAITING", state, "without a window, a session's task is not held")
}
