package abi_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/plugins/abi"
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

func TestRecordsRoundTripFieldByFieldAndInPlace(t *testing.T) {
	t.Parallel()
	c := policy.Candidate{HeadSeq: 1, HeadRank: -2, HeadWaitMs: 3, HeadDeadlineMs: 4, HeadPriority: -5, Agent: 6,
		AgentInflight: 7, AgentLimit: 8, AgentWeight: 9, Lane: 10, LaneInflight: 11, LaneLimit: 12, QueueLen: 13}
	b := make([]byte, 8+2*abi.CandidateSize)[8:]
	abi.PutCandidate(b, &c)
	var got policy.Candidate
	abi.ReadCandidate(b, &got)
	require.Equal(t, c, got)
	var scratch []policy.Candidate
	require.Equal(t, []policy.Candidate{c}, abi.Candidates(b, abi.CandidateSize, 1, &scratch), "in place")
	long := make([]byte, 2*(abi.CandidateSize+8))
	abi.PutCandidate(long, &c)
	abi.PutCandidate(long[abi.CandidateSize+8:], &c)
	require.Equal(t, []policy.Candidate{c, c}, abi.Candidates(long, abi.CandidateSize+8, 2, &scratch), "longer records from a newer host")

	task := policy.Task{Seq: 1, CreatedAtMs: 2, DeadlineMs: 3, Priority: 4, Agent: 5, Lane: 6, Attempts: 7, Depth: 8, Flags: 9}
	tb := make([]byte, abi.TaskSize)
	abi.PutTasks(tb, []policy.Task{task})
	var gt policy.Task
	abi.ReadTask(tb, &gt)
	require.Equal(t, task, gt)

	f := policy.Failure{NowMs: 1, TaskSeq: 2, CreatedAtMs: 3, DeadlineMs: 4, PrevDelayMs: 5, BaseDelayMs: 6, MaxDelayMs: 7,
		Multiplier: 8, Attempt: 9, MaxAttempts: 10, HTTPStatus: 11, Class: 2, Flags: 1, Priority: 12, Agent: 13, Lane: 14, LaneInflight: 15}
	fb := make([]byte, abi.FailureSize)
	abi.PutFailure(fb, &f)
	var gf policy.Failure
	abi.ReadFailure(fb, &gf)
	require.Equal(t, f, gf)

	d := policy.Decision{Action: policy.ActionRetry, DelayMs: policy.MaxRetryDelayMs}
	got2, ok := abi.UnpackDecision(abi.PackDecision(d))
	require.True(t, ok)
	require.Equal(t, d, got2)
}
