package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// TestAFollowedTaskEndsWithoutLingering: with a durable store, the end of a
// task nobody follows waits for the next commit someone waits for (here an
// hour, to tell the two apart), while the end of a followed task is
// committed — and so published — at once.
func TestAFollowedTaskEndsWithoutLingering(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := enginetest.NewExecutor()
	e, err := engine.New(engine.Options{Store: durableMemory{memory.New(memory.Options{})}, Executor: exec})
	require.NoError(t, err)
	engine.SetLazyCommitDelay(e, time.Hour)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() { _ = e.Shutdown(ctx) })

	committedEnd := func(id string) bool {
		evs, _ := e.Events().Read(0, 1<<20, nil)
		for _, ev := range evs {
			if ev.TaskID == id && ev.Type == engine.EventState && ev.To == engine.StateSucceeded {
				return true
			}
		}
		return false
	}
	finish := func(id string) {
		waitfor.Eventually(t, "the attempt of "+id+" starts", func() bool { return exec.Run(id) != nil })
		exec.Run(id).Finish(engine.Outcome{})
	}

	followed, err := e.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	unfollow := e.Follow(followed.ID)
	finish(followed.ID)
	waitfor.Eventually(t, "the followed task's end is committed at once", func() bool { return committedEnd(followed.ID) })
	unfollow()
	unfollow() // harmless

	alone, err := e.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	finish(alone.ID)
	// The next submission waits for its commit, and the lingering end
	// rides in it.
	next, err := e.Submit(ctx, enginetest.Spec("b").Obj())
	require.NoError(t, err)
	require.True(t, committedEnd(alone.ID), "the end rode in the next commit")
	finish(next.ID)

	require.NotPanics(t, func() { e.Follow("no-such-task")() })
}
