//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

// Guest memories on Linux: each instance's linear memory is one mapping,
// reserved at its limit when the instance is made, outside the Go heap.
//
// wazero's own memories are Go slices that memory.grow reallocates and
// copies, a page at a time: growing a memory to its 8 MiB cap copied about
// 40 MB and left 8 MiB of garbage behind, tens of milliseconds for one
// decision. Here memory.grow only lengthens the slice over the mapping (the
// kernel hands out zeroed pages as they are first touched), and the
// garbage collector never sees guest memory.
//
// What the kernel does at a page's first touch is costly on a virtual
// machine: tens of microseconds a page on some, so that a decision
// chasing through untouched memory could run for milliseconds on a few
// thousand units of fuel. So the memory an instance starts with is made
// resident when the instance is made, off any decision's path (populate),
// and a decision that grows its memory has its CPU time counted from the
// grow on (instance.memoryGrew), whatever its wall time so far. The
// mapping asks for no
// transparent huge pages: with them the first touch of a guest's few
// hundred KiB committed a whole 2 MiB page per instance (pools × slots ×
// 2 MiB resident), and loads scattered over the memory missed the caches
// as much with them as without (plugins/ABI.md, cost model).
//
// A mapping is unmapped only once both wazero (Free, when it closes the
// module) and the host (release, when it closes the instance) are done with
// it. wazero frees every module's memory when the runtime closes, running
// calls or not; the host closes an instance only when no call runs on it
// and no host code reads or writes its memory. So a decision that runs
// while its plugin or runtime closes keeps its memory until it returns.
//
// 64-bit only (see memory_other.go): sizes up to 4 GiB plus the alignment
// slack must fit in an int, and the reservation in the address space.

package host

import (
	"math"
	"sync"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mappedMemory is a guest memory over its own mapping.
type mappedMemory struct {
	mu       sync.Mutex
	whole    []byte // the mapping, for munmap; nil once unmapped
	buf      []byte // over whole, as long as the memory
	freed    bool   // wazero closed the module (Free)
	released bool   // the host closed the instance (release)
	sized    bool   // wazero has sized the memory the instance starts with
	grown    func() // called after a memory.grow lengthened the memory
}

// instanceMemory returns the allocator one instance is made with, and the
// function that gives back what it allocated once the instance is closed.
// failed is true when the instance was never made (InstantiateModule
// failed): wazero then may not have called Free, and nothing else holds
// the memory. grown is called, on the guest's goroutine, after each
// memory.grow that lengthens a memory.
func instanceMemory(grown func()) (experimental.MemoryAllocator, func(failed bool)) {
	var (
		mu   sync.Mutex
		mems []*mappedMemory
	)
	alloc := experimental.MemoryAllocatorFunc(func(capBytes, maxBytes uint64) experimental.LinearMemory {
		m := allocate(capBytes, maxBytes)
		if mm, ok := m.(*mappedMemory); ok {
			mm.grown = grown
			mu.Lock()
			mems = append(mems, mm)
			mu.Unlock()
		}
		return m
	})
	release := func(failed bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range mems {
			if failed {
				m.Free()
			}
			m.release()
		}
		mems = nil
	}
	return alloc, release
}

// allocate maps a memory that may grow to max(capBytes, maxBytes).
func allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	size := max(capBytes, maxBytes)
	if size == 0 || size > math.MaxInt32*2+2 { // at most 4 GiB (65,536 pages); an int holds it on 64-bit
		return &slowMemory{}
	}
	whole, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return &slowMemory{}
	}
	liveMappings.Add(1)
	return &mappedMemory{whole: whole, buf: whole[:0]}
}

// Reallocate lengthens the memory in place; it never moves. wazero's first
// call sizes the memory the instance starts with, which is made resident
// (populate); each later one is a memory.grow, reported to grown.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	m.mu.Lock()
	if size > uint64(cap(m.buf)) {
		m.mu.Unlock()
		return nil
	}
	first, longer := !m.sized, size > uint64(len(m.buf))
	m.sized = true
	m.buf = m.buf[:size]
	buf := m.buf
	m.mu.Unlock()
	switch {
	case first:
		populate(buf)
	case longer && m.grown != nil:
		m.grown()
	}
	return buf
}

// populate makes b's pages resident: one madvise where the kernel has
// MADV_POPULATE_WRITE (Linux 5.14), else a write to each page.
func populate(b []byte) {
	const madvPopulateWrite = 23
	if len(b) == 0 || syscall.Madvise(b, madvPopulateWrite) == nil {
		return
	}
	for i := 0; i < len(b); i += syscall.Getpagesize() {
		b[i] = 0
	}
}

// Free is wazero's: the module is closed. A call may still run on the
// memory (the runtime closes every module, busy or not), so the memory
// stays mapped until the host releases it too.
func (m *mappedMemory) Free() {
	m.mu.Lock()
	m.freed = true
	m.unmap()
	m.mu.Unlock()
}

// release is the host's: the instance is closed, no call runs on it.
func (m *mappedMemory) release() {
	m.mu.Lock()
	m.released = true
	m.unmap()
	m.mu.Unlock()
}

// unmap unmaps the memory once wazero and the host are both done with it.
func (m *mappedMemory) unmap() {
	if m.freed && m.released && m.whole != nil {
		_ = syscall.Munmap(m.whole)
		m.whole, m.buf = nil, nil
		liveMappings.Add(-1)
	}
}

// slowMemory is a guest memory on the Go heap, grown by reallocation: what
// wazero does by itself, for when a mapping cannot be made. It ignores the
// maximum: wazero checks a grow against the memory's max before it asks.
type slowMemory struct{ buf []byte }

func (m *slowMemory) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		nb := make([]byte, size, max(size, uint64(cap(m.buf))*5/4))
		copy(nb, m.buf)
		m.buf = nb
	}
	m.buf = m.buf[:size]
	return m.buf
}

func (m *slowMemory) Free() { m.buf = nil }
