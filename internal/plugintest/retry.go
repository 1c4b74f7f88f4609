package plugintest

import "bytes"

// RetryAnswer returns a retry plugin (ABI version 1, no policy_flags, no
// configure export) whose retry_decide answers answer — delay_ms << 8 |
// action — to every failure, whatever its attempt and max_attempts.
// RetryAnswer(1) is "retry at once", for ever: a policy that ignores the
// budget it is given.
func RetryAnswer(answer int64) []byte { return retryModule(answer, nil, "") }

// ConfigureSpins returns a retry plugin whose configure export loops until
// it runs out of fuel, whatever document it is given (none included), and
// whose retry_decide parks every task.
func ConfigureSpins() []byte { return retryModule(2, spinForEver, "") }

// ConfigureSpinsOnADocument returns a retry plugin as ConfigureSpins's
// whose configure loops until it runs out of fuel only when it is given a
// document: with none (length 0) it accepts, so the module loads, and any
// configuration given to it is what makes configure fault.
func ConfigureSpinsOnADocument() []byte { return retryModule(2, spinOnADocument, "") }

// The bodies of a retry module's configure export.
var (
	spinForEver     = [][]byte{{0x03, 0x40, 0x0C, 0, 0x0B}, {0x41, 0}}                            // loop for ever; 0
	spinOnADocument = [][]byte{{0x20, 0, 0x04, 0x40, 0x03, 0x40, 0x0C, 0, 0x0B, 0x0B}, {0x41, 0}} // if len: loop for ever; 0
)

// Exporting returns a retry plugin as RetryAnswer(2)'s that also exports an
// i32 global under name (a name the host may reserve for itself).
func Exporting(name string) []byte { return retryModule(2, nil, name) }

// Padded returns wasm with a custom section appended ("pad"), so that the
// module is size bytes long at least: a module too large for a server.
func Padded(wasm []byte, size int) []byte {
	n := max(size-len(wasm)-16, 0)
	payload := append([]byte{3}, "pad"...)
	payload = append(payload, make([]byte, n)...)
	return append(bytes.Clone(wasm), sect(0, payload)...)
}

// retryModule builds a retry module answering answer; configure, when not
// nil, is the body of its configure export.
func retryModule(answer int64, configure [][]byte, export string) []byte {
	const arena = 64 << 10 // the arena: the second page, all of it
	funcs := []byte{0, 1, 2}
	exports := [][]byte{wasmName("memory"), {2, 0}, wasmName("abi_version"), {0, 0}, wasmName("arena"), {0, 1}, wasmName("retry_decide"), {0, 2}}
	code := [][]byte{
		funcBody([]byte{0x41, 1}),                                // abi_version: 1
		funcBody(append([]byte{0x42}, sleb(arena<<32|arena)...)), // arena: ptr << 32 | len
		funcBody(append([]byte{0x42}, sleb(answer)...)),          // retry_decide: the answer
	}
	if configure != nil {
		funcs = append(funcs, 3)
		exports = append(exports, wasmName("configure"), []byte{0, 3})
		code = append(code, funcBody(configure...))
	}
	var globals []byte
	if export != "" {
		globals = sect(6, []byte{1, 0x7F, 0, 0x41, 0, 0x0B}) // an immutable i32, 0
		exports = append(exports, wasmName(export), []byte{3, 0})
	}
	return bytes.Join([][]byte{
		[]byte("\x00asm\x01\x00\x00\x00"),
		sect(1, []byte{4},
			[]byte{0x60, 0, 1, 0x7F},        // 0: () -> i32
			[]byte{0x60, 1, 0x7F, 1, 0x7E},  // 1: (i32) -> i64
			[]byte{0x60, 0, 1, 0x7E},        // 2: () -> i64
			[]byte{0x60, 1, 0x7F, 1, 0x7F}), // 3: (i32) -> i32
		sect(3, append([]byte{byte(len(funcs))}, funcs...)),
		sect(5, []byte{1, 0, 2}), // 2 pages
		globals,
		sect(7, append([]byte{byte(len(exports) / 2)}, bytes.Join(exports, nil)...)),
		sect(10, append([]byte{byte(len(code))}, bytes.Join(code, nil)...)),
	}, nil)
}
