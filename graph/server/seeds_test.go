package server_test

// Seed systems' expectations through the API (issue 22).

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestPriorityFirstFairnessLetsACriticalTaskOfAnotherAgentGoFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.plugins = true
		o.config.Lanes = []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}
	})
	ctx := ctxFor(t)
	order := func() []string {
		t.Helper()
		hold := b.submit(t, "c", nil) // takes the lane's only slot
		waitfor.Eventually(t, "the first task runs", func() bool { return b.exec.Run(hold) != nil })
		normal := b.submit(t, "a", map[string]any{"priority": "NORMAL"})
		critical := b.submit(t, "b", map[string]any{"priority": "CRITICAL"})
		require.NoError(t, b.exec.Succeed(hold, `{}`))
		var first string
		waitfor.Eventually(t, "the next task runs", func() bool {
			for _, id := range []string{normal, critical} {
				if b.exec.Run(id) != nil {
					first = id
					return true
				}
			}
			return false
		})
		second := normal
		if first == normal {
			second = critical
		}
		require.NoError(t, b.exec.Succeed(first, `{}`))
		waitfor.Eventually(t, "the other task runs", func() bool { return b.exec.Run(second) != nil })
		require.NoError(t, b.exec.Succeed(second, `{}`))
		if first == critical {
			return []string{"CRITICAL", "NORMAL"}
		}
		return []string{"NORMAL", "CRITICAL"}
	}
	require.Equal(t, []string{"NORMAL", "CRITICAL"}, order(), "fair-share, the default, orders by priority only within a queue")
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "priority-first"}) { name } }`, nil, nil))
	var pol struct{ Policies []struct{ Slot, Name string } }
	require.NoError(t, b.c.Do(ctx, `{ policies { slot name } }`, nil, &pol))
	require.Contains(t, pol.Policies, struct{ Slot, Name string }{"FAIRNESS", "priority-first"})
	require.Equal(t, []string{"CRITICAL", "NORMAL"}, order(), "priority-first lets the other agent's CRITICAL task go first")
}

func TestAChatInstanceRunsOneConversationAtATimeByDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.registry = true })
	inst := fakeInstance(t)
	var reg struct{ RegisterInstance struct{ Capacity int } }
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($url: String!) { registerInstance(input: {id: "chat-1", url: $url, kind: CHAT}) { capacity } }`,
		map[string]any{"url": inst.URL}, &reg))
	require.Equal(t, 1, reg.RegisterInstance.Capacity)
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($url: String!) { registerInstance(input: {id: "browser-1", url: $url}) { capacity } }`,
		map[string]any{"url": inst.URL}, &reg))
	require.Equal(t, 0, reg.RegisterInstance.Capacity, "a browser instance stays unlimited unless told")
}

func TestAnInterruptThatDrainsCancelsTheSessionsRunningAndQueuedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	running := b.submit(t, "a", map[string]any{"sessionKey": "chat-1"})
	waitfor.Eventually(t, "the first task runs", func() bool { return b.exec.Run(running) != nil })
	queued := b.submit(t, "a", map[string]any{"sessionKey": "chat-1"})
	plain := b.submit(t, "a", map[string]any{"sessionKey": "chat-1", "queueMode": "INTERRUPT"})
	require.Equal(t, "CANCELLED", b.state(t, running), "INTERRUPT cancels what runs")
	require.Equal(t, "QUEUED", b.state(t, queued), "INTERRUPT leaves the queue behind")
	_ = b.exec.Fail(running, context.Canceled) // the executor returns: the session's slot is free
	waitfor.Eventually(t, "the interrupting task runs", func() bool { return b.exec.Run(plain) != nil })

	drain := b.submit(t, "a", map[string]any{"sessionKey": "chat-1", "queueMode": "INTERRUPT_DRAIN"})
	require.Equal(t, "CANCELLED", b.state(t, plain))
	require.Equal(t, "CANCELLED", b.state(t, queued), "INTERRUPT_DRAIN empties the session's queue too")
	var got struct {
		Task struct{ Reason, QueueMode string }
	}
	require.NoError(t, b.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { reason } }`, map[string]any{"id": queued}, &got))
	require.Equal(t, "drained by the interrupt of task "+drain, got.Task.Reason)
	_ = b.exec.Fail(plain, context.Canceled)
	waitfor.Eventually(t, "the draining task runs", func() bool { return b.exec.Run(drain) != nil })
}

func TestALaneCreatedAtRunTimeCapsEachSessionAndDropsItsOldest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	var made struct {
		CreateLane struct {
			Name              string
			MaxInFlight       int
			SessionMaxQueued  int
			SessionDropPolicy string
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { createLane(name: "groupchat", input: {sessionMaxQueued: 2, sessionDropPolicy: DROP_OLDEST}) {
		name maxInFlight sessionMaxQueued sessionDropPolicy } }`, nil, &made))
	require.Equal(t, "groupchat", made.CreateLane.Name)
	require.Equal(t, 30, made.CreateLane.MaxInFlight, "omitted fields take a new lane's defaults")
	require.Equal(t, "DROP_OLDEST", made.CreateLane.SessionDropPolicy)
	err := b.c.Do(ctx, `mutation { createLane(name: "groupchat") { name } }`, nil, nil)
	require.Equal(t, "CONFLICT", gqlErr(t, err).Code())

	in := map[string]any{"lane": "groupchat", "sessionKey": "room-1"}
	hold := b.submit(t, "a", in)
	waitfor.Eventually(t, "the session's first task runs", func() bool { return b.exec.Run(hold) != nil })
	first := b.submit(t, "a", in)
	second := b.submit(t, "a", in)
	third := b.submit(t, "a", in)
	require.Equal(t, "CANCELLED", b.state(t, first), "beyond 2 queued, the session's oldest is dropped")
	require.Equal(t, "QUEUED", b.state(t, second))
	require.Equal(t, "QUEUED", b.state(t, third))
	other := b.submit(t, "a", map[string]any{"sessionKey": "room-1"})
	require.Equal(t, "QUEUED", b.state(t, other), "main keeps the engine's session cap")

	err = b.c.Do(ctx, `mutation { deleteLane(name: "groupchat") { name } }`, nil, nil)
	require.Equal(t, "CONFLICT", gqlErr(t, err).Code(), "a lane with live tasks stays")
	_, err = b.eng.CancelWhere(ctx, engine.TaskFilter{Lane: "groupchat"}, "test")
	require.NoError(t, err)
	require.NoError(t, b.exec.Succeed(hold, `{}`))
	waitfor.Eventually(t, "the lane empties", func() bool {
		return b.c.Do(ctx, `mutation { deleteLane(name: "groupchat") { name } }`, nil, nil) == nil
	})
	var lanes struct{ Lanes []struct{ Name string } }
	require.NoError(t, b.c.Do(ctx, `{ lanes { name } }`, nil, &lanes))
	for _, l := range lanes.Lanes {
		require.NotEqual(t, "groupchat", l.Name)
	}
}

func TestAPlanAsOfAGivenTimeIsTheSameEachTime(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.config.Lanes = []engine.LaneConfig{{Name: "main", MaxInFlight: 0}} })
	for _, agent := range []string{"a", "b", "a", "c"} {
		b.submit(t, agent, nil)
	}
	const q = `query($now: Time) { plan(limit: 10, now: $now) { at fairness steps { taskId agentId reason waitedMs } skipped { lane agentId reason } } }`
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	plan := func(now any) string {
		t.Helper()
		var out map[string]any
		require.NoError(t, b.c.Do(ctxFor(t), q, map[string]any{"now": now}, &out))
		raw, err := json.Marshal(out)
		require.NoError(t, err)
		return string(raw)
	}
	first := plan(at.Format(time.RFC3339Nano))
	require.Equal(t, first, plan(at.Format(time.RFC3339Nano)), "the same state and now give the same plan")
	require.Contains(t, first, at.Format("2006-01-02T15:04:05"), "the plan is made as of now")
	require.Contains(t, first, `"steps":[{`, "the lane's ceiling of 0 holds the tasks, and the plan shows what would go next")
	require.NotEqual(t, first, plan(at.Add(time.Minute).Format(time.RFC3339Nano)), "another now, other waits")
}

func TestATaskMaySetItsSessionsConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	group := map[string]any{"sessionKey": "group-1", "sessionMaxInFlight": 3}
	ids := []string{b.submit(t, "a", group), b.submit(t, "a", map[string]any{"sessionKey": "group-1"}),
		b.submit(t, "a", map[string]any{"sessionKey": "group-1"}), b.submit(t, "a", map[string]any{"sessionKey": "group-1"})}
	waitfor.Eventually(t, "three of the session's tasks run at once", func() bool {
		n := 0
		for _, id := range ids {
			if b.exec.Run(id) != nil {
				n++
			}
		}
		return n == 3
	})
	require.Equal(t, "QUEUED", b.state(t, ids[3]), "the fourth waits: the session's ceiling is 3")
	solo := b.submit(t, "a", map[string]any{"sessionKey": "dm-1"})
	second := b.submit(t, "a", map[string]any{"sessionKey": "dm-1"})
	waitfor.Eventually(t, "a session without a setting runs one", func() bool { return b.exec.Run(solo) != nil })
	require.Equal(t, "QUEUED", b.state(t, second))
	err := b.c.Do(ctxFor(t), `mutation { submitTask(input: {agentId: "a", action: {kind: "click"}, sessionMaxInFlight: 3}) { id } }`, nil, nil)
	require.Equal(t, "INVALID_INPUT", gqlErr(t, err).Code(), "without a session there is nothing to set")
}
