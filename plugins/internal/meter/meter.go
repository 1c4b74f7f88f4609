// Package meter instruments a WebAssembly module with fuel: a mutable i64
// global, exported as FuelExport, that every function entry and every loop
// header decrements, trapping with `unreachable` when it reaches zero. The
// host fills the tank before each call, so a guest can make at most that
// many calls and loop iterations together: an endless loop and a recursion
// that never ends (deep or, without any loop, exponential) run out of fuel.
// Bulk operations (memory.copy, memory.fill and the like) burn one more unit
// per BulkBytesPerUnit bytes of their length, so a loop that copies or
// clears megabytes per iteration runs out in about the same time; runaway
// memory ends in the memory cap.
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
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secCode     = 10
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
	var params []int       // parameter count of each function type
	var funcTypes []uint32 // type of each defined function
	for _, s := range secs {
		var err error
		switch s.id {
		case secType:
			params, err = typeParams(s.payload)
		case secImport:
			importedGlobals, err = countImportedGlobals(s.payload)
		case secFunction:
			funcTypes, err = functionTypes(s.payload)
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
	nparams := make([]int, len(funcTypes)) // of each defined function
	for i, t := range funcTypes {
		if int(t) >= len(params) {
			return nil, fmt.Errorf("function section: function %d has type %d, which does not exist", i, t)
		}
		nparams[i] = params[t]
	}

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
			p, err := instrumentCode(s.payload, fuel, nparams)
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

func instrumentCode(payload []byte, fuel uint32, nparams []int) ([]byte, error) {
	meter := meterCode(fuel)
	r := &reader{b: payload}
	n := r.u32()
	if int(n) != len(nparams) {
		return nil, fmt.Errorf("code section: %d bodies for %d functions", n, len(nparams))
	}
	out := appendU32(nil, n)
	for f := range n {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, r.err)
		}
		nb, err := instrumentBody(body, meter, fuel, nparams[f])
		if err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, nil
}

// instruction is one decoded instruction: its bytes and its opcode (for
// the 0xFC prefix, 0xFC00 | the sub-opcode).
type instruction struct {
	raw []byte
	op  uint32
}

func instrumentBody(body, meter []byte, fuelIndex uint32, nparams int) ([]byte, error) {
	r := &reader{b: body}
	groups := r.u32()
	afterCount := r.i
	locals := 0
	for range groups {
		locals += int(r.u32())
		if t := r.byte(); !isValType(t) {
			return nil, fmt.Errorf("%w: local of type 0x%x", ErrUnsupported, t)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	decls := body[:r.i]
	var code []instruction
	bulk := false
	for r.i < len(r.b) {
		start := r.i
		op := uint32(r.byte())
		if op == 0xFC {
			sub := r.u32()
			r.i = start + 1 // skipImmediates reads the sub-opcode again
			op = 0xFC00 | sub
		}
		prefix := byte(op)
		if op > 0xFF {
			prefix = 0xFC
		}
		if err := r.skipImmediates(prefix); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		raw := body[start:r.i]
		if (op == 0x23 || op == 0x24) && globalIndex(raw[1:]) >= fuelIndex {
			return nil, fmt.Errorf("refers to global %d, which does not exist", globalIndex(raw[1:]))
		}
		bulk = bulk || bulkOp(op)
		code = append(code, instruction{raw, op})
	}
	out := make([]byte, 0, len(body)+len(body)/8)
	var scratch uint32 // an i32 local that holds a bulk operation's length
	if bulk {
		scratch = uint32(nparams + locals)
		out = appendU32(out, groups+1)
		out = append(out, decls[afterCount:]...)
		out = append(out, 1, 0x7F)
	} else {
		out = append(out, decls...)
	}
	out = append(out, meter...) // every call, so that recursion without loops is metered too
	for _, in := range code {
		if bulkOp(in.op) {
			out = append(out, bulkMeterCode(fuelIndex, scratch)...)
		}
		out = append(out, in.raw...)
		if in.op == 0x03 { // loop: meter each entry and each back edge
			out = append(out, meter...)
		}
	}
	return out, nil
}

// bulkOp reports whether op copies or fills a length given by the i32 on
// top of the stack: memory.init, memory.copy, memory.fill, table.init,
// table.copy, table.fill.
func bulkOp(op uint32) bool {
	switch op {
	case 0xFC08, 0xFC0A, 0xFC0B, 0xFC0C, 0xFC0E, 0xFC11:
		return true
	}
	return false
}

// BulkBytesPerUnit is how many bytes (or table elements) of a bulk
// operation burn one unit of fuel, on top of the unit every operation
// burns: about what one loop iteration costs in time.
const BulkBytesPerUnit = 32

// bulkMeterCode returns the instructions inserted before a bulk operation,
// whose length n is on top of the stack: it burns n/BulkBytesPerUnit + 1
// units, emptying the tank and trapping if there are not that many.
//
//	local.tee $n
//	global.get $fuel ; <charge> ; i64.lt_u ; if ; i64.const 0 ; global.set $fuel ; unreachable ; end
//	global.get $fuel ; <charge> ; i64.sub ; global.set $fuel
//
// where <charge> is local.get $n ; i64.extend_i32_u ; i64.const 5 ;
// i64.shr_u ; i64.const 1 ; i64.add.
func bulkMeterCode(fuel, scratch uint32) []byte {
	g := appendU32(nil, fuel)
	l := appendU32(nil, scratch)
	charge := append([]byte{0x20}, l...)
	charge = append(charge, 0xAD, 0x42, 5, 0x88, 0x42, 1, 0x7C)
	c := append([]byte{0x22}, l...)
	c = append(c, 0x23)
	c = append(c, g...)
	c = append(c, charge...)
	c = append(c, 0x54, 0x04, 0x40, 0x42, 0, 0x24)
	c = append(c, g...)
	c = append(c, 0x00, 0x0B, 0x23)
	c = append(c, g...)
	c = append(c, charge...)
	c = append(c, 0x7D, 0x24)
	return append(c, g...)
}

// typeParams returns the parameter count of each type in a type section.
func typeParams(payload []byte) ([]int, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := make([]int, 0, n)
	for range n {
		if form := r.byte(); form != 0x60 {
			return nil, fmt.Errorf("%w: type form 0x%x", ErrUnsupported, form)
		}
		p := r.u32()
		r.bytes(int(p))
		r.bytes(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("type section: %w", r.err)
		}
		out = append(out, int(p))
	}
	return out, nil
}

// functionTypes returns the type index of each defined function.
func functionTypes(payload []byte) ([]uint32, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := make([]uint32, 0, n)
	for range n {
		out = append(out, r.u32())
	}
	if r.err != nil {
		return nil, fmt.Errorf("function section: %w", r.err)
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
