package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// What the executor would refuse without reaching the page — a parameter
// the action's kind needs, a malformed selector — and a webhook URL whose
// address the deliverer will not call are refused at submission, with the
// field's path, on every submission path; nothing is recorded.
func TestSubmissionRefusesWhatWouldOnlyFailWhenItRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.schedules = true })
	ctx := ctxFor(t)
	metadata := "http://169.254.169.254/latest"
	cases := []struct {
		name  string
		vars  map[string]any
		field string
		msg   string
	}{
		{"navigate without a url", task(map[string]any{"action": map[string]any{"kind": "navigate"}}), "input.action.params.url", "navigate needs params.url"},
		{"navigate with a url not a string", task(map[string]any{"action": map[string]any{"kind": "goto", "params": map[string]any{"url": 3}}}), "input.action.params.url", "goto needs params.url"},
		{"navigate to a file: URL", task(map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "file:///etc/hostname"}}}), "input.action.params.url", "scheme must be http, https, about or data"},
		{"navigate to javascript:", task(map[string]any{"action": map[string]any{"kind": "goto", "params": map[string]any{"url": "javascript:alert(1)"}}}), "input.action.params.url", "scheme must be"},
		{"navigate to a URL without a scheme", task(map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "example.com/x"}}}), "input.action.params.url", "has no scheme"},
		{"navigate to http: without a host", task(map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "http:///x"}}}), "input.action.params.url", "has no host"},
		{"text with maxChars 0", task(map[string]any{"action": map[string]any{"kind": "text", "params": map[string]any{"maxChars": 0}}}), "input.action.params.maxChars", "within 1..1000000"},
		{"text with maxChars past the cap", task(map[string]any{"action": map[string]any{"kind": "text", "params": map[string]any{"maxChars": 1_000_001}}}), "input.action.params.maxChars", "within 1..1000000"},
		{"snapshot with maxNodes past the cap", task(map[string]any{"action": map[string]any{"kind": "snapshot", "params": map[string]any{"maxNodes": 10_001}}}), "input.action.params.maxNodes", "within 1..10000"},
		{"evaluate without an expression", task(map[string]any{"action": map[string]any{"kind": "evaluate", "params": map[string]any{}}}), "input.action.params.expression", "evaluate needs params.expression"},
		{"a malformed XPath selector", task(map[string]any{"action": map[string]any{"kind": "click", "selector": "xpath://[["}}), "input.action.selector", "is not a valid selector"},
		{"a malformed ref", task(map[string]any{"action": map[string]any{"kind": "click", "ref": "ref:x"}}), "input.action.ref", "is not a valid selector"},
		{"a webhook to the cloud metadata address", task(map[string]any{"webhookUrl": metadata}), "input.webhookUrl", "is not public"},
		{"a webhook to loopback", task(map[string]any{"webhookUrl": "http://[::1]:8080/x"}), "input.webhookUrl", "is not public"},
	}
	for _, tc := range cases {
		err := b.c.Do(ctx, submitQ, tc.vars, nil)
		e := gqlErr(t, err)
		require.Equal(t, "INVALID_INPUT", e.Code(), "%s: %s", tc.name, e.Message)
		require.Equal(t, tc.field, e.Field(), "%s: %s", tc.name, e.Message)
		require.Contains(t, e.Message, tc.msg, tc.name)
	}

	// In a batch, each bad item is refused at its own path; the others go in.
	var out struct {
		SubmitTasks struct {
			Accepted, Refused int
			Items             []struct {
				Error *struct{ Code, Field string }
			}
		}
	}
	items := []map[string]any{
		{"task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.com"}}}},
		{"task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "navigate"}}},
		{"task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "click", "selector": "xpath://[["}}},
		{"task": map[string]any{"agentId": "e", "action": map[string]any{"kind": "click", "selector": "#go"}, "webhookUrl": metadata}},
	}
	require.NoError(t, b.c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted refused items { error { code field } } } }`,
		map[string]any{"in": map[string]any{"items": items}}, &out))
	require.Equal(t, 1, out.SubmitTasks.Accepted)
	require.Equal(t, 3, out.SubmitTasks.Refused)
	require.Nil(t, out.SubmitTasks.Items[0].Error)
	for i, field := range map[int]string{1: "input.items.1.task.action.params.url", 2: "input.items.2.task.action.selector", 3: "input.items.3.task.webhookUrl"} {
		require.NotNil(t, out.SubmitTasks.Items[i].Error, i)
		require.Equal(t, "INVALID_INPUT", out.SubmitTasks.Items[i].Error.Code, i)
		require.Equal(t, field, out.SubmitTasks.Items[i].Error.Field, i)
	}
	// The batch's own webhook too.
	err := b.c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted } }`,
		map[string]any{"in": map[string]any{"items": items[:1], "webhookUrl": metadata}}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
	require.Equal(t, "input.webhookUrl", e.Field(), e.Message)

	// A schedule's template is checked as a task is.
	schedQ := `mutation($t: SubmitTaskInput!) { createSchedule(input: {name: "s", kind: EVERY, everyMs: 3600000, template: $t}) { id } }`
	for field, tmpl := range map[string]map[string]any{
		"input.template.action.params.url": {"agentId": "e", "action": map[string]any{"kind": "navigate"}},
		"input.template.action.selector":   {"agentId": "e", "action": map[string]any{"kind": "click", "selector": "xpath://[["}},
		"input.template.webhookUrl":        {"agentId": "e", "action": map[string]any{"kind": "click", "selector": "#go"}, "webhookUrl": metadata},
	} {
		e := gqlErr(t, b.c.Do(ctx, schedQ, map[string]any{"t": tmpl}, nil))
		require.Equal(t, "INVALID_INPUT", e.Code(), e.Message)
		require.Equal(t, field, e.Field(), e.Message)
	}
	require.Empty(t, b.sched.List(context.Background()), "no schedule was created")
	require.EqualValues(t, 1, b.eng.Stats(context.Background()).Submitted, "only the good item was recorded")

	// A webhook on a host name is checked when it is called (what a name
	// resolves to may change): it is accepted here.
	require.NoError(t, b.c.Do(ctx, submitQ, task(map[string]any{"webhookUrl": "https://hooks.example/done"}), nil))
}
