package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubmitTaskReturnsTheRecordedTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	var out struct {
		SubmitTask struct {
			ID     string
			State  string
			Lane   string
			Action struct{ Kind string }
		}
	}
	err := b.c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id state lane action { kind } } }`,
		map[string]any{"in": map[string]any{"agentId": "a", "action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &out)
	require.NoError(t, err)
	require.NotEmpty(t, out.SubmitTask.ID)
	require.Equal(t, "main", out.SubmitTask.Lane)
	require.Equal(t, "click", out.SubmitTask.Action.Kind)
}
