package abi_test

import (
	"reflect"
	"testing"
	"unsafe"

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
	if !abi.InPlace {
		t.Fatal("records are not laid out in place on a little-endian machine: every guest decodes field by field")
	}
	if p := abi.FailureInPlace(fb); p == nil || !reflect.DeepEqual(*p, f) {
		t.Errorf("failure in place: got %+v, want %+v", p, f)
	}
	if p := abi.FailureInPlace(aligned(1 + abi.FailureSize)[1:]); p != nil {
		t.Error("a misaligned failure record was viewed in place")
	}
	if got := abi.TasksInPlace(tb, abi.TaskSize, 1); len(got) != 1 || !reflect.DeepEqual(got[0], task) {
		t.Errorf("task in place: got %+v, want %+v", got, task)
	}
	if got := abi.TasksInPlace(tb, abi.TaskSize+8, 1); got != nil {
		t.Error("longer task records were viewed in place")
	}
	if got := abi.CandidatesInPlace(b, abi.CandidateSize, 0); got != nil {
		t.Error("no candidates were viewed in place as some")
	}
	if h := (abi.Header{Layout: 1, RecordSize: 2, Count: 3, NamesOffset: 4}); true {
		hb, mb := aligned(abi.HeaderSize), aligned(1 + abi.HeaderSize)[1:]
		abi.PutHeader(hb, h)
		abi.PutHeader(mb, h)
		if got := abi.ReadHeader(hb); got != h {
			t.Errorf("header: got %+v, want %+v", got, h)
		}
		if got := abi.ReadHeader(mb); got != h {
			t.Errorf("misaligned header: got %+v, want %+v", got, h)
		}
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

// aligned returns n bytes that start on an 8-byte boundary (a byte slice
// the compiler keeps on the stack need not).
func aligned(n int) []byte {
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), n)
}
