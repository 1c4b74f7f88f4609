package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// loadExample loads one of examples/plugins' modules into the server.
func (b *bundle) loadExample(t *testing.T, file, name string, config any) error {
	t.Helper()
	wasm, err := os.ReadFile("../../examples/plugins/" + file)
	require.NoError(t, err)
	vars := map[string]any{"w": base64.StdEncoding.EncodeToString(wasm), "n": name, "c": config}
	// Loading compiles the module: minutes under -race on a busy machine
	// (the bound is one such a machine keeps, not a speed goal).
	c := *b.c
	c.HTTP = &http.Client{Timeout: 5 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return c.Do(ctx, `mutation($n: String!, $w: String!, $c: JSON) { loadPlugin(input: {name: $n, wasmBase64: $w, config: $c}) { name } }`, vars, nil)
}

// ABI v2 details through a real server: a selection plugin (labelsel) that
// reads the tasks' labels and sessions and the agents' labels, set with
// setAgent, orders each agent's queue by them.
func TestASelectionPluginRanksByTaskLabelsSessionsAndAgentLabels(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.plugins = true
		o.auto = func(*engine.Run) engine.Outcome { return engine.Outcome{} }
	})
	require.NoError(t, b.loadExample(t, "labelsel.wasm", "labelsel", map[string]any{"lastSessions": []string{"later"}}))
	ctx := ctxFor(t) // after the load, which has its own bound
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: SELECTION, name: "labelsel"}) { name } }`, nil, nil))
	var agent struct {
		SetAgent struct {
			Labels []struct{ Key, Value string }
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { setAgent(id: "gold", input: {maxInFlight: 1, labels: [{key: "tier", value: "gold"}]}) { labels { key value } } }`, nil, &agent))
	require.Equal(t, "tier", agent.SetAgent.Labels[0].Key, "the agent shows its labels")
	require.NoError(t, b.c.Do(ctx, `mutation { setAgent(id: "plain", input: {maxInFlight: 1}) { id } }`, nil, nil))
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: true}) { name } }`, nil, nil))

	p1 := b.submit(t, "plain", nil)
	p2 := b.submit(t, "plain", map[string]any{"sessionKey": "later"})
	p3 := b.submit(t, "plain", map[string]any{"labels": []map[string]string{{"key": "urgent", "value": "yes"}}})
	g1 := b.submit(t, "gold", map[string]any{"priority": "LOW"})
	g2 := b.submit(t, "gold", map[string]any{"priority": "HIGH"})
	require.NoError(t, b.c.Do(ctx, `mutation { updateLane(name: "main", input: {paused: false}) { name } }`, nil, nil))

	waitfor.Eventually(t, "every task started", func() bool { return len(b.exec.Started()) == 5 })
	started := b.exec.Started()
	before := func(a, c string) bool { return slices.Index(started, a) < slices.Index(started, c) }
	require.True(t, before(p3, p1) && before(p1, p2), "plain: the urgent-labelled task first, the deferred session's last: %v", started)
	require.True(t, before(g2, g1), "gold: priority order for an agent labelled tier=gold: %v", started)
}

// A retry plugin (errcode) decides by the failed attempt's error code, as
// the executor reported it: a code it is told to fail fails the task at
// its first failure, a code it is told to retry at once is retried without
// the lane's backoff.
func TestARetryPluginDecidesByTheErrorCode(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.plugins = true
		o.auto = func(r *engine.Run) engine.Outcome {
			return engine.Outcome{Err: errors.New("it went wrong"), Class: policy.ClassTransient, Code: r.Spec().Labels["code"]}
		}
	})
	require.NoError(t, b.loadExample(t, "errcode.wasm", "errcode", map[string]any{"fail": []string{"captcha"}, "immediate": []string{"tab_not_found"}}))
	ctx := ctxFor(t) // after the load, which has its own bound
	require.NoError(t, b.c.Do(ctx, `mutation { setPolicy(input: {slot: RETRY, name: "errcode"}) { name } }`, nil, nil))
	label := func(code string) map[string]any {
		return map[string]any{"labels": []map[string]string{{"key": "code", "value": code}}}
	}
	failed := b.submit(t, "a", label("captcha"))
	again := b.submit(t, "b", label("tab_not_found"))
	waitfor.Eventually(t, "both tasks ended", func() bool {
		f, a := b.task(t, failed), b.task(t, again)
		return f.State == engine.StateFailed && (a.State == engine.StateParked || a.State == engine.StateFailed)
	})
	require.Len(t, b.task(t, failed).Attempts, 1, "a transient failure with a code the plugin fails is not retried")
	require.Len(t, b.task(t, again).Attempts, 4, "a code the plugin retries at once spends the budget without the lane's backoff")
	reason := func(id string) string {
		var out struct{ Task struct{ Reason string } }
		require.NoError(t, b.c.Do(ctx, `query($id: ID!) { task(id: $id) { reason } }`, map[string]any{"id": id}, &out))
		return out.Task.Reason
	}
	require.Equal(t, "failed by retry policy errcode: it went wrong", reason(failed), "the reason names the policy that failed the task")
	require.Equal(t, "retry budget spent: it went wrong", reason(again), "a spent budget is recorded as such")
}

// A configuration that does not satisfy the schema the module declares is
// refused, at load and later, with an error that names the field.
func TestAPluginConfigurationOutsideItsSchemaIsRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	err := b.loadExample(t, "errcode.wasm", "errcode", map[string]any{"backoffFactor": 20})
	e := gqlErr(t, err)
	require.Equal(t, "input.config.backoffFactor: must be ≤ 10", e.Message, "the message is the schema's, at the input's path")
	require.Equal(t, "INVALID_INPUT", e.Code(), "a bad configuration is bad input, not a bad module")
	require.Equal(t, "input.config.backoffFactor", e.Extensions["field"], "the field is the configuration's, not the module's")
	require.NoError(t, b.loadExample(t, "errcode.wasm", "errcode", map[string]any{"backoffFactor": 3}))
	ctx := ctxFor(t) // after the loads, which have their own bound
	err = b.c.Do(ctx, `mutation { configurePlugin(name: "errcode", config: {fail: ["x", 7]}) { name } }`, nil, nil)
	require.ErrorContains(t, err, "config.fail[1]: must be a string, not an integer")
	require.Equal(t, "config.fail[1]", gqlErr(t, err).Extensions["field"])
	require.Equal(t, "INVALID_INPUT", gqlErr(t, err).Code())
	err = b.c.Do(ctx, `mutation { configurePlugin(name: "errcode", config: {backoff: 2}) { name } }`, nil, nil)
	require.ErrorContains(t, err, "config.backoff: unknown field")
}
