//go:build wasip1

package fairness

import (
	"encoding/binary"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/abi"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
)

var (
	registered policy.Fairness
	cands      []policy.Candidate // reused between calls
	picks      []uint32
)

// Register makes p the plugin's fairness policy. If p implements
// sdk.Configurable it receives the operator's configuration.
func Register(p policy.Fairness, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
}

//go:wasmexport fairness_pick
func pick(nowMs, agingMs int64, slots, flags int32) int32 {
	if registered == nil {
		return guest.Fail("fairness_pick: no fairness policy registered")
	}
	if slots < 0 {
		return guest.Fail("fairness_pick: negative slots")
	}
	a := guest.Arena
	h := abi.ReadHeader(a)
	if h.Layout != abi.LayoutVersion || h.RecordSize < abi.CandidateSize {
		return guest.Fail("fairness_pick: unsupported record layout")
	}
	n := int(h.Count)
	out := int(abi.OutputOffset(h.Count, h.RecordSize))
	if out+4*int(slots) > len(a) {
		return guest.Fail("fairness_pick: records overflow the arena")
	}
	if cap(cands) < n {
		cands = make([]policy.Candidate, n)
	}
	if cap(picks) < int(slots) {
		picks = make([]uint32, slots)
	}
	cands, picks = cands[:n], picks[:slots]
	rs := int(h.RecordSize)
	for i := range cands {
		abi.ReadCandidate(a[abi.HeaderSize+i*rs:], &cands[i])
	}
	ctx := policy.PickContext{NowMs: nowMs, AgingMs: agingMs, Slots: uint32(slots), Flags: uint32(flags)}
	k := registered.Pick(ctx, cands, picks)
	if k < 0 || k > len(picks) {
		return guest.Fail("fairness_pick: policy returned a count out of range")
	}
	for i, p := range picks[:k] {
		binary.LittleEndian.PutUint32(a[out+4*i:], p)
	}
	return int32(k)
}
