// `switchyard plugin build|check|bench|simulate`: the policy author's tools,
// offline (no server needed), over plugins/authoring.

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/simulate"
	"github.com/switchyard/switchyard/plugins/authoring"
	"github.com/switchyard/switchyard/plugins/host"
)

// pluginToolOrder is the order in which help and usage errors list
// pluginToolVerbs.
var pluginToolOrder = []string{"new", "build", "check", "bench", "simulate"}

// pluginToolVerbs are the offline verbs of `switchyard plugin`.
var pluginToolVerbs = map[string]struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}{
	"new":      {"write a new plugin project (Go or AssemblyScript; ABI v2 with a configuration schema) for a slot", runPluginNew},
	"build":    {"build a Go plugin's main package (for wasip1) into a .wasm module", runPluginBuild},
	"check":    {"check a module against the ABI and the conformance checks", runPluginCheck},
	"bench":    {"measure a module's decisions against the native built-in, under the server's deadline (faulted ones show as FAULTED, by kind, not timed)", runPluginBench},
	"simulate": {"replay a workload through the engine under a module and under the built-in (exit 1 when the plugin faulted)", runPluginSimulate},
}

// runPlugin dispatches `switchyard plugin VERB`.
func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, "Usage: switchyard plugin VERB [flags] ...\n\nVerbs:")
		for _, name := range pluginToolOrder {
			fmt.Fprintf(stderr, "  %-9s %s\n", name, pluginToolVerbs[name].summary)
		}
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	v, ok := pluginToolVerbs[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown verb %q (%s)", errUsage, args[0], strings.Join(pluginToolOrder, ", "))
	}
	return v.run(ctx, args[1:], stdout, stderr)
}

// parseArgs parses flags before, between and after positional arguments
// (`plugin build DIR -o x.wasm` as well as `plugin build -o x.wasm DIR`);
// "--" ends the flags. fs.Args() holds the positional arguments after it.
func parseArgs(fs *flag.FlagSet, args []string) error {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return fs.Parse(append([]string{"--"}, pos...))
}

func runPluginNew(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plugin new", "selection|fairness|retry [--lang go|assemblyscript] [--sdk DIR] [--module PATH] DIR\n\nDIR's name names the project (the Go module example.com/NAME unless --module,\nthe npm package, the .wasm file, the plugin): "+authoring.NameRule, stderr)
	lang := fs.String("lang", "go", "the project's language: go or assemblyscript")
	module := fs.String("module", "", "Go: the project's module path (default example.com/ and DIR's base name)")
	sdk := fs.String("sdk", "", "Go: the SDK's directory, plugins/sdk of a Switchyard checkout (default: the checkout that holds the current directory)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("%w: give the slot (selection, fairness or retry) and a new directory", errUsage)
	}
	if _, ok := policy.ParseSlot(fs.Arg(0)); !ok {
		return fmt.Errorf("%w: unknown slot %q (selection, fairness or retry)", errUsage, fs.Arg(0))
	}
	if *lang != "go" && *lang != "assemblyscript" {
		return fmt.Errorf("%w: --lang %q: want go or assemblyscript", errUsage, *lang)
	}
	if *lang == "go" && *sdk == "" {
		found, ok := authoring.FindSDK(".")
		if !ok {
			return fmt.Errorf("%w: --sdk: the Go SDK has no published version yet; give the plugins/sdk directory of a Switchyard checkout (for example --sdk ~/src/switchyard/plugins/sdk)", errUsage)
		}
		*sdk = found
	}
	files, err := authoring.New(fs.Arg(1), authoring.NewOptions{Slot: fs.Arg(0), Lang: *lang, Module: *module, SDK: *sdk})
	if errors.Is(err, authoring.ErrName) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err != nil {
		return err
	}
	article := "a"
	if *lang == "assemblyscript" {
		article = "an"
	}
	fmt.Fprintf(stdout, "wrote %s %s %s plugin in %s:\n", article, *lang, fs.Arg(0), fs.Arg(1))
	for _, f := range files {
		fmt.Fprintf(stdout, "  %s\n", f)
	}
	fmt.Fprintf(stdout, "next: see %s\n", filepath.Join(fs.Arg(1), "README.md"))
	return nil
}

func runPluginBuild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("plugin build", "[-o MODULE.wasm] DIR\n\nDIR is the directory of the plugin's Go main package (the one that calls\nselection.Register, fairness.Register or retry.Register); it is built with\nGOOS=wasip1 GOARCH=wasm -buildmode=c-shared in DIR's own module", stderr)
	out := fs.String("o", "", "the module to write (default: DIR + .wasm, or for a DIR named wasm, its parent + .wasm: ./drr/wasm gives ./drr.wasm)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: give one directory: the plugin's main package (which registers the policy with the SDK)", errUsage)
	}
	dir := fs.Arg(0)
	if *out == "" {
		*out = authoring.DefaultOutput(dir)
	}
	start := time.Now()
	if err := authoring.Build(ctx, dir, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s in %s\n", *out, time.Since(start).Round(time.Millisecond))
	return nil
}

// moduleArgs parses the common arguments of the verbs that take a module.
func moduleArgs(name string, args []string, stderr io.Writer, extra func(fs *flag.FlagSet)) (wasm, config []byte, asJSON bool, fs *flag.FlagSet, err error) {
	fs = newFlags("plugin "+name, "[flags] MODULE.wasm", stderr)
	cfgArg := fs.String("config", "", "the plugin's configuration: a JSON document, or @file to read it from a file (as plugin load and configure take it)")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	if extra != nil {
		extra(fs)
	}
	if err := parseArgs(fs, args); err != nil {
		return nil, nil, false, nil, err
	}
	if fs.NArg() != 1 {
		return nil, nil, false, nil, fmt.Errorf("%w: give one .wasm module", errUsage)
	}
	if wasm, err = os.ReadFile(fs.Arg(0)); err != nil {
		return nil, nil, false, nil, err
	}
	if *cfgArg != "" {
		if config, err = configArg(*cfgArg); err != nil {
			return nil, nil, false, nil, err
		}
	}
	return wasm, config, *jsonOut, fs, nil
}

// moduleName is what the tools' errors call the module: the name of the
// file moduleArgs read.
func moduleName(fs *flag.FlagSet) string { return filepath.Base(fs.Arg(0)) }

func report(stdout io.Writer, asJSON bool, r fmt.Stringer) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err := fmt.Fprint(stdout, r.String())
	return err
}

func runPluginCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var candidates, maxWasm *int
	var fuel *int64
	wasm, config, asJSON, fs, err := moduleArgs("check", args, stderr, func(fs *flag.FlagSet) {
		candidates = fs.Int("candidates", authoring.DefaultCandidates, "queue heads offered to a fairness policy in the large check: your server's engine.fairnessCandidates")
		fuel = fs.Int64("fuel", 0, "the budget of one decision: your server's plugins.decisionFuel (0: the default)")
		maxWasm = fs.Int("max-wasm-bytes", authoring.DefaultMaxWasmBytes, "the largest module the server takes, for the size check: your server's plugins.maxWasmBytes")
	})
	if err != nil {
		return err
	}
	if *candidates < 1 || *candidates > 1024 || *fuel < 0 || *maxWasm < 1 {
		return fmt.Errorf("%w: --candidates must be within 1..1024, --fuel not negative and --max-wasm-bytes positive", errUsage)
	}
	r, err := authoring.Check(ctx, wasm, authoring.Options{Name: moduleName(fs), Config: config, Candidates: *candidates, DecisionFuel: *fuel, MaxWasmBytes: *maxWasm})
	if err != nil {
		return err
	}
	return reportChecks(stdout, asJSON, r)
}

// reportChecks prints a check report and fails when a check did: the
// report of `plugin check`, and the one `plugin bench` and `plugin
// simulate` print instead of theirs when the module refused --config
// (authoring.ConfigRefusal), which names the slot and the field and shows
// the module's schema.
func reportChecks(stdout io.Writer, asJSON bool, r *authoring.CheckReport) error {
	if err := report(stdout, asJSON, r); err != nil {
		return err
	}
	if !r.Passed {
		return errChecksFailed
	}
	return nil
}

// toolError is err of a tool that loads a module (bench, simulate): a
// configuration the module refused is reported as plugin check reports it.
func toolError(stdout io.Writer, asJSON bool, err error) error {
	var cr *authoring.ConfigRefusal
	if errors.As(err, &cr) {
		return reportChecks(stdout, asJSON, cr.Report)
	}
	return err
}

// errChecksFailed makes `plugin check` exit 1 when a check failed, and
// `plugin bench` and `plugin simulate` when the module refused --config.
var errChecksFailed = errors.New("the module failed checks")

func runPluginBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var decisions, candidates *int
	var deadline, cpu *time.Duration
	var fuel *int64
	var allowFaults *bool
	wasm, config, asJSON, fs, err := moduleArgs("bench", args, stderr, func(fs *flag.FlagSet) {
		decisions = fs.Int("decisions", 2000, "decisions timed per case")
		candidates = fs.Int("candidates", 0, "fairness: bench up to this many queue heads, your server's engine.fairnessCandidates (as plugin check --candidates): the cases of 16, 64 and 256 below it, and it (0: 16, 64 and 256)")
		deadline = fs.Duration("deadline", host.DefaultDeadline, "the wall-clock backstop of one decision: your server's plugins.deadline; a decision past it is abandoned and counted as a deadline fault, as the server does")
		fuel = fs.Int64("fuel", 0, "the budget of one decision: your server's plugins.decisionFuel (0: the default)")
		cpu = fs.Duration("cpu", host.DefaultDecisionCPU, "the CPU time of one decision (Linux): your server's plugins.decisionCPU; a decision that uses it up is a fuel fault, as the server counts it")
		allowFaults = fs.Bool("allow-faults", false, "exit 0 even when the fallback answered some of the plugin's decisions (faults, a quarantine): for a bench of a plugin expected to fault")
	})
	if err != nil {
		return err
	}
	if *decisions < 1 || *deadline < time.Millisecond || *cpu < 100*time.Microsecond || *fuel < 0 || *candidates < 0 || *candidates > 1024 {
		return fmt.Errorf("%w: --decisions must be positive, --deadline at least 1ms (as plugins.deadline), --cpu at least 100µs, --fuel not negative and --candidates within 0..1024", errUsage)
	}
	r, err := authoring.Bench(ctx, wasm, authoring.BenchOptions{Options: authoring.Options{Name: moduleName(fs), Config: config, DecisionFuel: *fuel, Candidates: *candidates},
		Decisions: *decisions, Deadline: *deadline, DecisionCPU: *cpu})
	if err != nil {
		return toolError(stdout, asJSON, err)
	}
	if err := report(stdout, asJSON, r); err != nil {
		return err
	}
	if r.Fallbacks > 0 && !*allowFaults {
		return benchFaulted(r)
	}
	return nil
}

// benchFaulted is the error of a bench whose plugin did not answer every
// decision (the fallback answered some: its faults, a quarantine they
// began): a plugin the server would fall back from fails the bench, as a
// fault fails plugin check, unless --allow-faults says it was expected.
func benchFaulted(r *authoring.BenchReport) error {
	var kinds []string
	for _, k := range host.FaultKinds {
		if n := r.Faults[k.String()]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", strings.ToUpper(k.String()), n))
		}
	}
	what := "the plugin did not answer every decision" // a table too large for its memory
	if len(kinds) > 0 {
		what = "the plugin faulted (" + strings.Join(kinds, ", ") + ")"
	}
	return fmt.Errorf("%s: the fallback answered %d of its decisions; pass --allow-faults when that is expected", what, r.Fallbacks)
}

func runPluginSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var workload *string
	var agents, tasks, skew, lane, maxSteps *int
	var horizon, timeout *time.Duration
	var allowFaults *bool
	wasm, config, asJSON, fs, err := moduleArgs("simulate", args, stderr, func(fs *flag.FlagSet) {
		allowFaults = fs.Bool("allow-faults", false, "exit 0 even when the built-in answered some of the plugin's decisions (faults, a quarantine): for a simulation of a plugin expected to fault")
		workload = fs.String("workload", "", "a workload file (JSON Lines: atMs, agent, durationMs, outcome, code, attempts, …; plugins/ABI.md has every field); default: a synthetic one, without failures")
		maxSteps = fs.Int("max-steps", simulate.DefaultMaxSteps, "fail a run that needs more scheduled calls (attempt ends, retries, timers) than this")
		horizon = fs.Duration("horizon", simulate.DefaultHorizon, "fail a run with work left this long in simulated time after the last submission")
		timeout = fs.Duration("timeout", 10*time.Minute, "give up after this long in real time (0: no limit)")
		agents = fs.Int("agents", 4, "synthetic workload: agents")
		tasks = fs.Int("tasks", 1000, "synthetic workload: tasks")
		skew = fs.Int("skew", 8, "synthetic workload: the first agent submits this many times more than each other")
		lane = fs.Int("lane-inflight", 4, "the main lane's concurrency ceiling during the simulation")
	})
	if err != nil {
		return err
	}
	if *maxSteps < 1 || *horizon <= 0 || *timeout < 0 {
		return fmt.Errorf("%w: --max-steps and --horizon must be positive, --timeout not negative", errUsage)
	}
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, *timeout, fmt.Errorf("plugin simulate: --timeout %s passed", *timeout))
		defer cancel()
	}
	var subs []simulate.Submission
	if *workload != "" {
		f, err := os.Open(*workload)
		if err != nil {
			return err
		}
		defer f.Close()
		if subs, err = simulate.ReadWorkload(f); err != nil {
			return err
		}
	} else {
		subs = simulate.Generate(simulate.Synthetic{Agents: *agents, Tasks: *tasks, Skew: *skew, Seed: 1})
	}
	// The engine's default lanes, so that a workload may name any of them;
	// the main lane narrowed to --lane-inflight.
	lanes := engine.DefaultLanes()
	for i := range lanes {
		if lanes[i].Name == "main" {
			lanes[i].MaxInFlight = *lane
		}
	}
	cfg := engine.Config{Lanes: lanes, AgentMaxInFlight: *lane}
	r, err := authoring.Simulate(ctx, wasm, subs, authoring.SimulateOptions{Options: authoring.Options{Name: moduleName(fs), Config: config}, Engine: cfg,
		MaxSteps: *maxSteps, Horizon: *horizon})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", err, context.Cause(ctx))
	}
	if err != nil {
		return toolError(stdout, asJSON, err)
	}
	if err := report(stdout, asJSON, r); err != nil {
		return err
	}
	if r.Fallbacks > 0 && !*allowFaults {
		// As bench: the run "under the plugin" was partly the built-in's,
		// which a server would have fallen back to as well.
		return fmt.Errorf("the plugin faulted %d %s: the built-in answered %d of its %d decisions; pass --allow-faults when that is expected",
			r.Faults, map[bool]string{true: "time", false: "times"}[r.Faults == 1], r.Fallbacks, r.Calls)
	}
	return nil
}

// configArg reads --config as plugin load and configure take it: a JSON
// document inline, or @file. A bare path that names a file is refused with
// the @ it lacks, as those verbs would refuse it.
func configArg(arg string) ([]byte, error) {
	doc, from := []byte(arg), "--config"
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if doc, err = os.ReadFile(name); err != nil {
			return nil, fmt.Errorf("%w: --config: %v", errUsage, err)
		}
		from = "--config " + arg
	}
	if !utf8.Valid(doc) {
		return nil, fmt.Errorf("%w: %s is not valid UTF-8", errUsage, from)
	}
	if !json.Valid(doc) {
		if _, err := os.Stat(arg); err == nil && !strings.HasPrefix(arg, "@") {
			return nil, fmt.Errorf("%w: --config takes a JSON document or @file; to read the file %s, write --config @%s", errUsage, arg, arg)
		}
		return nil, fmt.Errorf("%w: %s is not JSON", errUsage, from)
	}
	return doc, nil
}
