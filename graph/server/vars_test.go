package server_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadVariablesAreRefusedAsBeforeOnceTheQueryIsCached: a cached query's
// variables skip gqlparser when the server can vouch for them (vars.go);
// bad ones must still get gqlparser's error, the same as when the query was
// new, naming the field.
func TestBadVariablesAreRefusedAsBeforeOnceTheQueryIsCached(t *testing.T) {
	b := setup(t)
	const batch = `"query":"mutation ($in: SubmitTasksInput!) { submitTasks(input: $in) { accepted refused items { index task { agentId lane } } } }"`
	const task = `"query":"mutation ($in: SubmitTaskInput!, $b: Boolean!) { submitTask(input: $in) { agentId timeoutMs @include(if: $b) } }"`
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
	for _, tc := range []struct{ body, want string }{
		{`{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"a"}},{"task":{"lane":"main"}}]}}}`, `must be defined`},
		{`{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"a","priority":"URGENT"}}]}}}`, `URGENT is not a valid Priority`},
		{`{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"a","bogus":1}}]}}}`, `unknown field`},
		{`{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"a","dependsOn":"x"}}]}}}`, `"accepted":0`}, // a list of one: refused by the engine, not gqlparser
		{`{` + task + `,"variables":{"in":{"agentId":"a","timeoutMs":1.5},"b":true}}`, `cannot use`},
		{`{` + task + `,"variables":{"in":{"agentId":"a","timeoutMs":"250"},"b":"x"}}`, `cannot use`},
		{`{` + task + `,"variables":{"in":{"agentId":"a","timeoutMs":250,"action":{"kind":"click","selector":"css:#go"}},"b":true}}`, `"timeoutMs":250`},
	} {
		first := send(tc.body) // the query may be new: gqlparser checks the variables
		require.Contains(t, first, tc.want)
		require.Equal(t, first, send(tc.body), "the cached query's answer differs") // the query is cached
	}
	// A valid batch, its query cached by the requests above: the resolver
	// sees the real items, not placeholders.
	got := send(`{` + batch + `,"variables":{"in":{"items":[{"task":{"agentId":"x1","action":{"kind":"click","selector":"css:#go"}}},{"task":{"agentId":"x2","lane":"main","action":{"kind":"click","selector":"css:#go"}}}]}}}`)
	require.Contains(t, got, `"accepted":2`)
	require.Contains(t, got, `"agentId":"x1"`)
	require.Contains(t, got, `"agentId":"x2"`)
}
