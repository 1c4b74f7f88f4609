package selection

import (
	"encoding/binary"

	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var (
	registered policy.Selection
	detailed   policy.DetailedSelection
	plain      policy.Selection // registered, when it takes no details: rank's fast path
	tasks      []policy.Task    // reused between calls
	ranks      []int64
)

// Register makes p the plugin's selection policy. If p implements
// sdk.Configurable it receives the operator's configuration. Options:
// sdk.Stateless, and from ABI v2 sdk.Names or sdk.Details: p must then
// implement policy.DetailedSelection, whose RankDetailed receives the
// tasks' agent ids and lane names (and with sdk.Details their sessions and
// labels and their agents' weights, ceilings and labels).
func Register(p policy.Selection, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
	detailed, _ = p.(policy.DetailedSelection)
	plain = nil
	if detailed == nil {
		plain = p
	}
}

// The export is the function itself, not a wrapper calling it: inside a
// guest every Go call level costs about as much as the decoding, and so
// does every jump the hot path takes (each is a turn of the function's
// dispatch loop in Go's WebAssembly, and a charge of fuel). The usual
// decision — a policy without details, records of the v1 size read in
// place, ranks written in place — therefore runs on one straight path of
// checks that fall through; anything else takes rankAny. The directive
// has effect only when compiling for wasm.
//
//go:wasmexport selection_rank
func rank(nowMs int64) int32 {
	a := guest.Arena
	if p := plain; abi.InPlace && p != nil && guest.Aligned(a) {
		h := guest.HeaderAt(a)
		n := int(h.Count)
		outOff := int(abi.OutputOffset(h.Count, abi.TaskSize))
		if h.Layout == abi.LayoutVersion && h.RecordSize == abi.TaskSize && h.NamesOffset == 0 &&
			n > 0 && outOff+8*n <= len(a) {
			p.Rank(nowMs, guest.TasksAt(a, abi.HeaderSize, n), guest.Int64sAt(a, outOff, n))
			return int32(n)
		}
	}
	return rankAny(nowMs)
}

// rankAny is the export's general path, for any header and policy.
func rankAny(nowMs int64) int32 {
	if registered == nil {
		return guest.Fail("selection_rank: no selection policy registered")
	}
	a := guest.Arena
	h := abi.ReadHeader(a)
	if h.Layout != abi.LayoutVersion || h.RecordSize < abi.TaskSize {
		return guest.Fail("selection_rank: unsupported record layout")
	}
	n := int(h.Count)
	outOff := int(abi.OutputOffset(h.Count, h.RecordSize))
	if outOff+8*n > len(a) {
		return guest.Fail("selection_rank: records overflow the arena")
	}
	in := abi.TasksInPlace(a[abi.HeaderSize:], h.RecordSize, n)
	if in == nil {
		in = abi.Tasks(a[abi.HeaderSize:], h.RecordSize, n, &tasks)
	}
	out := abi.Int64s(a[outOff:], n)
	aliased := out != nil
	if !aliased { // cannot alias the arena: use scratch and copy
		if cap(ranks) < n {
			ranks = make([]int64, n)
		}
		out = ranks[:n]
	}
	if off := h.NamesOffset; off != 0 && detailed != nil {
		t := abi.Table{Arena: a, Off: off, N: n, Entry: abi.EntrySize(guest.Flags())}
		if t.Entry == 0 || !t.Fits() {
			return guest.Fail("selection_rank: the names table overflows the arena")
		}
		detailed.RankDetailed(policy.RankContext{NowMs: nowMs, Details: t}, in, out)
	} else if detailed != nil {
		detailed.RankDetailed(policy.RankContext{NowMs: nowMs}, in, out)
	} else {
		registered.Rank(nowMs, in, out)
	}
	if !aliased {
		for i, r := range out {
			binary.LittleEndian.PutUint64(a[outOff+8*i:], uint64(r))
		}
	}
	return int32(n)
}
