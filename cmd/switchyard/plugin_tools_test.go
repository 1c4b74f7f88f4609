package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/plugintest"
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

	// --allow-faults: a loaded machine may take a decision past its deadline
	// (see below), which fails a bench; this test is about the figures.
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--json", "--allow-faults", "--decisions", "200", module}, &out, &errOut), errOut.String())
	rep := decodeBench(t, out.Bytes())
	require.Equal(t, "fair-share", rep.Builtin)
	require.Equal(t, int64(10*time.Millisecond), rep.DeadlineNs, "the server's default plugins.deadline")
	require.Equal(t, int64(2500*time.Microsecond), rep.DecisionCPUNs, "the server's default plugins.decisionCPU")
	require.Equal(t, int64(5_000_000), rep.DecisionFuel, "the server's default plugins.decisionFuel")
	require.False(t, rep.Names || rep.Details, "drr asks for no names or details, and is sent none")
	require.Len(t, rep.Cases, 9)
	for _, c := range rep.Cases {
		require.LessOrEqual(t, c.Native.P50Ns, c.Native.P99Ns, c.Name)
		require.InDelta(t, c.Native.P50Ns/float64(c.Tasks), c.Native.PerTaskNs, 1e-9, c.Name)
		if c.Plugin.Decisions == 0 || c.Plugin.P50Ns == 0 || c.Native.P50Ns == 0 {
			// A loaded machine may take the plugin past its deadline; a
			// clock that did not move over a decision gives no median:
			// either way there is no ratio.
			require.Zero(t, c.Ratio, c.Name)
			continue
		}
		require.LessOrEqual(t, c.Plugin.P50Ns, c.Plugin.P99Ns, c.Name)
		// The ratio and the cost per task are the medians', which a few
		// slow decisions do not swing as they swing the means.
		require.InEpsilon(t, c.Plugin.P50Ns/c.Native.P50Ns, c.Ratio, 1e-9, c.Name)
		require.InDelta(t, c.Plugin.P50Ns/float64(c.Tasks), c.Plugin.PerTaskNs, 1e-9, c.Name)
	}
	// Each case's fuel is its own (fuel is deterministic): drr's one slot
	// over 64 candidates costs more than 8 or 64 slots over them, which
	// the bench decides after it; and ABI.md quotes the bench's figure.
	require.Equal(t, "fairness/cands=64/slots=64", rep.Cases[5].Name)
	require.Less(t, rep.Cases[4].Fuel, rep.Cases[3].Fuel, "%s after %s", rep.Cases[4].Name, rep.Cases[3].Name)
	doc, err := os.ReadFile(filepath.Join("..", "..", "plugins", "ABI.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(`over\s+64\s+candidates\s+with\s+64\s+slots,[^;]*\bdrr\s+([\d.]+)\s+million`).FindStringSubmatch(string(doc))
	require.NotNil(t, m, "ABI.md quotes drr's fuel over 64 candidates with 64 slots")
	quoted, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	require.InEpsilon(t, quoted*1e6, float64(rep.Cases[5].Fuel), 0.2, "ABI.md quotes %s million, the bench measures %d", m[1], rep.Cases[5].Fuel)
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--allow-faults", "--decisions", "20", module}, &out, &errOut), errOut.String())
	require.Regexp(t, `(?m)^case +p50 +p99 +p50 per task +ratio$`, out.String())
	require.Contains(t, out.String(), "each decision: deadline 10ms, CPU time 2.5ms, 5000000 fuel; sent no names or details (the module asks for none)")

	// --candidates benches up to a server's engine.fairnessCandidates, as
	// plugin check --candidates checks at it.
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--json", "--allow-faults", "--decisions", "10", "--candidates", "100", module}, &out, &errOut), errOut.String())
	var names []string
	for _, c := range decodeBench(t, out.Bytes()).Cases {
		names = append(names, c.Name)
	}
	require.Equal(t, []string{
		"fairness/cands=16/slots=1", "fairness/cands=16/slots=8", "fairness/cands=16/slots=64",
		"fairness/cands=64/slots=1", "fairness/cands=64/slots=8", "fairness/cands=64/slots=64",
		"fairness/cands=100/slots=1", "fairness/cands=100/slots=8", "fairness/cands=100/slots=64",
	}, names)
	require.Equal(t, 2, run(ctx, []string{"plugin", "bench", "--candidates", "2000", module}, &out, &errOut))
}

// benchReport is `plugin bench --json`, as a tool reads it.
type benchReport struct {
	Builtin       string
	DeadlineNs    int64
	DecisionCPUNs int64
	DecisionFuel  int64
	Names         bool
	Details       bool
	Faults        map[string]uint64
	Fallbacks     uint64
	Quarantines   uint64
	Cases         []struct {
		Name           string
		Tasks          int
		Plugin, Native struct {
			Decisions, Faulted      int
			Faults                  map[string]int
			P50Ns, P99Ns, PerTaskNs float64
		}
		Ratio  float64
		Fuel   uint64
		WarmUp struct {
			Decisions, Faulted int
			Faults             map[string]int
		}
	}
}

func decodeBench(t *testing.T, b []byte) benchReport {
	t.Helper()
	var rep benchReport
	require.NoError(t, json.Unmarshal(b, &rep), string(b))
	return rep
}

// spinModule is a fairness plugin (ABI version 1) written straight in the
// binary format, so small that it compiles at once even under -race: it
// answers the load's smoke decision (8 candidates) with no opinion and
// spins forever over more, as a policy with a data-dependent runaway loop.
func spinModule() []byte {
	leb := func(v int64) []byte { // signed LEB128
		var b []byte
		for {
			c := byte(v & 0x7F)
			v >>= 7
			if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
				return append(b, c)
			}
			b = append(b, c|0x80)
		}
	}
	sect := func(id byte, parts ...[]byte) []byte { // every section here is under 128 bytes
		b := bytes.Join(parts, nil)
		return append([]byte{id, byte(len(b))}, b...)
	}
	body := func(code ...[]byte) []byte {
		b := append([]byte{0}, bytes.Join(code, nil)...) // no locals
		b = append(b, 0x0B)
		return append([]byte{byte(len(b))}, b...)
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	const arena = 64 << 10 // the arena: the second page
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		sect(1, []byte{3, 0x60, 0, 1, 0x7F, 0x60, 1, 0x7F, 1, 0x7E, 0x60, 4, 0x7E, 0x7E, 0x7F, 0x7F, 1, 0x7F}),
		sect(3, []byte{3, 0, 1, 2}),
		sect(5, []byte{1, 0, 2}), // 2 pages
		sect(7, []byte{4}, name("memory"), []byte{2, 0}, name("abi_version"), []byte{0, 0},
			name("arena"), []byte{0, 1}, name("fairness_pick"), []byte{0, 2}),
		sect(10, []byte{3},
			body([]byte{0x41, 1}),                               // abi_version: 1
			body(append([]byte{0x42}, leb(arena<<32|arena)...)), // arena: ptr << 32 | len
			body(append([]byte{0x41}, leb(arena+8)...), // the header's count
				[]byte{0x28, 2, 0, 0x41, 9, 0x49, 0x04, 0x40, 0x41, 0, 0x0F, 0x0B}, // ≤ 8: return 0
				[]byte{0x03, 0x40, 0x0C, 0, 0x0B, 0x41, 0})),                       // else loop forever
	}, nil)
}

// A decision the server would abandon is abandoned by the bench too: under
// the server's deadline (--deadline, as plugins.deadline) it is counted as
// a deadline fault, by kind, as the server counts it, and not timed as a
// merely slow one. The fuel budget (--fuel, as plugins.decisionFuel) and
// the CPU time (--cpu, as plugins.decisionCPU) are set far out (a quarter
// of a second of spinning, a minute), so that the deadline ends the loop.
// It runs alone (not in parallel: the parallel tests wait until it is
// done), so that the machine's other work is the test binary's own.
func TestPluginBenchAbandonsADecisionPastTheDeadline(t *testing.T) {
	ctx := context.Background()
	module := filepath.Join(t.TempDir(), "spin.wasm")
	require.NoError(t, os.WriteFile(module, spinModule(), 0o644))
	args := []string{"plugin", "bench", "--decisions", "10", "--deadline", "2ms", "--cpu", "1m", "--fuel", "200000000", module}
	var out, errOut bytes.Buffer
	// A plugin that faults fails the bench, as it fails plugin check; the
	// report is printed all the same.
	require.Equal(t, 1, run(ctx, append(args, "--json"), &out, &errOut), errOut.String())
	require.Equal(t, "switchyard plugin: the plugin faulted (DEADLINE 18): the fallback answered 99 of its decisions; pass --allow-faults when that is expected\n", errOut.String())
	rep := decodeBench(t, out.Bytes())
	require.Equal(t, int64(2*time.Millisecond), rep.DeadlineNs)
	require.Equal(t, int64(time.Minute), rep.DecisionCPUNs)
	require.Equal(t, int64(200_000_000), rep.DecisionFuel)
	require.Len(t, rep.Cases, 9)
	for _, c := range rep.Cases {
		// Each case starts with the breaker reset: its first timed decision
		// is the plugin's, runs past the deadline and quarantines it; the
		// fallback answers the rest.
		require.Zero(t, c.Plugin.Decisions, c.Name)
		require.Equal(t, 10, c.Plugin.Faulted, c.Name)
		require.Equal(t, map[string]int{"deadline": 1, "fallback": 9}, c.Plugin.Faults, c.Name)
		require.Zero(t, c.Plugin.P50Ns, c.Name)
		require.Zero(t, c.Ratio, c.Name)
		require.Equal(t, 10, c.Native.Decisions, c.Name)
		// Its warm-up (a tenth as many: one decision) too is reported.
		require.Zero(t, c.WarmUp.Decisions, c.Name)
		require.Equal(t, 1, c.WarmUp.Faulted, c.Name)
		require.Equal(t, map[string]int{"deadline": 1}, c.WarmUp.Faults, c.Name)
	}
	// The totals are the cases' sums: one in each case's warm-up, one in
	// its timed decisions; the fallback answered all 99.
	require.Equal(t, map[string]uint64{"deadline": 18}, rep.Faults)
	require.Equal(t, uint64(18), rep.Quarantines)
	require.Equal(t, uint64(99), rep.Fallbacks)

	// Unless the faults were expected.
	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, run(ctx, append(args, "--allow-faults"), &out, &errOut), errOut.String())
	require.Contains(t, out.String(), "each decision: deadline 2ms, CPU time 1m0s, 200000000 fuel")
	require.Regexp(t, `fairness/cands=16/slots=1 +FAULTED: all 10 decisions fell back \(DEADLINE 1, FALLBACK 9; native p50 \d+ ns\)`, out.String())
	require.Contains(t, out.String(), "WARNING: the fallback answered 99 decisions, none in the plugin's figures (90 timed, 9 in the warm-ups); the plugin faulted: DEADLINE 18; a server abandons a decision past its deadline (2ms)")

	for _, bad := range [][]string{{"--deadline", "500us"}, {"--deadline", "0"}, {"--fuel", "-1"}, {"--decisions", "0"}} {
		errOut.Reset()
		require.Equal(t, 2, run(ctx, append([]string{"plugin", "bench", module}, bad...), &out, &errOut), "%v", bad)
		require.Contains(t, errOut.String(), "--deadline at least 1ms (as plugins.deadline)", "%v", bad)
	}
}

// A module that reads details (ABI v2) is benched with them: labelsel reads
// each task's labels and session and its agent's labels, and burns fuel for
// every task it reads; without details it would rank everything FIFO for
// next to nothing. vip reads names only, and drr (above) neither.
func TestPluginBenchSendsTheDetailsAModuleReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bench := func(file string) (benchReport, string) {
		module := filepath.Join("..", "..", "examples", "plugins", file)
		var out, errOut bytes.Buffer
		// --allow-faults: a loaded machine may take a decision past its
		// deadline; this test is about what is sent.
		require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--json", "--allow-faults", "--decisions", "20", module}, &out, &errOut), errOut.String())
		rep := decodeBench(t, out.Bytes())
		out.Reset()
		require.Equal(t, 0, run(ctx, []string{"plugin", "bench", "--allow-faults", "--decisions", "5", module}, &out, &errOut), errOut.String())
		return rep, out.String()
	}
	rep, text := bench("labelsel.wasm")
	require.True(t, rep.Names && rep.Details)
	require.Contains(t, text, "sent names and details (ABI v2)")
	require.Equal(t, "selection/tasks=1000", rep.Cases[2].Name)
	// Fuel is deterministic: the details cost about 3,500 units a task;
	// without them the most one decision burnt was the load's smoke
	// decision's, about 30,000.
	require.Greater(t, rep.Cases[2].Fuel, uint64(1000*1000), "labelsel read the details of 1,000 tasks")
	require.Greater(t, rep.Cases[2].Fuel, 5*rep.Cases[1].Fuel/2, "and more of them than of 100 tasks")

	rep, text = bench("vip.wasm")
	require.True(t, rep.Names)
	require.False(t, rep.Details)
	require.Contains(t, text, "sent names (ABI v2; the module asks for no details)")
}

func TestPluginCheckExitsOneForABrokenModule(t *testing.T) {
	t.Parallel()
	bad := filepath.Join(t.TempDir(), "bad.wasm")
	require.NoError(t, os.WriteFile(bad, []byte("\x00asm\x01\x00\x00\x00garbage"), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "check", bad}, &out, &errOut))
	require.NotEmpty(t, errOut.String())
	require.Contains(t, out.String(), `load plugin "bad.wasm": invalid plugin:`, "the module is called by its file's name")
	for _, verb := range []string{"bench", "simulate"} {
		errOut.Reset()
		require.Equal(t, 1, run(context.Background(), []string{"plugin", verb, bad}, &out, &errOut))
		require.Contains(t, errOut.String(), `load plugin "bad.wasm": invalid plugin:`, verb)
	}
	out.Reset()
	errOut.Reset()
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
	scaffold := func(slot, name string) string {
		dir := filepath.Join(t.TempDir(), name)
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(context.Background(), []string{"plugin", "new", slot, "--lang", "assemblyscript", dir}, &out, &errOut), errOut.String())
		for _, args := range [][]string{{"install", "--no-audit", "--no-fund"}, {"test"}} {
			cmd := exec.Command(npm, args...)
			cmd.Dir = dir
			b, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s: npm %s:\n%s", slot, strings.Join(args, " "), b)
		}
		return dir
	}
	// The selection and retry scaffolds pass their own tests and check too.
	for _, slot := range []string{"selection", "retry"} {
		module := filepath.Join(scaffold(slot, "my"+slot), "my"+slot+".wasm")
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(context.Background(), []string{"plugin", "check", module}, &out, &errOut), "%s: %s\n%s", slot, out.String(), errOut.String())
	}
	dir := scaffold("fairness", "shortest")
	var out, errOut bytes.Buffer
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

// Outside a checkout plugin new cannot find the SDK: its usage error says
// what to give, with an example. (Not parallel: it changes the directory.)
func TestPluginNewOutsideACheckoutShowsHowToGiveTheSDK(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	require.Equal(t, 2, run(context.Background(), []string{"plugin", "new", "fairness", "p"}, &out, &errOut))
	require.Contains(t, errOut.String(), "give the plugins/sdk directory of a Switchyard checkout (for example --sdk ~/src/switchyard/plugins/sdk)")
	require.NoDirExists(t, "p", "nothing is written")
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
	// The refusal is a configuration failure, under the module's slot,
	// with its schema, and no fuel figure: no decision was made.
	text := out.String()
	require.True(t, strings.HasPrefix(text, "FAIL  retry plugin, no decision made: it refused the configuration\n"), text)
	require.Contains(t, text, `configuration schema: {"type":"object","properties":{"backoffFactor"`)
	require.Regexp(t, `(?m)^  FAIL config +the configuration does not satisfy the module's schema: config.backoffFactor: must be ≤ 10`, text)
	require.NotContains(t, text, "fuel")
	require.NotRegexp(t, `(?m)^  FAIL abi`, text)
	out.Reset()
	require.Equal(t, 1, run(ctx, []string{"plugin", "check", "--json", "--config", `{"bogus": 1}`, module}, &out, &errOut))
	var check struct {
		Slot         string
		Decided      bool
		FuelMax      *uint64
		ConfigSchema json.RawMessage
		Checks       []struct {
			Name   string
			Passed bool
			Detail string
		}
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &check), out.String())
	require.Equal(t, "retry", check.Slot)
	require.False(t, check.Decided)
	require.Nil(t, check.FuelMax, "no fuel figure when no decision ran")
	require.Contains(t, string(check.ConfigSchema), `"additionalProperties"`)
	require.Len(t, check.Checks, 1)
	require.Equal(t, "config", check.Checks[0].Name)
	require.False(t, check.Checks[0].Passed)
	require.Contains(t, check.Checks[0].Detail, "config.bogus: unknown field")
	out.Reset()
	errOut.Reset()
	require.Equal(t, 2, run(ctx, []string{"plugin", "check", "--config", file, module}, &out, &errOut))
	require.Contains(t, errOut.String(), "--config @"+file, "a bare path is refused, naming the @ form")
}

// plugin bench and plugin simulate given a document the module's schema
// refuses report it as plugin check does, with one report: the slot, the
// field and the schema, exit status 1, and no figures (nothing was timed or
// simulated), in text and in JSON.
func TestPluginBenchAndSimulateReportARefusedConfigurationAsCheckDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	module := filepath.Join("..", "..", "examples", "plugins", "errcode.wasm")
	for _, asJSON := range []bool{false, true} {
		args := func(verb string) []string {
			a := []string{"plugin", verb, "--config", `{"backoffFactor": 20}`}
			if verb == "bench" {
				a = append(a, "--decisions", "20")
			}
			if asJSON {
				a = append(a, "--json")
			}
			return append(a, module)
		}
		var check, checkErr bytes.Buffer
		require.Equal(t, 1, run(ctx, args("check"), &check, &checkErr))
		for _, verb := range []string{"bench", "simulate"} {
			var out, errOut bytes.Buffer
			require.Equal(t, 1, run(ctx, args(verb), &out, &errOut), "%s: %s", verb, errOut.String())
			require.Equal(t, check.String(), out.String(), "%s reports the refusal as check does", verb)
			require.Equal(t, strings.Replace(checkErr.String(), "plugin check", "plugin "+verb, 1), errOut.String())
			text := out.String()
			if asJSON {
				var rep struct {
					Slot         string
					Decided      bool
					ConfigSchema json.RawMessage
					Checks       []struct{ Name, Detail string }
				}
				require.NoError(t, json.Unmarshal(out.Bytes(), &rep), text)
				require.Equal(t, "retry", rep.Slot)
				require.False(t, rep.Decided)
				require.Contains(t, string(rep.ConfigSchema), `"backoffFactor"`)
				require.Len(t, rep.Checks, 1)
				require.Equal(t, "config", rep.Checks[0].Name)
				require.Contains(t, rep.Checks[0].Detail, "config.backoffFactor: must be ≤ 10")
				continue
			}
			require.True(t, strings.HasPrefix(text, "FAIL  retry plugin, no decision made: it refused the configuration\n"), text)
			require.Contains(t, text, `configuration schema: {"type":"object","properties":{"backoffFactor"`)
			require.Regexp(t, `(?m)^  FAIL config +the configuration does not satisfy the module's schema: config.backoffFactor: must be ≤ 10`, text)
			require.NotContains(t, text, "p50", "nothing was timed")
		}
	}
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

// plugin check --config reports a configuration under which the module's
// smoke decision faults, where it decides under none, as a refused
// configuration (the config check fails, the abi check is not run); a
// module that faults under no configuration too fails the abi check.
func TestPluginCheckBlamesAConfigurationUnderWhichTheSmokeDecisionFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	spinner, always := filepath.Join(dir, "spinner.wasm"), filepath.Join(dir, "always.wasm")
	require.NoError(t, os.WriteFile(spinner, plugintest.SpinOnConfig(), 0o644))
	require.NoError(t, os.WriteFile(always, plugintest.SpinAlways(), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(ctx, []string{"plugin", "check", "--config", `{"spin": true}`, spinner}, &out, &errOut), errOut.String())
	text := out.String()
	require.True(t, strings.HasPrefix(text, "FAIL  fairness plugin, not checked: its smoke decision faults under the configuration\n"), text)
	require.Regexp(t, `(?m)^  FAIL config +the module's smoke decision faults under the configuration \(fuel: ran out of fuel`, text)
	require.NotRegexp(t, `(?m)^  FAIL abi`, text)
	out.Reset()
	require.Equal(t, 1, run(ctx, []string{"plugin", "check", "--config", `{"quiet": true}`, always}, &out, &errOut), errOut.String())
	text = out.String()
	require.True(t, strings.HasPrefix(text, "FAIL  the module did not load"), text)
	require.Regexp(t, `(?m)^  FAIL abi +.*smoke decision: fuel: ran out of fuel`, text)
}

// plugin simulate of a plugin that faults once at work: the built-in
// answers its decisions, the report heads its column plugin* and says so
// first, and the run exits 1 as bench and check do, unless --allow-faults.
func TestPluginSimulateExitsOneWhenThePluginFaulted(t *testing.T) {
	t.Parallel()
	module := filepath.Join(t.TempDir(), "trap.wasm")
	require.NoError(t, os.WriteFile(module, plugintest.TrapAfter(3), 0o644))
	var out, errOut bytes.Buffer
	require.Equal(t, 1, run(context.Background(), []string{"plugin", "simulate", "--tasks", "100", module}, &out, &errOut))
	require.Regexp(t, `^switchyard plugin: the plugin faulted \d+ times: the built-in answered \d+ of its \d+ decisions; pass --allow-faults when that is expected\n$`, errOut.String())
	text := out.String()
	require.Regexp(t, `^WARNING: the plugin faulted \d+ times and the built-in answered \d+ of the \d+\n`, text)
	require.Regexp(t, `(?m)^ +plugin\* +built-in$`, text)
	require.NotRegexp(t, `(?m)^ +plugin +built-in$`, text, "the column is not the plugin's alone")

	out.Reset()
	errOut.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "simulate", "--json", "--allow-faults", "--tasks", "100", module}, &out, &errOut), errOut.String())
	var sim struct{ Calls, Faults, Fallbacks uint64 }
	require.NoError(t, json.Unmarshal(out.Bytes(), &sim))
	require.Positive(t, sim.Faults)
	require.Positive(t, sim.Fallbacks)
	require.LessOrEqual(t, sim.Fallbacks, sim.Calls)
}

// plugin new refuses a directory whose name cannot name the project (the
// Go module, the npm package, the .wasm file, the plugin), and a --module
// that is no module path, as usage errors, writing nothing; and says "an
// assemblyscript" plugin.
func TestPluginNewRefusesANameThatCannotNameTheProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sdk, err := filepath.Abs(filepath.Join("..", "..", "plugins", "sdk"))
	require.NoError(t, err)
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	for _, c := range []struct{ name, lang string }{{"bad name", "go"}, {"-x", "go"}, {"Mixed", "assemblyscript"}, {"my.sel", "go"}} {
		errOut.Reset()
		require.Equal(t, 2, run(ctx, []string{"plugin", "new", "selection", "--lang", c.lang, "--sdk", sdk, filepath.Join(dir, c.name)}, &out, &errOut), c.name)
		require.Contains(t, errOut.String(), fmt.Sprintf("%q is not a valid name for a plugin project", c.name))
		require.Contains(t, errOut.String(), "use letters, digits, '-' and '_'")
		require.NoDirExists(t, filepath.Join(dir, c.name))
	}
	errOut.Reset()
	require.Equal(t, 2, run(ctx, []string{"plugin", "new", "selection", "--sdk", sdk, "--module", "example.com/bad name", filepath.Join(dir, "good")}, &out, &errOut))
	require.Contains(t, errOut.String(), `--module "example.com/bad name" is not a valid name`)
	require.NoDirExists(t, filepath.Join(dir, "good"))

	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "new", "retry", "--lang", "assemblyscript", filepath.Join(dir, "my-retry-v2")}, &out, &errOut), errOut.String())
	require.True(t, strings.HasPrefix(out.String(), "wrote an assemblyscript retry plugin in "), out.String())
	out.Reset()
	require.Equal(t, 0, run(ctx, []string{"plugin", "new", "retry", "--sdk", sdk, filepath.Join(dir, "My_Retry")}, &out, &errOut), errOut.String())
	require.True(t, strings.HasPrefix(out.String(), "wrote a go retry plugin in "), out.String())
	mod, err := os.ReadFile(filepath.Join(dir, "My_Retry", "go.mod"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(mod), "module example.com/My_Retry\n"), string(mod))
}
