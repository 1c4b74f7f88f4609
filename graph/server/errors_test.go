package server_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
)

const submitQ = `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id state } }`

func task(extra map[string]any) map[string]any {
	in := map[string]any{"agentId": "e", "action": map[string]any{"kind": "click", "selector": "css:#go"}}
	for k, v := range extra {
		in[k] = v
	}
	return map[string]any{"in": in}
}

func TestMalformedInputIsRefusedWithItsFieldPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	cases := []struct {
		name  string
		vars  map[string]any
		field string
	}{
		{"params not an object", task(map[string]any{"action": map[string]any{"kind": "click", "params": "text"}}), "input.action.params"},
		{"neither action nor instruction", map[string]any{"in": map[string]any{"agentId": "e"}}, "input.action"},
		{"both action and instruction", task(map[string]any{"instruction": "do it"}), "input.action"},
		{"empty agent", task(map[string]any{"agentId": ""}), "input.agentId"},
		{"bad lane name", task(map[string]any{"lane": "no spaces"}), "input.lane"},
		{"unknown lane", task(map[string]any{"lane": "nowhere"}), "input.lane"},
		{"deadline in the past", task(map[string]any{"deadline": "2001-01-01T00:00:00Z"}), "input.deadline"},
		{"deadline not a time", task(map[string]any{"deadline": "tomorrow"}), "input.deadline"},
		{"timeout out of range", task(map[string]any{"timeoutMs": 0}), "input.timeoutMs"},
		{"retry attempts out of range", task(map[string]any{"retryPolicy": map[string]any{"maxAttempts": 0}}), "input.retryPolicy.maxAttempts"},
		{"webhook not http", task(map[string]any{"webhookUrl": "ftp://x"}), "input.webhookUrl"},
		{"duplicate label", task(map[string]any{"labels": []map[string]any{{"key": "a", "value": "1"}, {"key": "a", "value": "2"}}}), "input.labels.1.key"},
		{"interrupt without a session", task(map[string]any{"queueMode": "INTERRUPT"}), "input.queueMode"},
		{"repeated dependency", task(map[string]any{"dependsOn": []string{"x", "x"}}), "input.dependsOn.1"},
		{"unknown action kind", task(map[string]any{"action": map[string]any{"kind": "navigte"}}), "input.action.kind"},
		{"unknown dependency", task(map[string]any{"dependsOn": []string{"no-such-task"}}), "input.dependsOn"},
		{"empty dependency", task(map[string]any{"dependsOn": []string{"x", ""}}), "input.dependsOn.1"},
		{"long session key", task(map[string]any{"sessionKey": strings.Repeat("s", 257)}), "input.sessionKey"},
		{"long idempotency key", task(map[string]any{"idempotencyKey": strings.Repeat("k", 257)}), "input.idempotencyKey"},
		{"long ref", task(map[string]any{"action": map[string]any{"kind": "click", "ref": strings.Repeat("e", 257)}}), "input.action.ref"},
		{"long selector", task(map[string]any{"action": map[string]any{"kind": "click", "selector": strings.Repeat("#", 4097)}}), "input.action.selector"},
		{"bad action kind", task(map[string]any{"action": map[string]any{"kind": "cl ick"}}), "input.action.kind"},
		{"empty label key", task(map[string]any{"labels": []map[string]any{{"key": "a", "value": "1"}, {"key": "", "value": "2"}}}), "input.labels.1.key"},
		{"long label value", task(map[string]any{"labels": []map[string]any{{"key": "a", "value": strings.Repeat("v", 257)}}}), "input.labels.0.value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := b.c.Do(ctx, submitQ, tc.vars, nil)
			e := gqlErr(t, err)
			require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
			require.Equal(t, tc.field, e.Field(), e.Message)
			require.Equal(t, false, e.Extensions["retryable"])
		})
	}

	// An unknown kind is refused at submit, listing the kinds a browser
	// instance knows (the executor's table), and nothing is queued.
	err := b.c.Do(ctx, submitQ, task(map[string]any{"action": map[string]any{"kind": "navigte"}}), nil)
	e := gqlErr(t, err)
	for _, known := range executor.Kinds(executor.KindServer) {
		require.Contains(t, e.Message, known)
	}
	require.NoError(t, b.c.Do(ctx, submitQ, task(map[string]any{"action": map[string]any{"kind": "Navigate", "params": map[string]any{"url": "https://example.com"}}}), nil),
		"kinds are known in any case")
	var stats struct{ Stats struct{ Submitted int } }
	require.NoError(t, b.c.Do(ctx, `{ stats { submitted } }`, nil, &stats))
	require.Equal(t, 1, stats.Stats.Submitted, "only the known kind was accepted")

	// An enum value that does not exist never reaches a resolver.
	err = b.c.Do(ctx, submitQ, task(map[string]any{"priority": "URGENT"}), nil)
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", gqlErr(t, err).Code())
}

func TestErrorCodesNotFoundConflictQueueFullDrainingCycleUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.config.Lanes = []engine.LaneConfig{{Name: "main", MaxInFlight: 10}, {Name: "tiny", MaxInFlight: 0, MaxQueued: 1}}
	})
	ctx := ctxFor(t)

	t.Run("NOT_FOUND", func(t *testing.T) {
		var out struct{ Task *struct{ ID string } }
		err := b.c.Do(ctx, `{ task(id: "no-such-task") { id } }`, nil, &out)
		require.Equal(t, "NOT_FOUND", gqlErr(t, err).Code())
		require.Nil(t, out.Task, "the field is null, the rest of the response stands")
		for _, q := range []string{`{ batch(id: "nope") { id } }`, `{ lane(name: "nope") { name } }`, `{ instance(id: "nope") { id } }`,
			`mutation { updateLane(name: "nope", input: {paused: true}) { name } }`} {
			require.Equal(t, "NOT_FOUND", gqlErr(t, b.c.Do(ctx, q, nil, nil)).Code(), q)
		}
	})

	t.Run("CONFLICT", func(t *testing.T) {
		id := b.submit(t, "e", nil)
		err := b.c.Do(ctx, `mutation($id: ID!) { resetTask(id: $id) { id } }`, map[string]any{"id": id}, nil)
		require.Equal(t, "CONFLICT", gqlErr(t, err).Code(), "only a PARKED task can be reset")
	})

	t.Run("QUEUE_FULL", func(t *testing.T) {
		b.submit(t, "e", map[string]any{"lane": "tiny"})
		err := b.c.Do(ctx, submitQ, task(map[string]any{"lane": "tiny"}), nil)
		e := gqlErr(t, err)
		require.Equal(t, "QUEUE_FULL", e.Code())
		require.Equal(t, true, e.Extensions["retryable"])
		require.Equal(t, map[string]any{"scope": "lane", "key": "tiny", "queued": float64(1), "cap": float64(1)}, e.Extensions["counts"])
		rejected, _ := e.Extensions["taskId"].(string)
		require.NotEmpty(t, rejected, "the refusal is recorded as a task")
		require.Equal(t, "REJECTED", b.state(t, rejected))
	})

	t.Run("CYCLE", func(t *testing.T) {
		var out struct {
			SubmitTasks struct {
				Items []struct{ Error *struct{ Code string } }
			}
		}
		items := []map[string]any{
			{"key": "a", "task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "click"}, "dependsOn": []string{"b"}}},
			{"key": "b", "task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "click"}, "dependsOn": []string{"a"}}},
		}
		require.NoError(t, b.c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { items { error { code } } } }`,
			map[string]any{"in": map[string]any{"items": items}}, &out))
		require.Equal(t, "CYCLE", out.SubmitTasks.Items[0].Error.Code)
	})

	t.Run("LIMIT", func(t *testing.T) {
		e := gqlErr(t, b.c.Do(ctx, `{ tasks(first: 1001) { pageInfo { hasNextPage } } }`, nil, nil))
		require.Equal(t, "LIMIT", e.Code())
		require.Equal(t, "first", e.Field())
		e = gqlErr(t, b.c.Do(ctx, `{ plan(limit: 5000) { fairness } }`, nil, nil))
		require.Equal(t, "LIMIT", e.Code())
		require.Equal(t, "limit", e.Field())
	})

	t.Run("UNAVAILABLE", func(t *testing.T) {
		for _, q := range []string{`{ plugins { name } }`, `mutation { unloadPlugin(name: "x") { name } }`,
			`mutation { setPolicy(input: {slot: FAIRNESS, name: "x"}) { name } }`,
			`mutation { loadPlugin(input: {name: "x", wasmBase64: "AGFzbQ=="}) { name } }`, `{ schedules { id } }`,
			`mutation { registerInstance(input: {id: "i", url: "http://127.0.0.1:1"}) { id } }`} {
			e := gqlErr(t, b.c.Do(ctx, q, nil, nil))
			require.Equal(t, "UNAVAILABLE", e.Code(), q)
		}
	})

	t.Run("DRAINING", func(t *testing.T) {
		var out struct{ Drain struct{ Draining bool } }
		require.NoError(t, b.c.Do(ctx, `mutation { drain { draining } }`, nil, &out))
		require.True(t, out.Drain.Draining)
		e := gqlErr(t, b.c.Do(ctx, submitQ, task(nil), nil))
		require.Equal(t, "DRAINING", e.Code())
		res, err := http.Get(b.base + "/readyz")
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "a draining server is not ready")
	})
}

func TestLimitsAreTypedErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.config.MaxBatch = 3
		o.limits = resolvers.Limits{MaxComplexity: 200, MaxDepth: 5, MaxBodyBytes: 4096}
	})
	ctx := ctxFor(t)

	t.Run("complexity", func(t *testing.T) {
		e := gqlErr(t, b.c.Do(ctx, `{ tasks(first: 100) { edges { node { id state } } } }`, nil, nil))
		require.Equal(t, "LIMIT", e.Code())
		require.Equal(t, "complexity", e.Extensions["limit"])
		require.NoError(t, b.c.Do(ctx, `{ tasks(first: 10) { edges { node { id state } } } }`, nil, nil), "a smaller page fits")
	})
	t.Run("depth", func(t *testing.T) {
		e := gqlErr(t, b.c.Do(ctx, `{ tasks(first: 1) { edges { node { children(first: 1) { dependencies { state } } } } } }`, nil, nil))
		require.Equal(t, "LIMIT", e.Code())
		require.Equal(t, "depth", e.Extensions["limit"])
	})
	t.Run("introspection is not limited by depth", func(t *testing.T) {
		require.NoError(t, b.c.Do(ctx, `{ __schema { types { name fields { name type { name ofType { name ofType { name ofType { name } } } } } } } }`, nil, nil))
	})
	t.Run("batch size", func(t *testing.T) {
		items := make([]map[string]any, 4)
		for i := range items {
			items[i] = map[string]any{"task": map[string]any{"agentId": "l", "action": map[string]any{"kind": "click"}}}
		}
		e := gqlErr(t, b.c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted } }`,
			map[string]any{"in": map[string]any{"items": items}}, nil))
		require.Equal(t, "LIMIT", e.Code())
		require.Equal(t, "input.items", e.Field())
	})
	t.Run("body size", func(t *testing.T) {
		body := []byte(`{"query":"{ stats { inFlight } }","variables":{"pad":"` + strings.Repeat("x", 5000) + `"}}`)
		res, status, err := b.c.RawBody(ctx, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusRequestEntityTooLarge, status)
		require.Equal(t, "LIMIT", res.Errors[0].Code())
		require.Equal(t, "bodySize", res.Errors[0].Extensions["limit"])

		// A chunked body (no Content-Length) is held to the same limit.
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.base+"/graphql", struct{ *bytes.Reader }{bytes.NewReader(body)})
		req.Header.Set("Content-Type", "application/json")
		hres, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		hres.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, hres.StatusCode)
	})
	t.Run("the limits are advertised", func(t *testing.T) {
		var out struct {
			Server struct {
				Limits struct{ MaxBatch, MaxComplexity, MaxDepth, MaxBodyBytes, MaxPageSize int }
			}
		}
		require.NoError(t, b.c.Do(ctx, `{ server { limits { maxBatch maxComplexity maxDepth maxBodyBytes maxPageSize } } }`, nil, &out))
		require.Equal(t, 3, out.Server.Limits.MaxBatch)
		require.Equal(t, 200, out.Server.Limits.MaxComplexity)
		require.Equal(t, 5, out.Server.Limits.MaxDepth)
		require.Equal(t, 4096, out.Server.Limits.MaxBodyBytes)
		require.Equal(t, 1000, out.Server.Limits.MaxPageSize)
	})
}

func TestWebSocketMessagesLargerThanTheLimitCloseTheSocketWith1009(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.limits = resolvers.Limits{MaxWebSocketPayloadBytes: 1024} })
	ctx := ctxFor(t)
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	big := []byte(`{"id":"1","type":"subscribe","payload":{"query":"subscription { stats { inFlight } }","variables":{"pad":"` + strings.Repeat("x", 2048) + `"}}}`)
	require.NoError(t, conn.SendRaw(ctx, big))
	select {
	case <-conn.Done():
	case <-ctx.Done():
		t.Fatal("the server should close a socket that sends a message over the limit")
	}
	require.EqualValues(t, 1009, conn.CloseStatus(), "close status: message too big (%v)", conn.Err())
}

func TestAnActionForAChatInstanceIsRefusedAtSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.registry = true })
	_, err := b.reg.Register(context.Background(), executor.InstanceConfig{ID: "talker", URL: "http://127.0.0.1:1", Kind: executor.KindChat})
	require.NoError(t, err)
	err = b.c.Do(ctxFor(t), submitQ, task(map[string]any{"instanceId": "talker"}), nil)
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
	require.Equal(t, "input.action.kind", e.Field())
	require.Contains(t, e.Message, "takes instructions, not actions")
	// An instruction for it is accepted.
	require.NoError(t, b.c.Do(ctxFor(t), submitQ, map[string]any{"in": map[string]any{"agentId": "e", "instanceId": "talker", "instruction": "say hi"}}, nil))
}
