package host_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

func unhex(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

// TestWorkedExampleInABIDocument keeps the worked example in ABI.md true.
func TestWorkedExampleInABIDocument(t *testing.T) {
	t.Parallel()
	cands := []policy.Candidate{
		{HeadSeq: 10, HeadWaitMs: 5000, Agent: 7, AgentInflight: 3, AgentLimit: 10, AgentWeight: 1, LaneLimit: 30, QueueLen: 4},
		{HeadSeq: 12, HeadWaitMs: 1000, Agent: 9, AgentInflight: 0, AgentLimit: 10, AgentWeight: 1, LaneLimit: 30, QueueLen: 1},
	}
	b := make([]byte, abi.FairnessBytes(2, 2))
	abi.PutHeader(b, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.CandidateSize, Count: 2})
	for i := range cands {
		abi.PutCandidate(b[abi.HeaderSize+i*abi.CandidateSize:], &cands[i])
	}
	want := unhex(t, `01000000 48000000 02000000 00000000
		0a00000000000000 0000000000000000 8813000000000000 0000000000000000
		00000000 07000000 03000000 0a000000 01000000 0000 0000 00000000 1e000000 04000000 00000000
		0c00000000000000 0000000000000000 e803000000000000 0000000000000000
		00000000 09000000 00000000 0a000000 01000000 0000 0000 00000000 1e000000 01000000 00000000`)
	require.Equal(t, want, b[:len(want)])
	require.Equal(t, uint32(160), abi.OutputOffset(2, abi.CandidateSize))

	picks := make([]uint32, 2)
	n := (&fairshare.Fairness{}).Pick(policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: 2}, cands, picks)
	require.Equal(t, []uint32{1, 0}, picks[:n])
}
