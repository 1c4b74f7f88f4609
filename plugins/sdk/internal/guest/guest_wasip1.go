//go:build wasip1

package guest

import (
	"bytes"
	"unsafe"

	"github.com/switchyard/switchyard/plugins/abi"
)

// initialArena is large enough for the usual decision (about 800 fairness
// candidates) so that the host rarely needs to ask for more.
const initialArena = 64 << 10

var (
	// Arena is the memory through which records cross; the host writes the
	// input at offset 0 and reads results from abi.OutputOffset.
	Arena = make([]byte, initialArena)

	configurable interface{ Configure([]byte) error }
	flags        int32
	registered   bool
)

// Register records the policy's configuration hook (nil if it takes none)
// and its flags. It panics if called twice: a plugin holds one policy.
func Register(conf interface{ Configure([]byte) error }, f int32) {
	if registered {
		panic("switchyard: a plugin registers exactly one policy")
	}
	registered = true
	configurable, flags = conf, f
}

//go:wasmimport switchyard reason
func hostReason(ptr unsafe.Pointer, n uint32)

//go:wasmimport switchyard log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

// Reason tells the host why the current call is refused.
func Reason(msg string) {
	hostReason(unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

// Fail records msg as the reason and returns abi.ErrGuest.
func Fail(msg string) int32 {
	Reason(msg)
	return abi.ErrGuest
}

// Log sends a message to the host's log.
func Log(level int32, msg string) {
	hostLog(level, unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}

//go:wasmexport abi_version
func abiVersion() int32 { return abi.Version }

//go:wasmexport policy_flags
func policyFlags() int32 { return flags }

//go:wasmexport arena
func arena(minLen int32) int64 {
	if minLen < 0 {
		return 0
	}
	if int(minLen) > len(Arena) {
		n := len(Arena)
		for n < int(minLen) {
			n *= 2
		}
		Arena = make([]byte, n)
	}
	return abi.PackArena(uint32(uintptr(unsafe.Pointer(&Arena[0]))), uint32(len(Arena)))
}

//go:wasmexport configure
func configure(n int32) int32 {
	if n < 0 || int(n) > len(Arena) {
		return Fail("configure: length out of the arena")
	}
	doc := bytes.Clone(Arena[:n])
	if n == 0 { // no configuration: the policy keeps its defaults
		return 0
	}
	if configurable == nil {
		if isEmpty(doc) {
			return 0
		}
		return Fail("configure: this policy takes no configuration")
	}
	if err := configurable.Configure(doc); err != nil {
		return Fail("configure: " + err.Error())
	}
	return 0
}

// isEmpty reports whether a configuration document says nothing: empty,
// null or an empty object.
func isEmpty(doc []byte) bool {
	t := bytes.TrimSpace(doc)
	switch string(t) {
	case "", "null", "{}":
		return true
	}
	return false
}
