// `switchyard bench --mode engine`: the engine's own figures, through its Go
// API (internal/enginebench), with the built-in policies natively and as the
// WebAssembly modules that ship, in the same run.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/enginebench"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// engineReport is what --mode engine prints.
type engineReport struct {
	Native    enginebench.Throughput `json:"native"`
	Wasm      enginebench.Throughput `json:"wasm"`
	WasmRatio float64                `json:"wasmRatio"` // wasm ÷ native throughput
	// CPU per task, the least of the three runs of each, and native ÷
	// wasm of it: the ratio's counterpart in CPU, which moves less than
	// throughput with the machine's other load (0 where not measured).
	NativeCPU time.Duration `json:"nativeCpuPerTaskNs"`
	WasmCPU   time.Duration `json:"wasmCpuPerTaskNs"`
	CPURatio  float64       `json:"cpuRatio,omitempty"`
	// The WebAssembly runs' plugin decisions and how many of them the
	// native fallbacks answered instead (a plugin quarantined, say, for a
	// decision that ran past its deadline while its thread waited for a
	// core): those decisions measure the fallback, not the module.
	WasmDecisions   uint64 `json:"wasmDecisions"`
	WasmFallbacks   uint64 `json:"wasmFallbacks"`
	WasmQuarantines uint64 `json:"wasmQuarantines"`
	// WasmGraces counts the calls the plugins' watchdog let run on past
	// their deadline in wall time because they waited for a core
	// (host.Stats.DeadlineGraces).
	WasmGraces    uint64                `json:"wasmDeadlineGraces"`
	Depth         []enginebench.AtDepth `json:"depth,omitempty"`
	DepthSpread   float64               `json:"depthSpread,omitempty"` // slowest ÷ fastest per-dispatch cost
	Latency       *enginebench.Latency  `json:"latency,omitempty"`
	MemoryPerTask float64               `json:"memoryPerQueuedTaskBytes,omitempty"`
	EngineOnly    float64               `json:"memoryPerQueuedTaskEngineOnlyBytes,omitempty"`
}

// pluginTally is what the plugins of one engine decided.
type pluginTally struct{ decisions, fallbacks, quarantines, graces uint64 }

// wasmPolicies makes an engine use the shipped WebAssembly built-ins; the
// returned func releases the plugin runtime, and tally says what the
// plugins of the latest engine set up decided.
func wasmPolicies(ctx context.Context) (setup enginebench.Setup, release func(), tally func() pluginTally, err error) {
	var managers []*manager.Manager
	setup = func(e *engine.Engine) error {
		var m *manager.Manager
		rt, err := host.New(host.Config{OnEvent: func(ev host.Event) { m.HostEvent(ev) }})
		if err != nil {
			return err
		}
		m = manager.New(e, rt, manager.Options{})
		managers = append(managers, m)
		return m.Start(ctx)
	}
	release = func() {
		for _, m := range managers {
			_ = m.Close(context.Background())
		}
	}
	tally = func() (t pluginTally) {
		if len(managers) == 0 {
			return t
		}
		for _, in := range managers[len(managers)-1].List(ctx) {
			t.decisions += in.Stats.Calls
			t.fallbacks += in.Stats.Fallbacks
			t.quarantines += in.Stats.Quarantines
			t.graces += in.Stats.DeadlineGraces
		}
		return t
	}
	return setup, release, tally, nil
}

func runEngineBench(ctx context.Context, tasks int, full, asJSON bool, cpuProfile string, stdout io.Writer) error {
	setup, release, tally, err := wasmPolicies(ctx)
	if err != nil {
		return err
	}
	defer release()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	workers := runtime.GOMAXPROCS(0)
	// Each run carries a profiler label, inherited by the engine's own
	// goroutines, so that a profile tells the two apart:
	// go tool pprof -tagfocus policies=wasm.
	run := func(setup enginebench.Setup) (t enginebench.Throughput, err error) {
		label := "native"
		if setup != nil {
			label = "wasm"
		}
		pprof.Do(ctx, pprof.Labels("policies", label), func(ctx context.Context) {
			t, err = enginebench.RunThroughput(ctx, tasks, 100, workers, setup)
		})
		return t, err
	}
	var rep engineReport
	// Warm up both (JIT of the modules' cache, the Go heap), then measure
	// native and wasm alternately and keep each one's best of three, so
	// that a noisy neighbour on the machine hurts both alike.
	if _, err := enginebench.RunThroughput(ctx, tasks/10+1, 100, workers, nil); err != nil {
		return err
	}
	if _, err := enginebench.RunThroughput(ctx, tasks/10+1, 100, workers, setup); err != nil {
		return err
	}
	for range 3 {
		n, err := run(nil)
		if err != nil {
			return err
		}
		w, err := run(setup)
		if err != nil {
			return err
		}
		pt := tally()
		rep.WasmDecisions += pt.decisions
		rep.WasmFallbacks += pt.fallbacks
		rep.WasmQuarantines += pt.quarantines
		rep.WasmGraces += pt.graces
		if n.TasksPerSec > rep.Native.TasksPerSec {
			rep.Native = n
		}
		if w.TasksPerSec > rep.Wasm.TasksPerSec {
			rep.Wasm = w
		}
		if rep.NativeCPU == 0 || n.CPUPerTask < rep.NativeCPU {
			rep.NativeCPU = n.CPUPerTask
		}
		if rep.WasmCPU == 0 || w.CPUPerTask < rep.WasmCPU {
			rep.WasmCPU = w.CPUPerTask
		}
	}
	rep.WasmRatio = rep.Wasm.TasksPerSec / rep.Native.TasksPerSec
	if rep.WasmCPU > 0 {
		rep.CPURatio = float64(rep.NativeCPU) / float64(rep.WasmCPU)
	}
	if full {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for _, q := range []int{1_000, 100_000, 1_000_000} {
			for _, a := range []int{10, 1_000, 10_000} {
				d, err := enginebench.RunAtDepth(ctx, q, a, 100_000, 2, nil)
				if err != nil {
					return err
				}
				rep.Depth = append(rep.Depth, d)
				lo, hi = min(lo, d.PerDispatch), max(hi, d.PerDispatch)
			}
		}
		rep.DepthSpread = float64(hi) / float64(lo)
		lat, err := enginebench.RunLatency(ctx, 10_000, 5*time.Second, setup)
		if err != nil {
			return err
		}
		rep.Latency = &lat
		if rep.MemoryPerTask, rep.EngineOnly, err = enginebench.MemoryPerQueuedTask(ctx, 1_000_000); err != nil {
			return err
		}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "engine throughput, submit→dispatch→complete (no-op executor, memory store, %d submitters, 100 agents, best of 3):\n", workers)
	fmt.Fprintf(stdout, "  native policies       %9.0f tasks/s\n", rep.Native.TasksPerSec)
	fmt.Fprintf(stdout, "  WebAssembly policies  %9.0f tasks/s  (%.2f× native)\n", rep.Wasm.TasksPerSec, rep.WasmRatio)
	if rep.CPURatio > 0 {
		fmt.Fprintf(stdout, "CPU per task (the process's, least of 3): native %s, WebAssembly %s (native ÷ WebAssembly %.2f)\n",
			rep.NativeCPU, rep.WasmCPU, rep.CPURatio)
	}
	if rep.WasmFallbacks > 0 {
		fmt.Fprintf(stdout, "WebAssembly runs: %d of %d plugin decisions answered by the native fallback (%d quarantines): the ratio measures the fallback for those\n",
			rep.WasmFallbacks, rep.WasmDecisions, rep.WasmQuarantines)
	}
	if rep.WasmGraces > 0 {
		fmt.Fprintf(stdout, "WebAssembly runs: %d plugin calls let run on past their deadline: they waited for a core\n", rep.WasmGraces)
	}
	if full {
		fmt.Fprintln(stdout, "per-dispatch cost with a backlog (native, best of 2):")
		for _, d := range rep.Depth {
			fmt.Fprintf(stdout, "  %9d queued, %6d agents  %8s/dispatch\n", d.Queued, d.Agents, d.PerDispatch)
		}
		fmt.Fprintf(stdout, "  slowest ÷ fastest: %.2f\n", rep.DepthSpread)
		l := rep.Latency
		fmt.Fprintf(stdout, "submit → executor call at %d tasks/s (WebAssembly policies): p50 %s, p99 %s, p99.9 %s, max %s\n",
			l.Rate, l.P50, l.P99, l.P999, l.Max)
		fmt.Fprintf(stdout, "memory per queued task (1,000,000 queued): %.0f B with the memory store, %.0f B in the engine alone\n",
			rep.MemoryPerTask, rep.EngineOnly)
	}
	return nil
}
