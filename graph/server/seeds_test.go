package server_test

// Seed systems' expectations through the API (issue 22).

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
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
		eventually(t, "the first task runs", func() bool { return b.exec.Run(hold) != nil })
		normal := b.submit(t, "a", map[string]any{"priority": "NORMAL"})
		critical := b.submit(t, "b", map[string]any{"priority": "CRITICAL"})
		require.NoError(t, b.exec.Succeed(hold, `{}`))
		var first string
		eventually(t, "the next task runs", func() bool {
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
		eventually(t, "the other task runs", func() bool { return b.exec.Run(second) != nil })
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
