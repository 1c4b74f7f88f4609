//go:build !linux

package host

// threadClock reports false: a thread's CPU time is read only on Linux, and
// elsewhere a decision is bounded by its fuel and its deadline alone.
func threadClock() (int32, bool) { return 0, false }

// clockRead is never called where threadClock reports false.
func clockRead(int32) int64 { return -1 }
