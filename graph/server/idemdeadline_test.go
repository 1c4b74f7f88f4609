package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAKeyedResendAfterItsDeadlineGetsTheOriginalTask: a client whose
// answer was lost resends its keyed request, and by then the deadline it
// gave has passed; it gets the task it made in time, not INVALID_INPUT.
// Without the key, or with a new one, a past deadline is still refused.
func TestAKeyedResendAfterItsDeadlineGetsTheOriginalTask(t *testing.T) {
	b := setup(t)
	send := func(vars map[string]any) map[string]any {
		t.Helper()
		body, err := json.Marshal(map[string]any{
			"query":     "mutation ($i: SubmitTaskInput!) { submitTask(input: $i) { id } }",
			"variables": map[string]any{"i": vars},
		})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctxFor(t), http.MethodPost, b.base+"/graphql", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var out map[string]any
		require.NoError(t, json.Unmarshal(data, &out), string(data))
		return out
	}
	deadline := time.Now().Add(300 * time.Millisecond).UTC()
	task := func(key string) map[string]any {
		v := map[string]any{"agentId": "late", "lane": "cron", "action": map[string]any{"kind": "title"}, "deadline": deadline.Format(time.RFC3339Nano)}
		if key != "" {
			v["idempotencyKey"] = key
		}
		return v
	}
	first := send(task("K1"))
	require.Nil(t, first["errors"], "%v", first)
	id := first["data"].(map[string]any)["submitTask"].(map[string]any)["id"]
	for time.Now().Before(deadline.Add(50 * time.Millisecond)) {
		time.Sleep(20 * time.Millisecond) // until the deadline has passed
	}
	again := send(task("K1"))
	require.Nil(t, again["errors"], "%v", again)
	require.Equal(t, id, again["data"].(map[string]any)["submitTask"].(map[string]any)["id"])
	for _, key := range []string{"K2", ""} {
		out := send(task(key))
		require.NotNil(t, out["errors"], "key %q: %v", key, out)
		require.Contains(t, out["errors"].([]any)[0].(map[string]any)["message"], "is not in the future", "key %q", key)
		require.Equal(t, "INVALID_INPUT", out["errors"].([]any)[0].(map[string]any)["extensions"].(map[string]any)["code"], "key %q", key)
	}
}
