package drr

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

// Two always-busy queues, agents 1 and 2.
func busy() []policy.Candidate {
	return []policy.Candidate{
		{Agent: 1, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
		{Agent: 2, AgentLimit: 100, AgentWeight: 1, LaneLimit: 100, QueueLen: 100},
	}
}

func agents(cands []policy.Candidate, picks []uint32) []uint32 {
	out := make([]uint32, len(picks))
	for i, p := range picks {
		out[i] = cands[p].Agent
	}
	return out
}

func TestQueuesAlternateByQuantumAcrossAndWithinDecisions(t *testing.T) {
	t.Parallel()
	want := []uint32{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}
	one := &DRR{Quantum: 3}
	var got []uint32
	for range 12 {
		p := make([]uint32, 1)
		n := one.Pick(policy.PickContext{Slots: 1}, busy(), p)
		got = append(got, agents(busy(), p[:n])...)
	}
	require.Equal(t, want, got, "one slot per decision")

	many := &DRR{Quantum: 3}
	p := make([]uint32, 12)
	n := many.Pick(policy.PickContext{Slots: 12}, busy(), p)
	require.Equal(t, want, agents(busy(), p[:n]), "twelve slots in one decision")
}

func TestWeightScalesTheTurnAndDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	d := &DRR{Quantum: 1}
	c := busy()
	c[1].AgentWeight = 2
	p := make([]uint32, 6)
	dry := d.Pick(policy.PickContext{Slots: 6, Flags: policy.PickDryRun}, c, p)
	require.Equal(t, []uint32{1, 2, 2, 1, 2, 2}, agents(c, p[:dry]))
	n := d.Pick(policy.PickContext{Slots: 6}, c, p)
	require.Equal(t, []uint32{1, 2, 2, 1, 2, 2}, agents(c, p[:n]), "the dry run left the turn where it was")
}

func TestConfigureValidatesQuantum(t *testing.T) {
	t.Parallel()
	d := &DRR{}
	require.NoError(t, d.Configure([]byte(`{"quantum": 4}`)))
	require.Equal(t, uint32(4), d.Quantum)
	require.Error(t, d.Configure([]byte(`{"quantum": 0}`)))
	require.Equal(t, uint32(4), d.Quantum, "a refused configuration keeps the old one")
}

func TestAQueueBlockedByACeilingKeepsItsTurn(t *testing.T) {
	t.Parallel()
	d := &DRR{Quantum: 2}
	cands := busy()
	for i := range cands { // one lane that runs one task at a time
		cands[i].LaneLimit = 1
	}
	var got []uint32
	picks := make([]uint32, 8)
	for range 8 {
		n := d.Pick(policy.PickContext{Slots: 8}, cands, picks)
		require.Equal(t, 1, n, "the lane has room for one")
		got = append(got, agents(cands, picks[:n])...)
	}
	require.Equal(t, []uint32{1, 1, 2, 2, 1, 1, 2, 2}, got)
}
