// Package manager keeps a server's policy plugins: the built-in policies
// (as WebAssembly modules by default, natively on request), the plugins
// operators load at run time, and which policy fills each engine slot. It
// persists loaded plugins and policy choices as engine settings so that a
// restart — or another node — comes back with the same policies, and it
// reports plugin events (loads, faults, breaker trips) to subscribers.
//
// Swapping a policy is atomic between two engine decisions: the engine takes
// the new policy under its lock, so no decision ever sees half a swap and no
// task is lost.
package manager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/priofirst"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// NativePrefix names the native form of a built-in policy ("native:fair-share").
const NativePrefix = "native:"

// DefaultMaxWasmBytes caps an uploaded module.
const DefaultMaxWasmBytes = 16 << 20

// Options configure a Manager.
type Options struct {
	// Native makes the native built-ins the default policies instead of
	// their WebAssembly builds.
	Native bool
	// MaxWasmBytes caps an uploaded module (default 16 MiB).
	MaxWasmBytes int
	Logger       hclog.Logger
	// SharedRuntime says that the runtime outlives the manager (a cluster
	// node's, kept across its leaderships so that the modules it keeps
	// compiled serve the next): Close closes the manager's plugins, not
	// the runtime.
	SharedRuntime bool
}

// Info describes a policy a slot can use.
type Info struct {
	Name     string
	Slot     policy.Slot
	Builtin  bool   // ships with Switchyard
	Native   bool   // native Go, not WebAssembly
	Hash     string // SHA-256 of the module, for WebAssembly
	Size     int    // module bytes
	Config   json.RawMessage
	LoadedAt time.Time
	Stats    host.Stats // zero for native policies
	ActiveIn []string   // the assignments using it: "global" or "lane:<name>"
	// Replaced, set by Load only, says what the load replaced: the plugin
	// loaded under the same name before (its slot, module and whether its
	// configuration was dropped); "" when the name was new.
	Replaced string
}

// EventKind says what happened.
type EventKind string

// Event kinds.
const (
	EventLoaded     EventKind = "LOADED"
	EventUnloaded   EventKind = "UNLOADED"
	EventConfigured EventKind = "CONFIGURED"
	EventPolicySet  EventKind = "POLICY_SET"
	EventFault      EventKind = "FAULT"
	EventDisabled   EventKind = "DISABLED"
	EventEnabled    EventKind = "ENABLED"
	// EventQuarantined: the breaker quarantined the plugin; Event.Reason
	// says why and for how long, Event.Until until when.
	EventQuarantined EventKind = "QUARANTINED"
	EventRefused     EventKind = "REFUSED" // a module refused at load, or a stored plugin or choice not restored at start
)

// Event is a plugin event.
type Event struct {
	Seq    uint64
	Kind   EventKind
	Plugin string
	Slot   policy.Slot
	Lane   string // for EventPolicySet: "" for every lane
	Reason string
	At     time.Time
	Until  time.Time // for EventQuarantined: when the quarantine ends
	Lagged uint64    // events this subscriber missed before this one
}

type entry struct {
	info   Info
	plugin *host.Plugin  // nil for native policies
	native policy.Policy // the native policy, for native entries and as the fallback
}

// Manager keeps the plugins of one engine.
type Manager struct {
	e    *engine.Engine
	rt   *host.Runtime
	opts Options
	log  hclog.Logger

	mu      sync.Mutex
	entries map[string]*entry

	evMu sync.Mutex
	seq  uint64
	subs map[*subscriber]struct{}
	// startup holds what went wrong while Start restored the stored
	// plugins and choices; every subscriber receives these first, since
	// nobody can be subscribed while a server starts.
	startup []Event
}

type subscriber struct {
	ch     chan Event
	missed uint64
}

// stored is a loaded plugin as persisted.
type stored struct {
	Wasm     []byte          `json:"wasm"`
	Config   json.RawMessage `json:"config,omitempty"`
	LoadedAt time.Time       `json:"loadedAt"`
}

const (
	pluginPrefix = "plugin/"
	policyPrefix = "policy/"
)

// New returns a manager over e and rt. To receive the runtime's fault and
// breaker events, create rt with Config.OnEvent calling the manager's
// HostEvent:
//
//	var m *manager.Manager
//	rt, err := host.New(host.Config{OnEvent: func(ev host.Event) { m.HostEvent(ev) }})
//	m = manager.New(e, rt, opts)
func New(e *engine.Engine, rt *host.Runtime, opts Options) *Manager {
	if opts.MaxWasmBytes <= 0 {
		opts.MaxWasmBytes = DefaultMaxWasmBytes
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	return &Manager{e: e, rt: rt, opts: opts, log: opts.Logger.Named("plugins"), entries: map[string]*entry{}, subs: map[*subscriber]struct{}{}}
}

// HostEvent turns a runtime event into a plugin event. Pass it as
// host.Config.OnEvent. It never blocks.
func (m *Manager) HostEvent(ev host.Event) {
	if m == nil {
		return
	}
	// The runtime logs its breaker's changes itself (host.Config.Logger),
	// once each: they are published here, not logged again.
	kind := EventFault
	switch ev.Kind {
	case host.EventDisabled:
		kind = EventDisabled
	case host.EventQuarantined:
		kind = EventQuarantined
	case host.EventEnabled:
		kind = EventEnabled
	}
	reason := ev.Reason
	if ev.Kind == host.EventFault {
		reason = ev.Fault.String() + ": " + ev.Reason
	}
	m.publish(Event{Kind: kind, Plugin: ev.Plugin, Slot: ev.Slot, Reason: reason, At: ev.Time, Until: ev.Until})
}

// Start registers the built-in policies (WebAssembly and native), makes the
// defaults active, reloads the plugins persisted by earlier runs and
// reapplies the persisted policy choices.
func (m *Manager) Start(ctx context.Context) error {
	for _, mod := range builtin.Modules() {
		nat := mod.Native()
		m.entries[NativePrefix+mod.Name] = &entry{info: Info{Name: NativePrefix + mod.Name, Slot: mod.Slot, Builtin: true, Native: true}, native: nat}
		p, err := m.rt.Load(ctx, mod.Name, mod.Wasm, nil)
		if err != nil {
			return fmt.Errorf("built-in policy %s: %w", mod.Name, err)
		}
		m.entries[mod.Name] = &entry{info: Info{Name: mod.Name, Slot: mod.Slot, Builtin: true, Hash: p.Hash(), Size: len(mod.Wasm), LoadedAt: time.Now()},
			plugin: p, native: nat}
	}
	// Built-in policies without a WebAssembly build, chosen by name with
	// setPolicy: priority-first fairness.
	m.entries[priofirst.Name] = &entry{info: Info{Name: priofirst.Name, Slot: policy.SlotFairness, Builtin: true, Native: true},
		native: policy.Policy{Fairness: &priofirst.Fairness{}}}
	// The defaults are not stored as choices: a later start (perhaps with
	// other defaults) applies its own, then the operator's stored choices.
	for _, mod := range builtin.Modules() {
		name := mod.Name
		if m.opts.Native {
			name = NativePrefix + mod.Name
		}
		if err := m.applyAs(mod.Slot, "", name, false); err != nil {
			return err
		}
	}
	persisted := m.e.Settings(pluginPrefix)
	for _, key := range slices.Sorted(maps.Keys(persisted)) {
		name := strings.TrimPrefix(key, pluginPrefix)
		var st stored
		if err := json.Unmarshal(persisted[key], &st); err != nil {
			return fmt.Errorf("stored plugin %s does not parse: %w", name, err)
		}
		info, err := m.load(ctx, name, st.Wasm, st.Config, st.LoadedAt, true)
		if err == nil && info.Stats.State == host.StateDisabled {
			// It loads, but not under its stored configuration (or its
			// smoke decision faults now): it is kept, out of service, so
			// that the operator can configure or enable it.
			m.log.Error("a stored plugin was restored disabled; policies that use it fall back to the built-ins until it is enabled", "plugin", name, "reason", info.Stats.Reason)
			m.publishStartup(Event{Kind: EventDisabled, Plugin: name, Slot: info.Slot, At: time.Now(), Reason: info.Stats.Reason})
		}
		if err != nil {
			// A plugin that no longer loads (a newer ABI, a changed host)
			// must not keep the server down: report it and carry on with
			// the built-ins.
			m.log.Error("a stored plugin failed to load; policies that used it fall back to the built-ins", "plugin", name, "error", err)
			m.publishStartup(Event{Kind: EventRefused, Plugin: name, At: time.Now(),
				Reason: fmt.Sprintf("the stored plugin did not load at start: %v", err)})
		}
	}
	choices := m.e.Settings(policyPrefix)
	for _, key := range slices.Sorted(maps.Keys(choices)) {
		slotName, lane, _ := strings.Cut(strings.TrimPrefix(key, policyPrefix), "/")
		slot, ok := policy.ParseSlot(slotName)
		var v struct{ Name string }
		if !ok || json.Unmarshal(choices[key], &v) != nil || v.Name == "" {
			m.log.Error("ignoring an unreadable stored policy choice", "key", key)
			m.publishStartup(Event{Kind: EventRefused, At: time.Now(),
				Reason: fmt.Sprintf("the stored policy choice %s does not parse; it was not restored", key)})
			continue
		}
		if lane != "" {
			if _, err := m.e.Lane(ctx, lane); engine.IsCode(err, engine.CodeNotFound) {
				// A choice for a lane deleted by an older version, which
				// left it behind: it can govern nothing, so it is dropped
				// (once: it is gone at the next start).
				if err := m.e.ClearLanePolicy(slot, lane); err != nil {
					return fmt.Errorf("dropping the stored %s policy choice of lane %s, which no longer exists: %w", slot, lane, err)
				}
				m.log.Warn("dropped a stored policy choice for a lane that no longer exists", "slot", slot, "lane", lane, "policy", v.Name)
				continue
			}
		}
		if err := m.apply(slot, lane, v.Name); err != nil {
			now := m.currentName(slot, lane)
			m.log.Error("a stored policy choice could not be restored", "slot", slot, "lane", laneField(lane), "policy", v.Name, "using", now, "error", err)
			m.publishStartup(Event{Kind: EventRefused, Plugin: v.Name, Slot: slot, Lane: lane, At: time.Now(),
				Reason: fmt.Sprintf("the stored %s policy for %s, %s, was not restored (%v); %s is in use", slot, laneOrAll(lane), v.Name, err, now)})
			continue
		}
		m.log.Info("policy choice restored", "slot", slot, "lane", laneField(lane), "policy", v.Name)
	}
	return nil
}

// Load validates a module (ABI, exports, imports, a smoke decision), loads it
// under name and persists it. The plugin is not used until SetPolicy assigns
// it. Loading a name that exists replaces it only if it is not in use.
func (m *Manager) Load(ctx context.Context, name string, wasm, config []byte) (Info, error) {
	// A request that names no plugin it could load (its name, its
	// configuration's syntax, a slot's plugin) is the caller's error alone;
	// a module is refused below, visibly.
	switch {
	case !validName(name):
		return Info{}, invalid("name", "%q is not a plugin name (letters, digits, '-', '_' and '.', at most 64)", name)
	case strings.HasPrefix(name, NativePrefix):
		return Info{}, invalid("name", "names starting with %q are reserved", NativePrefix)
	}
	if len(config) > 0 && !json.Valid(config) {
		return Info{}, invalid("config", "is not valid JSON")
	}
	m.mu.Lock()
	old := m.entries[name]
	if old != nil && (old.info.Builtin || len(m.usesLocked(name)) > 0) {
		m.mu.Unlock()
		return Info{}, conflict("plugin %s is built in or in use; load the new module under another name and switch to it", name)
	}
	var prev Info
	if old != nil {
		prev = old.info
	}
	m.mu.Unlock()
	now := time.Now()
	var info Info
	var err error
	switch {
	case len(wasm) == 0:
		err = invalid("wasm", "the module is empty")
	case len(wasm) > m.opts.MaxWasmBytes:
		err = &engine.Error{Code: engine.CodeLimit, Field: "wasm", Message: fmt.Sprintf("the module is %d bytes; the limit is %d (plugins.maxWasmBytes)", len(wasm), m.opts.MaxWasmBytes)}
	default:
		info, err = m.load(ctx, name, wasm, config, now, false)
	}
	if err != nil {
		m.refused(name, err, now)
		return Info{}, err
	}
	raw, _ := json.Marshal(stored{Wasm: wasm, Config: config, LoadedAt: now})
	if err := m.e.SaveSetting(ctx, pluginPrefix+name, raw); err != nil {
		return Info{}, err
	}
	reason := fmt.Sprintf("%s policy, %d bytes, sha256 %s", info.Slot, info.Size, info.Hash)
	if prev.Name != "" {
		info.Replaced = replaced(prev, info, config)
		reason += "; replaced " + info.Replaced
		m.log.Info("a plugin was replaced by a load under its name", "plugin", name, "replaced", info.Replaced)
	}
	m.publish(Event{Kind: EventLoaded, Plugin: name, Slot: info.Slot, At: now, Reason: reason})
	return info, nil
}

// replaced describes the plugin prev that a load replaced with now (given
// config): its slot (and that it changed), its module, and what became of
// its configuration.
func replaced(prev, now Info, config []byte) string {
	s := fmt.Sprintf("the %s policy %s (sha256 %.12s)", prev.Slot, prev.Name, prev.Hash)
	if prev.Slot != now.Slot {
		s += fmt.Sprintf(", now a %s policy", now.Slot)
	}
	switch {
	case len(prev.Config) == 0:
	case len(config) == 0:
		s += fmt.Sprintf("; its configuration %s was dropped", prev.Config)
	default:
		s += fmt.Sprintf("; its configuration %s was replaced by the one given", prev.Config)
	}
	return s
}

// load loads a module under name; restore loads a stored one as
// host.Runtime.Restore does.
func (m *Manager) load(ctx context.Context, name string, wasm, config []byte, at time.Time, restore bool) (Info, error) {
	loadFn := m.rt.Load
	if restore {
		loadFn = m.rt.Restore
	}
	p, err := loadFn(ctx, name, wasm, config)
	if err != nil {
		if ce := configError(err, "the plugin is not loaded"); ce != nil {
			return Info{}, ce
		}
		if errors.Is(err, host.ErrInvalid) {
			return Info{}, &engine.Error{Code: engine.CodePluginInvalid, Field: "wasm", Message: err.Error()}
		}
		return Info{}, fmt.Errorf("loading plugin %s: %w", name, err)
	}
	mod, _ := builtin.ForSlot(p.Slot())
	e := &entry{info: Info{Name: name, Slot: p.Slot(), Hash: p.Hash(), Size: len(wasm), Config: config, LoadedAt: at},
		plugin: p, native: mod.Native()}
	m.mu.Lock()
	old := m.entries[name]
	m.entries[name] = e
	m.mu.Unlock()
	if old != nil && old.plugin != nil {
		_ = old.plugin.Close(ctx)
	}
	info := e.info
	info.Stats = p.Stats()
	return info, nil
}

// Unload removes a plugin that no slot uses.
func (m *Manager) Unload(ctx context.Context, name string) error {
	m.mu.Lock()
	e := m.entries[name]
	switch {
	case e == nil:
		m.mu.Unlock()
		return &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	case e.info.Builtin:
		m.mu.Unlock()
		return conflict("%s is built in and cannot be unloaded", name)
	}
	if uses := m.usesLocked(name); len(uses) > 0 {
		m.mu.Unlock()
		return conflict("plugin %s is in use (%s); set another policy first", name, strings.Join(uses, ", "))
	}
	delete(m.entries, name)
	m.mu.Unlock()
	_ = e.plugin.Close(ctx)
	if err := m.e.SaveSetting(ctx, pluginPrefix+name, nil); err != nil {
		return err
	}
	m.publish(Event{Kind: EventUnloaded, Plugin: name, Slot: e.info.Slot, At: time.Now()})
	return nil
}

// Configure changes a plugin's configuration live. The document is checked
// as a load checks it: against the module's schema, by the guest's
// configure, and by a smoke decision under it on a fresh instance, so that
// a configuration accepted here does not stop the plugin from loading at
// the next start. If any refuses it (INVALID_INPUT on config, or on the
// culprit's path), the old configuration stays. An empty document (or
// null) puts the plugin back to no configuration, as if it had been loaded
// without one: it is checked the same way (a module that needs a
// configuration refuses it), and the plugin's instances are rebuilt.
func (m *Manager) Configure(ctx context.Context, name string, config []byte) (Info, error) {
	if t := bytes.TrimSpace(config); len(t) == 0 || string(t) == "null" {
		config = nil
	} else if !json.Valid(config) {
		return Info{}, invalid("config", "is not valid JSON")
	}
	m.mu.Lock()
	e := m.entries[name]
	m.mu.Unlock()
	if e == nil {
		return Info{}, &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	}
	if e.plugin == nil {
		return Info{}, invalid("name", "native policies take no configuration")
	}
	err := e.plugin.Trial(ctx, config)
	if err == nil {
		err = e.plugin.Configure(ctx, config)
	}
	if err != nil {
		if ce := configError(err, "the configuration is unchanged"); ce != nil {
			return Info{}, ce
		}
		var se *host.SmokeError
		if errors.As(err, &se) {
			if setting := m.rt.BudgetSetting(se); setting != "" && (config == nil || e.plugin.Trial(ctx, nil) != nil) {
				// It faults under no configuration too: the server's
				// budget is the cause, not this configuration.
				return Info{}, invalid("config", "the plugin's smoke decision faults under any configuration (%s: %s): %s is too small for it, not this configuration at fault; raise it and restart; the configuration is unchanged", se.Kind, se.Reason, setting)
			}
			return Info{}, invalid("config", "under this configuration the plugin's smoke decision faults (%s: %s); the configuration is unchanged", se.Kind, se.Reason)
		}
		return Info{}, &engine.Error{Code: engine.CodePluginInvalid, Field: "config", Message: err.Error()}
	}
	m.mu.Lock()
	e.info.Config = append(json.RawMessage(nil), config...)
	info := m.infoLocked(e)
	m.mu.Unlock()
	if !e.info.Builtin {
		if raw, ok := m.e.Setting(pluginPrefix + name); ok {
			var st stored
			if json.Unmarshal(raw, &st) == nil {
				st.Config = config
				raw, _ = json.Marshal(st)
				if err := m.e.SaveSetting(ctx, pluginPrefix+name, raw); err != nil {
					return Info{}, err
				}
			}
		}
	}
	m.publish(Event{Kind: EventConfigured, Plugin: name, Slot: e.info.Slot, At: time.Now()})
	return info, nil
}

// SetPolicy makes the named policy fill slot, for one lane or (lane "") for
// every lane without its own. Fairness is global. The engine switches
// between two decisions; the choice is persisted.
func (m *Manager) SetPolicy(ctx context.Context, slot policy.Slot, lane, name string) error {
	if err := m.apply(slot, lane, name); err != nil {
		return err
	}
	m.publish(Event{Kind: EventPolicySet, Plugin: name, Slot: slot, Lane: lane, At: time.Now(),
		Reason: fmt.Sprintf("%s policy for %s is now %s", slot, laneOrAll(lane), name)})
	return nil
}

// ClearLanePolicy drops an operator's choice of policy for slot: a lane's
// own (the lane follows the global policy again; a choice stored for a lane
// that no longer exists is dropped too), or with lane "" the global one (the
// server's default fills the slot again: the WebAssembly built-in, or the
// native one on a server started with native policies, and a restart
// applies its own default there).
func (m *Manager) ClearLanePolicy(ctx context.Context, slot policy.Slot, lane string) error {
	if lane == "" {
		mod, ok := builtin.ForSlot(slot)
		if !ok {
			return invalid("slot", "unknown slot %s", slot)
		}
		name := mod.Name
		if m.opts.Native {
			name = NativePrefix + mod.Name
		}
		impl, err := m.impl(slot, name)
		if err != nil {
			return err
		}
		if err := m.e.ResetPolicy(slot, name, impl); err != nil {
			return err
		}
		m.publish(Event{Kind: EventPolicySet, Plugin: name, Slot: slot, At: time.Now(),
			Reason: fmt.Sprintf("%s policy for every lane is the default again, %s", slot, name)})
		return nil
	}
	if err := m.e.ClearLanePolicy(slot, lane); err != nil {
		return err
	}
	m.publish(Event{Kind: EventPolicySet, Slot: slot, Lane: lane, At: time.Now(), Reason: fmt.Sprintf("%s policy for lane %s follows the global one", slot, lane)})
	return nil
}

// currentName is the policy filling slot for lane ("" for the global one).
func (m *Manager) currentName(slot policy.Slot, lane string) string {
	global := ""
	for _, a := range m.e.Policies(context.Background()) { // the engine in this process: read from memory
		if a.Slot != slot {
			continue
		}
		if a.Lane == lane {
			return a.Name
		}
		if a.Lane == "" {
			global = a.Name
		}
	}
	return global
}

func (m *Manager) apply(slot policy.Slot, lane, name string) error {
	return m.applyAs(slot, lane, name, true)
}

// applyAs assigns a policy; choice stores it as the operator's choice (the
// built-in defaults are not stored).
func (m *Manager) applyAs(slot policy.Slot, lane, name string, choice bool) error {
	m.mu.Lock()
	e := m.entries[name]
	m.mu.Unlock()
	if e == nil {
		return &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	}
	if e.info.Slot != slot {
		return invalid("name", "%s is a %s policy, not a %s policy", name, e.info.Slot, slot)
	}
	if slot == policy.SlotFairness && lane != "" {
		return invalid("lane", "fairness is global: it cannot be set per lane")
	}
	impl, err := m.implOf(e, slot)
	if err != nil {
		return err
	}
	if !choice {
		return m.e.SetDefaultPolicy(slot, name, impl)
	}
	switch slot {
	case policy.SlotFairness:
		return m.e.SetFairness(name, impl.(policy.Fairness))
	case policy.SlotSelection:
		return m.e.SetSelection(lane, name, impl.(policy.Selection))
	default:
		return m.e.SetRetry(lane, name, impl.(policy.Retry))
	}
}

// impl is the policy named name as slot's implementation.
func (m *Manager) impl(slot policy.Slot, name string) (any, error) {
	m.mu.Lock()
	e := m.entries[name]
	m.mu.Unlock()
	if e == nil {
		return nil, &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	}
	return m.implOf(e, slot)
}

// implOf is e's implementation of slot: the native policy, or the plugin
// wrapped with its native fallback.
func (m *Manager) implOf(e *entry, slot policy.Slot) (any, error) {
	impl := e.native
	if e.plugin != nil {
		var err error
		switch slot {
		case policy.SlotFairness:
			impl.Fairness, err = e.plugin.Fairness(e.native.Fairness)
		case policy.SlotSelection:
			impl.Selection, err = e.plugin.Selection(e.native.Selection)
		case policy.SlotRetry:
			impl.Retry, err = e.plugin.Retry(e.native.Retry)
		}
		if err != nil {
			return nil, invalid("name", "%v", err)
		}
	}
	switch slot {
	case policy.SlotFairness:
		return impl.Fairness, nil
	case policy.SlotSelection:
		return impl.Selection, nil
	default:
		return impl.Retry, nil
	}
}

// usesLocked lists where a policy is active.
func (m *Manager) usesLocked(name string) []string {
	var out []string
	for _, a := range m.e.Policies(context.Background()) { // the engine in this process: read from memory
		if a.Name != name {
			continue
		}
		if a.Lane == "" {
			out = append(out, "global")
		} else {
			out = append(out, "lane:"+a.Lane)
		}
	}
	return out
}

func (m *Manager) infoLocked(e *entry) Info {
	info := e.info
	info.Config = append(json.RawMessage(nil), e.info.Config...)
	if e.plugin != nil {
		info.Stats = e.plugin.Stats()
	}
	info.ActiveIn = m.usesLocked(e.info.Name)
	return info
}

// MaxWasmBytes returns the largest module Load accepts, so that an API can
// refuse a larger upload before it decodes it (RefuseSize).
func (m *Manager) MaxWasmBytes() int { return m.opts.MaxWasmBytes }

// RefuseSize refuses the upload of a module named name of about n bytes,
// over MaxWasmBytes, that an API refused before decoding it: as Load
// refuses a module over the limit, with a LIMIT error on wasm, a REFUSED
// event and one WARN line, so that an operator sees the upload that
// failed.
func (m *Manager) RefuseSize(_ context.Context, name string, n int) error {
	err := &engine.Error{Code: engine.CodeLimit, Field: "wasm", Message: fmt.Sprintf("the module is about %d bytes; the limit is %d (plugins.maxWasmBytes)", n, m.opts.MaxWasmBytes)}
	m.refused(name, err, time.Now())
	return err
}

// refused announces a refused load of the plugin named name.
func (m *Manager) refused(name string, err error, at time.Time) {
	reason := refusal(name, err)
	// A refused module changes nothing, but an operator who uploaded
	// it looks for it in the log: once, at WARN, beside the event.
	m.log.Warn("a plugin was refused at load; nothing changed", "plugin", name, "reason", reason)
	m.publish(Event{Kind: EventRefused, Plugin: name, At: at, Reason: reason})
}

// List returns every policy available, built-ins first, then by name.
func (m *Manager) List(ctx context.Context) []Info {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Info, 0, len(m.entries))
	for _, e := range m.entries {
		out = append(out, m.infoLocked(e))
	}
	slices.SortFunc(out, func(a, b Info) int {
		if a.Builtin != b.Builtin {
			if a.Builtin {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Get returns one policy.
func (m *Manager) Get(ctx context.Context, name string) (Info, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[name]
	if e == nil {
		return Info{}, &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	}
	return m.infoLocked(e), nil
}

// Enable re-enables a plugin its breaker quarantined or that is disabled.
// A DISABLED plugin is first given the smoke decision a load makes, under
// its configuration, on an instance of its own: if it faults, the plugin
// would fault on its decisions too, and it stays DISABLED (CONFLICT, the
// message naming the fault and, for a budget, its setting) unless force,
// which enables it all the same (logged at WARN).
func (m *Manager) Enable(ctx context.Context, name string, force bool) error {
	m.mu.Lock()
	e := m.entries[name]
	m.mu.Unlock()
	if e == nil || e.plugin == nil {
		return &engine.Error{Code: engine.CodeNotFound, Message: "no plugin " + name}
	}
	if e.plugin.Stats().State == host.StateDisabled {
		if err := e.plugin.Trial(ctx, e.plugin.Config()); err != nil {
			why := err.Error()
			var se *host.SmokeError
			if errors.As(err, &se) {
				why = fmt.Sprintf("its smoke decision faults under its configuration (%s: %s)", se.Kind, se.Reason)
				if setting := m.rt.BudgetSetting(se); setting != "" {
					why += fmt.Sprintf(": %s may be too small for it", setting)
				}
			}
			if !force {
				return conflict("plugin %s stays DISABLED: %s; configure it (or raise the budget and restart), or force the enable", name, why)
			}
			m.log.Warn("a plugin was enabled by force though it faults", "plugin", name, "reason", why)
		}
	}
	e.plugin.Enable()
	return nil
}

// Close releases every plugin.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.plugin != nil {
			_ = e.plugin.Close(ctx)
		}
	}
	if m.opts.SharedRuntime {
		return nil
	}
	return m.rt.Close(ctx)
}

// Subscribe returns a channel of plugin events: first those of Start (a
// stored plugin or policy choice that could not be restored), then new
// ones as they happen. A subscriber that does not
// keep up loses events and learns how many from the next event's Lagged.
// Call stop to unsubscribe.
func (m *Manager) Subscribe(buffer int) (<-chan Event, func()) {
	m.evMu.Lock()
	s := &subscriber{ch: make(chan Event, max(buffer, 1)+len(m.startup))}
	for _, ev := range m.startup {
		s.ch <- ev
	}
	m.subs[s] = struct{}{}
	m.evMu.Unlock()
	return s.ch, func() {
		m.evMu.Lock()
		if _, ok := m.subs[s]; ok {
			delete(m.subs, s)
			close(s.ch)
		}
		m.evMu.Unlock()
	}
}

// publishStartup publishes an event of Start and keeps it for later
// subscribers.
func (m *Manager) publishStartup(ev Event) {
	ev = m.publish(ev)
	m.evMu.Lock()
	m.startup = append(m.startup, ev)
	m.evMu.Unlock()
}

func (m *Manager) publish(ev Event) Event {
	m.evMu.Lock()
	defer m.evMu.Unlock()
	m.seq++
	ev.Seq = m.seq
	for s := range m.subs {
		out := ev
		out.Lagged = s.missed
		select {
		case s.ch <- out:
			s.missed = 0
		default:
			s.missed++
		}
	}
	return ev
}

func validName(s string) bool {
	if s == "" || len(s) > 64+len(NativePrefix) {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

// laneField is a lane as a log line's lane field: its name, or "every
// lane" for a global choice (laneOrAll's "lane x" would read lane="lane x").
func laneField(lane string) string {
	if lane == "" {
		return "every lane"
	}
	return lane
}

func laneOrAll(lane string) string {
	if lane == "" {
		return "every lane"
	}
	return "lane " + lane
}

// refusal is the reason of a refused load of the plugin named name, for
// its REFUSED event and log line: `load plugin "NAME": ` and the error's
// text without the "wasm: " of its input field, which names the API
// argument the module came in and reads in a reason as part of the cause.
// A configuration's refusal keeps its field ("config: …", or the schema's
// path): that says which input was at fault.
func refusal(name string, err error) string {
	msg := err.Error()
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Field == "wasm" {
		c := *ee
		c.Field = ""
		msg = c.Error()
	}
	prefix := fmt.Sprintf("load plugin %q: ", name)
	if strings.HasPrefix(msg, prefix) {
		return msg
	}
	return prefix + msg
}

func invalid(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &engine.Error{Code: engine.CodeConflict, Message: fmt.Sprintf(format, args...)}
}

// configError is the INVALID_INPUT error for a configuration the module's
// schema, its configure or the load's smoke decision refused
// (host.ConfigError), nil for any other error: its field is the path of
// the culprit (config.maxShare), or config when the module refused the
// document as a whole. outcome, for a fault under the document, says what
// became of the request (the plugin is not loaded).
func configError(err error, outcome string) *engine.Error {
	var ce *host.ConfigError
	if !errors.As(err, &ce) {
		return nil
	}
	var se *schema.Error
	if errors.As(ce.Err, &se) {
		return &engine.Error{Code: engine.CodeInvalidInput, Field: se.Path, Message: se.Msg}
	}
	var sm *host.SmokeError
	if errors.As(ce.Err, &sm) {
		// At load: the module makes the smoke decision without this
		// configuration (or needs one), so the fault is the configuration's.
		return &engine.Error{Code: engine.CodeInvalidInput, Field: "config",
			Message: fmt.Sprintf("under this configuration the plugin's smoke decision faults (%s: %s); %s", sm.Kind, sm.Reason, outcome)}
	}
	var cf *host.ConfigureFault
	if errors.As(ce.Err, &cf) {
		return &engine.Error{Code: engine.CodeInvalidInput, Field: "config",
			Message: fmt.Sprintf("under this configuration the plugin's configure faults (%s: %s); %s", cf.Kind, cf.Reason, outcome)}
	}
	return &engine.Error{Code: engine.CodeInvalidInput, Field: "config", Message: "the plugin refused it: " + ce.Err.Error()}
}
