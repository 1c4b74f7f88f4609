package manager_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// server is one process of a server over a SQLite file: an engine and its
// plugin manager, with the manager's log.
type server struct {
	e    *engine.Engine
	m    *manager.Manager
	logs *syncBuffer
	stop func()
}

// onSQLite starts a server over the SQLite file at path, its plugin
// manager's defaults native or not; stop ends it and closes the store, as
// a process that exits does.
func onSQLite(t *testing.T, path string, native bool, hostCfg host.Config) *server {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	require.NoError(t, err)
	e, err := engine.New(engine.Options{Store: st, Executor: enginetest.NewExecutor()})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	s := &server{e: e, logs: &syncBuffer{}}
	var m *manager.Manager
	hostCfg.CacheDir = cacheDir(t)
	hostCfg.OnEvent = func(ev host.Event) { m.HostEvent(ev) }
	rt, err := host.New(hostCfg)
	require.NoError(t, err)
	m = manager.New(e, rt, manager.Options{Native: native, Logger: hclog.New(&hclog.LoggerOptions{Output: s.logs, Level: hclog.Info})})
	require.NoError(t, m.Start(ctx))
	s.m = m
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = m.Close(ctx)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, e.Shutdown(sctx))
		require.NoError(t, st.Close())
	}
	t.Cleanup(s.stop)
	return s
}

// lines returns the log lines at level (ERROR, WARN) that contain s.
func (s *server) lines(level, substr string) []string {
	var out []string
	for _, l := range strings.Split(s.logs.String(), "\n") {
		if strings.Contains(l, "["+level+"]") && strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

func TestDeletingALaneDropsItsPolicyChoices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := onSQLite(t, path, true, host.Config{})
	_, err := s.m.Load(ctx, "mysel2", readExample(t, "edf.wasm"), nil)
	require.NoError(t, err)
	_, err = s.e.CreateLane(ctx, "tmp", engine.LaneUpdate{})
	require.NoError(t, err)
	require.NoError(t, s.m.SetPolicy(ctx, policy.SlotSelection, "tmp", "mysel2"))
	require.NoError(t, s.m.SetPolicy(ctx, policy.SlotRetry, "tmp", "exponential"))
	_, err = s.e.DeleteLane(ctx, "tmp")
	require.NoError(t, err)

	info, err := s.m.Get(ctx, "mysel2")
	require.NoError(t, err)
	require.Empty(t, info.ActiveIn, "a deleted lane uses no policy")
	for _, a := range s.e.Policies(ctx) {
		require.NotEqual(t, "tmp", a.Lane, "a deleted lane has no policy of its own: %+v", a)
	}
	require.Empty(t, s.e.Settings("policy/"), "the lane's choices went with it")
	lane, err := s.e.CreateLane(ctx, "tmp", engine.LaneUpdate{})
	require.NoError(t, err)
	require.Equal(t, "native:priority", lane.Selection, "a new lane of the same name starts from the global policies")
	require.Equal(t, "native:exponential", lane.Retry)
	_, err = s.e.DeleteLane(ctx, "tmp")
	require.NoError(t, err)
	s.stop()

	// The store agrees: the next start finds no choice for the lane, and
	// says nothing about one.
	s = onSQLite(t, path, true, host.Config{})
	require.Empty(t, s.e.Settings("policy/"))
	require.Empty(t, s.lines("ERROR", ""), "%s", s.logs)
	require.Empty(t, s.lines("WARN", ""), "%s", s.logs)
	require.NoError(t, s.m.Unload(ctx, "mysel2"), "the plugin is not in use")
}

func TestAStoredChoiceForAGoneLaneIsDroppedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := onSQLite(t, path, true, host.Config{})
	_, err := s.m.Load(ctx, "mysel2", readExample(t, "edf.wasm"), nil)
	require.NoError(t, err)
	// What an older version left behind when it deleted lanes that had
	// their own policies.
	require.NoError(t, s.e.SaveSetting(ctx, "policy/selection/tmp", []byte(`{"name":"mysel2"}`)))
	require.NoError(t, s.e.SaveSetting(ctx, "policy/selection/ghost", []byte(`{"name":"mysel2"}`)))
	// Any stored choice can be cleared, its lane gone or not.
	require.NoError(t, s.m.ClearLanePolicy(ctx, policy.SlotSelection, "ghost"))
	_, ok := s.e.Setting("policy/selection/ghost")
	require.False(t, ok)
	err = s.m.ClearLanePolicy(ctx, policy.SlotSelection, "ghost")
	require.True(t, engine.IsCode(err, engine.CodeNotFound), "no lane and no choice: %v", err)
	s.stop()

	s = onSQLite(t, path, true, host.Config{})
	events, stop := s.m.Subscribe(16)
	defer stop()
	select {
	case ev := <-events:
		t.Fatalf("the start announced %+v", ev)
	default:
	}
	require.Empty(t, s.lines("ERROR", ""), "%s", s.logs)
	require.Len(t, s.lines("WARN", "dropped a stored policy choice for a lane that no longer exists"), 1, "%s", s.logs)
	require.Len(t, s.lines("WARN", ""), 1, "%s", s.logs)
	require.Contains(t, s.logs.String(), "lane=tmp")
	require.Empty(t, s.e.Settings("policy/"))
	require.NoError(t, s.m.Unload(ctx, "mysel2"), "the plugin is not in use")
	s.stop()

	s = onSQLite(t, path, true, host.Config{})
	require.Empty(t, s.lines("WARN", ""), "dropped once, for good: %s", s.logs)
	require.Empty(t, s.lines("ERROR", ""), "%s", s.logs)
}

func TestAGlobalChoiceCanGoBackToTheDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := onSQLite(t, path, false, host.Config{})
	fairness := func() string {
		for _, a := range s.e.Policies(ctx) {
			if a.Slot == policy.SlotFairness {
				return a.Name
			}
		}
		return ""
	}
	// The rollback from a fairness plugin the README advised: name the
	// built-in. It is a choice, and it pins the WebAssembly build.
	require.NoError(t, s.m.SetPolicy(ctx, policy.SlotFairness, "", "fair-share"))
	s.stop()
	s = onSQLite(t, path, true, host.Config{})
	require.Equal(t, "fair-share", fairness(), "a stored choice outlives --native-policies")

	events, stop := s.m.Subscribe(4)
	defer stop()
	require.NoError(t, s.m.ClearLanePolicy(ctx, policy.SlotFairness, ""))
	require.Equal(t, "native:fair-share", fairness(), "the server's default again")
	ev := <-events
	require.Equal(t, manager.EventPolicySet, ev.Kind)
	require.Equal(t, "native:fair-share", ev.Plugin)
	require.Empty(t, s.e.Settings("policy/"))
	s.stop()
	s = onSQLite(t, path, true, host.Config{})
	require.Equal(t, "native:fair-share", fairness())
	s.stop()
	s = onSQLite(t, path, false, host.Config{})
	require.Equal(t, "fair-share", fairness(), "each start applies its own default")
}

// configure with null (or an empty document) puts a plugin back to no
// configuration, stored so: a restart loads it without one.
func TestConfigureNullMeansNoConfiguration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := onSQLite(t, path, true, host.Config{})
	_, err := s.m.Load(ctx, "spinner", plugintest.SpinOnConfig(), []byte(`{"quiet": true}`))
	require.NoError(t, err)
	require.NoError(t, s.m.SetPolicy(ctx, policy.SlotFairness, "", "spinner"))
	info, err := s.m.Configure(ctx, "spinner", []byte(`null`))
	require.NoError(t, err, "null is no configuration")
	require.Empty(t, info.Config)
	got, err := s.m.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Empty(t, got.Config)
	// It still decides: dispatch goes on through it.
	h := enginetest.Spec("after-reset")
	_, err = s.e.Submit(ctx, h.Obj())
	require.NoError(t, err)
	s.stop()

	s = onSQLite(t, path, true, host.Config{})
	got, err = s.m.Get(ctx, "spinner")
	require.NoError(t, err)
	require.Empty(t, got.Config, "stored without a configuration")
	require.Equal(t, host.StateActive, got.Stats.State)
	require.Equal(t, []string{"global"}, got.ActiveIn)
	_, err = s.m.Configure(ctx, "spinner", nil)
	require.NoError(t, err, "an empty document is no configuration too")
}

// A plugin restored DISABLED because the server's fuel per decision is too
// small for it says so (not "configure it"); configure blames the budget,
// not the configuration; and enable refuses, naming the fault, unless
// forced.
func TestAPluginDisabledByTooSmallABudgetSaysSo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	s := onSQLite(t, path, true, host.Config{})
	_, err := s.m.Load(ctx, "wfq", readExample(t, "wfq.wasm"), nil)
	require.NoError(t, err)
	require.NoError(t, s.m.SetPolicy(ctx, policy.SlotFairness, "", "wfq"))
	s.stop()

	s = onSQLite(t, path, true, host.Config{DecisionFuel: 25000, FuelSetting: "plugins.decisionFuel"})
	got, err := s.m.Get(ctx, "wfq")
	require.NoError(t, err)
	require.Equal(t, host.StateDisabled, got.Stats.State)
	require.Contains(t, got.Stats.Reason, "ran out of fuel")
	require.Contains(t, got.Stats.Reason, "the fuel per decision, plugins.decisionFuel (now 25000) is too small for it; raise it and restart")
	require.NotContains(t, got.Stats.Reason, "configure it")

	_, err = s.m.Configure(ctx, "wfq", []byte(`{}`))
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "%v", err)
	require.Contains(t, err.Error(), "under any configuration")
	require.Contains(t, err.Error(), "plugins.decisionFuel (now 25000) is too small for it, not this configuration at fault")

	err = s.m.Enable(ctx, "wfq", false)
	require.True(t, engine.IsCode(err, engine.CodeConflict), "%v", err)
	require.Contains(t, err.Error(), "stays DISABLED")
	require.Contains(t, err.Error(), "ran out of fuel")
	require.Contains(t, err.Error(), "plugins.decisionFuel (now 25000)")
	got, err = s.m.Get(ctx, "wfq")
	require.NoError(t, err)
	require.Equal(t, host.StateDisabled, got.Stats.State, "refused: nothing changed")

	require.NoError(t, s.m.Enable(ctx, "wfq", true), "forced")
	got, err = s.m.Get(ctx, "wfq")
	require.NoError(t, err)
	require.NotEqual(t, host.StateDisabled, got.Stats.State)
	require.Len(t, s.lines("WARN", "a plugin was enabled by force though it faults"), 1, "%s", s.logs)
}

// A load under the name of a loaded plugin no slot uses replaces it, and
// says what it replaced: its slot (changed, here), its module and its
// configuration, dropped.
func TestALoadSaysWhatItReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := onSQLite(t, filepath.Join(t.TempDir(), "s.db"), true, host.Config{})
	first, err := s.m.Load(ctx, "swp", readExample(t, "edf.wasm"), []byte(`{}`))
	require.NoError(t, err)
	require.Empty(t, first.Replaced, "a new name replaces nothing")
	events, stop := s.m.Subscribe(4)
	defer stop()
	info, err := s.m.Load(ctx, "swp", readExample(t, "jitter.wasm"), nil)
	require.NoError(t, err)
	require.Equal(t, policy.SlotRetry, info.Slot)
	require.Contains(t, info.Replaced, "the selection policy swp (sha256 "+first.Hash[:12]+")")
	require.Contains(t, info.Replaced, "now a retry policy")
	require.Contains(t, info.Replaced, "its configuration {} was dropped")
	ev := <-events
	require.Equal(t, manager.EventLoaded, ev.Kind)
	require.Contains(t, ev.Reason, "; replaced "+info.Replaced)
}
