package host

import "unsafe"

// slowMemory is a guest memory on the Go heap, grown by reallocation: what
// wazero does by itself, for when a mapping cannot be made.
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

// addr returns the address of b's first byte.
func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
