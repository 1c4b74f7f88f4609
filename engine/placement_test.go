package engine_test

import (
	"context"
	"fmt"
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
	e, err := engine.New(enginetest.Synchronous(engine.Options{Store: h.Store, Executor: h.Exec, Clock: h.Clock, Seed: 1, PlaceOnInstances: true}))
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

func TestRemovingAnInstanceLosesItsSessionsVisibly(t *testing.T) {
	t.Parallel()
	h := placingHarness(t)
	h.Engine.SetInstance(engine.InstanceInfo{ID: "a", Capacity: 4, Healthy: true})
	h.Engine.SetInstance(engine.InstanceInfo{ID: "b", Capacity: 4, Healthy: true})
	// Two sessions build their pages on a; a third lives on b.
	for _, s := range []struct{ key, inst, tab string }{{"cart", "a", "TA1"}, {"blog", "a", "TA2"}, {"mail", "b", "TB1"}} {
		first := h.Submit(enginetest.Spec("x").Session(s.key).Instance(s.inst).Action("navigate").Obj())
		require.NoError(t, h.Exec.Finish(first.ID, engine.Outcome{InstanceID: s.inst, TabID: s.tab}))
	}
	before := h.Engine.Events().Last()

	h.Engine.RemoveInstance("a")

	evs, _ := h.Engine.Events().Read(before, 100, nil)
	var said []string
	for _, ev := range evs {
		require.Equal(t, engine.EventSession, ev.Type, "removal changes no task")
		require.Empty(t, ev.TaskID)
		require.Equal(t, "x", ev.AgentID, "the event names the session's agent")
		said = append(said, ev.SessionKey+": "+ev.Reason)
	}
	require.Equal(t, []string{
		"blog: session \"blog\" of agent \"x\" lost its tab TA2: instance a was removed; its next task fails with SESSION_LOST, or replays the session if it asked",
		"cart: session \"cart\" of agent \"x\" lost its tab TA1: instance a was removed; its next task fails with SESSION_LOST, or replays the session if it asked",
	}, said, "one event per session that lost its page, in a stable order")

	// The lost session's next task goes to its lost tab (for the executor to
	// fail with SESSION_LOST), not to a blank tab on b; b's session is untouched.
	next := h.Submit(enginetest.Spec("x").Session("cart").Action("fill").Obj())
	run := h.Exec.Run(next.ID)
	require.NotNil(t, run, "dispatched at once: it needs no room anywhere")
	require.Empty(t, run.InstanceID(), "placed nowhere")
	require.Equal(t, "TA1", run.TabID())
	on, lost := run.LostSession()
	require.True(t, lost, "the executor is told to fail it with SESSION_LOST")
	require.Equal(t, "a", on)
	mail := h.Submit(enginetest.Spec("x").Session("mail").Action("fill").Obj())
	require.Equal(t, "b", h.Exec.Run(mail.ID).InstanceID())
	require.Equal(t, "TB1", h.Exec.Run(mail.ID).TabID())

	// Once it failed (the executor's SESSION_LOST wraps ErrInstanceGone), the
	// session starts over in a new tab wherever there is room.
	require.NoError(t, h.Exec.Fail(next.ID, engine.Permanent(fmt.Errorf("SESSION_LOST: gone: %w", engine.ErrInstanceGone))))
	require.Equal(t, engine.StateFailed, h.State(next.ID))
	again := h.Submit(enginetest.Spec("x").Session("cart").Action("navigate").Obj())
	require.Equal(t, "b", h.Exec.Run(again.ID).InstanceID())
	require.Empty(t, h.Exec.Run(again.ID).TabID())
}

func TestASessionTaskThatEndsAfterItsInstanceWasRemovedLosesTheSession(t *testing.T) {
	t.Parallel()
	h := placingHarness(t)
	h.Engine.SetInstance(engine.InstanceInfo{ID: "a", Capacity: 4, Healthy: true})
	h.Engine.SetInstance(engine.InstanceInfo{ID: "b", Capacity: 4, Healthy: true})
	first := h.Submit(enginetest.Spec("x").Session("cart").Instance("a").Action("navigate").Obj())
	require.NotNil(t, h.Exec.Run(first.ID))
	h.Engine.RemoveInstance("a") // while the session's first task still runs there
	before := h.Engine.Events().Last()
	require.NoError(t, h.Exec.Finish(first.ID, engine.Outcome{InstanceID: "a", TabID: "TA1"}))

	evs, _ := h.Engine.Events().Read(before, 100, nil)
	var sessionEvents int
	for _, ev := range evs {
		if ev.Type == engine.EventSession {
			sessionEvents++
			require.Equal(t, "cart", ev.SessionKey)
			require.Contains(t, ev.Reason, "lost its tab TA1: instance a was removed")
		}
	}
	require.Equal(t, 1, sessionEvents)
	next := h.Submit(enginetest.Spec("x").Session("cart").Action("fill").Obj())
	require.Equal(t, "TA1", h.Exec.Run(next.ID).TabID())
	_, lost := h.Exec.Run(next.ID).LostSession()
	require.True(t, lost, "it fails with SESSION_LOST")
	require.NoError(t, h.Exec.Fail(next.ID, engine.Permanent(fmt.Errorf("SESSION_LOST: gone: %w", engine.ErrInstanceGone))))
}

func TestSessionReplayNeedsASessionKeyAndNoTab(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	for name, s := range map[string]engine.TaskSpec{
		"no session":  {AgentID: "a", SessionReplay: true, Action: &engine.Action{Kind: "click", Selector: "#go"}},
		"a named tab": {AgentID: "a", SessionKey: "s", TabID: "T1", SessionReplay: true, Action: &engine.Action{Kind: "click", Selector: "#go"}},
	} {
		_, err := h.Engine.Submit(context.Background(), s)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee, name)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, name)
		require.Equal(t, "sessionReplay", ee.Field, name)
	}
	ok := h.Submit(enginetest.Spec("a").Session("s").Action("click").Obj())
	require.NotEmpty(t, ok.ID)
}
