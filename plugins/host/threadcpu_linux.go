package host

import (
	"syscall"
	"unsafe"
)

// threadClock returns the id of the calling thread's CPU clock, which any
// thread of the process can read (clockRead), and true. A guest runs on
// the thread of the goroutine that calls it, so that the difference
// between two readings within a call, with the goroutine locked to its
// thread, is the call's own running time, which the machine's load does
// not inflate as it does the wall time. The caller locks its goroutine to
// the thread for as long as it uses the clock.
func threadClock() (int32, bool) {
	// Linux's per-thread CPU clock: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED).
	clock := int32(^uint32(syscall.Gettid())<<3 | 6)
	return clock, clockRead(clock) >= 0
}

// clockRead returns the clock's reading in ns, or -1 if it cannot be read.
// It is a system call: the vDSO serves only the wall and monotonic clocks.
func clockRead(clock int32) int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, uintptr(clock), uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
