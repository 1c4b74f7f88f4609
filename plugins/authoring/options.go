// What Check, Bench and Simulate share: how they get a runtime, how they
// load the plugin under test next to the built-in policy of its slot, and
// the synthetic input they decide on.

package authoring

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

// Options are what Check, Bench and Simulate need besides the module.
type Options struct {
	// Name is what errors and fault reasons call the plugin: the module's
	// file name, or the name its author gave it. "" means "plugin".
	Name string
	// Config is the plugin's configuration document (JSON), if it takes one.
	Config []byte
	// Runtime loads the plugin. Nil means a private runtime with the
	// default host.Config (DecisionFuel as below) and its file-backed
	// compilation cache, closed before the call returns.
	Runtime *host.Runtime
	// DecisionFuel is the budget of one decision in the private runtime
	// (the server's plugins.decisionFuel); 0 means host's default.
	DecisionFuel int64
	// Candidates is how many queue heads the "large" check offers a
	// fairness policy (the server's engine.fairnessCandidates); 0 means
	// DefaultCandidates. Bench's fairness cases go up to it when it is set
	// (benchCandidates), and to 256 otherwise.
	Candidates int
	// MaxWasmBytes is the largest module the server takes (its
	// plugins.maxWasmBytes), which Check's size check holds the module
	// to; 0 means DefaultMaxWasmBytes.
	MaxWasmBytes int
}

// DefaultMaxWasmBytes is the largest module a server takes by default
// (plugins.maxWasmBytes, manager.DefaultMaxWasmBytes).
const DefaultMaxWasmBytes = 16 << 20

func (o Options) maxWasmBytes() int {
	if o.MaxWasmBytes > 0 {
		return o.MaxWasmBytes
	}
	return DefaultMaxWasmBytes
}

// DefaultCandidates is the number of queue heads a server offers a fairness
// policy by default (engine.fairnessCandidates).
const DefaultCandidates = 64

func (o Options) name() string {
	if o.Name != "" {
		return o.Name
	}
	return "plugin"
}

func (o Options) candidates() int {
	if o.Candidates > 0 {
		return o.Candidates
	}
	return DefaultCandidates
}

// runtime returns the runtime to use and a function that releases it;
// onEvent sees a private runtime's events.
func (o Options) runtime(onEvent func(host.Event)) (*host.Runtime, func(), error) {
	// Checks judge fuel and counts, which are deterministic, not time,
	// which depends on the machine and its load: the deadline, the CPU
	// limit and the breaker's stall allowance (the wall time faulted
	// decisions may cost before a quarantine) are set far out, so that a
	// loaded or slower machine cannot fault or quarantine the plugin sooner
	// and change the report.
	return o.runtimeWith(host.Config{OnEvent: onEvent, Deadline: time.Minute, DecisionCPU: time.Minute, BreakerStall: time.Minute})
}

// runtimeWith returns o.Runtime, or else a private runtime of cfg with o's
// DecisionFuel, and a function that releases it.
func (o Options) runtimeWith(cfg host.Config) (*host.Runtime, func(), error) {
	if o.Runtime != nil {
		return o.Runtime, func() {}, nil
	}
	cfg.DecisionFuel = o.DecisionFuel
	cfg.AwaitRebuilds = true // each decision asked is the module's, not the fallback's while an instance is rebuilt
	rt, err := host.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	return rt, func() { _ = rt.Close(context.Background()) }, nil
}

// subject is a loaded plugin with wrappers for its slot around the native
// built-in of that slot, which is also the baseline it is compared with.
type subject struct {
	plugin  *host.Plugin
	builtin builtin.Module
	native  policy.Policy // the built-in's native policy, the baseline

	fairness  policy.Fairness
	selection policy.Selection
	retry     policy.Retry
}

// load loads wasm under name and wraps it. A configuration the module
// refuses is a *ConfigRefusal, which every tool reports as Check does.
func load(ctx context.Context, rt *host.Runtime, name string, wasm, config []byte) (*subject, error) {
	p, err := rt.Load(ctx, name, wasm, config)
	if err != nil {
		return nil, configRefused(err)
	}
	s := &subject{plugin: p}
	var ok bool
	if s.builtin, ok = builtin.ForSlot(p.Slot()); !ok {
		_ = p.Close(ctx)
		return nil, fmt.Errorf("no built-in policy for slot %s", p.Slot())
	}
	s.native = s.builtin.Native()
	fallback := s.builtin.Native()
	switch p.Slot() {
	case policy.SlotFairness:
		s.fairness, err = p.Fairness(fallback.Fairness)
	case policy.SlotSelection:
		s.selection, err = p.Selection(fallback.Selection)
	case policy.SlotRetry:
		s.retry, err = p.Retry(fallback.Retry)
	}
	if err != nil {
		_ = p.Close(ctx)
		return nil, err
	}
	return s, nil
}

// failures returns n plausible failed attempts: every class, common HTTP
// statuses, attempts from the first to past the budget, some deadlines.
func failures(n int) []policy.Failure {
	const now = 1_700_000_000_000
	statuses := []uint16{0, 408, 429, 500, 502, 503, 504, 400, 404}
	classes := []policy.ErrorClass{policy.ClassTransient, policy.ClassTransient, policy.ClassPermanent, policy.ClassCancelled}
	out := make([]policy.Failure, n)
	for i := range out {
		f := policy.Failure{
			NowMs: now, TaskSeq: uint64(i + 1), CreatedAtMs: now - 60_000,
			BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000,
			Attempt: uint16(1 + i%5), MaxAttempts: 4,
			HTTPStatus: statuses[i%len(statuses)], Class: classes[i%len(classes)],
			Priority: int32(i % 4), Agent: uint32(i % 7), Lane: uint16(i % 3),
		}
		if i%3 == 0 {
			f.Flags = policy.FailureJitter
		}
		if f.Attempt > 1 {
			f.PrevDelayMs = 1000 << (f.Attempt - 2)
		}
		if i%5 == 0 {
			f.DeadlineMs = now + int64(i%4)*5000
		}
		out[i] = f
	}
	return out
}
