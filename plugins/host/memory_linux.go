// Guest memories on Linux: each instance's linear memory is one mapping,
// reserved at its limit when the instance is made, outside the Go heap.
//
// wazero's own memories are Go slices that memory.grow reallocates and
// copies, a page at a time: growing a memory to its 8 MiB cap copied about
// 40 MB and left 8 MiB of garbage behind, tens of milliseconds for one
// decision. Here memory.grow only lengthens the slice over the mapping (the
// kernel hands out zeroed pages as they are first touched), the garbage
// collector never sees guest memory, and the mapping asks for transparent
// huge pages, so that loads scattered over the whole memory do not miss the
// TLB at every step (on a virtual machine such a miss walks two page
// tables).

package host

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// hugePage is the size the mapping is aligned to, so that whole huge pages
// fit in it.
const hugePage = 2 << 20

// madvHugepage is MADV_HUGEPAGE, which package syscall does not name.
const madvHugepage = 14

// mappedMemory is a guest memory over its own mapping.
type mappedMemory struct {
	whole []byte // the mapping, for munmap
	buf   []byte // 2 MiB aligned, as long as the memory may grow
}

// memoryAllocator returns the allocator instances are made with.
func memoryAllocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		size := max(capBytes, maxBytes)
		whole, err := syscall.Mmap(-1, 0, int(size)+hugePage, syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
		if err != nil {
			return &slowMemory{}
		}
		off := 0
		if rem := int(addr(whole) % hugePage); rem != 0 {
			off = hugePage - rem
		}
		buf := whole[off : off+int(size)]
		_ = syscall.Madvise(buf, madvHugepage) // a hint: without it the memory works the same, slower
		return &mappedMemory{whole: whole, buf: buf[:0]}
	})
}

// Reallocate lengthens the memory in place; it never moves.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		return nil
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free unmaps the memory; the instance is closed.
func (m *mappedMemory) Free() {
	if m.whole != nil {
		_ = syscall.Munmap(m.whole)
		m.whole, m.buf = nil, nil
	}
}
