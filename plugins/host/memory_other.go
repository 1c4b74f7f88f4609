//go:build !linux

package host

import "github.com/tetratelabs/wazero/experimental"

// memoryAllocator returns nil: wazero's own memories, on the Go heap.
func memoryAllocator() experimental.MemoryAllocator { return nil }
