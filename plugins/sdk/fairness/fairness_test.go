//go:build !wasip1

package fairness

import (
	"testing"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

// shortest picks the candidate with the shortest queue, once.
type shortest struct{}

func (shortest) Pick(_ policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	best := 0
	for i := range cands {
		if cands[i].QueueLen < cands[best].QueueLen {
			best = i
		}
	}
	picks[0] = uint32(best)
	return 1
}

// registerShortest registers shortest once: a plugin registers one policy.
func registerShortest() {
	if registered == nil {
		Register(shortest{})
	}
}

// The registered policy decides through the arena natively as it does in a
// plugin: records in, picks out at the output offset.
func TestARegisteredPolicyDecidesThroughTheArena(t *testing.T) {
	registerShortest()
	cands := []policy.Candidate{{HeadSeq: 1, QueueLen: 5}, {HeadSeq: 2, QueueLen: 1}, {HeadSeq: 3, QueueLen: 3}}
	a := guest.Arena
	abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion, RecordSize: abi.CandidateSize, Count: 3})
	abi.PutCandidates(a[abi.HeaderSize:], cands)
	if n := pick(0, 0, 2, 0); n != 1 {
		t.Fatalf("pick returned %d, want 1 (reason %q)", n, guest.LastReason)
	}
	out := abi.OutputOffset(3, abi.CandidateSize)
	if got := abi.Uint32s(a[out:], 1); got[0] != 1 {
		t.Fatalf("picked %d, want 1", got[0])
	}
	if n := pick(0, 0, -1, 0); n != abi.ErrGuest || guest.LastReason == "" {
		t.Fatalf("negative slots: got %d and reason %q, want a refusal", n, guest.LastReason)
	}
}

// The straight path (v1 records, picks in place) and the general path (a
// newer host's longer records) pick alike, and an answer out of range is
// refused on either.
func TestTheStraightPathPicksAsTheGeneralOne(t *testing.T) {
	registerShortest()
	cands := []policy.Candidate{{HeadSeq: 1, QueueLen: 5}, {HeadSeq: 2, QueueLen: 1}, {HeadSeq: 3, QueueLen: 3}}
	a := guest.Arena
	for _, size := range []uint32{abi.CandidateSize, abi.CandidateSize + 8} {
		clear(a[:1024])
		abi.PutHeader(a, abi.Header{Layout: abi.LayoutVersion, RecordSize: size, Count: 3})
		for i := range cands {
			abi.PutCandidate(a[abi.HeaderSize+int(size)*i:], &cands[i])
		}
		if n := pick(0, 0, 2, 0); n != 1 {
			t.Fatalf("record size %d: pick returned %d, want 1 (reason %q)", size, n, guest.LastReason)
		}
		if got := abi.Uint32s(a[abi.OutputOffset(3, size):], 1); got[0] != 1 {
			t.Errorf("record size %d: picked %d, want 1", size, got[0])
		}
	}
	if got := answer(3, 2); got != abi.ErrGuest {
		t.Errorf("3 picks for 2 slots: got %d, want a refusal", got)
	}
	if got := answer(int(policy.Hold(5)), 2); got != int32(policy.Hold(5)) {
		t.Errorf("a hold: got %d, want it passed on", got)
	}
}
