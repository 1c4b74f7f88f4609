package retry

import (
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var (
	registered policy.Retry
	detailed   policy.DetailedRetry
	plain      policy.Retry // registered, when it takes no details: decide's fast path
)

// Register makes p the plugin's retry policy. If p implements
// sdk.Configurable it receives the operator's configuration. Options:
// sdk.Stateless, and from ABI v2 sdk.Names or sdk.Details: p must then
// implement policy.DetailedRetry, whose DecideDetailed receives the task's
// agent id and lane name (and with sdk.Details its session, labels, agent
// and the attempt's error code).
func Register(p policy.Retry, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
	detailed, _ = p.(policy.DetailedRetry)
	plain = nil
	if detailed == nil {
		plain = p
	}
}

// The export is the function itself, not a wrapper calling it, and the
// usual decision (a policy without details, the record read in place) runs
// on one straight path: see selection's rank. The directive has effect
// only when compiling for wasm.
//
//go:wasmexport retry_decide
func decide() int64 {
	a := guest.Arena
	if p := plain; abi.InPlace && p != nil && guest.Aligned(a) {
		h := guest.HeaderAt(a)
		if h.Layout == abi.LayoutVersion && h.RecordSize >= abi.FailureSize && h.Count == 1 {
			return abi.PackDecision(p.Decide(*guest.FailureAt(a, abi.HeaderSize)))
		}
	}
	return decideAny()
}

// decideAny is the export's general path, for any header and policy.
func decideAny() int64 {
	if registered == nil {
		return int64(guest.Fail("retry_decide: no retry policy registered"))
	}
	a := guest.Arena
	h := abi.ReadHeader(a)
	if h.Layout != abi.LayoutVersion || h.RecordSize < abi.FailureSize || h.Count != 1 {
		return int64(guest.Fail("retry_decide: unsupported record layout"))
	}
	var f policy.Failure
	if p := abi.FailureInPlace(a[abi.HeaderSize:]); p != nil {
		f = *p
	} else {
		abi.ReadFailure(a[abi.HeaderSize:], &f)
	}
	if detailed == nil {
		return abi.PackDecision(registered.Decide(f))
	}
	var ctx policy.RetryContext
	if off := h.NamesOffset; off != 0 {
		t := abi.Table{Arena: a, Off: off, N: 1, Entry: abi.EntrySize(guest.Flags())}
		if t.Entry == 0 || !t.Fits() {
			return int64(guest.Fail("retry_decide: the names table overflows the arena"))
		}
		ctx.Details = t
	}
	return abi.PackDecision(detailed.DecideDetailed(ctx, f))
}
