// Package meter instruments a WebAssembly module with fuel: a mutable i64
// global, exported as FuelExport, that every function entry and every loop
// header decrements, trapping with `unreachable` when it reaches zero. The
// host fills the tank before each call, so a guest can make at most that
// many calls and loop iterations together: an endless loop and a recursion
// that never ends (deep or, without any loop, exponential) run out of fuel;
// runaway memory ends in the memory cap.
//
// Why not wazero's WithCloseOnContextDone: it makes every loop header exit
// to Go and back, about 100 ns each, which made a 64-candidate fairness
// decision of a Go guest cost ~270 µs. A fuel check costs a few
// nanoseconds, and it is deterministic: the same input ends the same way on
// any machine under any load.
package meter

import (
	"errors"
	"fmt"
)

// FuelExport is the name under which the fuel global is exported.
const FuelExport = "switchyard_fuel"

// Section ids.
const (
	secCustom = 0
	secImport = 2
	secGlobal = 6
	secExport = 7
	secCode   = 10
)

// ErrUnsupported marks a module that uses instructions the instrumenter
// does not know (SIMD, threads, exception handling, GC types).
var ErrUnsupported = errors.New("unsupported instruction set")

// Instrument returns a copy of the module in wasm with fuel metering added;
// the tank starts with initial fuel, enough for instantiation. It refuses a
// module whose code refers to the global index it adds.
func Instrument(wasm []byte, initial int64) ([]byte, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || wasm[4] != 1 || wasm[5] != 0 || wasm[6] != 0 || wasm[7] != 0 {
		return nil, errors.New("not a WebAssembly 1.0 binary module")
	}
	type section struct {
		id      byte
		payload []byte
	}
	var secs []section
	r := &reader{b: wasm, i: 8}
	for r.i < len(r.b) {
		id := r.byte()
		n := r.u32()
		payload := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.err)
		}
		secs = append(secs, section{id, payload})
	}
	importedGlobals, definedGlobals := 0, 0
	for _, s := range secs {
		var err error
		switch s.id {
		case secImport:
			importedGlobals, err = countImportedGlobals(s.payload)
		case secGlobal:
			sr := &reader{b: s.payload}
			definedGlobals = int(sr.u32())
			err = sr.err
		}
		if err != nil {
			return nil, err
		}
	}
	fuel := uint32(importedGlobals + definedGlobals)

	out := append([]byte(nil), wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	newGlobal := append([]byte{0x7E, 0x01, 0x42}, appendS64(nil, initial)...) // mut i64 = i64.const initial
	newGlobal = append(newGlobal, 0x0B)
	newExport := appendName(nil, FuelExport)
	newExport = append(newExport, 0x03) // global
	newExport = appendU32(newExport, fuel)
	sawGlobal, sawExport := false, false
	for _, s := range secs {
		if s.id != secCustom {
			// Insert missing sections in their canonical place.
			if !sawGlobal && s.id > secGlobal {
				emit(secGlobal, append([]byte{1}, newGlobal...))
				sawGlobal = true
			}
			if !sawExport && s.id > secExport {
				emit(secExport, append([]byte{1}, newExport...))
				sawExport = true
			}
		}
		switch s.id {
		case secGlobal:
			p, err := appendVecItem(s.payload, newGlobal)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawGlobal = true
		case secExport:
			p, err := appendVecItem(s.payload, newExport)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawExport = true
		case secCode:
			p, err := instrumentCode(s.payload, fuel)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
		default:
			emit(s.id, s.payload)
		}
	}
	if !sawGlobal {
		emit(secGlobal, append([]byte{1}, newGlobal...))
	}
	if !sawExport {
		emit(secExport, append([]byte{1}, newExport...))
	}
	return out, nil
}

// appendVecItem appends item to a section whose payload is a vector.
func appendVecItem(payload, item []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	p := appendU32(nil, n+1)
	p = append(p, payload[r.i:]...)
	return append(p, item...), nil
}

func countImportedGlobals(payload []byte) (int, error) {
	r := &reader{b: payload}
	n := r.u32()
	globals := 0
	for range n {
		r.bytes(int(r.u32())) // module
		r.bytes(int(r.u32())) // name
		switch r.byte() {
		case 0x00: // func
			r.u32()
		case 0x01: // table
			r.byte()
			r.limits()
		case 0x02: // memory
			r.limits()
		case 0x03: // global
			r.byte()
			r.byte()
			globals++
		case 0x04: // tag
			r.byte()
			r.u32()
		default:
			return 0, errors.New("import section: unknown import kind")
		}
		if r.err != nil {
			return 0, fmt.Errorf("import section: %w", r.err)
		}
	}
	return globals, nil
}

// meterCode returns the instructions inserted at each function entry and loop
// header:
//
//	global.get $fuel ; i64.eqz ; if ; unreachable ; end
//	global.get $fuel ; i64.const 1 ; i64.sub ; global.set $fuel
func meterCode(fuel uint32) []byte {
	g := appendU32(nil, fuel)
	c := append([]byte{0x23}, g...)
	c = append(c, 0x50, 0x04, 0x40, 0x00, 0x0B, 0x23)
	c = append(c, g...)
	c = append(c, 0x42, 0x01, 0x7D, 0x24)
	return append(c, g...)
}

func instrumentCode(payload []byte, fuel uint32) ([]byte, error) {
	meter := meterCode(fuel)
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for f := range n {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, r.err)
		}
		nb, err := instrumentBody(body, meter, fuel)
		if err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, nil
}

func instrumentBody(body, meter []byte, fuelIndex uint32) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	for range groups {
		r.u32()
		if t := r.byte(); !isValType(t) {
			return nil, fmt.Errorf("%w: local of type 0x%x", ErrUnsupported, t)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	out := make([]byte, 0, len(body)+len(body)/8)
	out = append(out, body[:r.i]...)
	out = append(out, meter...) // every call, so that recursion without loops is metered too
	for r.i < len(r.b) {
		start := r.i
		op := r.byte()
		if err := r.skipImmediates(op); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		out = append(out, body[start:r.i]...)
		if (op == 0x23 || op == 0x24) && globalIndex(body[start+1:r.i]) >= fuelIndex {
			return nil, fmt.Errorf("refers to global %d, which does not exist", globalIndex(body[start+1:r.i]))
		}
		if op == 0x03 { // loop: meter each entry and each back edge
			out = append(out, meter...)
		}
	}
	return out, nil
}

func isValType(t byte) bool {
	switch t {
	case 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F:
		return true
	}
	return false
}

// skipImmediates advances past the immediates of op.
func (r *reader) skipImmediates(op byte) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0B, op == 0x0F, op == 0x1A, op == 0x1B, op == 0xD1:
	case op >= 0x45 && op <= 0xC4: // numeric, conversions, sign extension
	case op == 0x02, op == 0x03, op == 0x04:
		r.blockType()
	case op == 0x0C, op == 0x0D, op == 0x10, op == 0x12, op == 0xD2,
		op >= 0x20 && op <= 0x26:
		r.u32()
	case op == 0x0E:
		n := r.u32()
		for range n + 1 {
			r.u32()
		}
	case op == 0x11, op == 0x13:
		r.u32()
		r.u32()
	case op == 0x1C:
		n := r.u32()
		r.bytes(int(n))
	case op >= 0x28 && op <= 0x3E:
		r.memarg()
	case op == 0x3F, op == 0x40:
		r.u32()
	case op == 0x41:
		r.s64()
	case op == 0x42:
		r.s64()
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xD0:
		r.s64() // heap type
	case op == 0xFC:
		switch sub := r.u32(); {
		case sub <= 7:
		case sub == 8:
			r.u32()
			r.u32()
		case sub == 9, sub == 11, sub == 13, sub == 15, sub == 16, sub == 17:
			r.u32()
		case sub == 10, sub == 12, sub == 14:
			r.u32()
			r.u32()
		default:
			return fmt.Errorf("%w: 0xFC %d", ErrUnsupported, sub)
		}
	default:
		return fmt.Errorf("%w: opcode 0x%02x", ErrUnsupported, op)
	}
	return nil
}

func (r *reader) blockType() {
	if r.i >= len(r.b) {
		r.err = errors.New("truncated block type")
		return
	}
	if t := r.b[r.i]; t == 0x40 || isValType(t) {
		r.i++
		return
	}
	r.s64()
}

func (r *reader) memarg() {
	align := r.u32()
	if align&0x40 != 0 { // multi-memory: a memory index follows
		r.u32()
	}
	r.u32()
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	i   int
	err error
}

func (r *reader) byte() byte {
	if r.i >= len(r.b) {
		r.err = errors.New("unexpected end of module")
		return 0
	}
	c := r.b[r.i]
	r.i++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || r.i+n > len(r.b) {
		r.err = errors.New("unexpected end of module")
		r.i = len(r.b)
		return nil
	}
	b := r.b[r.i : r.i+n]
	r.i += n
	return b
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		v |= uint32(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("malformed LEB128")
	return 0
}

func (r *reader) s64() {
	for range 10 {
		if c := r.byte(); c&0x80 == 0 {
			return
		}
	}
	r.err = errors.New("malformed LEB128")
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

func globalIndex(leb []byte) uint32 {
	r := &reader{b: leb}
	return r.u32()
}

func appendS64(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendName(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}
