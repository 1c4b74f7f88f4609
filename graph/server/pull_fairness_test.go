package server_test

// A pull lane's leases follow the fairness plugin, through a real server
// and real WebAssembly modules (ABI v2): vip, which serves named agents
// first, and ratecap, which holds an agent that has started its quota.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func pullWithPlugins(o *setupOptions) {
	pullLanes(o)
	o.plugins = true
}

func TestLeaseTasksFollowsAFairnessPluginThatFavoursANamedAgent(t *testing.T) {
	t.Parallel()
	b := setup(t, pullWithPlugins)
	require.NoError(t, b.loadExample(t, "vip.wasm", "vip", map[string]any{"agents": []string{"bob"}}))
	ctx := ctxFor(t) // after the load, which has its own bound
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "vip"}) { name } }`, nil, nil))
	alice1 := b.submitJob(t, "jobs", map[string]any{"agentId": "alice"})
	b.submitJob(t, "jobs", map[string]any{"agentId": "alice"})
	bob := b.submitJob(t, "jobs", map[string]any{"agentId": "bob"})

	got, err := lease(t, b.c, "jobs", 1, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, bob, got[0].Task.ID, "the plugin's named agent first, though alice's tasks are older")
	got, err = lease(t, b.c, "jobs", 1, 30_000, 0)
	require.NoError(t, err)
	require.Equal(t, alice1, got[0].Task.ID, "then the oldest head")
	require.Positive(t, readPlugins(t, b)["vip"].Calls, "the plugin decided")
}

func TestLeaseTasksLeasesNothingWhileAFairnessPluginHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, pullWithPlugins)
	require.NoError(t, b.loadExample(t, "ratecap.wasm", "ratecap", map[string]any{"perWindow": 1, "windowMs": 600000}))
	ctx := ctxFor(t) // after the load, which has its own bound
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "ratecap"}) { name } }`, nil, nil))
	first := b.submitJob(t, "jobs", map[string]any{"agentId": "capped"})
	second := b.submitJob(t, "jobs", map[string]any{"agentId": "capped"})

	got, err := lease(t, b.c, "jobs", 2, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, got, 1, "one start per window: the lane has room for both, the plugin holds the second")
	require.Equal(t, first, got[0].Task.ID)
	got, err = lease(t, b.c, "jobs", 2, 30_000, 0)
	require.NoError(t, err, "everything held: no tasks, and no error")
	require.Empty(t, got)

	var res struct {
		Task struct {
			State string
			Hold  *struct {
				Policy, Lane, Reason string
				ReaskAt              *time.Time
			}
		}
	}
	require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { state hold { policy lane reaskAt reason } } }`, map[string]any{"id": second}, &res))
	require.Equal(t, "QUEUED", res.Task.State)
	require.NotNil(t, res.Task.Hold, "the held task says so")
	require.Equal(t, "ratecap", res.Task.Hold.Policy)
	require.Equal(t, "jobs", res.Task.Hold.Lane)
	require.NotNil(t, res.Task.Hold.ReaskAt, "ratecap hints when its window ends")
	require.Contains(t, res.Task.Hold.Reason, "held by fairness plugin ratecap on pull lane jobs (asks again at the next lease, or a waiting lease after ")
	require.Positive(t, readPlugins(t, b)["ratecap"].Holds)

	// A lease that waits is answered with none when its wait ends: the
	// hint is ten minutes away.
	got, err = lease(t, b.c, "jobs", 2, 30_000, 200)
	require.NoError(t, err)
	require.Empty(t, got)
}
