package host_test

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// loadExample loads a committed example module.
func loadExample(t *testing.T, rt *host.Runtime, file, config string) (*host.Plugin, error) {
	t.Helper()
	wasm, err := os.ReadFile("../../examples/plugins/" + file)
	require.NoError(t, err)
	p, err := rt.Load(context.Background(), t.Name(), wasm, []byte(config))
	if err == nil {
		t.Cleanup(func() { _ = p.Close(context.Background()) })
	}
	return p, err
}

// A selection module that asks for details (sdk.Details) reads the tasks'
// labels and sessions and the agents' labels from the table the host
// writes; without details it ranks as it would without them.
func TestSelectionModuleReadsTheDetails(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	p, err := loadExample(t, rt, "labelsel.wasm", `{"lastSessions": ["session-1"]}`)
	require.NoError(t, err)
	w, err := p.Selection(priority.Selection{})
	require.NoError(t, err)
	tasks := host.SyntheticTasks(8, 3)
	// SyntheticDetails: agent-0 and agent-4 are tier=gold; session-1 is
	// record 1's; nobody is labelled urgent.
	d := host.SyntheticDetails(len(tasks), "")
	ranks := make([]int64, len(tasks))
	w.RankDetailed(policy.RankContext{NowMs: 1, Details: d}, tasks, ranks)
	for i, r := range ranks {
		want := int64(8) // FIFO
		switch {
		case i == 1:
			want = 9 // a session that goes last
		case i%4 == 0:
			want = 1 + int64(tasks[i].Priority) // a gold agent: by priority
		}
		require.Equal(t, want, r, "task %d", i)
	}
	w.Rank(1, tasks, ranks) // no details: FIFO
	require.Equal(t, slices.Repeat([]int64{8}, len(tasks)), ranks)
	require.Zero(t, p.Stats().Fallbacks)
}

// A retry module that asks for details reads the attempt's error code.
func TestRetryModuleReadsTheErrorCode(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	p, err := loadExample(t, rt, "errcode.wasm", `{"fail": ["captcha"]}`)
	require.NoError(t, err)
	w, err := p.Retry(backoff.Retry{})
	require.NoError(t, err)
	f := policy.Failure{NowMs: 1, TaskSeq: 1, BaseDelayMs: 1000, MaxDelayMs: 60_000, Multiplier: 2000, Attempt: 1, MaxAttempts: 4, Class: policy.ClassTransient}
	dec := func(code string) policy.Decision {
		return w.DecideDetailed(policy.RetryContext{Details: host.SyntheticDetails(1, code)}, f)
	}
	require.Equal(t, policy.Decision{Action: policy.ActionFail}, dec("captcha"))
	require.Equal(t, policy.Decision{Action: policy.ActionRetry}, dec("tab_not_found"))
	require.Equal(t, policy.Decision{Action: policy.ActionRetry, DelayMs: 1000}, dec("other"))
	require.Zero(t, p.Stats().Fallbacks)
}

// A module's declared schema is read at load and checked before the module
// sees a configuration: the error names the field and changes nothing.
func TestConfigurationIsCheckedAgainstTheModulesSchema(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{KeepCompiled: 1}) // the refused load's module is loaded again
	_, err := loadExample(t, rt, "errcode.wasm", `{"backoffFactor": 0.5}`)
	require.ErrorIs(t, err, host.ErrInvalid)
	require.ErrorContains(t, err, "config.backoffFactor: must be ≥ 1")
	require.True(t, schema.IsError(err))

	p, err := loadExample(t, rt, "errcode.wasm", `{"backoffFactor": 3}`)
	require.NoError(t, err)
	s, err := schema.Parse(p.ConfigSchema())
	require.NoError(t, err, "the schema the module declared")
	require.Equal(t, "object", s.Type)
	err = p.Configure(context.Background(), []byte(`{"immediate": "tab_not_found"}`))
	require.ErrorContains(t, err, "config.immediate: must be an array, not a string")
	require.JSONEq(t, `{"backoffFactor": 3}`, string(p.Config()), "a refused configuration changes nothing")
}

// A version 1 module loads and decides as before: it declares no schema,
// gets no table (its header's reserved word stays 0) and its picks do not
// change when the engine offers details.
func TestAVersion1ModuleDecidesAsBefore(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	p, err := loadExample(t, rt, "asc.wasm", "")
	require.NoError(t, err)
	require.Equal(t, int32(1), p.Version())
	require.Nil(t, p.ConfigSchema())
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := host.SyntheticCandidates(16, 5)
	ctx := policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: 8}
	plain := make([]uint32, 8)
	n := w.Pick(ctx, cands, plain)
	d := host.SyntheticDetails(len(cands), "")
	ctx.Names, ctx.Details = d, d
	named := make([]uint32, 8)
	require.Equal(t, n, w.Pick(ctx, cands, named))
	require.Equal(t, plain[:n], named[:n])
	require.Zero(t, p.Stats().Fallbacks)
}

// An API client chooses the labels: a batch of tasks with as many and as
// long labels as the API takes makes a table larger than any guest should
// hold. The host does not send it: the decision falls back, and the plugin
// is not blamed (no fault, never quarantined) however often it happens.
func TestOversizedDetailsFallBackWithoutBlamingThePlugin(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	p, err := loadExample(t, rt, "labelsel.wasm", `{"lastSessions": ["session-1"]}`)
	require.NoError(t, err)
	w, err := p.Selection(priority.Selection{})
	require.NoError(t, err)
	tasks := host.SyntheticTasks(100, 3) // engine.MaxBatch
	d := host.LargeDetails(len(tasks), 64, 256, 256)
	ranks := make([]int64, len(tasks))
	want := make([]int64, len(tasks))
	priority.Selection{}.Rank(1, tasks, want)
	for range 3 * rt.Config().BreakerThreshold {
		w.RankDetailed(policy.RankContext{NowMs: 1, Details: d}, tasks, ranks)
		require.Equal(t, want, ranks, "the fallback ranks")
	}
	st := p.Stats()
	require.Empty(t, st.Faults)
	require.Equal(t, uint64(3*rt.Config().BreakerThreshold), st.Fallbacks)
	disabled, why := p.Disabled()
	require.False(t, disabled, why)

	small := host.SyntheticDetails(len(tasks), "") // the same batch with ordinary labels is asked
	w.RankDetailed(policy.RankContext{NowMs: 1, Details: small}, tasks, ranks)
	require.Equal(t, uint64(3*rt.Config().BreakerThreshold), p.Stats().Fallbacks)
}

// The engine copies names and details for a decision only for a policy
// that reads them (policy.UsesDetails): a module that declared details, or
// for selection names, says so; one that declared neither, or a version 1
// module, does not. (No example fairness module reads details.)
func TestWrappersSayWhetherTheyReadDetails(t *testing.T) {
	t.Parallel()
	rt := newRuntime(t, host.Config{})
	sel := func(file, config string) *host.Selection {
		p, err := loadExample(t, rt, file, config)
		require.NoError(t, err)
		w, err := p.Selection(priority.Selection{})
		require.NoError(t, err)
		return w
	}
	fair := func(file, config string) *host.Fairness {
		p, err := loadExample(t, rt, file, config)
		require.NoError(t, err)
		w, err := p.Fairness(&fairshare.Fairness{})
		require.NoError(t, err)
		return w
	}
	require.True(t, policy.UsesDetails(sel("labelsel.wasm", `{"lastSessions": ["session-1"]}`)))
	require.False(t, policy.UsesDetails(sel("edf.wasm", "")))
	require.False(t, policy.UsesDetails(fair("asc.wasm", "")))
	require.False(t, policy.UsesDetails(fair("vip.wasm", ""))) // names only: the engine copies those anyway

	// Plugin.Reads says which table the module asked for.
	for _, tc := range []struct {
		file           string
		names, details bool
	}{{"labelsel.wasm", true, true}, {"vip.wasm", true, false}, {"asc.wasm", false, false}} {
		p, err := loadExample(t, rt, tc.file, "")
		require.NoError(t, err)
		names, details := p.Reads()
		require.Equal(t, []bool{tc.names, tc.details}, []bool{names, details}, tc.file)
	}
}
