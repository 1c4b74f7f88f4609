package server_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/waitfor"
)

type pluginFigures struct {
	Name  string
	Calls int64
	Holds int64
	P50Us *float64
	P99Us *float64
}

func readPlugins(t *testing.T, b *bundle) map[string]pluginFigures {
	t.Helper()
	var res struct{ Plugins []pluginFigures }
	require.NoError(t, b.c.Do(ctxFor(t), `{ plugins { name calls holds p50Us p99Us } }`, nil, &res))
	out := map[string]pluginFigures{}
	for _, p := range res.Plugins {
		out[p.Name] = p
	}
	return out
}

// A policy no decision of which has been timed (no calls yet, or native)
// has no percentiles: null, not a zero that reads as an instant decision.
// Once it decides, both are there and p50 <= p99.
func TestPluginPercentilesAreNullUntilADecisionIsTimed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	for name, p := range readPlugins(t, b) {
		if p.Calls == 0 {
			require.Nil(t, p.P50Us, "%s has made no decision", name)
			require.Nil(t, p.P99Us, "%s has made no decision", name)
		}
	}
	require.Nil(t, readPlugins(t, b)["native:priority"].P50Us, "native policies are not timed")
	require.Zero(t, readPlugins(t, b)["exponential"].Calls, "nothing failed: the retry plugin was not asked")
	require.Nil(t, readPlugins(t, b)["exponential"].P99Us)

	require.NoError(t, b.plugins.SetPolicy(ctxFor(t), policy.SlotSelection, "", "priority"))
	b.submitMany(t, "m", 5)
	waitfor.Eventually(t, "the selection plugin's decisions to be timed", func() bool {
		return readPlugins(t, b)["priority"].P50Us != nil
	})
	p := readPlugins(t, b)["priority"]
	require.Positive(t, p.Calls)
	require.NotNil(t, p.P99Us, "p99Us is null exactly when p50Us is")
	require.LessOrEqual(t, *p.P50Us, *p.P99Us)
}

// A task a fairness plugin holds says so on Task.hold: the plugin, the
// lane and when the plugin is asked again, in words too; its reason stays
// why it entered QUEUED.
func TestAHeldTaskShowsItsHold(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	wasm, err := os.ReadFile("../../examples/plugins/ratecap.wasm")
	require.NoError(t, err)
	// Loading compiles the module: minutes under -race on a busy machine.
	loadCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err = b.plugins.Load(loadCtx, "ratecap", wasm, []byte(`{"perWindow": 1, "windowMs": 600000}`))
	require.NoError(t, err)
	ctx := ctxFor(t)
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: FAIRNESS, name: "ratecap"}) { name } }`, nil, nil))

	first := b.submit(t, "capped", nil)
	waitfor.Eventually(t, "the first task to start", func() bool { return b.exec.Run(first) != nil })
	second := b.submit(t, "capped", nil)

	type hold struct {
		Policy, Lane, Reason string
		Since                time.Time
		ReaskAt              *time.Time
	}
	var res struct {
		Task struct {
			State, Reason string
			Hold          *hold
		}
	}
	waitfor.Eventually(t, "the second task to be held", func() bool {
		require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { state reason hold { policy lane since reaskAt reason } } }`, map[string]any{"id": second}, &res))
		return res.Task.Hold != nil
	})
	require.Equal(t, "QUEUED", res.Task.State)
	require.Equal(t, "ratecap", res.Task.Hold.Policy)
	require.Equal(t, "main", res.Task.Hold.Lane)
	require.NotNil(t, res.Task.Hold.ReaskAt, "ratecap hints when its window ends")
	require.True(t, res.Task.Hold.ReaskAt.After(res.Task.Hold.Since))
	require.Contains(t, res.Task.Hold.Reason, "held by fairness plugin ratecap on lane main (asks again at ")
	require.Positive(t, readPlugins(t, b)["ratecap"].Holds)

	var running struct{ Task struct{ Hold *hold } }
	require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { hold { reason } } }`, map[string]any{"id": first}, &running))
	require.Nil(t, running.Task.Hold, "a running task is not held")
}
