package host_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/plugins/host"
)

// reverse is a fallback whose answers are easy to tell from the faulty
// guest's: it picks the last candidates first.
type reverse struct{}

func (reverse) Pick(_ policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	n := 0
	for n < len(picks) && n < len(cands) {
		picks[n] = uint32(len(cands) - 1 - n)
		n++
	}
	return n
}

// events collects a runtime's events.
type events struct {
	mu  sync.Mutex
	all []host.Event
}

func (e *events) add(ev host.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) kinds() []host.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var k []host.EventKind
	for _, ev := range e.all {
		k = append(k, ev.Kind)
	}
	return k
}

// faultReasons returns the reasons of the fault events, in order.
func (e *events) faultReasons() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var reasons []string
	for _, ev := range e.all {
		if ev.Kind == host.EventFault {
			reasons = append(reasons, ev.Reason)
		}
	}
	return reasons
}

func (e *events) last() host.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.all[len(e.all)-1]
}

func pickCtx() policy.PickContext { return policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: 4} }

// faulty is the faulty guest loaded healthy ({"mode": "ok"}) into a runtime
// of its own, wrapped as a fairness policy whose fallback is reverse, with
// eight candidates to pick four of: the plugin picks 0, 1, 2, 3 and the
// fallback 7, 6, 5, 4.
type faulty struct {
	p     *host.Plugin
	w     *host.Fairness
	cands []policy.Candidate
	picks []uint32
}

// loadFaulty loads the faulty guest into a runtime with cfg (its budget,
// its breaker).
func loadFaulty(t *testing.T, cfg host.Config) *faulty {
	t.Helper()
	rt := newRuntime(t, cfg)
	p, err := rt.Load(context.Background(), "faulty", guests["faulty"], []byte(`{"mode": "ok"}`))
	require.NoError(t, err)
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	return &faulty{p: p, w: w, cands: host.SyntheticCandidates(8, 1), picks: make([]uint32, 4)}
}

// pick makes one decision into f.picks and returns how many it picked.
func (f *faulty) pick() int { return f.w.Pick(pickCtx(), f.cands, f.picks) }

// mode reconfigures the guest: "ok", or the way it fails.
func (f *faulty) mode(t *testing.T, mode string) {
	t.Helper()
	require.NoError(t, f.p.Configure(context.Background(), []byte(`{"mode": "`+mode+`"}`)))
}

func TestLoadRefusesInvalidModules(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{KeepCompiled: 1}) // faulty is refused four times in a row
	for _, tc := range []struct {
		name, guest, config, want string
	}{
		{"wrong ABI version", "badversion", "", "ABI version 99"},
		{"unknown import", "badimport", "", "imports env.open_socket"},
		{"missing slot export", "noslot", "", "exports none of selection_rank, fairness_pick, retry_decide"},
		{"configuration refused", "faulty", `{"mode": 5}`, "configure"},
		{"smoke decision traps", "faulty", `{"mode": "panic"}`, "smoke decision: trap"},
		{"smoke decision loops", "faulty", `{"mode": "loop"}`, "smoke decision: fuel"},
		{"smoke decision out of range", "faulty", `{"mode": "range"}`, "smoke decision: invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rt.Load(context.Background(), tc.name, guests[tc.guest], []byte(tc.config))
			require.ErrorIs(t, err, host.ErrInvalid)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := rt.Load(context.Background(), "garbage", []byte("not wasm at all"), nil)
	require.ErrorIs(t, err, host.ErrInvalid)

	// A module whose memory starts larger than a plugin's may be (its data
	// too big) is told so in the setting's terms, not wazero's.
	big := append([]byte("\x00asm\x01\x00\x00\x00"), 5, 4, 1, 0, 0xc8, 0x01) // one memory, min 200 pages
	_, err = rt.Load(context.Background(), "big", big, nil)
	require.ErrorIs(t, err, host.ErrInvalid)
	require.ErrorContains(t, err, "the module's memory starts at 200 pages (12.5 MiB), over the 128 pages (8 MiB) a plugin's memory may have (plugins.memoryPages)")
}

func TestFaultyFairnessDecisionsFallBackAndAreCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		want host.FaultKind
		why  string
	}{
		{"loop", host.FaultBudget, "ran out of fuel"},
		{"panic", host.FaultTrap, "assignment to entry in nil map"},
		{"range", host.FaultInvalid, "picked candidate"},
		{"count", host.FaultRefused, "count out of range"}, // caught by the SDK in the guest
		{"alloc", host.FaultBudget, "ran out of fuel"},     // memory.grow pays by the page: the budget ends before the cap
		{"refuse", host.FaultRefused, "count out of range"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			var ev events
			// A budget of its own: "alloc" must run out of fuel (memory.grow
			// pays by the page) before it reaches the memory cap.
			f := loadFaulty(t, host.Config{OnEvent: ev.add, BreakerThreshold: 100, DecisionFuel: 2_000_000})
			require.Equal(t, 4, f.pick())
			require.Equal(t, []uint32{0, 1, 2, 3}, f.picks, "the healthy plugin answers")

			f.mode(t, tc.mode)
			for range 3 { // the fault, then decisions while the instance may be rebuilt
				require.Equal(t, 4, f.pick())
				require.Equal(t, []uint32{7, 6, 5, 4}, f.picks, "the fallback answers")
			}
			st := f.p.Stats()
			require.GreaterOrEqual(t, st.Faults[tc.want], uint64(1), "stats %+v", st)
			require.Equal(t, uint64(3), st.Fallbacks)
			require.Equal(t, host.EventFault, ev.all[0].Kind)
			require.Equal(t, tc.want, ev.all[0].Fault)
			require.Equal(t, policy.SlotFairness, ev.all[0].Slot, "a fault names the plugin's slot")
			require.Contains(t, ev.all[0].Reason, tc.why)
		})
	}
}

func TestInvalidRetryAnswersAreRejected(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{KeepCompiled: 1}) // each case loads badretry afresh
	for mode, want := range map[string]host.FaultKind{
		"action":   host.FaultInvalid,
		"negative": host.FaultRefused, // a negative delay packs into a negative result: the ABI's error value
		"huge":     host.FaultInvalid,
	} {
		t.Run(mode, func(t *testing.T) {
			p, err := rt.Load(context.Background(), "badretry", guests["badretry"], nil)
			require.NoError(t, err)
			defer p.Close(context.Background())
			w, err := p.Retry(fixedRetry{})
			require.NoError(t, err)
			f := policy.Failure{NowMs: 1e12, Attempt: 1, MaxAttempts: 4, Class: policy.ClassTransient}
			require.Equal(t, policy.Decision{Action: policy.ActionRetry, DelayMs: 1234}, w.Decide(f), "the healthy plugin answers")
			require.NoError(t, p.Configure(context.Background(), []byte(`{"mode": "`+mode+`"}`)))
			require.Equal(t, fixedRetry{}.Decide(f), w.Decide(f), "the fallback answers")
			require.Equal(t, uint64(1), p.Stats().Faults[want])
		})
	}
}

type fixedRetry struct{}

func (fixedRetry) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionPark}
}

func TestBreakerDisablesPluginAfterRepeatedFaults(t *testing.T) {
	t.Parallel()
	var ev events
	f := loadFaulty(t, host.Config{OnEvent: ev.add, BreakerThreshold: 3, BreakerStall: time.Hour, QuarantineBase: time.Hour})
	p := f.p
	f.mode(t, "panic")
	waitfor.Eventually(t, "the breaker trips", func() bool {
		require.Equal(t, 4, f.pick())
		require.Equal(t, []uint32{7, 6, 5, 4}, f.picks)
		disabled, _ := p.Disabled()
		return disabled
	})
	require.Equal(t, []host.EventKind{host.EventFault, host.EventFault, host.EventFault, host.EventQuarantined}, ev.kinds())
	require.Contains(t, ev.last().Reason, "3 faults")
	require.Contains(t, ev.last().Reason, "quarantined for 1h0m0s")
	require.Equal(t, p.Stats().Until, ev.last().Until, "the event says when the quarantine ends")
	st := p.Stats()
	require.True(t, st.Disabled)
	require.Equal(t, uint64(3), st.Faults[host.FaultTrap])

	// Disabled, the plugin is not called at all: no more faults.
	for range 10 {
		require.Equal(t, 4, f.pick())
	}
	require.Equal(t, uint64(3), p.Stats().FaultTotal())

	// Enabled again with a good configuration, it answers again.
	f.mode(t, "ok")
	p.Enable()
	waitfor.Eventually(t, "the re-enabled plugin answers", func() bool {
		f.pick()
		return f.picks[0] == 0
	})
	require.Equal(t, host.EventEnabled, ev.kinds()[4])
}

// TestQuarantineReadsAsProbationOnceOver: a reader between a quarantine's
// end and the next decision sees the state that decision will find,
// PROBATION, not a QUARANTINED with an end in the past; the breaker itself
// changes (and announces it) only at that decision.
func TestQuarantineReadsAsProbationOnceOver(t *testing.T) {
	t.Parallel()
	var ev events
	f := loadFaulty(t, host.Config{OnEvent: ev.add, BreakerThreshold: 1, BreakerStall: time.Hour,
		QuarantineBase: time.Second, Probation: 5})
	p := f.p
	f.mode(t, "panic")
	f.pick()
	st := p.Stats()
	require.Equal(t, host.StateQuarantined, st.State, "%+v", st)
	require.False(t, st.Until.IsZero())
	f.mode(t, "ok")

	waitfor.Eventually(t, "the ended quarantine reads as probation without a decision", func() bool {
		return p.Stats().State == host.StateProbation
	})
	st = p.Stats()
	require.True(t, st.Until.IsZero(), "no end in the past: %+v", st)
	require.Empty(t, st.Reason)
	require.False(t, st.Disabled)
	disabled, _ := p.Disabled()
	require.False(t, disabled)
	require.NotContains(t, ev.kinds(), host.EventEnabled, "reading does not end the quarantine")

	f.pick()
	require.Equal(t, host.StateProbation, p.Stats().State)
	require.Equal(t, host.EventEnabled, ev.last().Kind, "the next decision ends it")
}

// TestBreakerChangesAreLoggedOnce: a quarantine is one WARN line, whose
// end (until) is a plain UTC time, without the monotonic reading Go
// prints after a time ("m=+12.3"), its end one INFO line: good news, and
// the probation passed after it one more.
func TestBreakerChangesAreLoggedOnce(t *testing.T) {
	t.Parallel()
	var ev events
	logs := &records{}
	f := loadFaulty(t, host.Config{OnEvent: ev.add, Logger: slog.New(logs), BreakerThreshold: 1, BreakerStall: time.Hour,
		QuarantineBase: 100 * time.Millisecond, Probation: 5})
	f.mode(t, "panic")
	f.pick()
	require.Equal(t, host.EventQuarantined, ev.last().Kind)
	until := ev.last().Until
	require.NotContains(t, until.String(), "m=", "the event's end is a wall-clock time")
	f.mode(t, "ok")
	waitfor.Eventually(t, "the quarantine is over", func() bool { return f.p.Stats().State == host.StateProbation })
	f.pick() // ends it
	require.Equal(t, host.EventEnabled, ev.last().Kind)
	waitfor.Eventually(t, "the lines are written", func() bool { return len(logs.breaker()) >= 2 })

	lines := logs.breaker()
	require.Len(t, lines, 2, "one line for the quarantine, one for its end: %v", lines)
	q := lines[0]
	require.Equal(t, slog.LevelWarn, q.Level)
	require.Contains(t, q.Message, "quarantined")
	require.Equal(t, "faulty", q.attrs["plugin"])
	require.Contains(t, q.attrs["reason"], "quarantined for 100ms")
	require.Equal(t, until.UTC().Format("2006-01-02T15:04:05.000Z07:00"), q.attrs["until"])
	e := lines[1]
	require.Equal(t, slog.LevelInfo, e.Level, "the end of a quarantine is good news")
	require.Equal(t, "plugin enabled", e.Message)
	require.Contains(t, e.attrs["reason"], "quarantine over")

	for range 5 { // the probation's good decisions: passed
		f.pick()
	}
	require.Equal(t, host.StateActive, f.p.Stats().State)
	waitfor.Eventually(t, "the probation's end is written", func() bool { return len(logs.breaker()) >= 3 })
	lines = logs.breaker()
	require.Len(t, lines, 3, "one more line, for the probation passed: %v", lines)
	require.Equal(t, slog.LevelInfo, lines[2].Level)
	require.Equal(t, "plugin passed its probation: trusted again", lines[2].Message)
	require.Equal(t, "faulty", lines[2].attrs["plugin"])
	require.Equal(t, "5", lines[2].attrs["decisions"])
}

// records keeps the lines a runtime's logger receives, with their
// attributes as text.
type records struct {
	mu    sync.Mutex
	lines []record
}

type record struct {
	slog.Record
	attrs map[string]string
}

func (l *records) Enabled(context.Context, slog.Level) bool { return true }
func (l *records) Handle(_ context.Context, r slog.Record) error {
	rec := record{Record: r, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, rec)
	return nil
}
func (l *records) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *records) WithGroup(string) slog.Handler      { return l }

// breaker returns the lines about the breaker's state, not the guest's.
func (l *records) breaker() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []record
	for _, r := range l.lines {
		if strings.HasPrefix(r.Message, "plugin ") {
			out = append(out, r)
		}
	}
	return out
}

func TestRareFaultsDoNotTripTheBreaker(t *testing.T) {
	t.Parallel()
	f := loadFaulty(t, host.Config{BreakerThreshold: 2, BreakerForgive: 10})
	for range 5 { // one refused decision in every 20: forgiven in time
		f.mode(t, "count")
		f.pick()
		f.mode(t, "ok")
		for range 19 {
			f.pick()
		}
	}
	disabled, why := f.p.Disabled()
	require.False(t, disabled, why)
	require.Equal(t, uint64(5), f.p.Stats().FaultTotal())
}

func TestConfigureIsHotAndRefusalKeepsTheOldConfiguration(t *testing.T) {
	t.Parallel()
	f := loadFaulty(t, host.Config{})
	err := f.p.Configure(context.Background(), []byte(`{"mode": [`))
	require.ErrorIs(t, err, host.ErrInvalid)
	require.JSONEq(t, `{"mode": "ok"}`, string(f.p.Config()))
	waitfor.Eventually(t, "the plugin answers with its old configuration", func() bool {
		f.pick()
		return f.picks[0] == 0
	})

	f.mode(t, "count")
	f.pick()
	require.Equal(t, uint32(7), f.picks[0], "the new configuration applies to the next decision")
}

func TestConcurrentDecisionsMatchTheNativePolicy(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{Instances: 2})
	w, err := loadBuiltin(t, rt, policy.SlotFairness).Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			native := &fairshare.Fairness{}
			for i := range 200 {
				cands := host.SyntheticCandidates(1+(i%50), uint64(g*1000+i))
				ctx := policy.PickContext{NowMs: 1e12, AgingMs: 30_000, Slots: 6}
				want, got := make([]uint32, 6), make([]uint32, 6)
				nw, ng := native.Pick(ctx, cands, want), w.Pick(ctx, cands, got)
				if nw != ng || !equal(want[:nw], got[:ng]) {
					t.Errorf("goroutine %d decision %d: plugin %v, native %v", g, i, got[:ng], want[:nw])
					return
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestClosedPluginKeepsAnsweringThroughFallback(t *testing.T) {
	t.Parallel()
	f := loadFaulty(t, host.Config{})
	require.NoError(t, f.p.Close(context.Background()))
	require.Equal(t, 4, f.pick())
	require.Equal(t, []uint32{7, 6, 5, 4}, f.picks)
	_, err := f.p.Fairness(nil)
	require.Error(t, err, "a wrapper needs a fallback")
	_, err = f.p.Retry(fixedRetry{})
	require.ErrorContains(t, err, "is a fairness policy, not a retry policy")
}

// Trial checks a configuration as a load would, on an instance of its own:
// one under which the smoke decision faults is a *SmokeError with the
// fault, one the guest refuses a *ConfigError; neither touches the plugin,
// which keeps deciding under its configuration, its breaker and figures
// untouched.
func TestTrialRefusesAConfigurationUnderWhichTheSmokeDecisionFaults(t *testing.T) {
	t.Parallel()
	var ev events
	f := loadFaulty(t, host.Config{OnEvent: ev.add})
	ctx := context.Background()
	for _, tc := range []struct {
		mode string
		kind host.FaultKind
		why  string
	}{
		{"loop", host.FaultBudget, "ran out of fuel"},
		{"panic", host.FaultTrap, "assignment to entry in nil map"},
		{"range", host.FaultInvalid, "picked candidate"},
	} {
		err := f.p.Trial(ctx, []byte(`{"mode": "`+tc.mode+`"}`))
		var se *host.SmokeError
		require.ErrorAs(t, err, &se, tc.mode)
		require.ErrorIs(t, err, host.ErrInvalid)
		require.Equal(t, tc.kind, se.Kind, tc.mode)
		require.Contains(t, se.Reason, tc.why, tc.mode)
	}
	var ce *host.ConfigError
	require.ErrorAs(t, f.p.Trial(ctx, []byte(`{"mode": 5}`)), &ce, "the guest refuses it")
	require.NoError(t, f.p.Trial(ctx, []byte(`{"mode": "ok"}`)))
	require.JSONEq(t, `{"mode": "ok"}`, string(f.p.Config()))
	st := f.p.Stats()
	require.Equal(t, host.StateActive, st.State)
	require.Zero(t, st.FaultTotal())
	require.Zero(t, st.Observed, "a trial's smoke decision is not a decision asked of the plugin")
	require.Empty(t, ev.kinds())
	require.Equal(t, 4, f.pick())
	require.Equal(t, []uint32{0, 1, 2, 3}, f.picks, "the plugin decides")
}

// A plugin restored under a configuration its smoke decision faults under,
// or its guest refuses, comes back disabled and without an instance rather
// than refused: decisions fall back without asking it, Configure keeps a
// new configuration for later, and Enable builds its instance with it. A
// module that does not load at all is refused as by Load.
func TestRestoreKeepsAPluginItsStoredConfigurationBreaks(t *testing.T) {
	t.Parallel()
	var ev events
	rt := newRuntime(t, host.Config{OnEvent: ev.add})
	ctx := context.Background()
	p, err := rt.Restore(ctx, "faulty", guests["faulty"], []byte(`{"mode": "loop"}`))
	require.NoError(t, err)
	off, why := p.Disabled()
	require.True(t, off)
	require.Contains(t, why, "its smoke decision at start faulted under its stored configuration: fuel: ran out of fuel")
	require.Equal(t, host.StateDisabled, p.Stats().State)
	require.Zero(t, p.Stats().Instances)
	require.JSONEq(t, `{"mode": "loop"}`, string(p.Config()))
	require.Empty(t, ev.kinds(), "Restore announces nothing: its caller does")
	w, err := p.Fairness(reverse{})
	require.NoError(t, err)
	picks := make([]uint32, 4)
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(8, 1), picks))
	require.Equal(t, []uint32{7, 6, 5, 4}, picks, "the fallback decides")
	require.Equal(t, uint64(1), p.Stats().FallbacksBy[host.FallbackBreaker])

	require.NoError(t, p.Configure(ctx, []byte(`{"mode": "ok"}`)), "configured with no instance")
	off, _ = p.Disabled()
	require.True(t, off, "configuring does not enable")
	p.Enable()
	waitfor.Eventually(t, "its instance is built (decisions fall back meanwhile)", func() bool { return host.Ready(p) })
	require.Equal(t, 4, w.Pick(pickCtx(), host.SyntheticCandidates(8, 1), picks))
	require.Equal(t, []uint32{0, 1, 2, 3}, picks, "enabled, the plugin decides under its new configuration")
	require.Zero(t, p.Stats().FaultTotal())

	q, err := rt.Restore(ctx, "refused", guests["faulty"], []byte(`{"mode": 5}`))
	require.NoError(t, err)
	off, why = q.Disabled()
	require.True(t, off)
	require.Contains(t, why, "its configure failed at start under its stored configuration: refused: configure: unknown mode")

	_, err = rt.Restore(ctx, "noslot", guests["noslot"], nil)
	require.ErrorIs(t, err, host.ErrInvalid, "a module that does not validate is refused")
	_, err = rt.Load(ctx, "loop", guests["faulty"], []byte(`{"mode": "loop"}`))
	var se *host.SmokeError
	require.ErrorAs(t, err, &se, "Load still refuses it")
}

// A load whose smoke decision faults under the configuration given, where
// the module makes it under none or refuses to go without one, refuses
// the configuration (a *ConfigError wrapping the *SmokeError); a module
// whose smoke decision faults under no configuration too is refused
// itself (a bare *SmokeError), whatever configuration it was given.
func TestLoadBlamesTheConfigurationOnlyWhenTheModuleDecidesWithoutIt(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		wasm   []byte
		config string
	}{
		{"spinner", plugintest.SpinOnConfig(), `{"spin": true}`}, // decides under none
		{"faulty", guests["faulty"], `{"mode": "loop"}`},         // refuses none ("unknown mode")
		{"faulty-panic", guests["faulty"], `{"mode": "panic"}`},  // a trap rather than fuel
	} {
		_, err := rt.Load(ctx, tc.name, tc.wasm, []byte(tc.config))
		var ce *host.ConfigError
		require.ErrorAs(t, err, &ce, tc.name)
		var se *host.SmokeError
		require.ErrorAs(t, err, &se, tc.name)
		require.ErrorIs(t, err, host.ErrInvalid, tc.name)
		require.Contains(t, err.Error(), ", under this configuration (the module is not at fault", tc.name)
	}
	for _, config := range []string{`{"quiet": true}`, ``} {
		_, err := rt.Load(ctx, "always", plugintest.SpinAlways(), []byte(config))
		var se *host.SmokeError
		require.ErrorAs(t, err, &se, config)
		require.Equal(t, host.FaultBudget, se.Kind)
		var ce *host.ConfigError
		require.False(t, errors.As(err, &ce), "the module is at fault, not the configuration %q", config)
	}
	_, err := rt.Load(ctx, "spinner", plugintest.SpinOnConfig(), []byte(`{"quiet": true}`))
	require.NoError(t, err, "the module loads under another configuration")
}

// Stats.FuelMax is deterministic: a decision the host stops (here at its
// deadline) burnt an amount that depends on the machine, and would count
// its stopped tank's unspent units too, so it is left out.
func TestFuelMaxLeavesOutDecisionsTheHostStopped(t *testing.T) {
	f := loadFaulty(t, host.Config{DecisionFuel: 1 << 40, Deadline: 10 * time.Millisecond})
	f.pick()
	require.NotZero(t, f.p.ResetFuelMax(), "a decision that ended")

	f.mode(t, "loop")
	f.pick()
	st := f.p.Stats()
	require.Equal(t, uint64(1), st.Faults[host.FaultDeadline], "%+v", st)
	require.Zero(t, st.FuelMax, "a decision stopped at its deadline")
}
