package plugins_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
	"github.com/switchyard/switchyard/plugins/host"
)

func load(t *testing.T, file, config string) *host.Plugin {
	t.Helper()
	cfg := host.Config{}
	if uc, err := os.UserCacheDir(); err == nil {
		cfg.CacheDir = filepath.Join(uc, "switchyard", "wazero-test")
	}
	rt, err := host.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	wasm, err := os.ReadFile(file)
	require.NoError(t, err)
	p, err := rt.Load(context.Background(), file, wasm, []byte(config))
	require.NoError(t, err)
	return p
}

func TestEDFPluginRanksEarlierDeadlinesFirst(t *testing.T) {
	t.Parallel()
	w, err := load(t, "edf.wasm", "").Selection(priority.Selection{})
	require.NoError(t, err)
	tasks := []policy.Task{{Seq: 1, DeadlineMs: 9000}, {Seq: 2}, {Seq: 3, DeadlineMs: 2000}}
	ranks := make([]int64, 3)
	w.Rank(0, tasks, ranks)
	require.Less(t, ranks[2], ranks[0])
	require.Less(t, ranks[0], ranks[1])
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}

func TestDRRPluginAlternatesByQuantumAcrossDecisions(t *testing.T) {
	t.Parallel()
	p := load(t, "drr.wasm", `{"quantum": 2}`)
	require.False(t, p.Stateless(), "DRR keeps its turn between decisions: one instance")
	w, err := p.Fairness(&fairshare.Fairness{})
	require.NoError(t, err)
	cands := []policy.Candidate{
		{Agent: 1, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
		{Agent: 2, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
	}
	var got []uint32
	pick := make([]uint32, 1)
	for range 8 {
		require.Equal(t, 1, w.Pick(policy.PickContext{Slots: 1}, cands, pick))
		got = append(got, cands[pick[0]].Agent)
	}
	require.Equal(t, []uint32{1, 1, 2, 2, 1, 1, 2, 2}, got)
	require.Error(t, p.Configure(context.Background(), []byte(`{"quantum": 0}`)))
	require.Zero(t, p.Stats().Fallbacks)
}

func TestJitterPluginSpreadsRetries(t *testing.T) {
	t.Parallel()
	w, err := load(t, "jitter.wasm", "").Retry(backoff.Retry{})
	require.NoError(t, err)
	seen := map[int64]bool{}
	for seq := range uint64(50) {
		d := w.Decide(policy.Failure{NowMs: 1e12, TaskSeq: seq, Attempt: 2, MaxAttempts: 4,
			BaseDelayMs: 1000, MaxDelayMs: 60_000, PrevDelayMs: 2000, Class: policy.ClassTransient})
		require.Equal(t, policy.ActionRetry, d.Action)
		require.GreaterOrEqual(t, d.DelayMs, int64(1000))
		require.LessOrEqual(t, d.DelayMs, int64(6000))
		seen[d.DelayMs] = true
	}
	require.Greater(t, len(seen), 30)
	require.Zero(t, w.Plugin().Stats().Fallbacks)
}
