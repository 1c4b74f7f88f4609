//go:build wasip1

package selection

//go:wasmexport selection_rank
func export(nowMs int64) int32 { return rank(nowMs) }
