//go:build wasip1

package selection

import (
	"encoding/binary"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/abi"
	"github.com/switchyard/switchyard/plugins/sdk"
	"github.com/switchyard/switchyard/plugins/sdk/internal/guest"
)

var (
	registered policy.Selection
	tasks      []policy.Task // reused between calls
	ranks      []int64
)

// Register makes p the plugin's selection policy. If p implements
// sdk.Configurable it receives the operator's configuration.
func Register(p policy.Selection, opts ...sdk.Option) {
	conf, _ := p.(sdk.Configurable)
	guest.Register(conf, sdk.Flags(opts))
	registered = p
}

//go:wasmexport selection_rank
func rank(nowMs int64) int32 {
	if registered == nil {
		return guest.Fail("selection_rank: no selection policy registered")
	}
	a := guest.Arena
	h := abi.ReadHeader(a)
	if h.Layout != abi.LayoutVersion || h.RecordSize < abi.TaskSize {
		return guest.Fail("selection_rank: unsupported record layout")
	}
	n := int(h.Count)
	out := int(abi.OutputOffset(h.Count, h.RecordSize))
	if out+8*n > len(a) {
		return guest.Fail("selection_rank: records overflow the arena")
	}
	if cap(tasks) < n {
		tasks = make([]policy.Task, n)
		ranks = make([]int64, n)
	}
	tasks, ranks = tasks[:n], ranks[:n]
	rs := int(h.RecordSize)
	for i := range tasks {
		abi.ReadTask(a[abi.HeaderSize+i*rs:], &tasks[i])
	}
	registered.Rank(nowMs, tasks, ranks)
	for i, r := range ranks {
		binary.LittleEndian.PutUint64(a[out+8*i:], uint64(r))
	}
	return int32(n)
}
