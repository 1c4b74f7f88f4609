package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
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

// An author outside this repository: `plugin new` writes a project in a
// temporary directory, with its own module that needs only the SDK (a replace
// directive points at this checkout's plugins/sdk: the SDK is not
// published); it tests natively, builds, passes `plugin check`, and a real
// server loads it and ranks submissions with it.
func TestAPluginScaffoldedOutsideTheRepositoryRunsInARealServer(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "urgent")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "new", "selection", dir, "--sdk", filepath.Join("..", "..", "plugins", "sdk")}, &out, &errOut), errOut.String())
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	require.NotContains(t, string(mod), "github.com/switchyard/switchyard ", "the project needs nothing of the server's module")

	goCmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), b)
		return string(b)
	}
	require.Contains(t, goCmd("test", "./..."), "ok  \texample.com/urgent")
	require.Contains(t, goCmd("doc", "github.com/switchyard/switchyard/plugins/sdk/selection"), "func Register(", "go doc shows Register on the native GOOS")

	module := filepath.Join(dir, "urgent.wasm")
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "build", filepath.Join(dir, "wasm"), "-o", module}, &out, &errOut), errOut.String())
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "check", module}, &out, &errOut), "%s\n%s", out.String(), errOut.String())

	server := startServer(t)
	res := sw(t, server, "plugin", "load", "urgent", module, "--request-timeout", serveStartTimeout.String())
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "plugin", "set", "selection", "urgent")
	require.Equal(t, 0, res.code, res.stderr)
	c := client.New(server + "/graphql")
	for i, p := range []string{"LOW", "HIGH"} {
		var sub struct{ SubmitTask struct{ ID string } }
		require.NoError(t, c.Do(context.Background(), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"agentId": "a", "priority": p, "idempotencyKey": fmt.Sprint(i),
				"action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &sub))
	}
	var plugins struct {
		Plugins []struct {
			Name          string
			Calls, Faults int64
		}
	}
	require.NoError(t, c.Do(context.Background(), `{ plugins { name calls faults } }`, nil, &plugins))
	for _, p := range plugins.Plugins {
		if p.Name == "urgent" {
			require.Positive(t, p.Calls, "the server ranked submissions with the plugin")
			require.Zero(t, p.Faults)
			return
		}
	}
	t.Fatalf("the plugin is not listed: %+v", plugins)
}

// The AssemblyScript scaffold builds with the compiler from the npm registry,
// passes its own node tests and `plugin check`, and, as the Go scaffold,
// speaks ABI version 2 with a configuration schema the host enforces.
func TestAnAssemblyScriptScaffoldBuildsTestsAndPassesCheck(t *testing.T) {
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the AssemblyScript scaffold needs node and npm")
	}
	dir := filepath.Join(t.TempDir(), "shortest")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "new", "fairness", "--lang", "assemblyscript", dir}, &out, &errOut), errOut.String())
	for _, args := range [][]string{{"install", "--no-audit", "--no-fund"}, {"test"}} {
		cmd := exec.Command(npm, args...)
		cmd.Dir = dir
		b, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm %s:\n%s", strings.Join(args, " "), b)
	}
	out.Reset()
	module := filepath.Join(dir, "shortest.wasm")
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "check", module}, &out, &errOut), "%s\n%s", out.String(), errOut.String())
	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "check", "--json", "--config", `{"maxPicks": 1}`, module}, &out, &errOut), "%s\n%s", out.String(), errOut.String())
	var rep struct {
		ConfigSchema struct {
			AdditionalProperties bool
			Properties           map[string]struct{ Type string }
		}
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), out.String())
	require.Equal(t, "integer", rep.ConfigSchema.Properties["maxPicks"].Type, "the module declares its schema (ABI v2)")
	out.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "check", "--config", `{"maxPicks": -1}`, module}, &out, &errOut))
	require.Contains(t, out.String()+errOut.String(), "config.maxPicks: must be ≥ 0", "the host checks the configuration against it")
}

func TestPluginBuildNamesTheMainPackageAndTakesFlagsAfterTheDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "p")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "new", "retry", dir, "--sdk", filepath.Join("..", "..", "plugins", "sdk")}, &out, &errOut), errOut.String())
	errOut.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "build", dir, "-o", filepath.Join(dir, "p.wasm")}, &out, &errOut))
	require.Contains(t, errOut.String(), "not a main package: it holds package p; did you mean "+filepath.Join(dir, "wasm")+"?")
	errOut.Reset()
	require.Equal(t, 2, run(context.Background(), []string{"plugin", "build", filepath.Join(dir, "wasm"), "--frobnicate"}, &out, &errOut))
	require.Contains(t, errOut.String(), "flag provided but not defined: -frobnicate")
	require.Equal(t, 2, run(context.Background(), []string{"plugin", "new", "scheduling", dir}, &out, &errOut))
}

// check, bench and simulate take --config as load and configure do: a JSON
// document inline, or @file; a bare path is refused, saying to write @.
func TestPluginToolsTakeConfigInlineOrFromAnAtFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	module := filepath.Join("..", "..", "examples", "plugins", "errcode.wasm")
	file := filepath.Join(t.TempDir(), "errcode.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"backoffFactor": 3}`), 0o644))
	var out, errOut bytes.Buffer
	for _, cfg := range []string{`{"backoffFactor": 3}`, "@" + file} {
		out.Reset()
		errOut.Reset()
		require.Equal(t, 0, run(ctx, []string{"plugin", "check", "--config", cfg, module}, &out, &errOut), "check --config %s: %s", cfg, errOut.String())
		require.Equal(t, 0, run(ctx, []string{"plugin", "simulate", "--tasks", "20", "--config", cfg, module}, &out, &errOut), "simulate --config %s: %s", cfg, errOut.String())
		require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--decisions", "20", "--config", cfg, module}, &out, &errOut), "bench --config %s: %s", cfg, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run(ctx, []string{"plugin", "check", "--config", `{"backoffFactor": 20}`, module}, &out, &errOut))
	require.Contains(t, out.String()+errOut.String(), "config.backoffFactor: must be ≤ 10", "an inline document is checked against the schema")
	errOut.Reset()
	require.Equal(t, 2, run(ctx, []string{"plugin", "check", "--config", file, module}, &out, &errOut))
	require.Contains(t, errOut.String(), "--config @"+file, "a bare path is refused, naming the @ form")
}

// plugin simulate exercises a code-driven retry plugin with a workload that
// gives its failing attempts' error codes, and prints what it and the
// built-in decided; a workload line with a code on a succeeding attempt is
// refused, naming the line.
func TestPluginSimulateShowsARetryPluginsDecisionsByErrorCode(t *testing.T) {
	t.Parallel()
	module := filepath.Join("..", "..", "examples", "plugins", "errcode.wasm")
	dir := t.TempDir()
	file := filepath.Join(dir, "workload.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(`# a selector that never matches, and an upstream that fails once
{"atMs": 0, "agent": "a", "durationMs": 50, "outcome": "transient", "code": "element_not_found"}
{"atMs": 5, "agent": "b", "durationMs": 50, "attempts": [{"outcome": "transient", "code": "upstream_503"}]}
`), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "simulate", "--workload", file, module}, &out, &errOut), errOut.String())
	require.NotContains(t, out.String(), "NOTE:")
	require.Regexp(t, `(?m)^tasks parked +0 +1$`, out.String())
	require.Regexp(t, `(?m)^tasks failed +1 +0$`, out.String())
	require.Regexp(t, `(?m)^code element_not_found +plugin +built-in\n  failed attempts +1 +4$`, out.String())
	require.Regexp(t, `(?m)^code upstream_503 +plugin +built-in\n  failed attempts +1 +1\n  retries +1 +1$`, out.String())

	out.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "simulate", "--tasks", "50", module}, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "NOTE: the plugin's retry policy was never asked in this run")

	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"atMs": 0, "agent": "a", "durationMs": 50, "code": "upstream_503"}`+"\n"), 0o644))
	out.Reset()
	errOut.Reset()
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "simulate", "--workload", bad, module}, &out, &errOut))
	require.Contains(t, errOut.String(), `workload line 1: code "upstream_503" is given for an attempt that succeeds`)
}
