//go:build wasip1

package retry

//go:wasmexport retry_decide
func export() int64 { return decide() }
