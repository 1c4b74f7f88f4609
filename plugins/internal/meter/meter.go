// Package meter instruments a WebAssembly module with fuel: a mutable i64
// global, exported as FuelExport, that the code pays from as it runs. When
// the tank cannot pay, the code calls the host's refill function (imported
// as RefillModule.RefillImport), which tops the tank up from what the call
// may still spend or ends the call by trapping. The host fills the tank
// before each call and may empty it from outside to stop a call (the
// deadline), so a guest runs at most that much code per call, whatever the
// shape of its code.
//
// The refill is the slow path that lets the host see a long call while it
// runs: each refill is a call into the host's Go code, where it can measure
// the call's CPU time, and where a stop of the world that the Go runtime
// needs (a garbage collection) can proceed, which it cannot while compiled
// guest code runs. The host decides how much each refill gives, and so how
// often a long call comes back to it.
//
// Fuel counts instructions, not loop iterations: every function entry and
// every loop header charges the weight (see Weight) of the code it guards,
// the instructions whose innermost enclosing loop (or the function, outside
// any loop) it is. None of them can run twice without passing that point
// again, so a loop whose body is twenty thousand multiplications pays for
// twenty thousand per iteration, and a recursion, with or without loops,
// pays at every call. Bulk operations (memory.copy, memory.fill and the
// like) burn one more unit per BulkBytesPerUnit bytes of their length, and
// memory.grow GrowUnitsPerPage per page, taken from their operands at run
// time. The checks sit only where the old per-iteration counter sat, so the
// fast path costs what it did.
//
// Why not wazero's WithCloseOnContextDone: it makes every loop header exit
// to Go and back, about 45 ns each, which made a 64-candidate fairness
// decision of a Go guest cost several times as much. A fuel check costs a
// few nanoseconds, and it is deterministic: the same input ends the same way
// on any machine under any load.
package meter

import (
	"errors"
	"fmt"
)

// FuelExport is the name under which the fuel global is exported.
const FuelExport = "switchyard_fuel"

// DepthExport is the name under which the call depth global is exported
// (see MaxDepth).
const DepthExport = "switchyard_depth"

// RefillModule and RefillImport name the function the instrumented module
// imports, with the type (i64) -> (): the tank holds less than the i64
// units the code is about to pay. The host either puts at least that many
// units in the tank and returns, or ends the call (a trap: the host
// function panics). A module may not import from RefillModule itself.
const (
	RefillModule = "switchyard_meter"
	RefillImport = "refill"
)

// StartExport is the name under which a module's start function is
// exported once Instrument has removed its start section: the host calls
// it right after instantiation, as the first call, where it can bound it
// as it bounds every call (a start section runs inside instantiation,
// where nothing outside can stop it).
const StartExport = "switchyard_start"

// Section ids.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElement  = 9
	secCode     = 10
)

// ErrUnsupported marks a module that uses instructions the instrumenter
// does not know (SIMD, threads, exception handling, GC types).
var ErrUnsupported = errors.New("unsupported instruction set")

// Instrument returns a copy of the module in wasm with fuel metering added;
// the tank starts with initial fuel. A start section is removed and its
// function exported as StartExport, for the host to call after
// instantiation. It refuses a module whose code refers to the global index
// it adds.
//
// The refill import is added after the module's own imports, so that every
// defined function's index goes up by one: calls, ref.func, exports,
// element segments and global initialisers are renumbered, and the "name"
// custom section, whose indices would be stale, is dropped (nothing in the
// host reads it).
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
	importedGlobals, definedGlobals, importedFuncs := 0, 0, 0
	start, hasStart := uint32(0), false
	var params []int       // parameter count of each function type
	var funcTypes []uint32 // type of each defined function
	for _, s := range secs {
		var err error
		switch s.id {
		case secType:
			params, err = typeParams(s.payload)
		case secImport:
			importedGlobals, importedFuncs, err = countImports(s.payload)
		case secFunction:
			funcTypes, err = functionTypes(s.payload)
		case secGlobal:
			sr := &reader{b: s.payload}
			definedGlobals = int(sr.u32())
			err = sr.err
		case secStart:
			sr := &reader{b: s.payload}
			start, hasStart = sr.u32(), true
			err = sr.err
		}
		if err != nil {
			return nil, err
		}
	}
	fuel := uint32(importedGlobals + definedGlobals)
	refill := uint32(importedFuncs)                     // the new import's function index
	refillType := uint32(len(params))                   // and its type's, added last
	funcs := funcIndex{imported: uint32(importedFuncs)} // renumbers the module's function indices
	if hasStart {
		start = funcs.of(start)
	}
	nparams := make([]int, len(funcTypes)) // of each defined function
	for i, t := range funcTypes {
		if int(t) >= len(params) {
			return nil, fmt.Errorf("function section: function %d has type %d, which does not exist", i, t)
		}
		nparams[i] = params[t]
	}

	// The code section grows by about a fifth; the other sections barely.
	out := append(make([]byte, 0, len(wasm)+len(wasm)/4+256), wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = appendU32(out, uint32(len(payload)))
		out = append(out, payload...)
	}
	newGlobal := append([]byte{0x7E, 0x01, 0x42}, appendS64(nil, initial)...) // mut i64 = i64.const initial
	newGlobal = append(newGlobal, 0x0B)
	newGlobal = append(newGlobal, 0x7F, 0x01, 0x41, 0, 0x0B) // the call depth: mut i32 = i32.const 0
	newExport := appendName(nil, FuelExport)
	newExport = append(newExport, 0x03) // global
	newExport = appendU32(newExport, fuel)
	newExport = appendName(newExport, DepthExport)
	newExport = append(newExport, 0x03)
	newExport = appendU32(newExport, fuel+1)
	exports := uint32(2)
	if hasStart { // the start section goes; its function is exported instead
		newExport = appendName(newExport, StartExport)
		newExport = append(newExport, 0x00) // func
		newExport = appendU32(newExport, start)
		exports++
	}
	newType := []byte{0x60, 1, 0x7E, 0} // (i64) -> ()
	newImport := appendName(nil, RefillModule)
	newImport = appendName(newImport, RefillImport)
	newImport = appendU32(append(newImport, 0x00), refillType) // func of that type
	sawType, sawImport, sawGlobal, sawExport := false, false, false, false
	for _, s := range secs {
		if s.id != secCustom {
			// Insert missing sections in their canonical place.
			if !sawType && s.id > secType {
				emit(secType, append([]byte{1}, newType...))
				sawType = true
			}
			if !sawImport && s.id > secImport {
				emit(secImport, append([]byte{1}, newImport...))
				sawImport = true
			}
			if !sawGlobal && s.id > secGlobal {
				emit(secGlobal, append([]byte{2}, newGlobal...))
				sawGlobal = true
			}
			if !sawExport && s.id > secExport {
				emit(secExport, append(appendU32(nil, exports), newExport...))
				sawExport = true
			}
		}
		switch s.id {
		case secType:
			p, err := appendVecItems(s.payload, 1, newType)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawType = true
		case secImport:
			p, err := appendVecItems(s.payload, 1, newImport)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawImport = true
		case secGlobal:
			g, err := funcs.globals(s.payload)
			if err != nil {
				return nil, err
			}
			p, err := appendVecItems(g, 2, newGlobal)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawGlobal = true
		case secExport:
			e, err := funcs.exports(s.payload)
			if err != nil {
				return nil, err
			}
			p, err := appendVecItems(e, exports, newExport)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
			sawExport = true
		case secElement:
			p, err := funcs.elements(s.payload)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
		case secCode:
			p, err := instrumentCode(s.payload, fuel, nparams, funcs, refill)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
		case secStart: // exported as StartExport instead
		case secCustom:
			if !isNameSection(s.payload) {
				emit(s.id, s.payload)
			}
		default:
			emit(s.id, s.payload)
		}
	}
	if !sawType {
		emit(secType, append([]byte{1}, newType...))
	}
	if !sawImport {
		emit(secImport, append([]byte{1}, newImport...))
	}
	if !sawGlobal {
		emit(secGlobal, append([]byte{2}, newGlobal...))
	}
	if !sawExport {
		emit(secExport, append(appendU32(nil, exports), newExport...))
	}
	return out, nil
}

// appendVecItems appends k items, encoded in items, to a section whose
// payload is a vector.
func appendVecItems(payload []byte, k uint32, items []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if r.err != nil {
		return nil, r.err
	}
	p := appendU32(nil, n+k)
	p = append(p, payload[r.i:]...)
	return append(p, items...), nil
}

// countImports returns how many globals and functions a module imports.
func countImports(payload []byte) (globals, funcs int, err error) {
	r := &reader{b: payload}
	n := r.u32()
	for range n {
		module := r.bytes(int(r.u32()))
		r.bytes(int(r.u32())) // name
		if string(module) == RefillModule {
			return 0, 0, fmt.Errorf("import section: imports from %s, which the meter reserves", RefillModule)
		}
		switch r.byte() {
		case 0x00: // func
			r.u32()
			funcs++
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
			return 0, 0, errors.New("import section: unknown import kind")
		}
		if r.err != nil {
			return 0, 0, fmt.Errorf("import section: %w", r.err)
		}
	}
	return globals, funcs, nil
}

// appendMeter appends the instructions inserted at a metered point (function
// entry, loop header) that guards weight units of code:
//
//	global.get $fuel ; i64.const w ; i64.lt_s ; if ; i64.const w ; call $refill ; end
//	global.get $fuel ; i64.const w ; i64.sub ; global.set $fuel
//
// The refill returns only with at least w units in the tank; a call it ends
// traps inside it.
func appendMeter(c []byte, fuel, refill uint32, weight int64) []byte {
	c = appendU32(append(c, 0x23), fuel)
	c = appendS64(append(c, 0x42), weight)
	c = append(c, 0x53, 0x04, 0x40)
	c = appendS64(append(c, 0x42), weight)
	c = appendU32(append(c, 0x10), refill)
	c = appendU32(append(c, 0x0B, 0x23), fuel)
	c = appendS64(append(c, 0x42), weight)
	return appendU32(append(c, 0x7D, 0x24), fuel)
}

func instrumentCode(payload []byte, fuel uint32, nparams []int, funcs funcIndex, refill uint32) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	if int(n) != len(nparams) {
		return nil, fmt.Errorf("code section: %d bodies for %d functions", n, len(nparams))
	}
	out := make([]byte, 0, len(payload)+len(payload)/4)
	out = appendU32(out, n)
	var w bodyWriter // reused from body to body
	for f := range n {
		size := r.u32()
		body := r.bytes(int(size))
		if r.err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, r.err)
		}
		nb, err := w.instrument(body, fuel, nparams[f], funcs, refill)
		if err != nil {
			return nil, fmt.Errorf("code section: function %d: %w", f, err)
		}
		out = appendU32(out, uint32(len(nb)))
		out = append(out, nb...)
	}
	return out, nil
}

// bodyWriter instruments function bodies one after another, reusing its
// buffers: a module's code section has thousands of bodies, and a server
// instruments every module it compiles.
type bodyWriter struct {
	code  []instruction
	exits []bool // per instruction: the local is paid into the tank before it
	stack []construct
	cuts  []cut // in order of position
	out   []byte
}

// construct is an open block, loop or if of a function body.
type construct struct{ loop bool }

// instruction is one decoded instruction: its bytes and its opcode (for
// the 0xFC prefix, 0xFC00 | the sub-opcode).
type instruction struct {
	raw []byte
	op  uint32
}

// instrument returns body instrumented; the result is valid until the
// next call.
func (w *bodyWriter) instrument(body []byte, fuelIndex uint32, nparams int, funcs funcIndex, refill uint32) ([]byte, error) {
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
	code, exits := w.code[:0], w.exits[:0]
	dynamic := false
	// Where fuel is paid: before the body (a check), after each loop
	// instruction (a check), and where a branch can land otherwise — after
	// the end of a block or if, after an else — a plain charge. Code between
	// two such points is entered only at the first, so each pays for the
	// run of instructions up to the next. A plain charge adds to a local
	// (a register: one instruction), which a check, and every way out of
	// the function, takes from the tank. Only checks can trap, so between
	// two checks the tank may go below zero by at most one function's
	// straight-line code, and every loop iteration and every call checks.
	stack := append(w.stack[:0], construct{}) // the function's own block
	cuts := append(w.cuts[:0], cut{at: 0, check: true})
	defer func() { w.code, w.exits, w.stack, w.cuts = code, exits, stack, cuts }()
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
		if op == 0xFC0F {
			// table.grow allocates outside the memory limit, as many
			// elements as asked in one instruction: a policy has no use
			// for it.
			return nil, fmt.Errorf("%w: table.grow", ErrUnsupported)
		}
		if op == 0x12 || op == 0x13 {
			// A tail call replaces its caller's frame, which the depth
			// count would not see leave.
			return nil, fmt.Errorf("%w: tail calls", ErrUnsupported)
		}
		if (op == 0x23 || op == 0x24) && globalIndex(raw[1:]) >= fuelIndex {
			return nil, fmt.Errorf("refers to global %d, which does not exist", globalIndex(raw[1:]))
		}
		if len(stack) == 0 {
			return nil, errors.New("instructions after the function's end")
		}
		cuts[len(cuts)-1].weight += Weight(op)
		next := len(code) + 1
		exits = append(exits, leavesFunction(op, raw, len(stack)))
		switch op {
		case 0x02, 0x04: // block, if
			stack = append(stack, construct{})
		case 0x03: // loop
			stack = append(stack, construct{loop: true})
			cuts = append(cuts, cut{at: next, check: true})
		case 0x05: // else
			cuts = append(cuts, cut{at: next})
		case 0x0B: // end
			if !stack[len(stack)-1].loop && len(stack) > 1 {
				cuts = append(cuts, cut{at: next})
			}
			stack = stack[:len(stack)-1]
		}
		dynamic = dynamic || dynamicCharge(op) != 0 || op == 0x11
		code = append(code, instruction{raw, op})
	}
	if len(stack) != 0 {
		return nil, errors.New("the function's body does not end")
	}
	exits[len(code)-1] = true // the function's own end
	out := w.out[:0]
	defer func() { w.out = out }()
	acc := uint32(nparams + locals) // the i64 local that gathers plain charges
	scratch := acc + 1              // an i32 local that holds a dynamic charge's operand, or the depth across a call_indirect
	if dynamic {
		out = appendU32(out, groups+2)
		out = append(out, decls[afterCount:]...)
		out = append(out, 1, 0x7E, 1, 0x7F)
	} else {
		out = appendU32(out, groups+1)
		out = append(out, decls[afterCount:]...)
		out = append(out, 1, 0x7E)
	}
	depth := fuelIndex + 1 // the depth global's index
	c := 0
	for i, in := range code {
		if exits[i] {
			out = appendPay(out, fuelIndex, acc)
		}
		for c < len(cuts) && cuts[c].at == i {
			out = cuts[c].appendCode(out, fuelIndex, acc, refill)
			c++
		}
		if shift := dynamicCharge(in.op); shift != 0 {
			out = appendDynamicMeter(out, fuelIndex, scratch, refill, shift)
		}
		switch {
		case in.op == 0x10 && globalIndex(in.raw[1:]) >= funcs.imported:
			// A defined function counted itself in at its entry.
			out = appendU32(append(out, 0x10), funcs.of(globalIndex(in.raw[1:])))
			out = appendLeave(out, depth)
		case in.op == 0xD2: // ref.func
			out = appendU32(append(out, 0xD2), funcs.of(globalIndex(in.raw[1:])))
		case in.op == 0x11:
			// The callee may be defined or imported (the host's, which
			// counts nothing): the depth is saved and restored.
			out = appendU32(append(out, 0x23), depth)
			out = appendU32(append(out, 0x21), scratch)
			out = append(out, in.raw...)
			out = appendU32(append(out, 0x20), scratch)
			out = appendU32(append(out, 0x24), depth)
		default:
			out = append(out, in.raw...)
		}
	}
	return out, nil
}

// cut is a point where fuel is paid: before instruction at, for the
// instructions up to the next cut.
type cut struct {
	at     int
	check  bool // may trap: function entry and loop headers
	weight int64
}

// appendCode appends the instructions that pay for the cut.
func (c cut) appendCode(out []byte, fuel, acc, refill uint32) []byte {
	switch {
	case c.check && c.at == 0:
		// Every call pays, so recursion without loops is metered too, and
		// counts itself in the depth.
		return appendEnter(appendMeter(out, fuel, refill, max(c.weight, 1)), fuel)
	case c.check:
		return appendMeter(appendPay(out, fuel, acc), fuel, refill, max(c.weight, 1))
	case c.weight > 0:
		return appendCharge(out, acc, c.weight)
	}
	return out
}

// MaxDepth is how deep calls may nest within one call from the host: a
// function entered deeper traps, its tank set to DepthExceeded. The depth
// is a global exported as DepthExport, which every function entry counts
// up and every call of a defined function counts down when it returns (a
// call_indirect, whose callee may be one of the host's, saves the depth
// and restores it); the host sets it to zero before each call (a function
// the host calls counts itself in, and nothing counts it out). Fuel alone
// would let a recursion go hundreds of thousands of calls deep, and wazero
// grows its call stack by copying it (up to 400 MB), so that each unit of
// such a recursion costs many times what its instructions say.
const MaxDepth = 10_000

// DepthExceeded is what the tank holds after a call went deeper than
// MaxDepth: below zero, as after any exhausted budget, and far enough below
// it that the host can tell the two apart.
const DepthExceeded = -1 << 60

// appendEnter appends the instructions inserted at a function's entry: the
// depth (the global after the tank) is checked and counted up.
//
//	global.get $depth ; i32.const MaxDepth ; i32.gt_u ; if ; i64.const DepthExceeded ; global.set $fuel ; unreachable ; end
//	global.get $depth ; i32.const 1 ; i32.add ; global.set $depth
func appendEnter(c []byte, fuel uint32) []byte {
	depth := fuel + 1
	c = appendU32(append(c, 0x23), depth)
	c = appendS64(append(c, 0x41), MaxDepth)
	c = append(c, 0x4B, 0x04, 0x40, 0x42)
	c = appendS64(c, DepthExceeded)
	c = appendU32(append(c, 0x24), fuel)
	c = appendU32(append(c, 0x00, 0x0B, 0x23), depth)
	return appendU32(append(c, 0x41, 1, 0x6A, 0x24), depth)
}

// appendLeave appends the instructions inserted after a call: the depth
// global at index d is counted down. A trap unwinds every frame without
// them, but the host never calls an instance again after a trap.
//
//	global.get $depth ; i32.const 1 ; i32.sub ; global.set $depth
func appendLeave(c []byte, d uint32) []byte {
	c = appendU32(append(c, 0x23), d)
	return appendU32(append(c, 0x41, 1, 0x6B, 0x24), d)
}

// appendCharge appends the instructions that owe weight units, in the local
// acc:
//
//	local.get $acc ; i64.const w ; i64.add ; local.set $acc
func appendCharge(c []byte, acc uint32, weight int64) []byte {
	c = appendU32(append(c, 0x20), acc)
	c = appendS64(append(c, 0x42), weight)
	return appendU32(append(c, 0x7C, 0x21), acc)
}

// appendPay appends the instructions that take what the local acc owes from
// the tank:
//
//	global.get $fuel ; local.get $acc ; i64.sub ; global.set $fuel ; i64.const 0 ; local.set $acc
func appendPay(c []byte, fuel, acc uint32) []byte {
	c = appendU32(append(c, 0x23), fuel)
	c = appendU32(append(c, 0x20), acc)
	c = appendU32(append(c, 0x7D, 0x24), fuel)
	return appendU32(append(c, 0x42, 0, 0x21), acc)
}

// leavesFunction reports whether the instruction op (raw, with its
// immediates), at a nesting depth of depth constructs including the
// function's own block, may leave the function: return, or a branch to
// the function's label.
func leavesFunction(op uint32, raw []byte, depth int) bool {
	switch op {
	case 0x0F: // return
		return true
	case 0x0C, 0x0D: // br, br_if
		return int(globalIndex(raw[1:])) == depth-1
	case 0x0E: // br_table
		r := &reader{b: raw, i: 1}
		n := r.u32()
		for range n + 1 {
			if int(r.u32()) == depth-1 {
				return true
			}
		}
	}
	return false
}

// Weight returns the fuel one execution of the instruction op costs (for
// the 0xFC prefix, op is 0xFC00 | the sub-opcode): about one unit per
// nanosecond on a current core. Structure (block, loop, end, else, nop)
// costs nothing; a call costs the entry and return on top of the callee's
// own metering; division, remainder and square root take tens of cycles;
// a load or store may miss the cache. Bulk operations and memory.grow pay
// by their operand on top (see BulkBytesPerUnit, GrowUnitsPerPage).
func Weight(op uint32) int64 {
	switch {
	case op == 0x01, op == 0x02, op == 0x03, op == 0x05, op == 0x0B: // nop, block, loop, else, end
		return 0
	case op == 0x10: // call
		return 4
	case op == 0x11: // call_indirect
		return 8
	case op >= 0x28 && op <= 0x3E: // loads and stores
		return WeightMemory
	case op == 0x40: // memory.grow, plus its pages
		return 64
	case op == 0x6D, op == 0x6E, op == 0x6F, op == 0x70, // i32 div and rem
		op == 0x7F, op == 0x80, op == 0x81, op == 0x82, // i64 div and rem
		op == 0x91, op == 0x95, op == 0x9F, op == 0xA3: // f32 sqrt, div; f64 sqrt, div
		return WeightDivide
	}
	return 1
}

// Weights of the instructions that cost more than one unit, tuned with
// the host's hostile-module benchmarks (plugins/host).
const (
	WeightMemory = 2
	WeightDivide = 8
)

// dynamicCharge returns how an operation whose operand on top of the stack
// sets its cost is charged: a positive shift charges operand >> shift
// units (bulk operations, by bytes or elements), a negative one operand <<
// -shift (memory.grow, by pages); 0 means the operation has no dynamic
// charge.
func dynamicCharge(op uint32) int {
	switch op {
	case 0xFC08, 0xFC0A, 0xFC0B, 0xFC0C, 0xFC0E, 0xFC11: // memory.init, .copy, .fill; table.init, .copy, .fill
		return bulkShift
	case 0x40: // memory.grow
		return -growShift
	}
	return 0
}

// BulkBytesPerUnit is how many bytes (or table elements) of a bulk
// operation burn one unit of fuel, on top of the unit every operation
// burns: about what copying them costs in time.
const BulkBytesPerUnit = 1 << bulkShift

// GrowUnitsPerPage is what memory.grow burns per 64 KiB page asked for:
// the host zeroes the page and may copy the whole memory to make room.
const GrowUnitsPerPage = 1 << growShift

const (
	bulkShift = 5
	growShift = 13
)

// appendDynamicMeter appends the instructions inserted before an operation
// whose operand n is on top of the stack: it burns charge(n) + 1 units,
// calling the refill first if the tank holds fewer.
//
//	local.tee $n
//	global.get $fuel ; <charge> ; i64.lt_s ; if ; <charge> ; call $refill ; end
//	global.get $fuel ; <charge> ; i64.sub ; global.set $fuel
//
// where <charge> is local.get $n ; i64.extend_i32_u ; i64.const s ;
// i64.shr_u (or i64.shl) ; i64.const 1 ; i64.add.
func appendDynamicMeter(c []byte, fuel, scratch, refill uint32, shift int) []byte {
	charge := func(c []byte) []byte {
		c = appendU32(append(c, 0x20), scratch)
		if shift > 0 {
			return append(c, 0xAD, 0x42, byte(shift), 0x88, 0x42, 1, 0x7C)
		}
		return append(c, 0xAD, 0x42, byte(-shift), 0x86, 0x42, 1, 0x7C)
	}
	c = appendU32(append(c, 0x22), scratch)
	c = charge(appendU32(append(c, 0x23), fuel))
	c = charge(append(c, 0x53, 0x04, 0x40))
	c = appendU32(append(c, 0x10), refill)
	c = charge(appendU32(append(c, 0x0B, 0x23), fuel))
	return appendU32(append(c, 0x7D, 0x24), fuel)
}

// funcIndex renumbers a module's function indices for the refill import,
// added after its imported functions: a defined function's index goes up
// by one.
type funcIndex struct{ imported uint32 }

func (f funcIndex) of(i uint32) uint32 {
	if i >= f.imported {
		return i + 1
	}
	return i
}

// exports returns an export section with its functions renumbered.
func (f funcIndex) exports(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		out = appendName(out, string(r.bytes(int(r.u32()))))
		kind := r.byte()
		i := r.u32()
		if kind == 0x00 {
			i = f.of(i)
		}
		out = appendU32(append(out, kind), i)
	}
	if r.err != nil {
		return nil, fmt.Errorf("export section: %w", r.err)
	}
	return out, nil
}

// globals returns a global section with the functions its initialisers
// refer to (ref.func) renumbered.
func (f funcIndex) globals(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		t := r.byte()
		if !isValType(t) {
			return nil, fmt.Errorf("%w: global of type 0x%x", ErrUnsupported, t)
		}
		out = append(out, t, r.byte()) // type, mutability
		out = f.constExpr(r, out)
	}
	if r.err != nil {
		return nil, fmt.Errorf("global section: %w", r.err)
	}
	return out, nil
}

// elements returns an element section with its functions renumbered, in
// each of the segment forms: a vector of function indices (flags 0 to 3)
// or of initialiser expressions (4 to 7), after an optional table index,
// offset and element kind or reference type.
func (f funcIndex) elements(payload []byte) ([]byte, error) {
	r := &reader{b: payload}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		flags := r.u32()
		if flags > 7 {
			return nil, fmt.Errorf("element section: unknown segment form %d", flags)
		}
		out = appendU32(out, flags)
		if flags&0b010 != 0 && flags&0b001 == 0 { // 2, 6: a table index
			out = appendU32(out, r.u32())
		}
		if flags&0b001 == 0 { // active: an offset
			out = f.constExpr(r, out)
		}
		if flags&0b011 != 0 { // 1, 2, 3, 5, 6, 7: an element kind or reference type
			out = append(out, r.byte())
		}
		k := r.u32()
		out = appendU32(out, k)
		for range k {
			if flags&0b100 == 0 {
				out = appendU32(out, f.of(r.u32()))
			} else {
				out = f.constExpr(r, out)
			}
			if r.err != nil {
				break
			}
		}
	}
	if r.err != nil {
		return nil, fmt.Errorf("element section: %w", r.err)
	}
	return out, nil
}

// constExpr copies a constant expression from r to out, up to and with its
// end, renumbering the functions it refers to (ref.func).
func (f funcIndex) constExpr(r *reader, out []byte) []byte {
	for r.err == nil {
		start := r.i
		op := r.byte()
		if op == 0xD2 {
			return f.constExpr(r, appendU32(append(out, op), f.of(r.u32())))
		}
		if err := r.skipImmediates(op); err != nil {
			r.err = err
			return out
		}
		if r.err != nil {
			return out
		}
		out = append(out, r.b[start:r.i]...)
		if op == 0x0B {
			return out
		}
	}
	return out
}

// isNameSection reports whether a custom section's payload is the "name"
// section.
func isNameSection(payload []byte) bool {
	r := &reader{b: payload}
	name := r.bytes(int(r.u32()))
	return r.err == nil && string(name) == "name"
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
