package manager_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// cacheDir is shared by the package's tests: compiling a Go guest takes about
// a second, loading it from the cache milliseconds.
func cacheDir(t testing.TB) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return t.TempDir()
	}
	return filepath.Join(dir, "switchyard", "wazero-test")
}

func newManager(t testing.TB, e *engine.Engine, native bool) *manager.Manager {
	t.Helper()
	var m *manager.Manager
	rt, err := host.New(host.Config{CacheDir: cacheDir(t), OnEvent: func(ev host.Event) { m.HostEvent(ev) }})
	require.NoError(t, err)
	m = manager.New(e, rt, manager.Options{Native: native})
	require.NoError(t, m.Start(context.Background()))
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "plugins", name))
	require.NoError(t, err)
	return b
}

func TestTheBuiltInsShipAsWasmAndAreTheDefaults(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	m := newManager(t, h.Engine, false)
	active := map[policy.Slot]string{}
	for _, a := range h.Policies(context.Background()) {
		active[a.Slot] = a.Name
	}
	require.Equal(t, map[policy.Slot]string{policy.SlotSelection: "priority", policy.SlotFairness: "fair-share", policy.SlotRetry: "exponential"}, active)
	infos := m.List(context.Background())
	require.Len(t, infos, 7, "three built-ins, each as wasm and native, and priority-first (native only)")
	for _, in := range infos {
		require.True(t, in.Builtin)
		if !in.Native {
			require.NotEmpty(t, in.Hash)
		}
	}
	// The wasm policies really decide: dispatch works and their counters move.
	h.Submit(enginetest.Spec("a").Obj())
	fs, err := m.Get(context.Background(), "priority")
	require.NoError(t, err)
	require.Positive(t, fs.Stats.Calls)
}

func TestLoadSetPersistAndUnload(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	start := func() (*engine.Engine, *manager.Manager) {
		e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: enginetest.NewExecutor()}))
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		return e, newManager(t, e, true)
	}
	e1, m1 := start()
	ctx := context.Background()
	info, err := m1.Load(ctx, "edf", readExample(t, "edf.wasm"), nil)
	require.NoError(t, err)
	require.Equal(t, policy.SlotSelection, info.Slot)
	require.NoError(t, m1.SetPolicy(ctx, policy.SlotSelection, "team", "edf"))
	err = m1.Unload(ctx, "edf")
	require.True(t, engine.IsCode(err, engine.CodeConflict), "a plugin in use cannot be unloaded: %v", err)
	err = m1.SetPolicy(ctx, policy.SlotFairness, "", "edf")
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "a selection plugin cannot fill the fairness slot: %v", err)
	events, stop := m1.Subscribe(16)
	defer stop()
	_, err = m1.Load(ctx, "junk", []byte("\x00asm junk"), nil)
	require.True(t, engine.IsCode(err, engine.CodePluginInvalid), "%v", err)
	ev := <-events
	require.Equal(t, manager.EventRefused, ev.Kind, "a refused load is an event too")
	require.Equal(t, "junk", ev.Plugin)
	require.Contains(t, ev.Reason, "invalid plugin")
	_, err = m1.Get(context.Background(), "junk")
	require.True(t, engine.IsCode(err, engine.CodeNotFound), "nothing changed")
	require.NoError(t, e1.Sync(ctx))

	// A restart on the same store comes back with the plugin and the choice.
	e2, m2 := start()
	got, err := m2.Get(context.Background(), "edf")
	require.NoError(t, err)
	require.Equal(t, []string{"lane:team"}, got.ActiveIn)
	team, err := e2.Lane(ctx, "team")
	require.NoError(t, err)
	require.Equal(t, "edf", team.Selection)
	require.NoError(t, m2.ClearLanePolicy(ctx, policy.SlotSelection, "team"))
	require.NoError(t, m2.Unload(ctx, "edf"))
	_, err = m2.Get(context.Background(), "edf")
	require.True(t, engine.IsCode(err, engine.CodeNotFound))
}

// TestHotSwapUnderLoadLosesNothing swaps the fairness and selection policies
// back and forth — native, the wasm built-ins, an example plugin — while
// tasks stream through a running engine, and checks that every task
// finished and no ceiling was exceeded.
func TestHotSwapUnderLoadLosesNothing(t *testing.T) {
	t.Parallel()
	var inflight, peak atomic.Int64
	exec := engine.ExecutorFunc(func(ctx context.Context, run *engine.Run) engine.Outcome {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(50 * time.Microsecond)
		inflight.Add(-1)
		return engine.Outcome{}
	})
	const ceiling = 8
	e, err := engine.New(engine.Options{Store: memory.New(memory.Options{}), Executor: exec,
		Config: engine.Config{MaxInFlight: ceiling, AgentMaxInFlight: 3}})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	m := newManager(t, e, false)
	_, err = m.Load(ctx, "drr", readExample(t, "drr.wasm"), nil)
	require.NoError(t, err)
	_, err = m.Load(ctx, "edf", readExample(t, "edf.wasm"), nil)
	require.NoError(t, err)

	const n = 3000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			_, err := e.Submit(ctx, enginetest.Spec("agent-"+strconv.Itoa(i%7)).Priority(engine.Priority(i%4)).Obj())
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	swaps := 0
	fairness := []string{"drr", "native:fair-share", "fair-share"}
	selection := []string{"edf", "priority", "native:priority"}
	for deadline := time.Now().Add(20 * time.Second); ; swaps++ {
		require.NoError(t, m.SetPolicy(ctx, policy.SlotFairness, "", fairness[swaps%3]))
		require.NoError(t, m.SetPolicy(ctx, policy.SlotSelection, "", selection[swaps%3]))
		st := e.Stats(ctx)
		if st.Ended[engine.StateSucceeded] == n {
			break
		}
		require.True(t, time.Now().Before(deadline), "tasks stopped flowing: %+v", st)
		time.Sleep(2 * time.Millisecond)
	}
	wg.Wait()
	st := e.Stats(ctx)
	require.EqualValues(t, n, st.Submitted)
	require.EqualValues(t, n, st.Ended[engine.StateSucceeded], "every task finished")
	require.LessOrEqual(t, peak.Load(), int64(ceiling), "the global ceiling held through the swaps")
	require.Greater(t, swaps, 10)
	require.Zero(t, st.PolicyInvalid)
	drr, err := m.Get(context.Background(), "drr")
	require.NoError(t, err)
	require.Positive(t, drr.Stats.Calls, "the plugin took part")
	require.NoError(t, e.Shutdown(ctx))
}

// A stored choice that cannot be honoured at start — its plugin no longer
// loads — leaves the default in place and says so: a REFUSED event for the
// plugin and one for the choice, which a subscriber receives even though it
// subscribed after the start.
func TestAStoredChoiceThatCannotBeRestoredIsAnEvent(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	start := func() (*engine.Engine, *manager.Manager) {
		e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: enginetest.NewExecutor()}))
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		return e, newManager(t, e, true)
	}
	ctx := context.Background()
	e1, m1 := start()
	_, err := m1.Load(ctx, "capper", readExample(t, "ratecap.wasm"), nil)
	require.NoError(t, err)
	require.NoError(t, m1.SetPolicy(ctx, policy.SlotFairness, "", "capper"))
	require.NoError(t, m1.SetPolicy(ctx, policy.SlotRetry, "", "exponential"))
	// The stored module no longer loads (as after a host change).
	require.NoError(t, e1.SaveSetting(ctx, "plugin/capper", []byte(`{"wasm":"AGFzbQ=="}`)))
	require.NoError(t, e1.Sync(ctx))

	e2, m2 := start()
	active := map[policy.Slot]string{}
	for _, a := range e2.Policies(ctx) {
		active[a.Slot] = a.Name
	}
	require.Equal(t, "native:fair-share", active[policy.SlotFairness], "the default stays")
	require.Equal(t, "exponential", active[policy.SlotRetry], "the other choice is restored")
	events, stop := m2.Subscribe(1)
	defer stop()
	ev := <-events
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.Equal(t, "capper", ev.Plugin)
	require.Contains(t, ev.Reason, "did not load at start")
	ev = <-events
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.Equal(t, "capper", ev.Plugin)
	require.Equal(t, policy.SlotFairness, ev.Slot)
	require.Contains(t, ev.Reason, "was not restored")
	require.Contains(t, ev.Reason, "native:fair-share is in use")
}

// TestAQuarantineIsAnnouncedAsOne: the breaker's quarantine is a
// QUARANTINED event with its reason and end; DISABLED is kept for a plugin
// that is disabled until an operator enables it.
func TestAQuarantineIsAnnouncedAsOne(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	m := manager.New(nil, nil, manager.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})})
	events, stop := m.Subscribe(4)
	defer stop()
	until := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	m.HostEvent(host.Event{Plugin: "p", Slot: policy.SlotFairness, Kind: host.EventQuarantined, Reason: "quarantined for 1s: 5 faults", Until: until})
	m.HostEvent(host.Event{Plugin: "p", Slot: policy.SlotFairness, Kind: host.EventDisabled, Reason: "cannot rebuild an instance: boom"})
	ev := <-events
	require.Equal(t, manager.EventQuarantined, ev.Kind)
	require.Equal(t, "quarantined for 1s: 5 faults", ev.Reason)
	require.Equal(t, until, ev.Until)
	ev = <-events
	require.Equal(t, manager.EventDisabled, ev.Kind)
	require.True(t, ev.Until.IsZero())
	require.Empty(t, logs.String(), "the runtime logs its breaker's changes: the manager does not log them again")
}

// TestARefusedLoadIsLoggedOnceAtWarn: a module refused at load is a WARN
// line with the plugin's name and the reason, beside its REFUSED event,
// whose reason starts with the cause, not with the API field "wasm: ".
func TestARefusedLoadIsLoggedOnceAtWarn(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	rt, err := host.New(host.Config{CacheDir: cacheDir(t)})
	require.NoError(t, err)
	m := manager.New(nil, rt, manager.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	events, stop := m.Subscribe(4)
	defer stop()
	_, err = m.Load(context.Background(), "junk", []byte("\x00asm junk"), nil)
	require.True(t, engine.IsCode(err, engine.CodePluginInvalid), "%v", err)
	ev := <-events
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.True(t, strings.HasPrefix(ev.Reason, `load plugin "junk": invalid plugin`), "the reason starts with its cause: %q", ev.Reason)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 1, "one line: %s", logs.String())
	require.Contains(t, lines[0], "[WARN]")
	require.Contains(t, lines[0], "plugin=junk")
	require.Contains(t, lines[0], `invalid plugin`)
}

// A module whose configure faults with no configuration given is refused
// as the module's fault (PLUGIN_INVALID on wasm), not as a configuration
// refused; and every REFUSED event's reason starts with the load and the
// plugin's name, a configuration's refusal and a size's included.
func TestARefusedLoadsReasonNamesThePluginAndTheCulprit(t *testing.T) {
	t.Parallel()
	rt, err := host.New(host.Config{CacheDir: cacheDir(t)})
	require.NoError(t, err)
	m := manager.New(nil, rt, manager.Options{MaxWasmBytes: 4096})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	events, stop := m.Subscribe(8)
	defer stop()
	ctx := context.Background()

	_, err = m.Load(ctx, "h_configure_spin", plugintest.ConfigureSpins(), nil)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodePluginInvalid, ee.Code, "%v", err)
	require.Equal(t, "wasm", ee.Field)
	ev := refusedEvent(t, events)
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.True(t, strings.HasPrefix(ev.Reason, `load plugin "h_configure_spin": invalid plugin: configure faulted under no configuration: fuel: ran out of fuel`), ev.Reason)

	_, err = m.Load(ctx, "plain", plugintest.RetryAnswer(2), []byte(`{"mode": "fast"}`))
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodeInvalidInput, ee.Code, "%v", err)
	require.Equal(t, "config", ee.Field)
	ev = refusedEvent(t, events)
	require.True(t, strings.HasPrefix(ev.Reason, `load plugin "plain": config: the plugin refused it: `), ev.Reason)

	_, err = m.Load(ctx, "big", plugintest.Padded(plugintest.RetryAnswer(2), 5000), nil)
	require.True(t, engine.IsCode(err, engine.CodeLimit), "%v", err)
	ev = refusedEvent(t, events)
	require.True(t, strings.HasPrefix(ev.Reason, `load plugin "big": the module is `), ev.Reason)
	require.Contains(t, ev.Reason, "the limit is 4096 (plugins.maxWasmBytes)")
}

// A configuration under which the module's configure faults (rather than
// refusing it) is refused as INVALID_INPUT on config, at load and by
// Configure, with a message that says configure faulted and why, not that
// the plugin refused it.
func TestAConfigurationUnderWhichConfigureFaultsIsRefusedAsAFault(t *testing.T) {
	t.Parallel()
	m := newManager(t, enginetest.New(t, nil).Engine, false)
	ctx := context.Background()
	const msg = "under this configuration the plugin's configure faults (fuel: ran out of fuel (20000000 units of SetupFuel))"

	_, err := m.Load(ctx, "cspin", plugintest.ConfigureSpinsOnADocument(), []byte(`{"mode": "fast"}`))
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodeInvalidInput, ee.Code, "%v", err)
	require.Equal(t, "config", ee.Field)
	require.Equal(t, msg+"; the plugin is not loaded", ee.Message)

	_, err = m.Load(ctx, "cspin", plugintest.ConfigureSpinsOnADocument(), nil)
	require.NoError(t, err)
	_, err = m.Configure(ctx, "cspin", []byte(`{"mode": "fast"}`))
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodeInvalidInput, ee.Code, "%v", err)
	require.Equal(t, "config", ee.Field)
	require.Equal(t, msg+"; the configuration is unchanged", ee.Message)
	got, err := m.Get(ctx, "cspin")
	require.NoError(t, err)
	require.Empty(t, got.Config)
}

// refusedEvent is the next event, failing the test if none comes: the
// wait is a bound on a hang, not a measurement.
func refusedEvent(t *testing.T, events <-chan manager.Event) manager.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no event for a refused module")
		return manager.Event{}
	}
}

// An empty module and one over the size limit are refused as a module that
// does not compile is: an event and one WARN line, besides the error, and
// nothing changes. A name that is no plugin's is the request's error alone.
func TestAnEmptyOrOversizedModuleIsRefusedVisibly(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	rt, err := host.New(host.Config{CacheDir: cacheDir(t)})
	require.NoError(t, err)
	m := manager.New(nil, rt, manager.Options{MaxWasmBytes: 1024, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	events, stop := m.Subscribe(4)
	defer stop()

	_, err = m.Load(context.Background(), "empty", nil, nil)
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "%v", err)
	ev := refusedEvent(t, events)
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.Equal(t, "empty", ev.Plugin)
	require.Contains(t, ev.Reason, "the module is empty")

	_, err = m.Load(context.Background(), "huge", make([]byte, 2048), nil)
	require.True(t, engine.IsCode(err, engine.CodeLimit), "%v", err)
	ev = refusedEvent(t, events)
	require.Equal(t, manager.EventRefused, ev.Kind)
	require.Equal(t, "huge", ev.Plugin)
	require.Contains(t, ev.Reason, "the module is 2048 bytes; the limit is 1024")

	_, err = m.Load(context.Background(), "no such name!", []byte("\x00asm"), nil)
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "%v", err)
	select {
	case ev := <-events:
		t.Fatalf("a bad name is no refused module: %+v", ev)
	default:
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	require.Len(t, lines, 2, "one line for each refused module: %s", logs.String())
	for _, l := range lines {
		require.Contains(t, l, "[WARN]")
	}
	require.Empty(t, m.List(context.Background()), "nothing was loaded")
}

// syncBuffer is a bytes.Buffer a logger may write while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A configuration is checked as a load would check it: one under which the
// smoke decision faults (here it makes every decision spin until it runs
// out of fuel) is refused on config, with the fault, and changes nothing;
// a harmless one is accepted. Accepted, the first would have made the
// plugin fail to load at the next start.
func TestAConfigurationUnderWhichTheSmokeDecisionFaultsIsRefused(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	m := newManager(t, h.Engine, false)
	ctx := context.Background()
	_, err := m.Load(ctx, "spinner", plugintest.SpinOnConfig(), []byte(`{"quiet": true}`))
	require.NoError(t, err)
	require.NoError(t, m.SetPolicy(ctx, policy.SlotFairness, "", "spinner"))
	events, stop := m.Subscribe(16)
	defer stop()

	_, err = m.Configure(ctx, "spinner", []byte(`{"spin": true}`))
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.Equal(t, engine.CodeInvalidInput, ee.Code)
	require.Equal(t, "config", ee.Field)
	require.Contains(t, ee.Message, "smoke decision faults (fuel: ran out of fuel")
	require.Contains(t, ee.Message, "the configuration is unchanged")
	got, err := m.Get(ctx, "spinner")
	require.NoError(t, err)
	require.JSONEq(t, `{"quiet": true}`, string(got.Config))
	require.Equal(t, host.StateActive, got.Stats.State, "the trial's fault is not the plugin's")
	require.Zero(t, got.Stats.FaultTotal())
	raw, ok := h.Engine.Setting("plugin/spinner")
	require.True(t, ok)
	require.Contains(t, string(raw), `"config":{"quiet":true}`, "the stored configuration is unchanged too")
	h.Submit(enginetest.Spec("a").Obj())
	got, err = m.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Positive(t, got.Stats.Calls)
	require.Zero(t, got.Stats.FaultTotal(), "the plugin decides under its old configuration")

	_, err = m.Configure(ctx, "spinner", []byte(`{"calm": 1}`))
	require.NoError(t, err)
	got, err = m.Get(ctx, "spinner")
	require.NoError(t, err)
	require.JSONEq(t, `{"calm": 1}`, string(got.Config))
	ev := <-events
	require.Equal(t, manager.EventConfigured, ev.Kind, "the refusal announced nothing; the change is announced: %+v", ev)
}

// A stored plugin whose smoke decision faults at start under its stored
// configuration (stored by an older server, or the host changed) is not
// dropped: it comes back DISABLED, with its configuration and the reason,
// announced by a DISABLED event; the policy that chose it stays chosen and
// falls back. Configured with a working configuration and enabled, it
// decides again, and a later start restores it active.
func TestAStoredPluginWhoseSmokeDecisionFaultsIsRestoredDisabled(t *testing.T) {
	t.Parallel()
	store := memory.New(memory.Options{})
	start := func() (*engine.Engine, *manager.Manager) {
		e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: enginetest.NewExecutor()}))
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		return e, newManager(t, e, false)
	}
	ctx := context.Background()
	e1, m1 := start()
	_, err := m1.Load(ctx, "spinner", plugintest.SpinOnConfig(), nil)
	require.NoError(t, err)
	require.NoError(t, m1.SetPolicy(ctx, policy.SlotFairness, "", "spinner"))
	// The stored configuration makes the smoke decision fault.
	raw, ok := e1.Setting("plugin/spinner")
	require.True(t, ok)
	var st map[string]any
	require.NoError(t, json.Unmarshal(raw, &st))
	st["config"] = map[string]any{"spin": true}
	raw, err = json.Marshal(st)
	require.NoError(t, err)
	require.NoError(t, e1.SaveSetting(ctx, "plugin/spinner", raw))
	require.NoError(t, e1.Sync(ctx))

	e2, m2 := start()
	got, err := m2.Get(ctx, "spinner")
	require.NoError(t, err, "the plugin is restored")
	require.JSONEq(t, `{"spin": true}`, string(got.Config))
	require.Equal(t, host.StateDisabled, got.Stats.State)
	require.Contains(t, got.Stats.Reason, "its smoke decision at start faulted under its stored configuration: fuel: ran out of fuel")
	require.Equal(t, []string{"global"}, got.ActiveIn, "the choice is restored")
	events, stop := m2.Subscribe(4)
	defer stop()
	ev := <-events
	require.Equal(t, manager.EventDisabled, ev.Kind, "%+v", ev)
	require.Equal(t, "spinner", ev.Plugin)
	require.Equal(t, policy.SlotFairness, ev.Slot)
	require.Equal(t, got.Stats.Reason, ev.Reason)
	_, err = e2.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	got, err = m2.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Positive(t, got.Stats.FallbacksBy[host.FallbackBreaker], "decisions go to the fallback")
	require.Zero(t, got.Stats.FaultTotal(), "without asking the plugin")

	_, err = m2.Configure(ctx, "spinner", []byte(`{"spin": true}`))
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "%v", err)
	_, err = m2.Configure(ctx, "spinner", []byte(`{"quiet": true}`))
	require.NoError(t, err)
	got, err = m2.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Equal(t, host.StateDisabled, got.Stats.State, "configuring does not enable")
	require.NoError(t, m2.Enable(ctx, "spinner", false))
	_, err = e2.Submit(ctx, enginetest.Spec("b").Obj())
	require.NoError(t, err)
	got, err = m2.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Equal(t, host.StateActive, got.Stats.State)
	require.Zero(t, got.Stats.FaultTotal(), "it decides under its new configuration")
	require.NoError(t, e2.Sync(ctx))

	_, m3 := start()
	got, err = m3.Get(ctx, "spinner")
	require.NoError(t, err)
	require.JSONEq(t, `{"quiet": true}`, string(got.Config))
	require.Equal(t, host.StateActive, got.Stats.State)
}

// A WebAssembly retry plugin that answers "retry at once" to every failure
// is obeyed within the task's budget and no further: on a lane with
// maxAttempts 3 whose exhausted tasks fail, the task fails after its third
// attempt, its reason naming the plugin that asked for more; a task of
// its own maxAttempts 1 runs once.
func TestARetryPluginCannotRetryPastTheBudget(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{Lanes: []engine.LaneConfig{
		{Name: "main", MaxInFlight: 4},
		{Name: "rf", MaxInFlight: 2, Retry: engine.RetryPolicy{MaxAttempts: 3}, Exhausted: engine.ExhaustedFail},
	}}
	h := enginetest.New(t, &cfg)
	m := newManager(t, h.Engine, false)
	ctx := context.Background()
	_, err := m.Load(ctx, "rforever", plugintest.RetryAnswer(1), nil)
	require.NoError(t, err)
	require.NoError(t, m.SetPolicy(ctx, policy.SlotRetry, "rf", "rforever"))
	run := func(spec engine.TaskSpec) *engine.Task {
		t.Helper()
		id := h.Submit(spec).ID
		for range 101 {
			if h.Exec.Run(id) == nil {
				return h.Get(id)
			}
			require.NoError(t, h.Exec.Fail(id, engine.Transient(errors.New("element not found"))))
		}
		t.Fatalf("%s: still retried after 101 attempts", id)
		return nil
	}
	got := run(enginetest.Spec("rf").Lane("rf").Obj())
	require.Len(t, got.Attempts, 3)
	require.Equal(t, engine.StateFailed, got.State)
	require.Equal(t, "retry budget of 3 attempts spent, though retry policy rforever asked for another: element not found", got.Reason)

	got = run(enginetest.Spec("once").Lane("rf").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj())
	require.Len(t, got.Attempts, 1, "maxAttempts 1 is at most once")
	require.Equal(t, engine.StateFailed, got.State)
	info, err := m.Get(ctx, "rforever")
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.Stats.Calls, "the plugin was asked about each failure, the last of each budget included")
}

// A manager over a shared runtime (a cluster node's, kept across its
// leaderships) closes its plugins, not the runtime: the next manager over
// it finds the built-ins compiled, and compiles nothing.
func TestAManagerOverASharedRuntimeLeavesItOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rt, err := host.New(host.Config{CacheDir: cacheDir(t), KeepCompiled: 3})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	first := manager.New(enginetest.New(t, nil).Engine, rt, manager.Options{SharedRuntime: true})
	require.NoError(t, first.Start(ctx))
	require.NoError(t, first.Close(ctx))
	compiles := rt.Compiles()
	next := manager.New(enginetest.New(t, nil).Engine, rt, manager.Options{SharedRuntime: true})
	require.NoError(t, next.Start(ctx), "the runtime is still open")
	require.Equal(t, compiles, rt.Compiles(), "the built-ins were kept compiled")
	require.NoError(t, next.Close(ctx))
}
