package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
)

// TestSecondServeOnOneFileIsRefused starts two real `switchyard serve`
// processes on one SQLite file: the second exits non-zero at start, naming
// the file and the first; the first keeps serving; a kill -9 of the first
// lets a new process start at once (the kernel drops the lock with the
// process).
func TestSecondServeOnOneFileIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "switchyard.db")
	config := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: sqlite, path: %q}
localInstance: {enabled: false}
shutdownGrace: 1s
`, db)), 0o644))

	first, url := startProcess(t, bin, config)
	t.Cleanup(func() { _ = first.Process.Kill(); _ = first.Wait() })
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/graphql")
	submit := func(url, key string) {
		t.Helper()
		var out struct{ SubmitTask struct{ ID string } }
		require.NoError(t, client.New(url).Do(context.Background(), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"agentId": "a", "idempotencyKey": key, "action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &out))
		require.NotEmpty(t, out.SubmitTask.ID)
	}
	submit(url, "before")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "serve", "--config", config).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the second process exits with an error: %s", out)
	require.NotZero(t, exit.ExitCode())
	msg := string(out)
	t.Logf("the second process said: %s", msg)
	for _, want := range []string{db, "in use by another process", "pid " + strconv.Itoa(first.Process.Pid), "listening on " + addr} {
		require.Contains(t, msg, want)
	}

	submit(url, "after") // the first keeps serving

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	_ = first.Wait()
	start := time.Now()
	next, url2 := startProcess(t, bin, config) // fails the test if it does not start
	t.Cleanup(func() { _ = next.Process.Signal(syscall.SIGTERM); _ = next.Wait() })
	t.Logf("a new process started %s after the kill -9", time.Since(start).Round(time.Millisecond))
	var got struct{ Stats struct{ LastSeq int64 } }
	require.NoError(t, client.New(url2).Do(context.Background(), `{ stats { lastSeq } }`, nil, &got))
	require.Positive(t, got.Stats.LastSeq, "the new process serves the same file")
}
