package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// TestAStoreThatCannotCommitIsNotReady runs `switchyard serve` on a SQLite
// file and then takes the file's write lock from another connection, as a
// backup tool or the sqlite3 shell left open would: commits cannot succeed.
// (Making the file read-only does not do it: the server's open descriptors
// keep writing.) /readyz turns not ready, /metrics and the log say why,
// submissions answer UNAVAILABLE within engine.commitTimeout instead of
// hanging; once the lock is gone, everything recovers on its own.
func TestAStoreThatCannotCommitIsNotReady(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out SQLite's busy timeout")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "switchyard.db")
	cfg := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("engine: {commitTimeout: 1s}\n"), 0o644))
	s := startServe(t, "--config", cfg, "--listen", "127.0.0.1:0", "--db", db, "--no-local-instance",
		"--log-level", "info", "--shutdown-grace", "100ms")
	base, logs := strings.TrimSuffix(s.URL, "/graphql"), s.Logs
	c := client.New(s.URL)
	submit := func(key string) error {
		var res struct{ SubmitTask struct{ ID string } }
		return c.Do(context.Background(), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"agentId": "a", "idempotencyKey": key, "action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &res)
	}
	get := func(path string) (int, string) {
		res, err := http.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	require.NoError(t, submit("before"))
	status, _ := get("/readyz")
	require.Equal(t, http.StatusOK, status)

	other, err := sqlite3.Open(db)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.Exec("PRAGMA busy_timeout = 10000; BEGIN EXCLUSIVE"))

	start := time.Now()
	err = submit("during")
	took := time.Since(start)
	require.Error(t, err)
	require.Contains(t, err.Error(), "UNAVAILABLE")
	t.Logf("submitTask answered after %s: %v", took.Round(time.Millisecond), err)
	require.Less(t, took, 20*time.Second, "the answer is bounded by engine.commitTimeout (1s), not never")

	waitfor.Eventually(t, "readyz turns not ready", func() bool { s, _ := get("/readyz"); return s == http.StatusServiceUnavailable })
	_, body := get("/readyz")
	t.Logf("readyz: %s", strings.TrimSpace(body))
	// Anyone who reaches the port reads it: what is wrong (once SQLite's
	// busy timeout ends the attempt), not where the file is.
	waitfor.Eventually(t, "readyz says the file is locked", func() bool {
		_, body = get("/readyz")
		return strings.Contains(body, "locked by another process")
	})
	t.Logf("readyz: %s", strings.TrimSpace(body))
	require.Contains(t, body, "the database is locked by another process")
	require.NotContains(t, body, dir)
	require.NotContains(t, err.Error(), dir)
	// SQLite's busy timeout (5s) ends the attempt with an error: counted and logged.
	waitfor.Eventually(t, "the metrics say commits fail", func() bool {
		_, m := get("/metrics")
		return strings.Contains(m, "switchyard_store_commit_failing 1") && !strings.Contains(m, "switchyard_store_commit_failures_total 0")
	})
	require.Contains(t, logs.String(), "commit failed; retrying")
	require.Contains(t, logs.String(), "is locked by another process")

	require.NoError(t, other.Exec("ROLLBACK"))
	waitfor.Eventually(t, "ready again once the store commits", func() bool { s, _ := get("/readyz"); return s == http.StatusOK })
	_, m := get("/metrics")
	require.Contains(t, m, "switchyard_store_commit_failing 0")
	require.Contains(t, logs.String(), "commits succeed again")
	require.NoError(t, submit("during"), "the submission made during the failure is found by its key")
	require.NoError(t, submit("after"))
}
