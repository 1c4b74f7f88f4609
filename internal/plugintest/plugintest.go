// Package plugintest builds tiny policy plugins straight in the WebAssembly
// binary format for tests across packages: they compile at once even under
// -race, where a Go guest takes seconds.
package plugintest

import "bytes"

// SpinOnConfig returns a fairness plugin (ABI version 1, stateful) that
// takes a configuration and answers every decision with no opinion (0
// picks), unless its configuration's first key starts with "s", as
// {"spin": true} does: then every decision, the smoke decision of a load
// included, loops until it runs out of fuel. Any other configuration ({},
// {"quiet": true}, none) is accepted and harmless.
func SpinOnConfig() []byte { return spinner(false) }

// SpinAlways returns a plugin as SpinOnConfig's whose every decision loops
// until it runs out of fuel, under any configuration or none: a module
// whose smoke decision faults whatever it is given.
func SpinAlways() []byte { return spinner(true) }

func spinner(always bool) []byte {
	spin := []byte{0x23, 0} // global.get 0: spin
	if always {
		spin = []byte{0x41, 1} // i32.const 1
	}
	const arena = 64 << 10 // the arena: the second page, all of it
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		sect(1, []byte{4},
			[]byte{0x60, 0, 1, 0x7F},                         // 0: () -> i32
			[]byte{0x60, 1, 0x7F, 1, 0x7E},                   // 1: (i32) -> i64
			[]byte{0x60, 4, 0x7E, 0x7E, 0x7F, 0x7F, 1, 0x7F}, // 2: (i64, i64, i32, i32) -> i32
			[]byte{0x60, 1, 0x7F, 1, 0x7F}),                  // 3: (i32) -> i32
		sect(3, []byte{4, 0, 1, 2, 3}),
		sect(5, []byte{1, 0, 2}),                   // 2 pages
		sect(6, []byte{1, 0x7F, 1, 0x41, 0, 0x0B}), // global 0: spin, a mutable i32, 0
		sect(7, []byte{5}, wasmName("memory"), []byte{2, 0}, wasmName("abi_version"), []byte{0, 0},
			wasmName("arena"), []byte{0, 1}, wasmName("fairness_pick"), []byte{0, 2}, wasmName("configure"), []byte{0, 3}),
		sect(10, []byte{4},
			funcBody([]byte{0x41, 1}),                                // abi_version: 1
			funcBody(append([]byte{0x42}, sleb(arena<<32|arena)...)), // arena: ptr << 32 | len
			funcBody(spin, []byte{0x04, 0x40, 0x03, 0x40, 0x0C, 0, 0x0B, 0x0B}, // fairness_pick: if spin, loop forever
				[]byte{0x41, 0}), // else 0 picks
			funcBody([]byte{0x20, 0, 0x41, 2, 0x4A}, // configure: len > 2
				append(append([]byte{0x41}, sleb(arena+2)...), 0x2D, 0, 0), // and the document's third byte
				append(append([]byte{0x41}, sleb('s')...), 0x46, 0x71),     // is 's'
				[]byte{0x24, 0, 0x41, 0})),                                 // set spin; accept
	}, nil)
}

// HoldAlways returns a fairness plugin (ABI version 2, flags HOLDS) whose
// every decision, a dry run's included, is a hold without a hint: the
// engine dispatches nothing from the queues it is asked about, until the
// fairness policy changes.
func HoldAlways() []byte { return holder(false, 2, 4) }

// HoldAlwaysV1 returns a plugin as HoldAlways's that declares ABI version
// 1 (and no policy_flags bits), which has no hold: its every answer is a
// negative value, an error.
func HoldAlwaysV1() []byte { return holder(false, 1, 0) }

// HoldSpinningInDryRun returns a plugin as HoldAlways's that, asked with
// DRY_RUN (a plan preview, or plugin check's dry-run decisions), loops
// until it runs out of fuel instead: its real decisions hold, its previews
// fault.
func HoldSpinningInDryRun() []byte { return holder(true, 2, 4) }

func holder(spinDry bool, version, flags byte) []byte {
	var pick []byte
	if spinDry {
		// if flags & DRY_RUN: loop forever
		pick = []byte{0x20, 3, 0x41, 1, 0x71, 0x04, 0x40, 0x03, 0x40, 0x0C, 0, 0x0B, 0x0B}
	}
	pick = append(append(pick, 0x41), sleb(-(1 << 30))...) // a hold, hint 0
	return fairness(version, flags, pick)
}

// Flagged returns a fairness plugin that declares ABI version version and
// policy_flags flags, and picks nothing (the engine then decides in its
// native order).
func Flagged(version, flags byte) []byte { return fairness(version, flags, []byte{0x41, 0}) }

// fairness is a fairness module whose fairness_pick is the code pick.
func fairness(version, flags byte, pick []byte) []byte {
	const arena = 64 << 10 // the arena: the second page, all of it
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		sect(1, []byte{3},
			[]byte{0x60, 0, 1, 0x7F},                          // 0: () -> i32
			[]byte{0x60, 1, 0x7F, 1, 0x7E},                    // 1: (i32) -> i64
			[]byte{0x60, 4, 0x7E, 0x7E, 0x7F, 0x7F, 1, 0x7F}), // 2: (i64, i64, i32, i32) -> i32
		sect(3, []byte{4, 0, 0, 1, 2}),
		sect(5, []byte{1, 0, 2}), // 2 pages
		sect(7, []byte{5}, wasmName("memory"), []byte{2, 0}, wasmName("abi_version"), []byte{0, 0},
			wasmName("policy_flags"), []byte{0, 1}, wasmName("arena"), []byte{0, 2}, wasmName("fairness_pick"), []byte{0, 3}),
		sect(10, []byte{4},
			funcBody([]byte{0x41, version}),                          // abi_version
			funcBody([]byte{0x41, flags}),                            // policy_flags: HOLDS (4) in version 2
			funcBody(append([]byte{0x42}, sleb(arena<<32|arena)...)), // arena: ptr << 32 | len
			funcBody(pick)),
	}, nil)
}

// sect is a section: its id, its length and its parts.
func sect(id byte, parts ...[]byte) []byte {
	b := bytes.Join(parts, nil)
	return append(append([]byte{id}, uleb(uint64(len(b)))...), b...)
}

func uleb(v uint64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func sleb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// funcBody is a function body of the code section: no locals, code, end.
func funcBody(code ...[]byte) []byte {
	b := append([]byte{0}, bytes.Join(code, nil)...) // no locals
	b = append(b, 0x0B)
	return append(uleb(uint64(len(b))), b...)
}

// wasmName is a name as the export section holds it (short names only).
func wasmName(s string) []byte { return append([]byte{byte(len(s))}, s...) }

// TrapAfter returns a fairness plugin (ABI version 2) that counts its
// decisions and answers the first n with no opinion (0 picks), then traps
// on every later one (unreachable): a module that passes its smoke
// decision and faults once it is put to work.
func TrapAfter(n int32) []byte {
	const arena = 64 << 10                                           // the arena: the second page, all of it
	count := []byte{0x23, 0, 0x41, 1, 0x6A, 0x24, 0}                 // global 0 += 1
	trap := append(append([]byte{0x23, 0, 0x41}, sleb(int64(n))...), // if global 0 > n
		0x4A, 0x04, 0x40, 0x00, 0x0B) //   unreachable
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		sect(1, []byte{3},
			[]byte{0x60, 0, 1, 0x7F},                          // 0: () -> i32
			[]byte{0x60, 1, 0x7F, 1, 0x7E},                    // 1: (i32) -> i64
			[]byte{0x60, 4, 0x7E, 0x7E, 0x7F, 0x7F, 1, 0x7F}), // 2: (i64, i64, i32, i32) -> i32
		sect(3, []byte{4, 0, 0, 1, 2}),
		sect(5, []byte{1, 0, 2}),                   // 2 pages
		sect(6, []byte{1, 0x7F, 1, 0x41, 0, 0x0B}), // global 0: the decisions so far, a mutable i32, 0
		sect(7, []byte{5}, wasmName("memory"), []byte{2, 0}, wasmName("abi_version"), []byte{0, 0},
			wasmName("policy_flags"), []byte{0, 1}, wasmName("arena"), []byte{0, 2}, wasmName("fairness_pick"), []byte{0, 3}),
		sect(10, []byte{4},
			funcBody([]byte{0x41, 2}),                                // abi_version
			funcBody([]byte{0x41, 0}),                                // policy_flags: none
			funcBody(append([]byte{0x42}, sleb(arena<<32|arena)...)), // arena: ptr << 32 | len
			funcBody(count, trap, []byte{0x41, 0})),                  // then 0 picks
	}, nil)
}
