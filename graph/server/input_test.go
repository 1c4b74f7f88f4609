package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTaskInputsAnswerAsTheGeneratedCodeDid: the task inputs are
// unmarshalled by hand (graph/model/input.go) instead of by gqlgen's
// generated code. The answers below were recorded from the generated code:
// an error of a field keeps its message, its path, its code; enum values
// reach the engine as gqlgen.yml binds them; unknown fields are refused.
func TestTaskInputsAnswerAsTheGeneratedCodeDid(t *testing.T) {
	b := setup(t, func(o *setupOptions) { o.schedules = true })
	send := func(body string) string {
		t.Helper()
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/graphql", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.Status + " " + string(data)
	}
	query := func(q string, vars string) string {
		q2, err := json.Marshal(q)
		require.NoError(t, err)
		if vars == "" {
			return `{"query":` + string(q2) + `}`
		}
		return `{"query":` + string(q2) + `,"variables":` + vars + `}`
	}
	const (
		one   = `mutation ($in: SubmitTaskInput!) { submitTask(input: $in) { agentId priority queueMode exhausted sessionReplay } }`
		batch = `mutation ($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted refused items { index task { agentId priority queueMode exhausted } error { code field message } } } }`
		click = `"action":{"kind":"click","selector":"css:#go"}`
	)
	for _, tc := range []struct{ name, body, want string }{
		{"a bad time", query(one, `{"in":{"agentId":"a",`+click+`,"deadline":"tomorrow"}}`),
			`200 OK {"errors":[{"message":"time should be RFC3339Nano formatted string","path":["submitTask","input","deadline"],"extensions":{"code":"INVALID_INPUT","field":"input.deadline","retryable":false}}],"data":{"submitTask":null}}`},
		{"a bad time in a batch", query(batch, `{"in":{"items":[{"task":{"agentId":"a",`+click+`}},{"task":{"agentId":"a",`+click+`,"deadline":"soon"}},{"task":{"agentId":"a",`+click+`,"deadline":"later"}}]}}`),
			`200 OK {"errors":[{"message":"time should be RFC3339Nano formatted string","path":["submitTasks","input","items",1,"task","deadline"],"extensions":{"code":"INVALID_INPUT","field":"input.items.1.task.deadline","retryable":false}}],"data":null}`},
		{"a bad time in a literal batch", query(`mutation { submitTasks(input: {items: [{key: "k", task: {agentId: "a", action: {kind: "click"}, deadline: "x"}}]}) { accepted } }`, ``),
			`200 OK {"errors":[{"message":"time should be RFC3339Nano formatted string","path":["submitTasks","input","items",0,"task","deadline"],"extensions":{"code":"INVALID_INPUT","field":"input.items.0.task.deadline","retryable":false}}],"data":null}`},
		{"a bad time in a schedule's template", query(`mutation ($t: SubmitTaskInput!) { createSchedule(input: {name: "s", kind: EVERY, everyMs: 3600000, template: $t}) { id } }`, `{"t":{"agentId":"a",`+click+`,"deadline":"x"}}`),
			`200 OK {"errors":[{"message":"time should be RFC3339Nano formatted string","path":["createSchedule","input","template","deadline"],"extensions":{"code":"INVALID_INPUT","field":"input.template.deadline","retryable":false}}],"data":{"createSchedule":null}}`},
		{"an unknown field in a literal", query(`mutation { submitTask(input: {agentId: "a", action: {kind: "click"}, bogus: 1}) { id } }`, ``),
			`200 OK {"errors":[{"message":"Field \"bogus\" is not defined by type \"SubmitTaskInput\".","locations":[{"line":1,"column":70}],"extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}`},
		{"an unknown field in a variable", query(batch, `{"in":{"items":[{"task":{"agentId":"a",`+click+`,"bogus":1}}]}}`),
			`200 OK {"errors":[{"message":"unknown field","path":["variable","in","items",0,"task","bogus"],"extensions":{"code":"GRAPHQL_VALIDATION_FAILED"}}]}`},
		{"defaults", query(one, `{"in":{"agentId":"d",`+click+`}}`),
			`200 OK {"data":{"submitTask":{"agentId":"d","priority":"NORMAL","queueMode":"ENQUEUE","exhausted":null,"sessionReplay":false}}}`},
		{"enums", query(batch, `{"in":{"items":[`+
			`{"task":{"agentId":"e",`+click+`,"priority":"CRITICAL","exhausted":"PARK","sessionKey":"s1","queueMode":"INTERRUPT"}},`+
			`{"task":{"agentId":"e",`+click+`,"priority":"HIGH","exhausted":"FAIL","sessionKey":"s2","queueMode":"INTERRUPT_DRAIN"}},`+
			`{"task":{"agentId":"e",`+click+`,"priority":"LOW","queueMode":"ENQUEUE"}},`+
			`{"task":{"agentId":"e",`+click+`,"priority":null,"queueMode":null}}]}}`),
			`200 OK {"data":{"submitTasks":{"accepted":4,"refused":0,"items":[{"index":0,"task":{"agentId":"e","priority":"CRITICAL","queueMode":"INTERRUPT","exhausted":"PARK"},"error":null},{"index":1,"task":{"agentId":"e","priority":"HIGH","queueMode":"INTERRUPT_DRAIN","exhausted":"FAIL"},"error":null},{"index":2,"task":{"agentId":"e","priority":"LOW","queueMode":"ENQUEUE","exhausted":null},"error":null},{"index":3,"task":{"agentId":"e","priority":"NORMAL","queueMode":"ENQUEUE","exhausted":null},"error":null}]}}}`},
		{"a batch's items with their tasks' dependencies (marshalled concurrently)", query(`mutation ($in: SubmitTasksInput!) { submitTasks(input: $in) { items { index key task { agentId dependencies { state } } error { code } } } }`,
			`{"in":{"items":[{"key":"a","task":{"agentId":"x",`+click+`}},{"key":"b","task":{"agentId":"y",`+click+`}},{"key":"c","task":{"agentId":""}}]}}`),
			`200 OK {"data":{"submitTasks":{"items":[{"index":0,"key":"a","task":{"agentId":"x","dependencies":[]},"error":null},{"index":1,"key":"b","task":{"agentId":"y","dependencies":[]},"error":null},{"index":2,"key":"c","task":null,"error":{"code":"INVALID_INPUT"}}]}}}`},
		{"a batch's items with their tasks' leaves (marshalled in place)", query(`mutation ($in: SubmitTasksInput!) { submitTasks(input: $in) { items { index ... on SubmitTaskResult { key } task { agentId } error { code field } } } }`,
			`{"in":{"items":[{"key":"a","task":{"agentId":"x",`+click+`}},{"key":"b","task":{"agentId":"y",`+click+`}},{"key":"c","task":{"agentId":""}}]}}`),
			`200 OK {"data":{"submitTasks":{"items":[{"index":0,"key":"a","task":{"agentId":"x"},"error":null},{"index":1,"key":"b","task":{"agentId":"y"},"error":null},{"index":2,"key":"c","task":null,"error":{"code":"INVALID_INPUT","field":"input.items.2.task.agentId"}}]}}}`},
	} {
		got := send(tc.body)
		if got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
