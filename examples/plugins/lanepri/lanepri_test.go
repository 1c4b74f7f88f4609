package lanepri

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

func configured(t *testing.T, doc string) *Policy {
	t.Helper()
	p := &Policy{}
	require.NoError(t, p.Configure([]byte(doc)))
	return p
}

func lanes(cands []policy.Candidate, picks []uint32) []uint16 {
	out := make([]uint16, len(picks))
	for i, p := range picks {
		out[i] = cands[p].Lane
	}
	return out
}

func queue(seq uint64, lane uint16, waitMs int64, n uint32) policy.Candidate {
	return policy.Candidate{HeadSeq: seq, Lane: lane, HeadWaitMs: waitMs, Agent: uint32(seq),
		AgentLimit: 100, LaneLimit: 100, QueueLen: n}
}

func TestHigherPriorityLaneGoesFirstThenTheRest(t *testing.T) {
	t.Parallel()
	p := configured(t, `{"priorities": {"0": 0, "1": 10}, "agingStepMs": 60000}`)
	cands := []policy.Candidate{queue(1, 0, 5000, 2), queue(2, 1, 10, 3)}
	picks := make([]uint32, 5)
	n := p.Pick(policy.PickContext{Slots: 5}, cands, picks)
	require.Equal(t, []uint16{1, 1, 1, 0, 0}, lanes(cands, picks[:n]))
}

func TestALongWaitingHeadOvertakesAHigherLane(t *testing.T) {
	t.Parallel()
	p := configured(t, `{"priorities": {"1": 2}, "agingStepMs": 1000}`)
	cands := []policy.Candidate{queue(1, 0, 2500, 1), queue(2, 1, 0, 3)}
	picks := make([]uint32, 2)
	n := p.Pick(policy.PickContext{Slots: 2}, cands, picks)
	require.Equal(t, []uint16{0, 1}, lanes(cands, picks[:n]), "2 steps of waiting tie with priority 2; the older head wins")
}

func TestMissingLanesTakeTheDefaultAndAgingFallsBackToTheEngines(t *testing.T) {
	t.Parallel()
	p := configured(t, `{"priorities": {"0": 1}, "default": 5}`)
	cands := []policy.Candidate{queue(1, 0, 30_000, 1), queue(2, 7, 0, 1)}
	picks := make([]uint32, 1)
	p.Pick(policy.PickContext{Slots: 1, AgingMs: 10_000}, cands, picks)
	require.Equal(t, uint16(7), cands[picks[0]].Lane, "default 5 beats 1 + 3 steps")
	p.Pick(policy.PickContext{Slots: 1, AgingMs: 5_000}, cands, picks)
	require.Equal(t, uint16(0), cands[picks[0]].Lane, "1 + 6 steps beats default 5")
}

func TestConfigurationIsChecked(t *testing.T) {
	t.Parallel()
	require.Error(t, (&Policy{}).Configure([]byte(`{"priorities": {"main": 1}}`)))
	require.Error(t, (&Policy{}).Configure([]byte(`{"agingStepMs": -1}`)))
	require.Error(t, (&Policy{}).Configure([]byte(`[1]`)))
}
