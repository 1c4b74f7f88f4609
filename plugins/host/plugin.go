package host

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// Plugin is one loaded module: a pool of instances, its configuration, its
// breaker and its statistics. It is safe for concurrent use. The engine uses
// it through the wrappers returned by Selection, Fairness and Retry.
type Plugin struct {
	rt       *Runtime
	name     string
	slot     policy.Slot
	key      [32]byte
	compiled wazero.CompiledModule
	flags    int32
	version  int32 // the ABI version the module declared
	size     int   // pool size: 1 for a stateful plugin

	idle *pool
	live atomic.Int32 // instances in existence (idle, busy or being built)
	// building counts the instances being built to replace discarded ones
	// (rebuild): while one is, a decision that finds no idle instance falls
	// back rather than wait for it (milliseconds, for a module with a large
	// memory or a Go guest's runtime to start).
	building atomic.Int32

	mu       sync.Mutex     // guards config, closed, disabledWhy and the rebuild path
	rebuilds sync.WaitGroup // instances being rebuilt after a fault; added to under mu
	stopping atomic.Bool    // set by Close: no call of the plugin's starts (callWith)
	config   []byte
	cfgGen   atomic.Uint64
	// resetGen is the configuration generation of the latest reset to no
	// configuration (Configure with an empty document): an instance
	// configured before it is replaced by a fresh one, not reconfigured,
	// since a module keeps its settings on an empty document.
	resetGen atomic.Uint64

	// schema is the configuration schema the module declared (nil for
	// none), schemaText its JSON text.
	schema     *schema.Schema
	schemaText []byte
	closed     bool

	// The breaker. disabled is set by a quarantine and by a failed rebuild;
	// until (on the runtime's monotonic clock, ns) is when a quarantine
	// ends, 0 for none, so a decision reads the clock only while the plugin
	// is out.
	disabled    atomic.Bool
	until       atomic.Int64
	disabledWhy string        // under mu
	backoff     time.Duration // under mu: the next quarantine's length
	probation   atomic.Int64  // good decisions still owed after a quarantine; 0 when not on probation
	debt        atomic.Int64  // faults × forgive, minus good decisions
	stall       atomic.Int64  // ns spent in faulted decisions, minus forgiveness

	logMu     sync.Mutex // guards the log rate limit
	logTokens float64
	logLast   time.Duration

	stats stats
}

// Load compiles (or reuses) wasm, validates it against the ABI, instantiates
// it, passes it config (a JSON document; nil or empty for none) and makes a
// smoke decision on synthetic input. Any failure is an error wrapping
// ErrInvalid that says what is wrong: a *ConfigError for a configuration
// refused, a *SmokeError for a smoke decision that faulted. A smoke
// decision that faults under config but not under no configuration (or
// under config of a module that refuses to go without one) refuses the
// configuration, not the module: the *SmokeError is then the Err of a
// *ConfigError.
func (rt *Runtime) Load(ctx context.Context, name string, wasm []byte, config []byte) (*Plugin, error) {
	return rt.loadAs(ctx, name, wasm, config, false)
}

// Restore loads a plugin as Load does, for a module that was loaded before
// (a server restoring the plugins it stored) and may now fail under its
// configuration where it passed: the module or the host changed (a smaller
// fuel budget, say), or the configuration was accepted by an older host.
// If the guest refuses config, or the smoke decision faults under it,
// the plugin is not refused but comes back disabled, with config and with
// no instance: every decision falls back, Disabled says why, and Enable
// (perhaps after Configure) builds its instances. It emits no event. A
// module that no longer compiles, validates or instantiates, or whose
// schema refuses config, is refused as Load refuses it.
func (rt *Runtime) Restore(ctx context.Context, name string, wasm []byte, config []byte) (*Plugin, error) {
	return rt.loadAs(ctx, name, wasm, config, true)
}

func (rt *Runtime) loadAs(ctx context.Context, name string, wasm, config []byte, restore bool) (*Plugin, error) {
	cm, key, err := rt.compile(ctx, wasm)
	if err != nil {
		return nil, fmt.Errorf("load plugin %q: %w", name, err)
	}
	p, err := rt.load(ctx, name, cm, key, config, restore)
	if err != nil {
		rt.releaseCompiled(ctx, key)
		return nil, fmt.Errorf("load plugin %q: %w", name, err)
	}
	return p, nil
}

// Validate compiles wasm (or finds it in the compilation cache) and checks
// its imports and exports against the ABI without instantiating it. It
// returns the slot the module fills. A server can call it at start to warm
// the compilation cache, so that a later Load takes milliseconds.
func (rt *Runtime) Validate(ctx context.Context, wasm []byte) (policy.Slot, error) {
	cm, key, err := rt.compile(ctx, wasm)
	if err != nil {
		return 0, err
	}
	defer rt.releaseCompiled(ctx, key)
	return validate(cm)
}

func (rt *Runtime) load(ctx context.Context, name string, cm wazero.CompiledModule, key [32]byte, config []byte, restore bool) (*Plugin, error) {
	slot, err := validate(cm)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		rt: rt, name: name, slot: slot, key: key, compiled: cm,
		config: append([]byte(nil), config...),
	}
	p.cfgGen.Store(1)
	p.backoff = rt.cfg.QuarantineBase
	p.logTokens = float64(2 * rt.cfg.LogLines)
	first, err := newInstance(ctx, p, phaseLoad)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	fail := func(err error) (*Plugin, error) {
		first.close()
		return nil, err
	}
	if err := p.checkVersion(first); err != nil {
		return fail(err)
	}
	if err := p.readSchema(first); err != nil {
		return fail(err)
	}
	if err := p.checkConfig(p.config); err != nil {
		return fail(p.configError(err))
	}
	p.size = 1
	if p.flags&abi.FlagStateless != 0 {
		p.size = rt.cfg.Instances
	}
	p.idle = newPool(p.size)
	why := ""
	if err := first.configure(p.config, 1); err != nil {
		f := first.callFault(err)
		if !restore && !f.unasked && f.kind != FaultRefused && p.configureFaults(ctx) {
			// configure did not answer (it trapped, ran out of fuel or
			// time) with no configuration given, or with none either:
			// the module is at fault, not a configuration.
			return fail(fmt.Errorf("%w: configure faulted under no configuration: %s: %s", ErrInvalid, f.kind, setupReason(f, p.rt.cfg.SetupFuel)))
		}
		if !restore || f.unasked {
			return fail(p.configError(p.configureError(f, err)))
		}
		why = fmt.Sprintf("its configure failed at start under its stored configuration: %s: %s",
			f.kind, strings.TrimPrefix(f.reason, errRefused.Error()+": "))
		why += "; configure it, then enable it"
	} else if err := first.smoke(); err != nil {
		var se *SmokeError
		switch {
		case !errors.As(err, &se):
			return fail(err)
		case restore:
			why = fmt.Sprintf("its smoke decision at start faulted under its stored configuration: %s: %s; configure it, then enable it", se.Kind, se.Reason)
			if setting := rt.BudgetSetting(se); setting != "" && (len(bytes.TrimSpace(p.config)) == 0 || !p.decidesUnconfigured(ctx)) {
				// Under no configuration too: the budget is the cause.
				why = fmt.Sprintf("its smoke decision at start faulted, under any configuration: %s: %s: %s is too small for it; raise it and restart (enabled as it is, it would fault on its decisions)", se.Kind, se.Reason, setting)
			}
		case len(bytes.TrimSpace(p.config)) > 0:
			first.close() // broken by the fault
			return nil, p.blame(ctx, se)
		default:
			return fail(err)
		}
	}
	if why != "" {
		// Restored out of service: no instance (the one that failed may be
		// half configured or broken), every decision falls back, and
		// Enable builds the instances with the configuration of the time.
		first.close()
		p.disabled.Store(true)
		p.disabledWhy = why
		return p, rt.register(p)
	}
	first.phase = phaseDecide
	p.idle.put(first)
	p.live.Store(1)
	for i := 1; i < p.size; i++ {
		in, err := p.build(ctx)
		if err != nil {
			p.shutdown()
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		p.live.Add(1)
		p.idle.put(in)
	}
	return p, rt.register(p)
}

// blame returns the error of a load whose smoke decision faulted (se)
// under the configuration given: a *ConfigError wrapping se when the fault
// is the configuration's, se when it is the module's. The module is tried
// on a fresh instance under no configuration: if it makes the smoke
// decision there, or refuses to go without a configuration (its configure
// answered an error code), the configuration is at fault; if it faults
// there too (in its configure or its decision), the module is.
func (p *Plugin) blame(ctx context.Context, se *SmokeError) error {
	in, err := newInstance(ctx, p, phaseLoad)
	if err != nil {
		return se
	}
	defer in.close()
	if err := in.configure(nil, 0); err != nil {
		if in.callFault(err).kind == FaultRefused {
			return p.configError(se)
		}
		return se
	}
	if in.smoke() != nil {
		return se
	}
	return p.configError(se)
}

// decidesUnconfigured reports whether the module, on a fresh instance
// under no configuration, makes the smoke decision.
func (p *Plugin) decidesUnconfigured(ctx context.Context) bool {
	in, err := newInstance(ctx, p, phaseLoad)
	if err != nil {
		return false
	}
	defer in.close()
	return in.configure(nil, 0) == nil && in.smoke() == nil
}

// BudgetSetting names the setting whose budget a smoke decision that
// faulted (se) ran out of — Config.FuelSetting for fuel, Config.CPUSetting
// for CPU time, with its value — or "" when the fault is not a budget's.
func (rt *Runtime) BudgetSetting(se *SmokeError) string {
	if se == nil || se.Kind != FaultBudget {
		return ""
	}
	switch {
	case strings.HasPrefix(se.Reason, "ran out of fuel"):
		return fmt.Sprintf("the fuel per decision, %s (now %d)", rt.cfg.FuelSetting, rt.cfg.DecisionFuel)
	case strings.HasPrefix(se.Reason, "used more than its"):
		return fmt.Sprintf("the CPU time per decision, %s (now %s)", rt.cfg.CPUSetting, rt.cfg.DecisionCPU)
	}
	return ""
}

// configureFaults reports whether a configure call that faulted at load
// is the module's fault: it had no configuration to blame, or
// a fresh instance's configure faults under no configuration too. A
// configure that answers an error code (FaultRefused) is not a fault: it
// refuses the document, or, under none, asks for a configuration.
func (p *Plugin) configureFaults(ctx context.Context) bool {
	if emptyConfig(p.config) {
		return true
	}
	bare, err := newInstance(ctx, p, phaseLoad)
	if err != nil {
		return false
	}
	defer bare.close()
	if err := bare.configure(nil, 0); err != nil {
		g := bare.callFault(err)
		return !g.unasked && g.kind != FaultRefused
	}
	return false
}

// configureError is the error of a configure call that did not take a
// document: err, the module's reason, when it refused it (or was not asked);
// a *ConfigureFault when it faulted (f, its fault) instead of answering.
func (p *Plugin) configureError(f fault, err error) error {
	if f.unasked || f.kind == FaultRefused {
		return err
	}
	return &ConfigureFault{Kind: f.kind, Reason: setupReason(f, p.rt.cfg.SetupFuel)}
}

// setupReason is f's reason for a call on the setup budget (a configure
// call), whose fuel is SetupFuel, not the decisions' budget.
func setupReason(f fault, setupFuel int64) string {
	if f.kind == FaultBudget && strings.HasPrefix(f.reason, "ran out of fuel") {
		return fmt.Sprintf("ran out of fuel (%d units of SetupFuel)", setupFuel)
	}
	return f.reason
}

// register adds a loaded plugin to the runtime, which closes it with
// itself; if the runtime is closed already, it shuts the plugin down and
// returns ErrClosed.
func (rt *Runtime) register(p *Plugin) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		p.shutdown()
		return ErrClosed
	}
	rt.plugins[p] = struct{}{}
	return nil
}

// checkVersion reads abi_version and policy_flags.
func (p *Plugin) checkVersion(in *instance) error {
	if err := in.setupCall(in.mod.ExportedFunction(abi.ExportABIVersion)); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, abi.ExportABIVersion, err)
	}
	v := int32(in.stack[0])
	if v < abi.MinVersion || v > abi.Version {
		return fmt.Errorf("%w: ABI version %d, this host speaks versions %d to %d", ErrInvalid, v, abi.MinVersion, abi.Version)
	}
	p.version = v
	if f := in.mod.ExportedFunction(abi.ExportPolicyFlags); f != nil {
		if err := in.setupCall(f); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, abi.ExportPolicyFlags, err)
		}
		p.flags = int32(in.stack[0])
	}
	if bits := p.flags &^ flagsOf(v); bits != 0 {
		return fmt.Errorf("%w: %s sets %s, which ABI version %d does not define: %s", ErrInvalid, abi.ExportPolicyFlags, flagNames(bits), v, flagAdvice(bits, v))
	}
	return nil
}

// flagsOf returns the policy_flags bits ABI version v defines.
func flagsOf(v int32) int32 {
	if v >= 2 {
		return abi.FlagStateless | abi.FlagNames | abi.FlagHolds | abi.FlagDetails
	}
	return abi.FlagStateless
}

// flagNames names policy_flags bits as the ABI does ("bit 1 (NAMES)"), an
// unknown bit by its number.
func flagNames(bits int32) string {
	known := map[int32]string{abi.FlagStateless: "STATELESS", abi.FlagNames: "NAMES", abi.FlagHolds: "HOLDS", abi.FlagDetails: "DETAILS"}
	var out []string
	for i := range 32 {
		bit := int32(1) << i
		if bits&bit == 0 {
			continue
		}
		if name, ok := known[bit]; ok {
			out = append(out, fmt.Sprintf("bit %d (%s)", i, name))
		} else {
			out = append(out, fmt.Sprintf("bit %d", i))
		}
	}
	return strings.Join(out, ", ")
}

// flagAdvice says what a module whose policy_flags sets bits its version
// does not define should do.
func flagAdvice(bits, v int32) string {
	if v < 2 && bits&^flagsOf(2) == 0 {
		return "a module that asks for them declares abi_version 2"
	}
	return "no ABI version this host speaks defines them; clear them"
}

// readSchema reads the configuration schema the module declares through
// its config_schema export (ABI v2), if it has one.
func (p *Plugin) readSchema(in *instance) error {
	f := in.mod.ExportedFunction(abi.ExportConfigSchema)
	if f == nil {
		return nil
	}
	if p.version < 2 {
		return fmt.Errorf("%w: %s is ABI version 2; the module declares version %d", ErrInvalid, abi.ExportConfigSchema, p.version)
	}
	if err := in.setupCall(f); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, abi.ExportConfigSchema, err)
	}
	ptr, n := abi.UnpackArena(int64(in.stack[0]))
	if n == 0 {
		return nil
	}
	if n > abi.MaxSchemaBytes {
		return fmt.Errorf("%w: %s: the schema is %d bytes, over the limit of %d", ErrInvalid, abi.ExportConfigSchema, n, abi.MaxSchemaBytes)
	}
	text, ok := in.mem.Read(ptr, n)
	if !ok {
		return fmt.Errorf("%w: %s: [%d, +%d) lies outside guest memory", ErrInvalid, abi.ExportConfigSchema, ptr, n)
	}
	text = bytes.Clone(text)
	s, err := schema.Parse(text)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, abi.ExportConfigSchema, err)
	}
	p.schema, p.schemaText = s, text
	return nil
}

// checkConfig checks a configuration document against the module's schema.
// The error (a *schema.Error) names the field.
func (p *Plugin) checkConfig(doc []byte) error {
	if p.schema == nil {
		return nil
	}
	return p.schema.Validate(doc)
}

// configError is err, a refusal of a configuration document, with what is
// known of the module that refused it.
func (p *Plugin) configError(err error) *ConfigError {
	return &ConfigError{Err: err, Slot: p.slot, Version: p.version, Stateless: p.Stateless(), Schema: bytes.Clone(p.schemaText)}
}

// ConfigSchema returns the JSON text of the configuration schema the module
// declared, nil when it declared none.
func (p *Plugin) ConfigSchema() []byte { return bytes.Clone(p.schemaText) }

// build makes a configured instance.
func (p *Plugin) build(ctx context.Context) (*instance, error) {
	in, err := newInstance(ctx, p, phaseBuild)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	doc, gen := p.config, p.cfgGen.Load()
	p.mu.Unlock()
	if err := in.configure(doc, gen); err != nil {
		in.close()
		return nil, fmt.Errorf("configure: %w", err)
	}
	return in, nil
}

// Name returns the name the plugin was loaded under.
func (p *Plugin) Name() string { return p.name }

// Slot returns the decision the plugin makes.
func (p *Plugin) Slot() policy.Slot { return p.slot }

// Hash returns the hex SHA-256 of the module's bytes.
func (p *Plugin) Hash() string { return hex.EncodeToString(p.key[:]) }

// Stateless reports whether the plugin declared itself stateless (and so
// runs on a pool of instances).
func (p *Plugin) Stateless() bool { return p.flags&abi.FlagStateless != 0 }

// Flags returns the flags of the module's policy_flags that the host acts
// on, named as the ABI names them, in bit order: STATELESS, then for an
// ABI v2 module NAMES (the names table, which DETAILS implies), HOLDS (a
// fairness policy that may answer hold) and DETAILS.
func (p *Plugin) Flags() []string {
	var names []string
	if p.Stateless() {
		names = append(names, "STATELESS")
	}
	reads, details := p.Reads()
	if reads {
		names = append(names, "NAMES")
	}
	if p.mayHold() {
		names = append(names, "HOLDS")
	}
	if details {
		names = append(names, "DETAILS")
	}
	return names
}

// mayHold reports whether the module declared (ABI v2) that it may answer
// hold; only a fairness decision can.
func (p *Plugin) mayHold() bool {
	return p.version >= 2 && p.slot == policy.SlotFairness && p.flags&abi.FlagHolds != 0
}

// Version returns the ABI version the module declared.
func (p *Plugin) Version() int32 { return p.version }

// Reads reports which table the module asked for (ABI v2) and is sent with
// each decision when the caller has it: names (agent ids, lane names),
// which details imply, and details (sessions, labels, the agents' weights,
// ceilings and labels, error codes).
func (p *Plugin) Reads() (names, details bool) {
	e := p.entry()
	return e != 0, e >= abi.DetailEntrySize
}

// entry returns the entry size of the names or details table the plugin
// asked for (ABI v2), 0 for none.
func (p *Plugin) entry() uint32 {
	if p.version < 2 {
		return 0
	}
	return abi.EntrySize(p.flags)
}

// Config returns the plugin's current configuration document.
func (p *Plugin) Config() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]byte(nil), p.config...)
}

// Configure passes a new configuration document to the plugin. A document
// that does not satisfy the module's schema is refused first, with an
// error (wrapping a *schema.Error) that names the field. The guest
// validates it on one instance next; if it refuses, the error says why and
// the plugin keeps its old configuration. The other instances pick the new
// document up before their next decision. A plugin with no instance
// (restored disabled, or disabled after its instances were lost) keeps the
// document for the instances Enable builds. Configure does not make the
// smoke decision (Trial does): a plugin may be given a configuration
// under which it faults.
//
// An empty document puts the plugin back to no configuration: a module
// keeps its settings when configured with one (ABI: "keep your defaults"),
// so its instances are replaced by fresh ones, which start as a load with
// no configuration does; their state is lost, as after a fault, and a
// decision that comes while one is being built falls back (rebuilding).
func (p *Plugin) Configure(ctx context.Context, config []byte) error {
	if len(bytes.TrimSpace(config)) == 0 {
		p.reset()
		return nil
	}
	if err := p.checkConfig(config); err != nil {
		return fmt.Errorf("configure plugin %q: %w", p.name, p.configError(err))
	}
	doc := append([]byte(nil), config...)
	p.mu.Lock()
	if p.live.Load() == 0 && !p.closed {
		// No instance to configure, and none being rebuilt (live counts
		// those): Enable's builds read the configuration under p.mu.
		p.config = doc
		p.cfgGen.Add(1)
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	in, err := p.acquireWait(ctx)
	if err != nil {
		return fmt.Errorf("configure plugin %q: %w", p.name, err)
	}
	p.mu.Lock()
	gen := p.cfgGen.Load() + 1
	if err := in.configure(doc, gen); err != nil {
		p.mu.Unlock()
		f := in.callFault(err)
		p.discard(in) // its settings may be half applied; rebuild with the old ones
		return fmt.Errorf("configure plugin %q: %w", p.name, p.configError(p.configureError(f, err)))
	}
	p.config = doc
	p.cfgGen.Store(gen)
	p.mu.Unlock()
	p.release(in)
	return nil
}

// reset puts the plugin back to no configuration (Configure with an empty
// document): the instances configured before are discarded, those idle at
// once and those deciding when they next begin a decision, and rebuilt
// under none.
func (p *Plugin) reset() {
	p.mu.Lock()
	gen := p.cfgGen.Load() + 1
	p.config = nil
	p.cfgGen.Store(gen)
	p.resetGen.Store(gen)
	p.mu.Unlock()
	for range p.size {
		in := p.idle.tryGet()
		if in == nil {
			return
		}
		if in.cfgGen >= gen { // already rebuilt under none
			p.release(in)
			return
		}
		p.discard(in)
	}
}

// Trial checks a configuration document as a load of the module with it
// would (and so a server's restart with it stored): against the module's
// schema, then on a fresh instance, which the guest configures with it and
// which makes the smoke decision, under the load's bounds. The plugin's
// own instances, their state and its breaker are not touched. The error
// is a *ConfigError when the schema or the guest refused doc, a
// *SmokeError when the decision faulted. Call it before Configure to
// refuse a configuration under which the plugin would not load.
func (p *Plugin) Trial(ctx context.Context, doc []byte) error {
	if err := p.checkConfig(doc); err != nil {
		return fmt.Errorf("try a configuration of plugin %q: %w", p.name, p.configError(err))
	}
	if err := p.trial(ctx, doc); err != nil {
		return fmt.Errorf("try a configuration of plugin %q: %w", p.name, err)
	}
	return nil
}

func (p *Plugin) trial(ctx context.Context, doc []byte) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.rebuilds.Add(1) // under p.mu, so that Close waits for the trial instance
	p.mu.Unlock()
	defer p.rebuilds.Done()
	in, err := newInstance(ctx, p, phaseLoad)
	if err != nil {
		return fmt.Errorf("a trial instance: %w", err)
	}
	defer in.close()
	if err := in.configure(doc, 0); err != nil {
		f := in.callFault(err)
		if f.unasked {
			return ErrClosed
		}
		return p.configError(p.configureError(f, err))
	}
	return in.smoke()
}

// State says whether a plugin decides.
type State uint8

// Plugin states.
const (
	StateActive      State = iota // it decides
	StateProbation                // back from quarantine: it decides, and a fault quarantines it again at once
	StateQuarantined              // its breaker tripped: the fallback decides until Stats.Until
	StateDisabled                 // an instance could not be rebuilt: the fallback decides until Plugin.Enable
)

// String returns the state's lower-case name, as used in metrics.
func (s State) String() string {
	switch s {
	case StateActive:
		return "active"
	case StateProbation:
		return "probation"
	case StateQuarantined:
		return "quarantined"
	case StateDisabled:
		return "disabled"
	}
	return "unknown"
}

// Disabled reports whether the plugin does not decide now (quarantined or
// disabled), and why. A quarantine whose end has passed no longer counts:
// the next decision asks the plugin (see state).
func (p *Plugin) Disabled() (bool, string) {
	st, why, _ := p.state()
	return st == StateQuarantined || st == StateDisabled, why
}

// state returns the plugin's state as the next decision will find it. A
// quarantine is ended by the first decision after its end (probe), so a
// reader between the two would otherwise see QUARANTINED with an end in
// the past: past the end it reads as PROBATION, which that decision starts.
func (p *Plugin) state() (State, string, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch u := p.until.Load(); {
	case u != 0 && time.Since(p.rt.epoch) >= time.Duration(u):
		return StateProbation, "", time.Time{}
	case u != 0:
		return StateQuarantined, p.disabledWhy, p.rt.wallAt(time.Duration(u))
	case p.disabled.Load():
		return StateDisabled, p.disabledWhy, time.Time{}
	case p.probation.Load() > 0:
		return StateProbation, "", time.Time{}
	}
	return StateActive, "", time.Time{}
}

// Enable puts a quarantined or disabled plugin back to work at once, with a
// clean slate: no debt, the shortest quarantine next time.
func (p *Plugin) Enable() {
	p.mu.Lock()
	was := p.disabled.Load()
	closed := p.closed
	p.debt.Store(0)
	p.stall.Store(0)
	p.probation.Store(0)
	p.backoff = p.rt.cfg.QuarantineBase
	p.disabledWhy = ""
	p.until.Store(0)
	p.disabled.Store(false)
	lost := 0
	if was && !closed {
		for int(p.live.Load()) < p.size { // replace instances lost while disabled
			p.live.Add(1)
			p.rebuilds.Add(1)
			p.building.Add(1)
			lost++
		}
	}
	p.mu.Unlock()
	if !was || closed {
		return
	}
	for range lost {
		go p.rebuild(nil)
	}
	p.emit(Event{Kind: EventEnabled, Reason: "enabled"})
}

// Close releases the plugin's instances. Its wrappers keep answering
// through their fallbacks. A call running on one of its instances when
// Close is called (a decision, or the setting up of an instance being
// rebuilt) is halted as Runtime.Close halts it, whatever its deadline and
// fuel: it ends at its next metered point, a decision falls back and
// counts no fault, and the instance is discarded; no call of the plugin's
// starts after Close. Close returns once none runs; if one still runs
// after closeWait or when ctx is done, Close returns an error and the
// halting, and the release of the module, go on in the background.
func (p *Plugin) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	// Closed first, so that a rebuild the halt stops does not disable the
	// plugin on its way out; then no call starts (stopping is set before
	// the halt's first look: see callWith).
	p.shutdown()
	p.stopping.Store(true)
	halted := p.rt.dog.haltPlugin(p)
	release := func() {
		p.rebuilds.Wait() // an instance being rebuilt is closed as it is put back
		p.rt.mu.Lock()
		delete(p.rt.plugins, p)
		p.rt.mu.Unlock()
		p.rt.releaseCompiled(context.Background(), p.key)
	}
	if err := awaitHalted(ctx, closeWait, halted); err != nil {
		go func() {
			<-halted
			release()
		}()
		return fmt.Errorf("close plugin %q: %w", p.name, err)
	}
	release()
	return nil
}

func (p *Plugin) shutdown() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.idle.close()
}

// acquire returns an idle instance, or nil and why the decision must fall
// back: the plugin is disabled or closed, or an instance is being rebuilt
// after a fault (waiting for it would stall the engine for milliseconds).
// When every instance is merely busy with another decision, it waits for
// one.
func (p *Plugin) acquire() (*instance, outcome) {
	if p.disabled.Load() && !p.probe() {
		return nil, out
	}
	if in := p.idle.tryGet(); in != nil {
		return in, decided
	}
	if p.idle.closed.Load() {
		return nil, closed
	}
	if int(p.live.Load()) < p.size || (p.building.Load() > 0 && !p.rt.cfg.AwaitRebuilds) {
		return nil, rebuilding
	}
	if in := p.idle.get(nil); in != nil {
		return in, decided
	}
	return nil, closed
}

// acquireWait waits for an instance, for operations that are not decisions.
func (p *Plugin) acquireWait(ctx context.Context) (*instance, error) {
	if in := p.idle.get(ctx.Done()); in != nil {
		return in, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, ErrClosed
}

// release returns a healthy instance to the pool.
func (p *Plugin) release(in *instance) { p.idle.put(in) }

// discard drops a broken instance and starts building its replacement.
// Closing it is left to the goroutine that builds the replacement, off the
// decision's path: an instance's close releases its memory (megabytes) and
// takes the wazero runtime's lock, which an instantiation running at the
// same time holds for as long as it copies a module's data in.
func (p *Plugin) discard(in *instance) {
	p.mu.Lock()
	stop := p.closed || (p.disabled.Load() && p.until.Load() == 0)
	if !stop {
		p.rebuilds.Add(1) // under p.mu, so that Close waits for it
		p.building.Add(1)
	}
	p.mu.Unlock()
	if stop {
		in.close()
		p.live.Add(-1)
		return
	}
	go p.rebuild(in)
}

// rebuild closes a discarded instance (old; nil when there is none) and
// builds one to replace it; live already counts it.
func (p *Plugin) rebuild(old *instance) {
	defer p.rebuilds.Done()
	defer p.building.Add(-1) // after the new instance is in the pool, or live no longer counts it
	if old != nil {
		old.close()
	}
	in, err := p.build(context.Background())
	if err != nil {
		p.live.Add(-1)
		p.disable(fmt.Sprintf("cannot rebuild an instance: %v", err))
		return
	}
	p.release(in)
}

// fault records a failed decision that took took, and feeds the breaker:
// a deadline fault, a fault on probation, BreakerThreshold faults or
// BreakerStall of faulted time (both net of forgiveness) quarantine the
// plugin.
func (p *Plugin) fault(kind FaultKind, reason string, took time.Duration) {
	p.stats.faults[kind].Add(1)
	p.emit(Event{Kind: EventFault, Fault: kind, Reason: reason})
	cfg := &p.rt.cfg
	limit := int64(cfg.BreakerThreshold) * int64(cfg.BreakerForgive)
	debt := p.debt.Add(int64(cfg.BreakerForgive))
	stall := p.stall.Add(int64(took))
	switch {
	case kind == FaultDeadline:
		p.quarantine(fmt.Sprintf("a decision ran past its deadline of %s: %s", cfg.Deadline, reason))
	case p.probation.Load() > 0:
		p.quarantine(fmt.Sprintf("a fault on probation: %s: %s", kind, reason))
	case debt >= limit:
		p.quarantine(fmt.Sprintf("%d faults in quick succession, the last: %s: %s", cfg.BreakerThreshold, kind, reason))
	case stall >= int64(cfg.BreakerStall):
		p.quarantine(fmt.Sprintf("faulted decisions took %s, more than %s, the last: %s: %s",
			time.Duration(stall).Round(time.Microsecond), cfg.BreakerStall, kind, reason))
	}
}

// succeeded forgives a little of the breaker's debt and counts down a
// probation.
func (p *Plugin) succeeded() {
	for {
		d := p.debt.Load()
		if d <= 0 || p.debt.CompareAndSwap(d, d-1) {
			break
		}
	}
	for {
		s := p.stall.Load()
		if s <= 0 {
			break
		}
		// Divided only when there is a stall to forgive: a healthy
		// plugin's decisions pay no division.
		forgive := int64(p.rt.cfg.BreakerStall) / int64(p.rt.cfg.BreakerForgive*p.rt.cfg.BreakerThreshold)
		if p.stall.CompareAndSwap(s, max(s-forgive, 0)) {
			break
		}
	}
	if p.probation.Load() > 0 && p.probation.Add(-1) == 0 {
		p.mu.Lock()
		p.backoff = p.rt.cfg.QuarantineBase // passed: the next quarantine is short again
		p.mu.Unlock()
		// No event (the state reads ACTIVE again): one INFO line, so that
		// an operator who read the quarantine's lines reads its end too.
		p.rt.enqueueLog(logLine{level: slog.LevelInfo, plugin: p.name, msg: "plugin passed its probation: trusted again",
			attrs: []any{"decisions", p.rt.cfg.Probation, "next_quarantine", p.rt.cfg.QuarantineBase.String()}})
	}
}

// quarantine takes the plugin out for its current backoff, and doubles the
// next one.
func (p *Plugin) quarantine(why string) {
	p.mu.Lock()
	if p.until.Load() != 0 || p.disabled.Load() || p.closed {
		p.mu.Unlock()
		return
	}
	d := p.backoff
	p.backoff = min(2*p.backoff, p.rt.cfg.QuarantineMax)
	until := time.Since(p.rt.epoch) + d
	p.until.Store(int64(until))
	p.probation.Store(0)
	p.debt.Store(0)
	p.stall.Store(0)
	p.disabledWhy = fmt.Sprintf("quarantined for %s: %s", d, why)
	p.disabled.Store(true)
	p.mu.Unlock()
	p.stats.quarantines.Add(1)
	p.emit(Event{Kind: EventQuarantined, Reason: p.disabledWhy, Until: p.rt.wallAt(until)})
}

// probe ends a quarantine whose time is up, putting the plugin on
// probation, and reports whether it may decide.
func (p *Plugin) probe() bool {
	u := p.until.Load()
	if u == 0 || time.Since(p.rt.epoch) < time.Duration(u) {
		return false
	}
	p.mu.Lock()
	if p.until.Load() != u || p.closed {
		p.mu.Unlock()
		return !p.disabled.Load()
	}
	p.until.Store(0)
	p.disabledWhy = ""
	p.probation.Store(int64(p.rt.cfg.Probation))
	p.disabled.Store(false)
	p.mu.Unlock()
	p.emit(Event{Kind: EventEnabled, Reason: fmt.Sprintf("quarantine over: on probation for %d decisions", p.rt.cfg.Probation)})
	return true
}

func (p *Plugin) disable(why string) {
	p.mu.Lock()
	if (p.disabled.Load() && p.until.Load() == 0) || p.closed {
		p.mu.Unlock()
		return
	}
	p.until.Store(0)
	p.disabled.Store(true)
	p.disabledWhy = why
	p.mu.Unlock()
	p.emit(Event{Kind: EventDisabled, Reason: why})
}

func (p *Plugin) emit(e Event) {
	e.Plugin, e.Slot, e.Time = p.name, p.slot, time.Now()
	if l, ok := eventLine(e); ok {
		p.rt.enqueueLog(l)
	}
	if f := p.rt.cfg.OnEvent; f != nil {
		f(e)
	}
}

// eventLine is the log line of a change of the breaker's state, the one
// line it gets (Config.OnEvent's receiver logs none of its own): a
// quarantine or a disable at WARN, since the plugin's slot is decided by
// the native fallback meanwhile, and its end at INFO, as good news. A
// fault is counted, not logged: the breaker's quarantine says enough.
func eventLine(e Event) (logLine, bool) {
	l := logLine{level: slog.LevelWarn, plugin: e.Plugin, attrs: []any{"reason", e.Reason}}
	switch e.Kind {
	case EventQuarantined:
		l.msg = "plugin quarantined by its breaker; its slot uses the native fallback until the quarantine ends"
		l.attrs = append(l.attrs, "until", e.Until.UTC().Format(untilFormat))
	case EventDisabled:
		l.msg = "plugin disabled: its slot uses the native fallback until it is enabled"
	case EventEnabled:
		l.level, l.msg = slog.LevelInfo, "plugin enabled"
	default:
		return logLine{}, false
	}
	return l, true
}

// untilFormat is how a log line writes the end of a quarantine: UTC, to
// the millisecond, as Hold.Reason writes a re-ask.
const untilFormat = "2006-01-02T15:04:05.000Z07:00"

// logGuest writes a guest's log line, if the plugin's rate limit allows.
func (p *Plugin) logGuest(level int32, msg func() []byte) {
	p.logMu.Lock()
	now := time.Since(p.rt.epoch)
	rate := float64(p.rt.cfg.LogLines)
	p.logTokens = min(p.logTokens+rate*(now-p.logLast).Seconds(), 2*rate)
	p.logLast = now
	ok := p.logTokens >= 1
	if ok {
		p.logTokens--
	}
	p.logMu.Unlock()
	if !ok {
		p.stats.logDropped.Add(1)
		return
	}
	l := slog.LevelInfo
	switch level {
	case abi.LogDebug:
		l = slog.LevelDebug
	case abi.LogWarn:
		l = slog.LevelWarn
	case abi.LogError:
		l = slog.LevelError
	}
	if !p.rt.enqueueLog(logLine{level: l, msg: sanitize(msg()), plugin: p.name}) {
		p.stats.logDropped.Add(1) // the logger is behind: the line is not worth a decision's wait
		return
	}
	p.stats.logLines.Add(1)
}

// begin starts a decision: an instance with the current configuration, or
// nil and why the decision must fall back.
func (p *Plugin) begin() (*instance, result) {
	in, o := p.acquire()
	if in == nil {
		return nil, result{o: o}
	}
	if p.idle.closed.Load() {
		// Closed (with the runtime, perhaps, and its watchdog stopped)
		// after this instance was put back but before put closed it: it
		// must not run again. put closes it now.
		p.idle.put(in)
		return nil, result{o: closed}
	}
	if in.cfgGen < p.resetGen.Load() {
		// Configured before a reset to no configuration: replaced, not
		// reconfigured (it would keep its settings).
		p.discard(in)
		return nil, result{o: rebuilding}
	}
	if gen := p.cfgGen.Load(); in.cfgGen != gen {
		p.mu.Lock()
		doc, gen := p.config, p.cfgGen.Load()
		p.mu.Unlock()
		if err := in.configure(doc, gen); err != nil {
			return nil, p.finish(in, in.callFault(err))
		}
	}
	return in, result{}
}

// slotExport returns the export that implements slot.
func slotExport(s policy.Slot) string {
	switch s {
	case policy.SlotSelection:
		return abi.ExportSelection
	case policy.SlotFairness:
		return abi.ExportFairness
	case policy.SlotRetry:
		return abi.ExportRetry
	}
	return ""
}
