//go:build wasip1

package guest

import (
	"unsafe"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

//go:wasmimport switchyard reason
func hostReason(ptr unsafe.Pointer, n uint32)

//go:wasmimport switchyard log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

// Reason tells the host why the current call is refused.
func Reason(msg string) {
	hostReason(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// Log sends a message to the host's log.
func Log(level int32, msg string) {
	hostLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

//go:wasmexport abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport policy_flags
func policyFlags() int32 { return Flags() }

//go:wasmexport arena
func arena(minLen int32) int64 {
	if !Grow(minLen) {
		return 0
	}
	return abi.PackArena(uint32(uintptr(unsafe.Pointer(&Arena[0]))), uint32(len(Arena)))
}

//go:wasmexport configure
func configure(n int32) int32 { return Configure(n) }

//go:wasmexport config_schema
func configSchema() int64 {
	if len(SchemaText) == 0 {
		return 0
	}
	return abi.PackArena(uint32(uintptr(unsafe.Pointer(&SchemaText[0]))), uint32(len(SchemaText)))
}
