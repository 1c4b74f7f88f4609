//go:build !linux

package host

// threadCPU reports false: a thread's CPU time is read only on Linux, and
// elsewhere a decision is bounded by its fuel and its deadline alone.
func threadCPU() (int64, bool) { return 0, false }
