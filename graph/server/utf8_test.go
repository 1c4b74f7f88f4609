package server_test

import (
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStringsThatAreNotUTF8AreRefusedWithTheirPathAndChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	submit := `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id agentId } }`
	for _, tc := range []struct{ name, body, field string }{
		{"raw bytes in a variable", `{"query":"` + submit + `","variables":{"in":{"agentId":"` + "\xff\xfe" + `","action":{"kind":"click"}}}}`, "variables.in.agentId"},
		{"a lone surrogate escape", `{"query":"` + submit + `","variables":{"in":{"agentId":"\udc00","action":{"kind":"click"}}}}`, "variables.in.agentId"},
		{"raw bytes in a nested list", `{"query":"` + submit + `","variables":{"in":{"agentId":"a","action":{"kind":"click"},"labels":[{"key":"k","value":"` + "\xc3" + `"}]}}}`, "variables.in.labels.0.value"},
		{"raw bytes in the document", `{"query":"mutation { submitTask(input: {agentId: \"` + "\xff" + `\", action: {kind: \"click\"}}) { id } }"}`, "query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, status, err := b.c.RawBody(ctx, []byte(tc.body))
			require.NoError(t, err)
			require.Equal(t, http.StatusBadRequest, status)
			require.Len(t, res.Errors, 1)
			require.Equal(t, "INVALID_INPUT", res.Errors[0].Code(), res.Errors[0].Message)
			require.Equal(t, tc.field, res.Errors[0].Field())
		})
	}

	// Over GET too.
	q := url.Values{"query": {`query($a: ID!) { task(id: $a) { id } }`}, "variables": {`{"a":"` + "\xff" + `"}`}}
	res, err := http.Get(b.base + "/graphql?" + q.Encode())
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusBadRequest, res.StatusCode)
	require.Contains(t, string(body), `"field":"variables.a"`)
	require.Contains(t, string(body), `"INVALID_INPUT"`)

	// A U+FFFD the client wrote is a character like any other.
	var out struct{ SubmitTask struct{ AgentID string } }
	require.NoError(t, b.c.Do(ctx, submit, map[string]any{"in": map[string]any{"agentId": "a\uFFFDb", "action": map[string]any{"kind": "click"}}}, &out))
	require.Equal(t, "a\uFFFDb", out.SubmitTask.AgentID)

	var stats struct{ Stats struct{ Submitted int } }
	require.NoError(t, b.c.Do(ctx, `{ stats { submitted } }`, nil, &stats))
	require.Equal(t, 1, stats.Stats.Submitted, "only the valid one was accepted")
}
