//go:build !unix

package enginebench

import "time"

// processCPU is not measured on this system.
func processCPU() time.Duration { return 0 }
