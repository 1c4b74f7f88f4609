package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Requests that no transport serves are told, in JSON, what is missing.
func TestRequestsNoTransportServesAreToldWhatIsMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name, method, contentType, accept string
		status                            int
		says                              string
	}{
		{"a POST without a content type", http.MethodPost, "", "", http.StatusUnsupportedMediaType, "the POST has no Content-Type: send Content-Type: application/json"},
		{"a POST of another type", http.MethodPost, "text/plain", "", http.StatusUnsupportedMediaType, "Content-Type text/plain is not served"},
		{"graphql-sse's single connection reservation", http.MethodPut, "", "", http.StatusMethodNotAllowed, "graphql-sse's single connection mode is not served; use its distinct connections mode"},
		{"another method", http.MethodDelete, "", "", http.StatusMethodNotAllowed, "/graphql serves GET, POST"},
		{"a misspelt parameter", http.MethodPost, "application/json", "", http.StatusBadRequest, `unknown parameter "qeury"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctxFor(t), tc.method, b.base+"/graphql", strings.NewReader(`{"qeury":"{ __typename }"}`))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			require.Equal(t, tc.status, res.StatusCode, string(body))
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			var out struct {
				Errors []struct{ Message string }
				Data   *json.RawMessage
			}
			require.NoError(t, json.Unmarshal(body, &out), string(body))
			require.Len(t, out.Errors, 1)
			require.Contains(t, out.Errors[0].Message, tc.says)
			require.Nil(t, out.Data, "no data entry: nothing ran")
		})
	}
}

// Before an operation runs, a failure is 200 under application/json and a
// 400 without data under application/graphql-response+json.
func TestFailuresBeforeExecutionFollowTheAcceptedMediaType(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, body := range []string{`{"query":"{"}`, `{"query":"{ noSuchField }"}`, `{"query":"query($id: ID!) { task(id: $id) { id } }","variables":{"id":null}}`} {
		for accept, status := range map[string]int{"application/json": 200, "application/graphql-response+json": 400} {
			req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/graphql", strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", accept)
			res, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			require.Equal(t, status, res.StatusCode, "%s with %s: %s", body, accept, raw)
			require.Equal(t, accept, res.Header.Get("Content-Type"))
			require.NotContains(t, string(raw), `"data"`, "%s with %s", body, accept)
		}
	}
}

// GET follows the same rules, and refuses mutations with 405.
func TestGETFollowsTheSameRulesAndRefusesMutations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func(query, accept string) (int, string, http.Header) {
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodGet, b.base+"/graphql?"+url.Values{"query": {query}}.Encode(), nil)
		require.NoError(t, err)
		req.Header.Set("Accept", accept)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(raw), res.Header
	}
	for _, q := range []string{"{", "{ noSuchField }"} {
		status, body, _ := get(q, "application/json")
		require.Equal(t, http.StatusOK, status, body)
		require.NotContains(t, body, `"data"`)
		status, body, _ = get(q, "application/graphql-response+json")
		require.Equal(t, http.StatusBadRequest, status, body)
		require.NotContains(t, body, `"data"`)
	}
	status, body, h := get(`mutation { drain { submitted } }`, "application/json")
	require.Equal(t, http.StatusMethodNotAllowed, status, body)
	require.Equal(t, "POST", h.Get("Allow"))
	require.Contains(t, body, "GET runs queries only")
	require.False(t, b.eng.Draining(context.Background()), "nothing ran")
	status, body, _ = get(`{ stats { submitted } }`, "application/json")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"data":{"stats"`)
}
