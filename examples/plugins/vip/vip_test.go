package vip_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/examples/plugins/vip"
)

type names []string

func (n names) AgentID(i int) string  { return n[i] }
func (n names) LaneName(i int) string { return "main" }

func TestTheNamedAgentGoesFirst(t *testing.T) {
	t.Parallel()
	v := &vip.VIP{}
	require.NoError(t, v.Configure([]byte(`{"agents": ["boss"]}`)))
	require.Error(t, v.Configure([]byte(`{"agent": ["boss"]}`)), "a misspelt field is refused")
	cands := []policy.Candidate{
		{Agent: 1, HeadWaitMs: 900, QueueLen: 1, AgentLimit: 9, LaneLimit: 9},
		{Agent: 2, HeadWaitMs: 10, QueueLen: 2, AgentLimit: 9, LaneLimit: 9},
	}
	picks := make([]uint32, 3)
	n := v.Pick(policy.PickContext{Slots: 3, Names: names{"a", "boss"}}, cands, picks)
	require.Equal(t, []uint32{1, 1, 0}, picks[:n])
	n = v.Pick(policy.PickContext{Slots: 3}, cands, picks)
	require.Equal(t, []uint32{0, 1, 1}, picks[:n], "without names: oldest first")
}
