//go:build wasip1

package fairness

//go:wasmexport fairness_pick
func export(nowMs, agingMs int64, slots, flags int32) int32 {
	return pick(nowMs, agingMs, slots, flags)
}
