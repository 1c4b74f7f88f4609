package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// placingHarness is enginetest.New with Options.PlaceOnInstances.
func placingHarness(t *testing.T) *enginetest.Harness {
	h := &enginetest.Harness{T: t, Clock: clock.NewFake(enginetest.Epoch), Store: memory.New(memory.Options{}), Exec: enginetest.NewExecutor()}
	e, err := engine.New(engine.Options{Store: h.Store, Executor: h.Exec, Clock: h.Clock, Synchronous: true, Seed: 1, PlaceOnInstances: true})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	h.Engine = e
	return h
}

func TestWithPlaceOnInstancesATaskWaitsForAnInstanceWithinItsDeadline(t *testing.T) {
	t.Parallel()
	h := placingHarness(t)
	waits := h.Submit(enginetest.Spec("a").Obj())
	late := h.Submit(enginetest.Spec("b").Deadline(h.Clock.Now().Add(time.Minute)).Obj())
	require.Empty(t, h.Exec.Started(), "no instance is known: nothing is dispatched")
	require.Equal(t, engine.StateQueued, h.State(waits.ID))

	// The deadline still ends a task that waits.
	h.Clock.Advance(time.Minute)
	got := h.Get(late.ID)
	require.Equal(t, engine.StateExpired, got.State, got.Reason)
	require.Empty(t, got.Attempts)

	// A chat instance does not run actions; an unhealthy browser instance
	// runs nothing.
	h.Engine.SetInstance(engine.InstanceInfo{ID: "chat", Healthy: true, Chat: true})
	h.Engine.SetInstance(engine.InstanceInfo{ID: "b1", Capacity: 1})
	require.Empty(t, h.Exec.Started())

	h.Engine.SetInstance(engine.InstanceInfo{ID: "b1", Capacity: 1, Healthy: true})
	require.Equal(t, []string{waits.ID}, h.Exec.Started())
	require.Equal(t, "b1", h.Exec.Run(waits.ID).InstanceID())

	// An instruction with no chat instance at all is still dispatched, for
	// the executor to refuse with its reason (waiting would never end).
	h.Engine.RemoveInstance("chat")
	ask := h.Submit(enginetest.Spec("c").Instruction("summarise").Obj())
	require.Contains(t, h.Exec.Started(), ask.ID)
}
