package server_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
)

// submitTask with an idempotencyKey says in the response's extensions
// whether the key named a task recorded before (replayed) or the call
// recorded it, under each submitTask field's response key; one without a
// key says nothing of it. Identical keyed submissions at once record one
// task, and exactly one of them says it did.
func TestSubmitTaskSaysInItsExtensionsWhetherItWasReplayed(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.config = engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4, Paused: true}}}
	})
	const one = `mutation ($i: SubmitTaskInput!) { submitTask(input: $i) { id } }`
	send := func(query string, vars map[string]any) *client.Response {
		t.Helper()
		res, status, err := b.c.Raw(ctxFor(t), client.Request{Query: query, Variables: vars})
		require.NoError(t, err)
		require.Equal(t, 200, status)
		require.Empty(t, res.Errors)
		return res
	}
	in := func(key string) map[string]any {
		v := map[string]any{"agentId": "resender", "action": map[string]any{"kind": "title"}}
		if key != "" {
			v["idempotencyKey"] = key
		}
		return v
	}

	first := send(one, map[string]any{"i": in("K1")})
	require.Equal(t, map[string]any{"replayed": map[string]any{"submitTask": false}}, first.Extensions)
	again := send(one, map[string]any{"i": in("K1")})
	require.Equal(t, map[string]any{"replayed": map[string]any{"submitTask": true}}, again.Extensions)
	require.JSONEq(t, string(first.Data), string(again.Data), "the same task")

	unkeyed := send(one, map[string]any{"i": in("")})
	require.Nil(t, unkeyed.Extensions, "a submission without a key is never a replay")

	// Several fields of one mutation, each under its alias.
	both := send(`mutation ($a: SubmitTaskInput!, $b: SubmitTaskInput!, $c: SubmitTaskInput!) {
		old: submitTask(input: $a) { id }
		fresh: submitTask(input: $b) { id }
		plain: submitTask(input: $c) { id }
	}`, map[string]any{"a": in("K1"), "b": in("K2"), "c": in("")})
	require.Equal(t, map[string]any{"replayed": map[string]any{"old": true, "fresh": false}}, both.Extensions)

	const calls = 6
	results := make([]*client.Response, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			results[i], _, errs[i] = b.c.Raw(ctxFor(t), client.Request{Query: one, Variables: map[string]any{"i": in("K3")}})
		})
	}
	wg.Wait()
	submitted := 0
	for i := range calls {
		require.NoError(t, errs[i])
		require.Empty(t, results[i].Errors)
		require.JSONEq(t, string(results[0].Data), string(results[i].Data), "the same task")
		if !results[i].Extensions["replayed"].(map[string]any)["submitTask"].(bool) {
			submitted++
		}
	}
	require.Equal(t, 1, submitted, "exactly one of the identical submissions recorded the task")
}
