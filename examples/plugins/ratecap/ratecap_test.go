package ratecap_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/examples/plugins/ratecap"
)

type names []string

func (n names) AgentID(i int) string  { return n[i] }
func (n names) LaneName(i int) string { return "main" }

func TestAnAgentAtItsCapIsHeldUntilTheWindowMoves(t *testing.T) {
	t.Parallel()
	r := &ratecap.RateCap{}
	require.NoError(t, r.Configure([]byte(`{"perWindow": 1, "windowMs": 1000}`)))
	cands := []policy.Candidate{{Agent: 1, QueueLen: 3, AgentLimit: 9, LaneLimit: 9}}
	picks := make([]uint32, 2)
	ctx := policy.PickContext{NowMs: 5000, Slots: 2, Names: names{"greedy"}}
	require.Equal(t, 1, r.Pick(ctx, cands, picks), "one start in the window")

	ctx.NowMs = 5400
	hint, held := policy.HoldHint(r.Pick(ctx, cands, picks))
	require.True(t, held)
	require.Equal(t, int64(600), hint, "asked again when the start leaves the window")

	ctx.NowMs = 6000
	require.Equal(t, 1, r.Pick(ctx, cands, picks))

	// A dry run answers without recording the start.
	ctx.NowMs, ctx.Flags = 7000, policy.PickDryRun
	require.Equal(t, 1, r.Pick(ctx, cands, picks))
	ctx.Flags = 0
	require.Equal(t, 1, r.Pick(ctx, cands, picks))
}
