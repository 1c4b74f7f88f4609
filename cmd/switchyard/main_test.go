package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/graph/client"
)

func TestVersionAndUsage(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version"}, &out, &errOut))
	require.Regexp(t, `^switchyard \S+ \(go1\.`, out.String())
	require.Equal(t, 2, run(context.Background(), []string{"frobnicate"}, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown command "frobnicate"`)
	require.Contains(t, errOut.String(), "serve")
	errOut.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"serve", "--no-such-flag"}, &out, &errOut))
	require.Contains(t, errOut.String(), "no-such-flag")
}

func TestServeRefusesABadConfigurationNamingTheKey(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("log:\n  levle: debug\n"), 0o600))
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"serve", "--config", cfg}, &out, &errOut))
	require.Contains(t, errOut.String(), `unknown key "levle" (in log)`)

	errOut.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"serve", "--log-format", "xml"}, &out, &errOut))
	require.Contains(t, errOut.String(), "log.format")
}

func TestServeAnswersGraphQLAndShutsDownGracefully(t *testing.T) {
	t.Parallel()
	s := startServe(t, "--listen", "127.0.0.1:0", "--no-local-instance", "--log-format", "json", "--shutdown-grace", "1s",
		"--db", filepath.Join(t.TempDir(), "switchyard.db"))
	base, logs := strings.TrimSuffix(s.URL, "/graphql"), s.Logs
	c := client.New(s.URL)
	var res struct{ SubmitTask struct{ ID string } }
	require.NoError(t, c.Do(context.Background(), `mutation { submitTask(input: {agentId: "cli", action: {kind: "click"}}) { id } }`, nil, &res))
	require.NotEmpty(t, res.SubmitTask.ID)
	r, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	r.Body.Close()
	require.Equal(t, http.StatusOK, r.StatusCode, "without a local instance the server is ready once it runs")

	require.Equal(t, 0, s.Stop(t), logs.String()) // as SIGINT
	// The logs are JSON lines, and say what happened.
	var sawDrain bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "log line %q", line)
		if strings.Contains(entry["@message"].(string), "draining") {
			sawDrain = true
		}
	}
	require.True(t, sawDrain, "shutdown drains the engine")
}

func TestBenchRunsEveryModeInProcess(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--mode", "submit", "--concurrency", "4"},
		{"--mode", "batch", "--batch", "10", "--concurrency", "2"},
		{"--mode", "e2e", "--batch", "10", "--concurrency", "2"},
		{"--mode", "fanout", "--subscribers", "4", "--rate", "300", "--feed"},
		{"--mode", "fanout", "--subscribers", "2", "--rate", "300", "--protocol", "graphql-ws"},
		{"--mode", "mcp", "--concurrency", "2"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"bench", "--duration", "400ms", "--warmup", "100ms", "--json"}, args...), &out, &errOut)
		require.Equal(t, 0, code, "%v: %s", args, errOut.String())
		var res struct {
			Mode        string
			Tasks       uint64
			TasksPerSec float64
			Errors      uint64
			Fanout      *struct {
				Connected  int
				Deliveries uint64
			}
		}
		require.NoError(t, json.NewDecoder(io.Reader(&out)).Decode(&res), "%v", args)
		require.Equal(t, args[1], res.Mode)
		require.Zero(t, res.Errors, "%v", args)
		if res.Fanout == nil {
			require.Positive(t, res.TasksPerSec, "%v", args)
			continue
		}
		require.Positive(t, res.Fanout.Connected, "%v", args)
		require.Positive(t, res.Fanout.Deliveries, "%v", args)
	}
}

func TestBenchForwardReadsARealInstanceDirectlyAndThroughTheScheduler(t *testing.T) {
	t.Parallel()
	if _, ok := chromium.Find(); !ok {
		t.Skip("chromium is not installed: skipping (apt-get install chromium)")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"bench", "--mode", "forward", "--duration", "500ms", "--warmup", "100ms", "--json"}, &out, &errOut)
	require.Equal(t, 0, code, errOut.String())
	var res struct {
		Mode    string
		Errors  uint64
		Forward struct {
			Direct, Through struct{ N int }
		}
	}
	require.NoError(t, json.NewDecoder(&out).Decode(&res))
	require.Equal(t, "forward", res.Mode)
	require.Zero(t, res.Errors)
	require.Positive(t, res.Forward.Direct.N)
	require.Equal(t, res.Forward.Direct.N, res.Forward.Through.N, "alternated: one of each per round")
}

func TestInstanceServesTheBuiltInBrowserBehindItsToken(t *testing.T) {
	t.Parallel()
	if _, ok := chromium.Find(); !ok {
		t.Skip("chromium is not installed: skipping (apt-get install chromium)")
	}
	inst := start(t, instanceLine, "instance", "--listen", "127.0.0.1:0", "--token", "s3cret")
	base := inst.URL
	// /health answers anyone, as a PinchTab bridge's does; everything else
	// wants the token.
	res, err := http.Get(base + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), `"status":"ok"`)
	res, err = http.Get(base + "/tabs")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode, "no token, no tabs")
	req, _ := http.NewRequest(http.MethodGet, base+"/tabs", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, 0, inst.Stop(t), inst.Logs.String())
}
