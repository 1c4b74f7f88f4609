package host_test

import (
	"syscall"
	"unsafe"
)

// threadCPU returns the CPU time the calling thread has used, in ns, and
// true; the caller has locked its goroutine to the thread. A guest runs on
// the thread of the goroutine that calls it, so that the difference around
// a call is the call's own running time, which the machine's load does not
// inflate as it does the wall time.
func threadCPU() (int64, bool) {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0, false
	}
	return ts.Nano(), true
}
