// A structural check of a module before anything else reads it: every count
// and length in it must fit in the bytes that follow, a function may declare
// at most maxLocals locals, and a table may start with at most
// maxTableElements elements (the meter refuses table.grow, so it stays
// there).
//
// Why: wazero (1.12) allocates what a module's counts announce before it
// reads what they count. A 2 KiB module whose export section announces 2^28
// exports made it allocate gigabytes and spend seconds in the garbage
// collector (found by FuzzLoad); a function declaring 2^32 locals, or a
// table of 2^27 elements per instance (which the memory limit does not
// cover), would end the process. The walk is linear in the module's size
// and allocates nothing.

package host

import (
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/plugins/internal/meter"
)

const (
	// maxLocals bounds the locals of one function (the limit browsers
	// apply).
	maxLocals = 50_000
	// maxTableElements bounds every table, min and max: 8 MiB of
	// references per table and instance.
	maxTableElements = 1 << 20
)

var errTruncated = errors.New("unexpected end")

// reservedError is an export under a name the host adds to every module
// it instruments (meter): the fuel and depth globals, the start function.
// wazero would refuse the instrumented module for a duplicate export
// (export[5] duplicates name "switchyard_fuel"), which names neither the
// cause nor the fix.
type reservedError struct{ name string }

func (e *reservedError) Error() string {
	return fmt.Sprintf("the module exports %q, a name reserved by the host, which adds its own %s, %s and %s exports to every module: rename it",
		e.name, meter.FuelExport, meter.DepthExport, meter.StartExport)
}

// reservedExport reports whether name is one of the host's own exports.
func reservedExport(name []byte) bool {
	switch string(name) {
	case meter.FuelExport, meter.DepthExport, meter.StartExport:
		return true
	}
	return false
}

// precheck walks a module's sections and returns the pages its own memory
// starts with (its memory section's minimum; 0 without one).
func precheck(wasm []byte) (memoryPages uint64, err error) {
	r := &wreader{b: wasm}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return 0, errors.New("not a WebAssembly module (no \\0asm header)")
	}
	r.i = 8
	for r.i < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return 0, fmt.Errorf("section header: %w", r.err)
		}
		if int(size) > len(r.b)-r.i {
			return 0, fmt.Errorf("section %d: its size %d runs past the module's end", id, size)
		}
		s := &wreader{b: r.b[r.i : r.i+int(size)]}
		r.i += int(size)
		if id == 5 { // memories: the first one's minimum, read apart
			m := &wreader{b: s.b}
			if m.u32() > 0 {
				if min, _, _ := m.limitsOf(); m.err == nil {
					memoryPages = min
				}
			}
		}
		if err := checkSection(id, s); err != nil {
			var re *reservedError
			if errors.As(err, &re) {
				return 0, err // says what is wrong in the author's terms
			}
			return 0, fmt.Errorf("section %d: %w", id, err)
		}
	}
	return memoryPages, nil
}

// checkSection walks one section's payload.
func checkSection(id byte, s *wreader) error {
	switch id {
	case 0: // custom
		name := s.name()
		if name == "name" && s.err == nil {
			return checkNames(s)
		}
		return s.err
	case 1: // types
		s.vec(func() {
			s.byte() // 0x60
			s.vec(func() { s.valType() })
			s.vec(func() { s.valType() })
		})
	case 2: // imports
		s.vec(func() {
			s.name()
			s.name()
			switch kind := s.byte(); kind {
			case 0:
				s.u32()
			case 1:
				s.refType()
				s.table()
			case 2:
				s.limits()
			case 3:
				s.valType()
				s.byte()
			case 4:
				s.byte()
				s.u32()
			default:
				s.fail(fmt.Errorf("import kind %d", kind))
			}
		})
	case 3: // functions
		s.vec(func() { s.u32() })
	case 4: // tables
		s.vec(func() {
			if s.peek() == 0x40 { // a table with an initialiser
				s.byte()
				s.byte()
				s.refType()
				s.table()
				s.expr()
				return
			}
			s.refType()
			s.table()
		})
	case 5: // memories
		s.vec(func() { s.limits() })
	case 6: // globals
		s.vec(func() {
			s.valType()
			s.byte()
			s.expr()
		})
	case 7: // exports
		s.vec(func() {
			n := s.u32()
			start := s.i
			s.skip(int(n))
			if s.err == nil && reservedExport(s.b[start:s.i]) {
				s.fail(&reservedError{name: string(s.b[start:s.i])})
				return
			}
			s.byte()
			s.u32()
		})
	case 8: // start
		s.u32()
	case 9: // elements
		s.vec(func() { s.element() })
	case 10: // code
		s.vec(func() {
			size := s.u32()
			if s.err != nil {
				return
			}
			if int(size) > len(s.b)-s.i {
				s.fail(fmt.Errorf("a function body of %d bytes runs past the section's end", size))
				return
			}
			body := &wreader{b: s.b[s.i : s.i+int(size)]}
			s.i += int(size)
			var locals uint64
			body.vec(func() {
				locals += uint64(body.u32())
				body.valType()
			})
			if locals > maxLocals {
				body.fail(fmt.Errorf("a function declares %d locals; the limit is %d", locals, maxLocals))
			}
			if body.err != nil {
				s.fail(body.err)
			}
		})
	case 11: // data
		s.vec(func() {
			switch flag := s.u32(); flag {
			case 0:
				s.expr()
			case 1:
			case 2:
				s.u32()
				s.expr()
			default:
				s.fail(fmt.Errorf("data segment flag %d", flag))
			}
			s.skip(int(s.u32()))
		})
	case 12: // data count
		s.u32()
	case 13: // tags
		s.vec(func() {
			s.byte()
			s.u32()
		})
	default:
		return fmt.Errorf("unknown section id %d", id)
	}
	return s.err
}

// checkNames walks the "name" custom section's subsections.
func checkNames(s *wreader) error {
	for s.err == nil && s.i < len(s.b) {
		id := s.byte()
		size := s.u32()
		if s.err != nil {
			break
		}
		if int(size) > len(s.b)-s.i {
			return fmt.Errorf("name subsection %d: its size %d runs past the section's end", id, size)
		}
		sub := &wreader{b: s.b[s.i : s.i+int(size)]}
		s.i += int(size)
		switch id {
		case 0:
			sub.name()
		case 1:
			sub.vec(func() {
				sub.u32()
				sub.name()
			})
		case 2:
			sub.vec(func() {
				sub.u32()
				sub.vec(func() {
					sub.u32()
					sub.name()
				})
			})
		}
		if sub.err != nil {
			return fmt.Errorf("name subsection %d: %w", id, sub.err)
		}
	}
	return s.err
}

// wreader reads a byte slice; the first error sticks and later reads
// return zero values.
type wreader struct {
	b   []byte
	i   int
	err error
}

func (r *wreader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *wreader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.i >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	r.i++
	return r.b[r.i-1]
}

func (r *wreader) peek() byte {
	if r.err != nil || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// leb reads an LEB128 number of at most maxBytes bytes (sign ignored: only
// its extent matters here, and its value for unsigned ones).
func (r *wreader) leb(maxBytes int) uint64 {
	var v uint64
	for n := 0; n < maxBytes; n++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if n < 10 {
			v |= uint64(c&0x7f) << (7 * n)
		}
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail(errors.New("an LEB128 number is too long"))
	return 0
}

func (r *wreader) u32() uint32 { return uint32(r.leb(5)) }

func (r *wreader) skip(n int) {
	if r.err != nil {
		return
	}
	if n < 0 || n > len(r.b)-r.i {
		r.fail(fmt.Errorf("a length of %d runs past the end", n))
		return
	}
	r.i += n
}

// vec reads a vector's count, checks that it fits in the bytes left (each
// item takes at least one), and reads its items.
func (r *wreader) vec(item func()) {
	n := r.u32()
	if r.err != nil {
		return
	}
	if int64(n) > int64(len(r.b)-r.i) {
		r.fail(fmt.Errorf("a vector of %d items in %d bytes", n, len(r.b)-r.i))
		return
	}
	for k := uint32(0); k < n && r.err == nil; k++ {
		item()
	}
}

func (r *wreader) name() string {
	n := r.u32()
	start := r.i
	r.skip(int(n))
	if r.err != nil {
		return ""
	}
	return string(r.b[start:r.i])
}

// valType reads a value type, with the heap type of a (ref null? ht).
func (r *wreader) valType() {
	switch r.byte() {
	case 0x63, 0x64:
		r.leb(5) // s33 heap type
	}
}

func (r *wreader) refType() { r.valType() }

// limitsOf reads memory or table limits: min, and max when hasMax.
func (r *wreader) limitsOf() (min, max uint64, hasMax bool) {
	flag := r.byte()
	width := 5
	if flag&0x04 != 0 { // 64-bit
		width = 10
	}
	min = r.leb(width)
	if flag&0x01 != 0 {
		max, hasMax = r.leb(width), true
	}
	if flag > 0x07 {
		r.fail(fmt.Errorf("limits flag %#x", flag))
	}
	return min, max, hasMax
}

func (r *wreader) limits() { r.limitsOf() }

// table reads a table's limits and bounds its initial size.
func (r *wreader) table() {
	min, _, _ := r.limitsOf()
	if r.err == nil && min > maxTableElements {
		r.fail(fmt.Errorf("a table of %d elements; the limit is %d", min, maxTableElements))
	}
}

// expr reads a constant expression up to its end (0x0b).
func (r *wreader) expr() {
	for r.err == nil {
		switch op := r.byte(); op {
		case 0x0b:
			return
		case 0x41, 0x23, 0xd2: // i32.const, global.get, ref.func
			r.leb(5)
		case 0x42: // i64.const
			r.leb(10)
		case 0x43:
			r.skip(4)
		case 0x44:
			r.skip(8)
		case 0xd0: // ref.null
			r.leb(5)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			r.u32()
			r.skip(16)
		default:
			r.fail(fmt.Errorf("opcode %#x in a constant expression", op))
		}
	}
}

// element reads one element segment (its eight flavours).
func (r *wreader) element() {
	flag := r.u32()
	switch flag {
	case 0:
		r.expr()
		r.vec(func() { r.u32() })
	case 1, 3:
		r.byte()
		r.vec(func() { r.u32() })
	case 2:
		r.u32()
		r.expr()
		r.byte()
		r.vec(func() { r.u32() })
	case 4:
		r.expr()
		r.vec(func() { r.expr() })
	case 5, 7:
		r.refType()
		r.vec(func() { r.expr() })
	case 6:
		r.u32()
		r.expr()
		r.refType()
		r.vec(func() { r.expr() })
	default:
		r.fail(fmt.Errorf("element segment flag %d", flag))
	}
}
