package retry

import (
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
)

var registered policy.Retry

// Register makes p the plugin's retry policy. If p implements
// sdk.Configurable it receives the operator's configuration.
func Register(p policy.Retry, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
}

func decide() int64 {
	if registered == nil {
		return int64(guest.Fail("retry_decide: no retry policy registered"))
	}
	a := guest.Arena
	h := abi.ReadHeader(a)
	if h.Layout != abi.LayoutVersion || h.RecordSize < abi.FailureSize || h.Count != 1 {
		return int64(guest.Fail("retry_decide: unsupported record layout"))
	}
	var f policy.Failure
	abi.ReadFailure(a[abi.HeaderSize:], &f)
	return abi.PackDecision(registered.Decide(f))
}
