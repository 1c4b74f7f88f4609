package abi_test

import (
	"reflect"
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

func TestRecordsRoundTripFieldByFieldAndInPlace(t *testing.T) {
	t.Parallel()
	c := policy.Candidate{HeadSeq: 1, HeadRank: -2, HeadWaitMs: 3, HeadDeadlineMs: 4, HeadPriority: -5, Agent: 6,
		AgentInflight: 7, AgentLimit: 8, AgentWeight: 9, Lane: 10, LaneInflight: 11, LaneLimit: 12, QueueLen: 13}
	b := make([]byte, 8+2*abi.CandidateSize)[8:]
	abi.PutCandidate(b, &c)
	var got policy.Candidate
	abi.ReadCandidate(b, &got)
	if want := c; !reflect.DeepEqual(got, want) {
		t.Errorf("mismatch: got %+v, want %+v", got, want)
	}
	var scratch []policy.Candidate
	if got, want := abi.Candidates(b, abi.CandidateSize, 1, &scratch), []policy.Candidate{c}; !reflect.DeepEqual(got, want) {
		t.Errorf("in place: got %+v, want %+v", got, want)
	}
	long := make([]byte, 2*(abi.CandidateSize+8))
	abi.PutCandidate(long, &c)
	abi.PutCandidate(long[abi.CandidateSize+8:], &c)
	if got, want := abi.Candidates(long, abi.CandidateSize+8, 2, &scratch), []policy.Candidate{c, c}; !reflect.DeepEqual(got, want) {
		t.Errorf("longer records from a newer host: got %+v, want %+v", got, want)
	}

	task := policy.Task{Seq: 1, CreatedAtMs: 2, DeadlineMs: 3, Priority: 4, Agent: 5, Lane: 6, Attempts: 7, Depth: 8, Flags: 9}
	tb := make([]byte, abi.TaskSize)
	abi.PutTasks(tb, []policy.Task{task})
	var gt policy.Task
	abi.ReadTask(tb, &gt)
	if got, want := gt, task; !reflect.DeepEqual(got, want) {
		t.Errorf("mismatch: got %+v, want %+v", got, want)
	}

	f := policy.Failure{NowMs: 1, TaskSeq: 2, CreatedAtMs: 3, DeadlineMs: 4, PrevDelayMs: 5, BaseDelayMs: 6, MaxDelayMs: 7,
		Multiplier: 8, Attempt: 9, MaxAttempts: 10, HTTPStatus: 11, Class: 2, Flags: 1, Priority: 12, Agent: 13, Lane: 14, LaneInflight: 15}
	fb := make([]byte, abi.FailureSize)
	abi.PutFailure(fb, &f)
	var gf policy.Failure
	abi.ReadFailure(fb, &gf)
	if got, want := gf, f; !reflect.DeepEqual(got, want) {
		t.Errorf("mismatch: got %+v, want %+v", got, want)
	}

	d := policy.Decision{Action: policy.ActionRetry, DelayMs: policy.MaxRetryDelayMs}
	got2, ok := abi.UnpackDecision(abi.PackDecision(d))
	if !ok {
		t.Fatal("UnpackDecision refused a packed decision")
	}
	if got, want := got2, d; !reflect.DeepEqual(got, want) {
		t.Errorf("mismatch: got %+v, want %+v", got, want)
	}
}
