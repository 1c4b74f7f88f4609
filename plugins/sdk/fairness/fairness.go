package fairness

import (
	"encoding/binary"

	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var (
	registered policy.Fairness
	cands      []policy.Candidate // reused between calls
	picks      []uint32
)

// Register makes p the plugin's fairness policy. If p implements
// sdk.Configurable it receives the operator's configuration. Options:
// sdk.Stateless, and from ABI v2 sdk.Names (PickContext.Names gives the
// candidates' agent ids and lane names), sdk.Details (PickContext.Details
// gives besides the head tasks' sessions and labels and the agents' labels)
// and sdk.Holds (p may return policy.Hold).
func Register(p policy.Fairness, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
}

// The export is the function itself, not a wrapper calling it, and the
// usual decision (no names table, v1 records, picks written in place, an
// answer in range) runs on one straight path: see selection's rank. The
// directive has effect only when compiling for wasm.
//
//go:wasmexport fairness_pick
func pick(nowMs, agingMs int64, slots, flags int32) int32 {
	a := guest.Arena
	if p := registered; abi.InPlace && p != nil && slots > 0 && guest.Aligned(a) {
		h := guest.HeaderAt(a)
		n := int(h.Count)
		outOff := int(abi.OutputOffset(h.Count, abi.CandidateSize))
		if h.Layout == abi.LayoutVersion && h.RecordSize == abi.CandidateSize && h.NamesOffset == 0 &&
			n > 0 && outOff+4*int(slots) <= len(a) {
			ctx := policy.PickContext{NowMs: nowMs, AgingMs: agingMs, Slots: uint32(slots), Flags: uint32(flags)}
			k := p.Pick(ctx, guest.CandidatesAt(a, abi.HeaderSize, n), guest.Uint32sAt(a, outOff, int(slots)))
			if k >= 0 && k <= int(slots) {
				return int32(k)
			}
			return answer(k, int(slots))
		}
	}
	return pickAny(nowMs, agingMs, slots, flags)
}

// answer checks a count of picks that is not one of 0 to slots: a hold,
// or an error.
func answer(k, slots int) int32 {
	if _, hold := policy.HoldHint(k); hold {
		return int32(k)
	}
	if k < 0 || k > slots {
		return guest.Fail("fairness_pick: policy returned a count out of range")
	}
	return int32(k)
}

// pickAny is the export's general path, for any header.
func pickAny(nowMs, agingMs int64, slots, flags int32) int32 {
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
	outOff := int(abi.OutputOffset(h.Count, h.RecordSize))
	if outOff+4*int(slots) > len(a) {
		return guest.Fail("fairness_pick: records overflow the arena")
	}
	in := abi.CandidatesInPlace(a[abi.HeaderSize:], h.RecordSize, n)
	if in == nil {
		in = abi.Candidates(a[abi.HeaderSize:], h.RecordSize, n, &cands)
	}
	out := abi.Uint32s(a[outOff:], int(slots))
	aliased := out != nil
	if !aliased { // cannot alias the arena: use scratch and copy
		if cap(picks) < int(slots) {
			picks = make([]uint32, slots)
		}
		out = picks[:slots]
	}
	ctx := policy.PickContext{NowMs: nowMs, AgingMs: agingMs, Slots: uint32(slots), Flags: uint32(flags)}
	if off := h.NamesOffset; off != 0 {
		t := abi.Table{Arena: a, Off: off, N: n, Entry: abi.EntrySize(guest.Flags())}
		if t.Entry == 0 || !t.Fits() {
			return guest.Fail("fairness_pick: the names table overflows the arena")
		}
		ctx.Names = t
		if t.Entry >= abi.DetailEntrySize {
			ctx.Details = t
		}
	}
	k := registered.Pick(ctx, in, out)
	if _, hold := policy.HoldHint(k); hold {
		return int32(k)
	}
	if k < 0 || k > len(out) {
		return guest.Fail("fairness_pick: policy returned a count out of range")
	}
	if !aliased {
		for i, p := range out[:k] {
			binary.LittleEndian.PutUint32(a[outOff+4*i:], p)
		}
	}
	return int32(k)
}
