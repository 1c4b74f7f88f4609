//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64))

package host

import "github.com/tetratelabs/wazero/experimental"

// instanceMemory returns a nil allocator, wazero's own memories on the Go
// heap, and a release with nothing to do: elsewhere than 64-bit Linux.
func instanceMemory(func()) (experimental.MemoryAllocator, func(failed bool)) {
	return nil, func(bool) {}
}
