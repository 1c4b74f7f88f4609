package host

import (
	"syscall"
	"unsafe"
)

// threadCPU returns the CPU time the calling thread has used, in ns, and
// true. A guest runs on the thread of the goroutine that calls it, so that
// the difference between two readings within a call, with the goroutine
// locked to its thread, is the call's own running time, which the
// machine's load does not inflate as it does the wall time. It is a system
// call (the vDSO serves only the wall and monotonic clocks), so the meter's
// slow path reads it only when the wall time says the limit may have been
// reached.
func threadCPU() (int64, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
