//go:build unix

package enginebench

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time (user and system) the process has used so
// far, every goroutine's and the collector's, or 0 where it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
