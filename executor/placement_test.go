package executor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A task submitted while the registry has no browser instance, then only an
// unhealthy one, waits in its queue without a single attempt; once the
// instance is healthy it runs, once.
func TestATaskWithNoInstanceWaitsWithoutAttemptsAndRunsOnceOneIsHealthy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Hour, UnhealthyAfter: 2})
	t.Cleanup(reg.Close)
	exec, err := executor.New(executor.Options{Registry: reg})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	eng, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec, TabLocator: reg, PlaceOnInstances: true})
	require.NoError(t, err)
	require.NoError(t, eng.Start(ctx))
	t.Cleanup(func() { _ = eng.Shutdown(context.Background()) })
	reg.SetSink(eng)

	task, err := eng.Submit(ctx, engine.TaskSpec{AgentID: "a", Action: action("press", "", `{"key":"Enter"}`)})
	require.NoError(t, err)
	waiting := func(why string) {
		t.Helper()
		waitfor.CheckFor(t, func() error {
			p, err := eng.Plan(ctx, 10)
			if err != nil {
				return err
			}
			for _, s := range p.Skipped {
				if s.Reason == "no healthy instance with room" && s.Tasks == 1 {
					return nil
				}
			}
			return fmt.Errorf("the task's queue is not waiting for an instance: %+v", p.Skipped)
		})
		got, err := eng.Task(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, engine.StateQueued, got.State, why)
		require.Empty(t, got.Attempts, why)
	}
	waiting("no instance is registered")

	// An instance whose browser is still starting: unhealthy, so the task
	// keeps waiting.
	d := pinchtabtest.New(t, pinchtabtest.Options{Token: doubleToken})
	d.SetPhase("", pinchtabtest.PhaseStarting)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "p", URL: d.URL(), Token: doubleToken, Capacity: 2})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		if inst, _ := reg.Get(context.Background(), "p"); inst.Health != executor.HealthUnhealthy {
			return fmt.Errorf("instance p is %s", inst.Health)
		}
		return nil
	})
	waiting("the only instance is unhealthy")

	// The browser is up: the task runs, in one attempt.
	d.SetPhase("", pinchtabtest.PhaseRunning)
	_, err = reg.CheckNow(ctx, "p")
	require.NoError(t, err)
	var got *engine.Task
	waitfor.CheckFor(t, func() error {
		got, err = eng.Task(ctx, task.ID)
		if err != nil {
			return err
		}
		if !got.State.Terminal() {
			return fmt.Errorf("task is %s", got.State)
		}
		return nil
	})
	require.Equal(t, engine.StateSucceeded, got.State, got.Reason)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, "p", got.Attempts[0].InstanceID)
}
