package server_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVariablesAreCoercedAsTheSpecificationSays: gqlparser takes an enum
// value in any letter case and an Int given as a string, and gqlgen then
// mapped an enum name it did not know to the enum's zero value — a "low"
// priority became CRITICAL. Variables of the wrong type or with a
// differently cased enum value are GRAPHQL_VALIDATION_FAILED, named by
// their path, whether the query is new or cached, and nothing is
// submitted or changed.
func TestVariablesAreCoercedAsTheSpecificationSays(t *testing.T) {
	b := setup(t)
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
		return string(data)
	}
	const task = `"query":"mutation ($i: SubmitTaskInput!) { submitTask(input: $i) { id priority } }"`
	const batch = `"query":"mutation ($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted } }"`
	const lane = `"query":"mutation ($in: LaneInput!) { updateLane(name: \"main\", input: $in) { name dropPolicy } }"`
	const list = `"query":"query ($s: [TaskState!]) { tasks(filter: {states: $s}, first: 5) { totalCount } }"`
	for _, tc := range []struct{ name, body, want string }{
		{"enum, lower case", `{` + task + `,"variables":{"i":{"agentId":"a","priority":"low","action":{"kind":"title"}}}}`,
			`"message":"\"low\" is not a valid Priority (enum values are case-sensitive): did you mean LOW?","path":["variable","i","priority"]`},
		{"enum, mixed case", `{` + task + `,"variables":{"i":{"agentId":"a","priority":"High","action":{"kind":"title"}}}}`, `did you mean HIGH?`},
		{"enum in a batch item", `{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"a","queueMode":"interrupt"}}]}}}`,
			`"path":["variable","in","items",0,"task","queueMode"]`},
		{"enum as a number", `{` + task + `,"variables":{"i":{"agentId":"a","priority":1}}}`, `1 is not a valid Priority`},
		{"enum in a list", `{` + list + `,"variables":{"s":["SUCCEEDED","succeeded"]}}`, `"path":["variable","s",1]`},
		{"enum of a lane", `{` + lane + `,"variables":{"in":{"dropPolicy":"drop_oldest"}}}`, `did you mean DROP_OLDEST?`},
		{"String given a number", `{` + task + `,"variables":{"i":{"agentId":5}}}`,
			`"message":"the number 5 is not a String: a String is a JSON string","path":["variable","i","agentId"]`},
		{"Int given a string", `{` + task + `,"variables":{"i":{"agentId":"a","timeoutMs":"1000"}}}`, `"\"1000\" is not a Int: an Int is a JSON number without a fractional part`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := send(tc.body) // a new query, or one the cases before cached
			require.Contains(t, first, tc.want)
			require.Contains(t, first, `"code":"GRAPHQL_VALIDATION_FAILED"`)
			require.NotContains(t, first, `"data":{`)
			require.Equal(t, first, send(tc.body), "the cached query's answer differs")
		})
	}
	// Nothing was submitted, and the lane kept its policy; the values
	// named as the schema names them are taken.
	require.Contains(t, send(`{`+list+`,"variables":{"s":null}}`), `"totalCount":0`)
	require.Contains(t, send(`{`+task+`,"variables":{"i":{"agentId":"a","priority":"LOW","action":{"kind":"title"}}}}`), `"priority":"LOW"`)
	require.Contains(t, send(`{`+lane+`,"variables":{"in":{"dropPolicy":"DROP_OLDEST"}}}`), `"dropPolicy":"DROP_OLDEST"`)
}
