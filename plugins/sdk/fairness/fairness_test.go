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

// The registered policy decides through the arena natively as it does in a
// plugin: records in, picks out at the output offset.
func TestARegisteredPolicyDecidesThroughTheArena(t *testing.T) {
	Register(shortest{})
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
