package host

import "sync/atomic"

// liveMappings counts the guest memories mapped and not yet unmapped
// (memory_linux.go); tests read it.
var liveMappings atomic.Int64
