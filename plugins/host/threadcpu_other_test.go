//go:build !linux

package host_test

// threadCPU reports false: a thread's CPU time is read only on Linux.
func threadCPU() (int64, bool) { return 0, false }
