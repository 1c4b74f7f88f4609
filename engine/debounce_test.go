package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

func debounced(t *testing.T, h *enginetest.Harness, lane string, d time.Duration) {
	t.Helper()
	_, err := h.UpdateLane(context.Background(), lane, engine.LaneUpdate{Debounce: &d})
	require.NoError(t, err)
}

// A burst to one session within the window collapses to its last task: the
// others are cancelled naming it, it runs once the burst has been quiet for
// the window; other sessions and the lanes without debounce are untouched.
func TestDebounceCollapsesABurstToItsLastTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	debounced(t, h, "main", 800*time.Millisecond)

	a := h.Submit(enginetest.Spec("bot").Session("chat-1").Obj())
	require.Equal(t, engine.StateWaiting, a.State)
	require.Equal(t, "debounce: held 800ms for newer tasks of its session", a.Reason)
	require.Equal(t, enginetest.Epoch.Add(800*time.Millisecond), a.NextRunAt, "when it queues, unless superseded")
	h.Clock.Advance(500 * time.Millisecond)
	b := h.Submit(enginetest.Spec("bot").Session("chat-1").Obj())
	other := h.Submit(enginetest.Spec("bot").Session("chat-2").Obj())
	plain := h.Submit(enginetest.Spec("bot").Obj())
	h.Clock.Advance(500 * time.Millisecond) // a's window would have ended: a was superseded, b's has not
	c := h.Submit(enginetest.Spec("bot").Session("chat-1").Obj())
	require.NoError(t, h.Sync(context.Background()))

	for id, by := range map[string]string{a.ID: b.ID, b.ID: c.ID} {
		got := h.Get(id)
		require.Equal(t, engine.StateCancelled, got.State)
		require.Equal(t, "debounced: superseded by "+by, got.Reason)
	}
	require.Equal(t, engine.StateWaiting, h.State(c.ID))
	require.Equal(t, []string{plain.ID}, h.Exec.Started(), "a task without a session is not held")
	h.Clock.Advance(300 * time.Millisecond)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, []string{plain.ID, other.ID}, h.Exec.Started(), "the other session's window has ended")

	h.Clock.Advance(499 * time.Millisecond)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, engine.StateWaiting, h.State(c.ID))
	h.Clock.Advance(time.Millisecond)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, []string{plain.ID, other.ID, c.ID}, h.Exec.Started())
	require.NoError(t, h.Exec.Succeed(c.ID, `{}`))
	require.NoError(t, h.Sync(context.Background()))

	st := h.Stats(context.Background())
	require.EqualValues(t, 2, st.Ended[engine.StateCancelled])
	evs, _ := h.Events().Read(0, 1000, nil)
	var cStates []engine.State
	for _, ev := range evs {
		if ev.TaskID == c.ID && ev.Type == engine.EventState {
			cStates = append(cStates, ev.To)
		}
	}
	require.Equal(t, []engine.State{engine.StateWaiting, engine.StateQueued, engine.StateAssigned, engine.StateSucceeded}, cStates)

	// Off again: tasks of a session queue at once.
	debounced(t, h, "main", 0)
	d := h.Submit(enginetest.Spec("bot").Session("chat-1").Obj())
	require.NotEqual(t, engine.StateWaiting, d.State)
}

// A held task may be cancelled or expire like any waiting task; the next
// task of its session is then held on its own, superseding nothing.
func TestDebounceHeldTaskEndsLikeAWaitingOne(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	debounced(t, h, "main", time.Second)
	a := h.Submit(enginetest.Spec("bot").Session("s").Obj())
	_, err := h.Cancel(context.Background(), a.ID, "changed my mind")
	require.NoError(t, err)
	b := h.Submit(enginetest.Spec("bot").Session("s").Deadline(enginetest.Epoch.Add(500 * time.Millisecond)).Obj())
	h.Clock.Advance(500 * time.Millisecond)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, engine.StateExpired, h.State(b.ID))
	c := h.Submit(enginetest.Spec("bot").Session("s").Obj())
	h.Clock.Advance(time.Second)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, "changed my mind", h.Get(a.ID).Reason)
	require.Equal(t, []string{c.ID}, h.Exec.Started())
}

// A task with dependencies is not held: it waits for them, as without
// debounce. A window beyond the maximum is refused naming the field.
func TestDebounceLeavesDependentsAloneAndIsBounded(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	debounced(t, h, "main", time.Second)
	first := h.Submit(enginetest.Spec("bot").Obj())
	dep := h.Submit(enginetest.Spec("bot").Session("s").DependsOn(first.ID).Obj())
	require.Equal(t, "waiting for 1 dependencies", dep.Reason)
	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, []string{first.ID, dep.ID}, h.Exec.Started())

	long := engine.MaxDebounce + time.Millisecond
	_, err := h.UpdateLane(context.Background(), "main", engine.LaneUpdate{Debounce: &long})
	ee := engineErr(t, err)
	require.Equal(t, engine.CodeInvalidInput, ee.Code)
	require.Equal(t, "debounce", ee.Field)
}

// An interrupting task is not held: it cancels what its session runs (as
// always) and what the debounce holds, and runs at once; a plain task after
// it is held on its own and supersedes nothing of it.
func TestDebounceLetsAnInterruptThrough(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	debounced(t, h, "main", time.Second)
	held := h.Submit(enginetest.Spec("bot").Session("s").Obj())
	require.Equal(t, engine.StateWaiting, held.State)
	urgent := h.Submit(enginetest.Spec("bot").Session("s").Interrupt().Obj())
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, "debounced: superseded by "+urgent.ID, h.Get(held.ID).Reason)
	require.Equal(t, []string{urgent.ID}, h.Exec.Started(), "the interrupt runs without waiting for the window")
	after := h.Submit(enginetest.Spec("bot").Session("s").Obj())
	require.Equal(t, engine.StateWaiting, after.State)
	require.NotEqual(t, engine.StateCancelled, h.State(urgent.ID))
	require.NoError(t, h.Exec.Succeed(urgent.ID, `{}`))
	h.Clock.Advance(time.Second)
	require.NoError(t, h.Sync(context.Background()))
	require.Equal(t, []string{urgent.ID, after.ID}, h.Exec.Started())
}

// The window is a lane setting of the environment too.
func TestDebounceFromTheLaneEnvironment(t *testing.T) {
	t.Parallel()
	lanes, err := engine.ApplyLaneEnv(engine.DefaultLanes(), []string{"SWITCHYARD_LANE_MAIN=debounce=800ms"})
	require.NoError(t, err)
	require.Equal(t, 800*time.Millisecond, lanes[0].Debounce)
}
