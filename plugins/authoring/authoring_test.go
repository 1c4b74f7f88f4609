package authoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/simulate"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/authoring"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

// rt is shared by the tests that need no fault reasons, and keeps every
// module it loaded compiled, so each module compiles once per run however
// many checks load it; sloppy is the test guest, built once.
var (
	rt     *host.Runtime
	sloppy []byte
)

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "authoring-test")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "sloppy.wasm")
	if err := authoring.Build(context.Background(), filepath.Join("testdata", "sloppy"), out); err != nil {
		return 0, err
	}
	if sloppy, err = os.ReadFile(out); err != nil {
		return 0, err
	}
	// The cache the other plugin test packages use; no timing (no deadline,
	// CPU time or stall a loaded machine could make a decision miss, as in
	// the checks' own runtimes); the default budget, which the examples fit
	// at the default candidate count.
	cfg := host.Config{Deadline: time.Minute, DecisionCPU: time.Minute, BreakerStall: time.Minute, AwaitRebuilds: true, KeepCompiled: 16}
	if uc, err := os.UserCacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(uc, "switchyard", "wazero-test")
	}
	if rt, err = host.New(cfg); err != nil {
		return 0, err
	}
	defer rt.Close(context.Background())
	return m.Run(), nil
}

func example(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "plugins", name))
	require.NoError(t, err)
	return b
}

func failed(r *authoring.CheckReport) []string {
	var names []string
	for _, c := range r.Checks {
		if !c.Passed {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestCheckPassesTheBuiltinsAndTheExamples(t *testing.T) {
	t.Parallel()
	for _, m := range builtin.Modules() {
		rep, err := authoring.Check(context.Background(), m.Wasm, authoring.Options{Runtime: rt})
		require.NoError(t, err)
		require.True(t, rep.Passed, "%s:\n%s", m.Name, rep)
		checks := 7
		switch m.Slot {
		case policy.SlotFairness:
			checks = 9 // and holds, dry-run
		case policy.SlotRetry:
			checks = 8 // and budget
		}
		require.Len(t, rep.Checks, checks)
		require.Equal(t, m.Slot.String(), rep.Slot)
		require.NotZero(t, rep.FuelMax)
	}
	// A stateful Go example and the AssemblyScript one. (Each module costs
	// seconds to compile on a cold cache, so not every example is here.)
	for _, ex := range []struct{ file, config string }{{"wfq.wasm", ""}, {"asc.wasm", ""}} {
		rep, err := authoring.Check(context.Background(), example(t, ex.file), authoring.Options{Runtime: rt, Config: []byte(ex.config)})
		require.NoError(t, err)
		require.True(t, rep.Passed, "%s:\n%s", ex.file, rep)
	}
}

// The report's header says which policy_flags the module set, as the ABI
// names them: whether it may hold, and which tables it reads.
func TestCheckHeaderNamesThePolicyFlags(t *testing.T) {
	t.Parallel()
	for _, ex := range []struct{ file, header string }{
		{"ratecap.wasm", "ok  fairness plugin (policy_flags: NAMES, HOLDS), fuel per decision up to "},
		{"labelsel.wasm", "ok  selection plugin (policy_flags: STATELESS, NAMES, DETAILS), fuel per decision up to "},
		{"wfq.wasm", "ok  fairness plugin (policy_flags: none), fuel per decision up to "},
	} {
		rep, err := authoring.Check(context.Background(), example(t, ex.file), authoring.Options{Runtime: rt})
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(rep.String(), ex.header), "%s:\n%s", ex.file, rep)
		if ex.file == "ratecap.wasm" { // it holds, and says so
			require.Contains(t, rep.String(), "ok   holds         held 300 of 300 decisions")
		}
	}
}

func TestCheckFindsEachMistake(t *testing.T) {
	t.Parallel()
	for mode, want := range map[string][]string{
		"ok":       nil,
		"stateful": {authoring.CheckDeterministic, authoring.CheckDryRun}, // its preview changes what it decides next
		"big":      {authoring.CheckLarge},
		"empty":    {authoring.CheckEmpty},
		"sticky":   {authoring.CheckConfig},
		"wide":     {authoring.CheckLarge},
		"greedy":   {authoring.CheckLarge},
		"holder":   {authoring.CheckHolds},
		"preview":  {authoring.CheckDryRun},
	} {
		// A private runtime, so that the report carries the fault reasons;
		// as many candidates as engine.fairnessCandidates allows, where
		// "big" goes wrong.
		rep, err := authoring.Check(context.Background(), sloppy, authoring.Options{Config: []byte(`{"mode": "` + mode + `"}`), Candidates: 1000})
		require.NoError(t, err)
		require.Equal(t, want, failed(rep), "mode %s:\n%s", mode, rep)
		require.Equal(t, want == nil, rep.Passed)
		if mode == "holder" {
			require.Contains(t, rep.String(), "FAIL holds         held 3 of 300 decisions over varied input and 50 of 50 over one candidate (hints 250–250 ms), yet does not declare HOLDS in policy_flags")
			require.Contains(t, rep.String(), "register with sdk.Holds")
		}
		if mode == "preview" {
			require.Contains(t, rep.String(), "FAIL dry-run       decision 1 of 100 answered [")
			require.Contains(t, rep.String(), "with DRY_RUN and [0 1")
		}
		if mode == "big" {
			require.Contains(t, rep.String(), "invalid: fairness_pick picked candidate 1000 of 1000")
			require.Contains(t, rep.String(), "FAIL large         3 decisions fell back to the built-in (faults: invalid 3); last fault: invalid: ")
		}
		if mode == "wide" { // the two 64-slot decisions only
			require.Contains(t, rep.String(), "FAIL large         2 decisions fell back to the built-in (faults: invalid 2); last fault: invalid: ")
		}
		if mode == "greedy" {
			require.Contains(t, rep.String(), "FAIL large         3 decisions fell back to the built-in (faults: fuel 3); last fault: fuel: ran out of fuel")
		}
	}
}

// A retry module that answers "retry" at or past the attempt budget it is
// given fails the budget check: the engine refuses such a retry, so the
// module does not do what its author meant. One that parks there passes.
func TestCheckFailsARetryPluginThatRetriesPastTheBudget(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Check(context.Background(), plugintest.RetryAnswer(1), authoring.Options{Runtime: rt})
	require.NoError(t, err)
	require.False(t, rep.Passed, rep.String())
	require.Equal(t, []string{authoring.CheckBudget}, failed(rep))
	require.Contains(t, rep.String(), "FAIL budget        retried 60 of 60 failures at or past their attempt budget (the first at attempt 1 of max_attempts 1)")
	require.Contains(t, rep.String(), "answer park (2) or fail (3) when attempt ≥ max_attempts")

	rep, err = authoring.Check(context.Background(), plugintest.RetryAnswer(2), authoring.Options{Runtime: rt})
	require.NoError(t, err)
	require.True(t, rep.Passed, rep.String())
	require.Contains(t, rep.String(), "ok   budget        none of 60 failures at or past their attempt budget retried")
}

// A module over the server's size limit (plugins.maxWasmBytes) loads here
// but not on a server: the size check fails, naming the limit, whether
// the module loaded or not; one within it passes, saying so.
func TestCheckReportsAModuleOverTheServersSizeLimit(t *testing.T) {
	t.Parallel()
	big := plugintest.Padded(plugintest.RetryAnswer(2), 5000)
	rep, err := authoring.Check(context.Background(), big, authoring.Options{Runtime: rt, MaxWasmBytes: 4096})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Equal(t, []string{authoring.CheckSize}, failed(rep))
	require.Contains(t, rep.String(), fmt.Sprintf("FAIL size          the module is %d bytes; a server refuses modules over plugins.maxWasmBytes, 4096 here", len(big)))

	rep, err = authoring.Check(context.Background(), plugintest.Padded([]byte("\x00asm\x01\x00\x00\x00"), 5000), authoring.Options{Runtime: rt, MaxWasmBytes: 4096})
	require.NoError(t, err)
	require.Equal(t, []string{authoring.CheckABI, authoring.CheckSize}, failed(rep), "a module that does not load is over the limit too")

	rep, err = authoring.Check(context.Background(), big, authoring.Options{Runtime: rt})
	require.NoError(t, err)
	require.True(t, rep.Passed, rep.String())
	require.Contains(t, rep.String(), fmt.Sprintf("ok   size          %d bytes, within plugins.maxWasmBytes (16777216 here", len(big)))
}

// A module that faults only under DRY_RUN (a plan's preview) passes every
// other check: the dry-run check finds it, and says what the server does
// with such a fault.
func TestCheckFindsAModuleThatFaultsOnlyInPreviews(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Check(context.Background(), plugintest.HoldSpinningInDryRun(), authoring.Options{})
	require.NoError(t, err)
	require.Equal(t, []string{authoring.CheckDryRun}, failed(rep), "%s", rep)
	require.Contains(t, rep.String(), "FAIL dry-run       decision 1 of 100 with DRY_RUN (a plan's preview) fell back to the built-in: it faulted: fuel: ran out of fuel")
	require.Contains(t, rep.String(), "not against the breaker")

	rep, err = authoring.Check(context.Background(), plugintest.HoldAlways(), authoring.Options{})
	require.NoError(t, err)
	require.True(t, rep.Passed, "%s", rep)
	require.Contains(t, rep.String(), "ok   dry-run       100 varied decisions with DRY_RUN, each then made for real: the same answers, no fault")
}

func TestCheckReportsAModuleThatDoesNotLoad(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Check(context.Background(), []byte("\x00asm\x01\x00\x00\x00"), authoring.Options{Runtime: rt})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Equal(t, []string{authoring.CheckABI}, failed(rep))
	require.Contains(t, rep.Checks[0].Detail, "missing export abi_version")
	require.True(t, strings.HasPrefix(rep.String(), "FAIL  the module did not load, no decision made\n"), rep.String())
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"name":"abi","passed":false`)
	require.NotContains(t, string(raw), "fuelMax")
}

func TestBenchComparesWithTheBuiltinOfTheSameSlot(t *testing.T) {
	t.Parallel()
	m, _ := builtin.ForSlot(2) // fairness
	rep, err := authoring.Bench(context.Background(), m.Wasm, authoring.BenchOptions{Options: authoring.Options{Runtime: rt}, Decisions: 50})
	require.NoError(t, err)
	require.Equal(t, "fairness", rep.Slot)
	require.Equal(t, "fair-share", rep.Builtin)
	require.Len(t, rep.Cases, 9)
	require.Empty(t, rep.Faults)
	require.Zero(t, rep.Fallbacks)
	require.Equal(t, time.Minute, time.Duration(rep.DeadlineNs), "a runtime given keeps its deadline")
	for _, c := range rep.Cases {
		require.Equal(t, 50, c.Plugin.Decisions)
		require.Empty(t, c.Plugin.Faults, c.Name)
		require.Positive(t, c.Plugin.P50Ns, c.Name)
		require.Positive(t, c.Native.P50Ns, c.Name)
		require.LessOrEqual(t, c.Plugin.P50Ns, c.Plugin.P99Ns, c.Name)
		require.Positive(t, c.Ratio, c.Name)
		require.Equal(t, c.Slots, c.Tasks)
		require.NotZero(t, c.Fuel)
		require.Equal(t, authoring.WarmUp{Decisions: 5}, c.WarmUp, c.Name)
	}
	// Each case reports its own fuel, not the most over the cases so far:
	// one slot over 64 candidates costs less than 64 slots over 16, which
	// the bench decides before it.
	fuel := map[string]uint64{}
	for _, c := range rep.Cases {
		fuel[c.Name] = c.Fuel
	}
	require.Less(t, fuel["fairness/cands=64/slots=1"], fuel["fairness/cands=16/slots=64"])
	require.Less(t, fuel["fairness/cands=256/slots=1"], fuel["fairness/cands=64/slots=64"])
	// And the figures plugins/ABI.md quotes ("Cost model") are the bench's.
	doc, err := os.ReadFile(filepath.Join("..", "ABI.md"))
	require.NoError(t, err)
	quoted := regexp.MustCompile(`fair-share\s+about\s+([\d,]+)\s+over\s+64\s+candidates\s+with\s+1\s+slot,\s+([\d,]+)\s+with\s+8\s+slots,\s+([\d,]+)\s+with\s+64\s+slots`).FindStringSubmatch(string(doc))
	require.NotNil(t, quoted, "ABI.md quotes the built-in's fuel")
	for i, slots := range []int{1, 8, 64} {
		requireAbout(t, quoted[i+1], fuel[fmt.Sprintf("fairness/cands=64/slots=%d", slots)], "fair-share, 64 candidates, %d slots", slots)
	}
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"name":"fairness/cands=64/slots=8"`)

	r, _ := builtin.ForSlot(3) // retry
	rrep, err := authoring.Bench(context.Background(), r.Wasm, authoring.BenchOptions{Options: authoring.Options{Runtime: rt}, Decisions: 50})
	require.NoError(t, err)
	require.Len(t, rrep.Cases, 1)
	require.Contains(t, rrep.String(), "retry/varied")
	requireAbout(t, regexp.MustCompile(`backoff\s+retry\s+about\s+([\d,]+)`).FindStringSubmatch(string(doc))[1], rrep.Cases[0].Fuel, "backoff")

	s, _ := builtin.ForSlot(1) // selection
	srep, err := authoring.Bench(context.Background(), s.Wasm, authoring.BenchOptions{Options: authoring.Options{Runtime: rt}, Decisions: 20})
	require.NoError(t, err)
	require.Equal(t, "selection/tasks=1000", srep.Cases[2].Name)
	requireAbout(t, regexp.MustCompile(`priority\s+selection\s+of\s+1,000\s+tasks\s+about\s+([\d,]+)`).FindStringSubmatch(string(doc))[1], srep.Cases[2].Fuel, "priority, 1,000 tasks")
	require.Less(t, srep.Cases[0].Fuel, srep.Cases[1].Fuel, "one task costs less than 100")
}

// requireAbout requires the figure a doc quotes ("19,000") to be within
// 10% of the one measured.
func requireAbout(t *testing.T, quoted string, got uint64, what string, args ...any) {
	t.Helper()
	want, err := strconv.ParseFloat(strings.ReplaceAll(quoted, ",", ""), 64)
	require.NoError(t, err)
	require.InEpsilon(t, want, float64(got), 0.1, "%s: the doc quotes %s, the bench measures %d", fmt.Sprintf(what, args...), quoted, got)
}

func TestSimulateRunsTheWorkloadUnderThePluginAndTheBuiltin(t *testing.T) {
	t.Parallel()
	// A noisy agent queues 20 tasks; a quiet one submits one 0.5 s later.
	var subs []simulate.Submission
	for range 20 {
		subs = append(subs, simulate.Submission{Agent: "noisy", Duration: 100 * time.Millisecond})
	}
	subs = append(subs, simulate.Submission{At: 500 * time.Millisecond, Agent: "quiet", Duration: 100 * time.Millisecond})
	opts := authoring.SimulateOptions{Options: authoring.Options{Runtime: rt},
		Engine: engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}}
	rep, err := authoring.Simulate(context.Background(), example(t, "asc.wasm"), subs, opts)
	require.NoError(t, err)
	require.Len(t, rep.Plugin.Order, 21)
	require.Len(t, rep.Builtin.Order, 21)
	quiet := func(r *simulate.Report) time.Duration { return r.Agents[1].WaitP50 }
	require.Less(t, quiet(rep.Plugin), quiet(rep.Builtin), "shortest queue first serves the quiet agent sooner")
	require.Zero(t, rep.Fallbacks)
	require.Contains(t, rep.String(), "Jain's fairness index")
	require.Contains(t, rep.String(), "1.000 means\n   every such agent got exactly its share", "the report says what the index is and what 1.0 means")
	_, err = json.Marshal(rep)
	require.NoError(t, err)
}

// A configuration under which the module's configure faults (it loops
// until it runs out of its setup fuel) fails the config check with a
// detail that says configure faulted and why, not that the module refused
// the configuration, which it never answered.
func TestCheckSaysAConfigureFaultedUnderTheConfiguration(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Check(context.Background(), plugintest.ConfigureSpinsOnADocument(), authoring.Options{Runtime: rt, Config: []byte(`{"mode": "fast"}`)})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Equal(t, []string{authoring.CheckConfig}, failed(rep))
	require.Equal(t, "the module's configure faults under the configuration (fuel: ran out of fuel (20000000 units of SetupFuel)), not under none; "+
		"the checks, the bench and the simulation need a configuration the module accepts", rep.Checks[0].Detail)
}

// Check shows the schema a module declares and checks the configuration
// against it: a configuration outside it fails the config check, naming
// the field, under the module's slot and with its schema, and no fuel is
// reported, since no decision was made; a module that reads details
// (labelsel, errcode) passes with the synthetic ones.
func TestCheckShowsTheSchemaAndChecksTheConfigurationAgainstIt(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Check(context.Background(), example(t, "errcode.wasm"), authoring.Options{Runtime: rt, Config: []byte(`{"backoffFactor": 11}`)})
	require.NoError(t, err)
	require.False(t, rep.Passed)
	require.Equal(t, []string{authoring.CheckConfig}, failed(rep), "a refused configuration is a configuration failure")
	require.Len(t, rep.Checks, 1, "the other checks need a configuration the module accepts")
	require.Contains(t, rep.Checks[0].Detail, "schema: config.backoffFactor: must be ≤ 10")
	require.Equal(t, "retry", rep.Slot)
	require.False(t, rep.Decided)
	require.Zero(t, rep.FuelMax)
	require.Contains(t, string(rep.ConfigSchema), `"backoffFactor"`)
	text := rep.String()
	require.True(t, strings.HasPrefix(text, "FAIL  retry plugin, no decision made: it refused the configuration\n"), text)
	require.Contains(t, text, `configuration schema: {"type":"object"`)
	require.Regexp(t, `(?m)^  FAIL config +the configuration does not satisfy the module's schema: config.backoffFactor: must be ≤ 10`, text)
	require.NotContains(t, text, "fuel")
	require.NotContains(t, text, " abi ")
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "fuelMax", "no fuel figure when no decision ran")
	for _, file := range []string{"errcode.wasm", "labelsel.wasm"} {
		rep, err = authoring.Check(context.Background(), example(t, file), authoring.Options{Runtime: rt})
		require.NoError(t, err)
		require.True(t, rep.Passed, "%s:\n%s", file, rep)
		require.Contains(t, rep.String(), `configuration schema: {"type":"object"`)
		require.Contains(t, string(rep.ConfigSchema), `"additionalProperties":false`)
	}
}

// With Candidates set (a server's engine.fairnessCandidates), bench's
// fairness cases go up to it: the default ones below it, then it. Sloppy's
// "greedy" mode faults over more than 100 candidates only.
func TestBenchGoesUpToTheCandidatesGiven(t *testing.T) {
	t.Parallel()
	counts := func(rep *authoring.BenchReport) []int {
		var ns []int
		for i, c := range rep.Cases {
			if i%3 == 0 {
				ns = append(ns, c.Candidates)
			}
		}
		return ns
	}
	rep, err := authoring.Bench(context.Background(), sloppy, authoring.BenchOptions{
		Options: authoring.Options{Runtime: rt, Config: []byte(`{"mode": "greedy"}`), Candidates: 64}, Decisions: 10})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 6)
	require.Equal(t, []int{16, 64}, counts(rep))
	require.Zero(t, rep.Fallbacks, "%s", rep)

	rep, err = authoring.Bench(context.Background(), sloppy, authoring.BenchOptions{
		Options: authoring.Options{Runtime: rt, Config: []byte(`{"mode": "greedy"}`), Candidates: 200}, Decisions: 10})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 9)
	require.Equal(t, []int{16, 64, 200}, counts(rep))
	require.Positive(t, rep.Faults["fuel"])
	require.Contains(t, rep.String(), "; run plugin check --candidates 200, as many as the largest case that faulted")
}

// A decision that faults is not the plugin's: bench counts it as faulted
// and leaves its time out, rather than report the quick answer of the
// fallback (or of a quarantined plugin) as the plugin's speed. Sloppy's
// "greedy" mode runs out of fuel over more than 100 candidates only.
func TestBenchReportsFaultedDecisionsAsFaulted(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Bench(context.Background(), sloppy, authoring.BenchOptions{
		Options: authoring.Options{Runtime: rt, Config: []byte(`{"mode": "greedy"}`)}, Decisions: 20})
	require.NoError(t, err)
	require.Len(t, rep.Cases, 9)
	for _, c := range rep.Cases {
		if c.Candidates > 100 {
			require.Equal(t, 20, c.Plugin.Faulted, c.Name)
			// Out of fuel until the breaker quarantines it; the fallback
			// answers the rest.
			require.Positive(t, c.Plugin.Faults["fuel"], c.Name)
			require.Equal(t, 20, c.Plugin.Faults["fuel"]+c.Plugin.Faults[authoring.FaultFallback], "%s: %v", c.Name, c.Plugin.Faults)
			require.Zero(t, c.Plugin.Decisions, c.Name)
			require.Zero(t, c.Plugin.MeanNs, c.Name)
			require.Zero(t, c.Plugin.P99Ns, c.Name)
			require.Zero(t, c.Ratio, c.Name)
		} else {
			require.Zero(t, c.Plugin.Faulted, c.Name)
			require.Equal(t, 20, c.Plugin.Decisions, c.Name)
			require.Positive(t, c.Plugin.P50Ns, c.Name)
		}
	}
	require.Equal(t, []string{"fuel"}, slices.Collect(maps.Keys(rep.Faults)))
	require.Positive(t, rep.Quarantines)
	// The totals are the sum of what the cases report, their warm-ups
	// (two decisions each, not timed) included: no fault belongs to no case.
	var fuelFaults, fallbacks, warm int
	for _, c := range rep.Cases {
		require.Equal(t, 2, c.WarmUp.Decisions+c.WarmUp.Faulted, c.Name)
		if c.Candidates > 100 {
			require.Equal(t, 2, c.WarmUp.Faulted, c.Name)
			require.Equal(t, 2, c.WarmUp.Faults["fuel"]+c.WarmUp.Faults[authoring.FaultFallback], "%s: %v", c.Name, c.WarmUp.Faults)
		}
		fuelFaults += c.Plugin.Faults["fuel"] + c.WarmUp.Faults["fuel"]
		fallbacks += c.Plugin.Faulted + c.WarmUp.Faulted
		warm += c.WarmUp.Faulted
	}
	require.Equal(t, uint64(fuelFaults), rep.Faults["fuel"])
	require.Equal(t, uint64(fallbacks), rep.Fallbacks)
	require.Equal(t, 6, warm)
	require.Contains(t, rep.String(), fmt.Sprintf("WARNING: the fallback answered %d decisions, none in the plugin's figures (60 timed, 6 in the warm-ups)", fallbacks))
	require.Regexp(t, `fairness/cands=256/slots=1 +FAULTED: all 20 decisions fell back \(FUEL \d+, FALLBACK \d+; native p50 \d+ ns\)`, rep.String())
	// plugin check, by default over 64 candidates, would pass it: the
	// advice says to check over as many as the case that faulted.
	require.Contains(t, rep.String(), "; run plugin check --candidates 256, as many as the largest case that faulted")
	raw, err := json.Marshal(rep.Cases[len(rep.Cases)-1])
	require.NoError(t, err)
	require.Regexp(t, `"plugin":\{"decisions":0,"faulted":20,"faults":\{"fallback":\d+,"fuel":\d+\},`, string(raw))
}

// The simulate report says what an agent's share is, and prints durations
// rounded so that minute-long ones fit their columns.
func TestSimulateReportDefinesShareAndFitsItsDurations(t *testing.T) {
	t.Parallel()
	run := func(name string, wait time.Duration) *simulate.Report {
		return &simulate.Report{Name: name, Jain: 0.986, WaitP50: 23177144767 * time.Nanosecond, WaitP99: wait,
			Makespan: 12*time.Minute + 4691999276*time.Nanosecond,
			Agents:   []simulate.AgentReport{{Agent: "agent-0", Share: 0.742, WaitP99: wait}}}
	}
	rep := &authoring.SimulateReport{Plugin: run("plugin", 12*time.Minute+4691999276*time.Nanosecond), Builtin: run("built-in", 43254463437*time.Nanosecond)}
	out := rep.String()
	require.Contains(t, out, "(share: the agent's fraction of all tasks first dispatched")
	require.Regexp(t, `(?m)^wait p50 +23\.177s +23\.177s$`, out)
	require.Regexp(t, `(?m)^makespan +12m4\.7s +12m4\.7s$`, out)
	require.Regexp(t, `(?m)^agent-0 +0\.742 +0\.742 +12m4\.7s +43\.254s$`, out)
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(line, " ") {
			continue // a legend
		}
		for _, f := range strings.Fields(line[min(len(line), 22):]) {
			require.LessOrEqual(t, len([]rune(f)), 14, "a value wider than its column in %q", line)
		}
	}
}

// codedWorkload: six tasks whose every attempt fails with
// element_not_found, six whose first attempt fails with tab_not_found, and
// four that succeed.
func codedWorkload() []simulate.Submission {
	var subs []simulate.Submission
	for i := range 16 {
		s := simulate.Submission{At: time.Duration(i) * time.Millisecond, Agent: []string{"a", "b"}[i%2], Duration: 10 * time.Millisecond}
		switch {
		case i < 6:
			s.Outcome, s.Code = "transient", "element_not_found"
		case i < 12:
			s.Attempts = []simulate.AttemptOutcome{{Outcome: "transient", Code: "tab_not_found"}}
		}
		subs = append(subs, s)
	}
	return subs
}

// A retry plugin that decides by error code (the errcode example) does
// otherwise than the built-in backoff on a workload with codes, and the
// report shows it, overall and by code: errcode fails element_not_found at
// once where the built-in retries it until the budget is spent and parks,
// and retries a lost tab at once where the built-in waits a second.
func TestSimulateShowsWhatARetryPluginDidByErrorCode(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Simulate(context.Background(), example(t, "errcode.wasm"), codedWorkload(),
		authoring.SimulateOptions{Options: authoring.Options{Runtime: rt}})
	require.NoError(t, err)
	require.Equal(t, "retry", rep.Slot)
	require.Equal(t, uint64(12), rep.Calls, "one decision per failed attempt")
	require.Zero(t, rep.Fallbacks)
	require.Equal(t, 6, rep.Plugin.Retry.Failed)
	require.Equal(t, 6, rep.Builtin.Retry.Parked)
	out := rep.String()
	require.NotContains(t, out, "NOTE:")
	for _, row := range []string{
		`(?m)^retry +plugin +built-in$`,
		`(?m)^attempts +22 +40$`,
		`(?m)^failed attempts +12 +30$`,
		`(?m)^retries +6 +24$`,
		`(?m)^tasks parked +0 +6$`,
		`(?m)^tasks failed +6 +0$`,
		`(?m)^attempts per task +1\.38 +2\.50$`,
		`(?m)^mean retry delay +0s +2s$`,
		`(?m)^code element_not_found +plugin +built-in\n  failed attempts +6 +24\n  retries +0 +18\n  then parked +0 +6\n  then failed +6 +0\n  attempts per task +1\.00 +4\.00\n  mean retry delay +0s +2\.333s$`,
		`(?m)^code tab_not_found +plugin +built-in\n  failed attempts +6 +6\n  retries +6 +6\n  then parked +0 +0\n  then failed +0 +0\n  attempts per task +2\.00 +2\.00\n  mean retry delay +0s +1s$`,
	} {
		require.Regexp(t, row, out)
	}
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"retry":{"attempts":22,"failures":12,"decisions":12,"retries":6,"parked":0,"failed":6,`)
	require.Contains(t, string(raw), `"slot":"retry","calls":12`)
}

// A retry plugin on a workload without failures is never asked: the report
// says so first, rather than print the built-in's figures twice silently.
func TestSimulateSaysWhenThePluginWasNeverAsked(t *testing.T) {
	t.Parallel()
	rep, err := authoring.Simulate(context.Background(), example(t, "errcode.wasm"),
		simulate.Generate(simulate.Synthetic{Agents: 2, Tasks: 40, Seed: 1}),
		authoring.SimulateOptions{Options: authoring.Options{Runtime: rt}})
	require.NoError(t, err)
	require.Zero(t, rep.Calls)
	require.True(t, strings.HasPrefix(rep.String(), "NOTE: the plugin's retry policy was never asked in this run"), rep.String())
	require.Contains(t, rep.String(), "no attempt failed; give the workload failing attempts")
	require.Regexp(t, `(?m)^failed attempts +0 +0$`, rep.String())

	// A fairness plugin is asked when agents contend for a narrow lane (no
	// note), not when every task finds a free slot (a note without the
	// retry hint).
	subs := simulate.Generate(simulate.Synthetic{Agents: 2, Tasks: 40, Seed: 1})
	narrow := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}}
	rep, err = authoring.Simulate(context.Background(), example(t, "asc.wasm"), subs,
		authoring.SimulateOptions{Options: authoring.Options{Runtime: rt}, Engine: narrow})
	require.NoError(t, err)
	require.Positive(t, rep.Calls)
	require.NotContains(t, rep.String(), "NOTE:")
	rep, err = authoring.Simulate(context.Background(), example(t, "asc.wasm"), subs,
		authoring.SimulateOptions{Options: authoring.Options{Runtime: rt}})
	require.NoError(t, err)
	require.Zero(t, rep.Calls)
	require.True(t, strings.HasPrefix(rep.String(), "NOTE: the plugin's fairness policy was never asked in this run"), rep.String())
	require.Contains(t, rep.String(), "nothing in this workload called for its decision")
}

// A bench's fuel figures are deterministic: they depend neither on the
// deadline or the CPU time a decision gets, nor on the faults these make
// (which depend on the machine and its load), and a fault rebuilds the
// instance, whose next decision pays again for the state a plugin keeps
// (drr's first decision over 64 candidates with 64 slots on a fresh
// instance burns twice what the later ones do). Here every decision over
// 1,000 candidates, 27 million fuel and milliseconds on any machine, uses
// up a CPU time of 100µs, yet each case reports the fuel a bench with
// ample time measures.
func TestBenchFuelDoesNotDependOnTheTimeLimitsOrTheirFaults(t *testing.T) {
	t.Parallel()
	wasm := example(t, "drr.wasm")
	bench := func(deadline, cpu time.Duration) *authoring.BenchReport {
		rep, err := authoring.Bench(context.Background(), wasm, authoring.BenchOptions{
			Options:   authoring.Options{DecisionFuel: 100_000_000, Candidates: 1000},
			Decisions: 10, Deadline: deadline, DecisionCPU: cpu,
		})
		require.NoError(t, err)
		return rep
	}
	tight, ample := bench(0, 100*time.Microsecond), bench(time.Minute, time.Minute)
	require.Empty(t, ample.Faults)
	require.Positive(t, tight.Faults[host.FaultBudget.String()], "decisions over 1,000 candidates used up their CPU time")
	require.Len(t, tight.Cases, len(ample.Cases))
	for i, c := range ample.Cases {
		require.Equal(t, c.Name, tight.Cases[i].Name)
		require.Positive(t, c.Fuel, c.Name)
		require.Equal(t, c.Fuel, tight.Cases[i].Fuel, "%s: fuel with a CPU time of 100µs, and of a minute", c.Name)
	}
	last := ample.Cases[len(ample.Cases)-1]
	require.Equal(t, "fairness/cands=1000/slots=64", last.Name)
	require.Zero(t, tight.Cases[len(tight.Cases)-1].Plugin.Decisions, "every timed decision over 1,000 candidates faulted")
	require.Greater(t, last.Fuel, uint64(20_000_000), "ABI.md: drr burns about 27 million over 1,000 candidates")
}

// A bench whose decisions ran past the deadline on a starved machine, and
// were let run on as a server lets them, says so: a p99 above the deadline
// is theirs, not a sign that the server would abandon such decisions.
func TestBenchReportSaysWhichDecisionsWereLetRunOnPastTheDeadline(t *testing.T) {
	t.Parallel()
	rep := &authoring.BenchReport{Slot: "fairness", Builtin: "fair-share", DeadlineNs: int64(10 * time.Millisecond),
		Cases: []authoring.BenchCase{{Name: "fairness/cands=16/slots=1", Tasks: 1,
			Plugin: authoring.Latency{Decisions: 200, P50Ns: 9000, P99Ns: 14e6, Graces: 3}, Native: authoring.Latency{Decisions: 200, P50Ns: 160, P99Ns: 161}}},
		Graces: 3}
	require.Contains(t, rep.String(), "NOTE: 3 of the plugin's decisions ran past the deadline (10ms) while this machine was starved of CPU, and were let run on")
	rep.Graces, rep.Cases[0].Plugin.Graces = 0, 0
	require.NotContains(t, rep.String(), "NOTE:")
}

// A group none of whose tasks ran (they expired queued) reads "—" for its
// wait and position, not 0s and 0.0, and each group says how many ran.
func TestSimulateReportShowsAGroupThatNeverRan(t *testing.T) {
	t.Parallel()
	rep := &authoring.SimulateReport{
		Plugin: &simulate.Report{Name: "mine", ByLabel: []simulate.GroupReport{
			{Group: "deadline=yes", Submitted: 2, Dispatched: 2, WaitP50: 3 * time.Second, MeanPosition: 4},
			{Group: "deadline=no", Submitted: 300, Dispatched: 300, WaitP50: time.Second, MeanPosition: 150}}},
		Builtin: &simulate.Report{Name: "fair-share", ByLabel: []simulate.GroupReport{
			{Group: "deadline=yes", Submitted: 2, Dispatched: 0},
			{Group: "deadline=no", Submitted: 300, Dispatched: 300, WaitP50: time.Second, MeanPosition: 150}}},
	}
	var row string
	for _, l := range strings.Split(rep.String(), "\n") {
		if strings.HasPrefix(l, "deadline=yes") {
			row = l
		}
	}
	require.Equal(t, []string{"deadline=yes", "3s", "—", "4.0", "—", "2/2", "0/2"}, strings.Fields(row))
}
