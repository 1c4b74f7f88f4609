package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

func paused(t *testing.T, h *enginetest.Harness, lane string, p bool) {
	t.Helper()
	_, err := h.UpdateLane(context.Background(), lane, engine.LaneUpdate{Paused: &p})
	require.NoError(t, err)
}

func engineErr(t *testing.T, err error) *engine.Error {
	t.Helper()
	var ee *engine.Error
	require.True(t, errors.As(err, &ee), "want an *engine.Error, got %v", err)
	return ee
}

func TestEveryEventCarriesAReasonAndAnIncreasingSeq(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	a := h.Submit(enginetest.Spec("a").Obj())
	require.NoError(t, h.Exec.Fail(a.ID, engine.Transient(errors.New("boom"))))
	h.Clock.Advance(engine.DefaultRetryPolicy().Backoff)
	require.NoError(t, h.Exec.Succeed(a.ID, `{}`))
	require.NoError(t, h.Sync(context.Background()))

	evs, missed := h.Events().Read(0, 100, nil)
	require.Zero(t, missed)
	var states []engine.State
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq, "seqs start at 1 and increase by one")
		require.NotEmpty(t, ev.Reason, "event %d has no reason", ev.Seq)
		if ev.TaskID == a.ID && ev.Type == engine.EventState {
			states = append(states, ev.To)
		}
	}
	require.Equal(t, []engine.State{engine.StateQueued, engine.StateAssigned, engine.StateRetryWait,
		engine.StateQueued, engine.StateAssigned, engine.StateSucceeded}, states)
	got := h.Get(a.ID)
	require.Len(t, got.Attempts, 2)
	require.Equal(t, "boom", got.Attempts[0].Error)
	require.Empty(t, got.Attempts[1].Error)
}

func TestInvalidInputIsRefusedWithTheFieldAndRecordsNothing(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	cases := map[string]struct {
		spec  engine.TaskSpec
		field string
	}{
		"no agent":             {engine.TaskSpec{Action: &engine.Action{Kind: "click"}}, "agentId"},
		"no work":              {engine.TaskSpec{AgentID: "a"}, "action"},
		"both kinds":           {engine.TaskSpec{AgentID: "a", Action: &engine.Action{Kind: "click"}, Instruction: "x"}, "action"},
		"unknown lane":         {enginetest.Spec("a").Lane("nope").Obj(), "lane"},
		"bad priority":         {enginetest.Spec("a").Priority(9).Obj(), "priority"},
		"params not object":    {func() engine.TaskSpec { s := enginetest.Spec("a").Obj(); s.Action.Params = []byte(`[1]`); return s }(), "action.params"},
		"past deadline":        {enginetest.Spec("a").Deadline(enginetest.Epoch.Add(-1)).Obj(), "deadline"},
		"unknown dependency":   {enginetest.Spec("a").DependsOn("01NOPE").Obj(), "dependsOn"},
		"bad retry":            {enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 0}).Obj(), "retryPolicy"},
		"interrupt no session": {enginetest.Spec("a").Interrupt().Obj(), "queueMode"},
	}
	for name, c := range cases {
		_, err := h.Engine.Submit(context.Background(), c.spec)
		ee := engineErr(t, err)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, name)
		require.Equal(t, c.field, ee.Field, name)
	}
	require.Zero(t, h.Stats(context.Background()).Submitted, "nothing was recorded")
	require.Empty(t, h.Exec.Started())
}

func TestQueueFullRejectsWithCountsAndRecordsTheTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxQueuedPerAgent: 2})
	paused(t, h, "main", true)
	h.Submit(enginetest.Spec("a").Obj())
	h.Submit(enginetest.Spec("a").Obj())
	task, err := h.Engine.Submit(context.Background(), enginetest.Spec("a").Obj())
	ee := engineErr(t, err)
	require.Equal(t, engine.CodeQueueFull, ee.Code)
	require.True(t, ee.Retryable)
	require.Equal(t, &engine.QueueCounts{Scope: "agent", Key: "a", Queued: 2, Cap: 2}, ee.Counts)
	require.NotNil(t, task)
	require.Equal(t, engine.StateRejected, h.State(task.ID), "the refused task is recorded")
	require.Equal(t, task.ID, ee.TaskID)
	// Another agent still gets in.
	h.Submit(enginetest.Spec("b").Obj())
}

func TestQueueCapsApplyPerScope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		cfg   engine.Config
		spec  func(i int) engine.TaskSpec
		scope string
	}{
		{"session", engine.Config{MaxQueuedPerSession: 1}, func(int) engine.TaskSpec { return enginetest.Spec("a").Session("s").Obj() }, "session"},
		{"lane", engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 5, MaxQueued: 1}}}, func(i int) engine.TaskSpec { return enginetest.Spec(string(rune('a' + i))).Obj() }, "lane"},
		{"global", engine.Config{MaxQueued: 1}, func(i int) engine.TaskSpec { return enginetest.Spec(string(rune('a' + i))).Obj() }, "global"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := enginetest.New(t, &c.cfg)
			paused(t, h, "main", true)
			h.Submit(c.spec(0))
			_, err := h.Engine.Submit(context.Background(), c.spec(1))
			ee := engineErr(t, err)
			require.Equal(t, engine.CodeQueueFull, ee.Code)
			require.Equal(t, c.scope, ee.Counts.Scope)
		})
	}
}

func TestDropOldestCancelsTheOldestQueuedTaskOfTheFullScope(t *testing.T) {
	t.Parallel()
	lanes := engine.DefaultLanes()
	lanes[0].DropPolicy = engine.DropOldest
	h := enginetest.New(t, &engine.Config{Lanes: lanes, MaxQueuedPerSession: 2})
	paused(t, h, "main", true)
	other := h.Submit(enginetest.Spec("a").Session("t").Obj())
	oldest := h.Submit(enginetest.Spec("a").Session("s").Obj())
	second := h.Submit(enginetest.Spec("a").Session("s").Obj())
	newest := h.Submit(enginetest.Spec("a").Session("s").Obj())
	require.Equal(t, engine.StateCancelled, h.State(oldest.ID))
	require.Equal(t, "dropped: queue full", h.Get(oldest.ID).Reason)
	require.Equal(t, engine.StateQueued, h.State(second.ID))
	require.Equal(t, engine.StateQueued, h.State(newest.ID))
	require.Equal(t, engine.StateQueued, h.State(other.ID), "another session is not the victim")
	require.EqualValues(t, 1, h.Stats(context.Background()).Dropped)
}

func TestDrainingRefusesNewWorkAndKeepsRunningWork(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	running := h.Submit(enginetest.Spec("a").Obj())
	h.Drain(context.Background())
	_, err := h.Engine.Submit(context.Background(), enginetest.Spec("a").Obj())
	ee := engineErr(t, err)
	require.Equal(t, engine.CodeDraining, ee.Code)
	require.True(t, ee.Retryable)
	require.NoError(t, h.Exec.Succeed(running.ID, `{}`))
	require.Equal(t, engine.StateSucceeded, h.State(running.ID))
}

func TestIdempotencyKeyReturnsTheOriginalTask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	first := h.Submit(enginetest.Spec("a").Idempotency("k1").Obj())
	again := h.Submit(enginetest.Spec("a").Idempotency("k1").Obj())
	require.Equal(t, first.ID, again.ID)
	other := h.Submit(enginetest.Spec("b").Idempotency("k1").Obj())
	require.NotEqual(t, first.ID, other.ID, "keys are scoped to the agent")
	// Still true once the original has ended and left the engine's memory.
	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))
	require.NoError(t, h.Sync(context.Background()))
	later := h.Submit(enginetest.Spec("a").Idempotency("k1").Obj())
	require.Equal(t, first.ID, later.ID)
	require.Equal(t, engine.StateSucceeded, later.State)
	require.EqualValues(t, 2, h.Stats(context.Background()).Submitted)
}

func TestSpawnDepthOverTheLaneMaximumIsRejected(t *testing.T) {
	t.Parallel()
	lanes := engine.DefaultLanes()
	lanes[0].MaxDepth = 1
	h := enginetest.New(t, &engine.Config{Lanes: lanes})
	root := h.Submit(enginetest.Spec("a").Obj())
	child := h.Submit(enginetest.Spec("a").Parent(root.ID).Obj())
	require.Equal(t, 1, child.Depth)
	grandchild, err := h.Engine.Submit(context.Background(), enginetest.Spec("a").Parent(child.ID).Obj())
	ee := engineErr(t, err)
	require.Equal(t, engine.CodeLimit, ee.Code)
	require.Equal(t, engine.StateRejected, h.State(grandchild.ID))
	require.Contains(t, h.Get(grandchild.ID).Reason, "spawn depth 2")
}

// A lane's maximum depth is bounded (MaxSpawnDepth): past it, and below 0,
// the update is refused on its field and the lane keeps its depth.
func TestALaneMaximumDepthPastTheBoundIsRefused(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	for _, depth := range []int{engine.MaxSpawnDepth + 1, -1} {
		_, err := h.UpdateLane(context.Background(), "main", engine.LaneUpdate{MaxDepth: &depth})
		ee := engineErr(t, err)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, "depth %d", depth)
		require.Equal(t, "maxDepth", ee.Field, "depth %d", depth)
	}
	deepest := engine.MaxSpawnDepth
	st, err := h.UpdateLane(context.Background(), "main", engine.LaneUpdate{MaxDepth: &deepest})
	require.NoError(t, err)
	require.Equal(t, engine.MaxSpawnDepth, st.Config.MaxDepth)
}

func TestLaneEnvOverridesAndCreatesLanes(t *testing.T) {
	t.Parallel()
	lanes, err := engine.ApplyLaneEnv(engine.DefaultLanes(), []string{
		"SWITCHYARD_LANE_MAIN=40",
		"SWITCHYARD_LANE_BULK_JOBS=inflight=5,queue=10,drop=drop-oldest,paused=true",
		"PATH=/bin",
	})
	require.NoError(t, err)
	byName := map[string]engine.LaneConfig{}
	for _, l := range lanes {
		byName[l.Name] = l
	}
	require.Equal(t, 40, byName["main"].MaxInFlight)
	require.Equal(t, 50, byName["subagent"].MaxInFlight)
	bulk := byName["bulk_jobs"]
	require.Equal(t, 5, bulk.MaxInFlight)
	require.Equal(t, 10, bulk.MaxQueued)
	require.Equal(t, engine.DropOldest, bulk.DropPolicy)
	require.True(t, bulk.Paused)

	_, err = engine.ApplyLaneEnv(engine.DefaultLanes(), []string{"SWITCHYARD_LANE_MAIN=speed=9"})
	require.ErrorContains(t, err, "SWITCHYARD_LANE_MAIN")
}

func TestDefaultLanes(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	got := map[string]int{}
	for _, l := range h.Lanes(context.Background()) {
		got[l.Config.Name] = l.Config.MaxInFlight
	}
	require.Equal(t, map[string]int{"main": 30, "subagent": 50, "team": 100, "cron": 30}, got)
	_, err := h.UpdateLane(context.Background(), "nope", engine.LaneUpdate{})
	require.Equal(t, engine.CodeNotFound, engineErr(t, err).Code)
}
