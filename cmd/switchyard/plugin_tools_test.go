package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPluginToolsCheckBenchAndSimulateAModule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	module := filepath.Join("..", "..", "examples", "plugins", "drr.wasm")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"plugin", "check", "--json", module}, &out, &errOut), errOut.String())
	var check struct {
		Slot   string
		Passed bool
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &check))
	require.True(t, check.Passed)
	require.Equal(t, "fairness", check.Slot)

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "simulate", "--json", "--tasks", "200", module}, &out, &errOut), errOut.String())
	var sim struct{ Plugin, Builtin struct{ Tasks int } }
	require.NoError(t, json.Unmarshal(out.Bytes(), &sim))
	require.Equal(t, 200, sim.Plugin.Tasks)
	require.Equal(t, 200, sim.Builtin.Tasks)

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--json", "--decisions", "200", module}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), `"builtin"`)
}

func TestPluginCheckExitsOneForABrokenModule(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.wasm")
	require.NoError(t, os.WriteFile(bad, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "check", bad}, &out, &errOut))
	require.NotEmpty(t, errOut.String())
	require.Equal(t, 2, run(context.Background(), []string{"plugin", "check"}, &out, &errOut), "no module is a usage error")
	require.Equal(t, 2, run(context.Background(), []string{"plugin", "frobnicate"}, &out, &errOut))
}

func TestPluginSimulateReplaysAWorkloadOverEveryLane(t *testing.T) {
	t.Parallel()
	module := filepath.Join("..", "..", "examples", "plugins", "drr.wasm")
	var w strings.Builder
	for i := range 400 { // two agents, 400 submissions over 200 ms, every default lane
		fmt.Fprintf(&w, `{"atMs": %.1f, "agent": "%s", "durationMs": %d, "lane": "%s"}`+"\n",
			float64(i)/2, []string{"alice", "bob"}[i%2], 20+i%5*20, []string{"main", "team", "subagent", "cron"}[i%4])
	}
	file := filepath.Join(t.TempDir(), "workload.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(w.String()), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "simulate", "--json", "--workload", file, module}, &out, &errOut), errOut.String())
	var sim struct{ Plugin, Builtin struct{ Tasks int } }
	require.NoError(t, json.Unmarshal(out.Bytes(), &sim))
	require.Equal(t, 400, sim.Plugin.Tasks)

	// Past a bound: a clear error, at once.
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "simulate", "--max-steps", "10", "--workload", file, module}, &out, &errOut))
	require.Contains(t, errOut.String(), "simulation limit reached")
}
