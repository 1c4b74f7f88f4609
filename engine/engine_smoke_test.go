package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

func TestSubmitDispatchSucceed(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	task := h.Submit(enginetest.Spec("a").Obj())
	require.Equal(t, []string{task.ID}, h.Exec.Running())
	require.Equal(t, engine.StateAssigned, h.State(task.ID))
	require.NoError(t, h.Exec.Succeed(task.ID, `{"ok":true}`))
	got := h.Get(task.ID)
	require.Equal(t, engine.StateSucceeded, got.State)
	require.JSONEq(t, `{"ok":true}`, string(got.Result))
}
