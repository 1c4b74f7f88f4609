// Package guest holds the state that every Switchyard Go plugin shares,
// whatever its slot: the arena, the registered policy's configuration hook
// and flags, and the abi_version, arena, configure and policy_flags exports.
//
// A WebAssembly instance is a single-threaded process of its own, so this
// package keeps its state in package variables: they are the instance's
// state, initialised by _initialize and never touched by two goroutines.
package guest

import (
	"bytes"
	"errors"
	"unsafe"

	"github.com/switchyard/switchyard/plugins/sdk/abi"
	"github.com/switchyard/switchyard/plugins/sdk/policy"
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

	// Schema is the configuration schema the plugin declared (nil for
	// none), and SchemaText its JSON text (the config_schema export).
	Schema     interface{ Validate([]byte) error }
	SchemaText []byte
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

// Fail records msg as the reason and returns abi.ErrGuest.
func Fail(msg string) int32 {
	Reason(msg)
	return abi.ErrGuest
}

// Flags returns the registered policy's flags (the policy_flags export).
func Flags() int32 { return flags }

// Grow makes the arena at least minLen bytes long and reports whether it
// could (the arena export).
func Grow(minLen int32) bool {
	if minLen < 0 {
		return false
	}
	if int(minLen) > len(Arena) {
		n := len(Arena)
		for n < int(minLen) {
			n *= 2
		}
		Arena = make([]byte, n)
	}
	return true
}

// Configure hands the n bytes of JSON at the start of the arena to the
// registered policy (the configure export).
func Configure(n int32) int32 {
	if n < 0 || int(n) > len(Arena) {
		return Fail("configure: length out of the arena")
	}
	if err := ConfigureDoc(bytes.Clone(Arena[:n])); err != nil {
		return Fail("configure: " + err.Error())
	}
	return 0
}

// ConfigureDoc checks doc against the declared schema, if any, and hands
// it to the registered policy. An empty document is no configuration: the
// policy keeps its defaults.
func ConfigureDoc(doc []byte) error {
	if len(doc) == 0 {
		return nil
	}
	if Schema != nil {
		if err := Schema.Validate(doc); err != nil {
			return err
		}
	}
	if configurable == nil {
		if isEmpty(doc) {
			return nil
		}
		return errors.New("this policy takes no configuration")
	}
	return configurable.Configure(doc)
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

// The exports' fast paths read the arena in place (abi.InPlace) on one
// straight path: every jump a Go function takes inside a guest is a turn of
// its dispatch loop in Go's WebAssembly, dearer than the reads themselves.
// The views below take no branch of their own (a length past the arena
// panics, as a slice expression does); the caller has checked that the
// arena is 8-aligned (Aligned) and that what it views lies inside it.

// Aligned reports whether the arena a starts on an 8-byte boundary (Go
// allocates it so; the check keeps the views honest).
func Aligned(a []byte) bool { return uintptr(unsafe.Pointer(&a[0]))%8 == 0 }

// HeaderAt returns the header at the start of the arena a, in place.
func HeaderAt(a []byte) *abi.Header {
	_ = a[abi.HeaderSize-1]
	return (*abi.Header)(unsafe.Pointer(&a[0]))
}

// Array lengths of the views: 2 GiB, the largest a 32-bit machine's
// compiler takes (a view never reaches it: the arena is smaller).
const (
	maxView       = 1<<31 - 1
	maxTasks      = maxView / abi.TaskSize
	maxCandidates = maxView / abi.CandidateSize
)

// TasksAt returns the n task records at a[off:] in place.
func TasksAt(a []byte, off, n int) []policy.Task {
	_ = a[off+n*abi.TaskSize-1]
	return (*[maxTasks]policy.Task)(unsafe.Pointer(&a[off]))[:n:n]
}

// CandidatesAt returns the n candidate records at a[off:] in place.
func CandidatesAt(a []byte, off, n int) []policy.Candidate {
	_ = a[off+n*abi.CandidateSize-1]
	return (*[maxCandidates]policy.Candidate)(unsafe.Pointer(&a[off]))[:n:n]
}

// Int64sAt returns the n int64s at a[off:] in place.
func Int64sAt(a []byte, off, n int) []int64 {
	_ = a[off+8*n-1]
	return (*[maxView / 8]int64)(unsafe.Pointer(&a[off]))[:n:n]
}

// Uint32sAt returns the n uint32s at a[off:] in place.
func Uint32sAt(a []byte, off, n int) []uint32 {
	_ = a[off+4*n-1]
	return (*[maxView / 4]uint32)(unsafe.Pointer(&a[off]))[:n:n]
}

// FailureAt returns the failure record at a[off:] in place.
func FailureAt(a []byte, off int) *policy.Failure {
	_ = a[off+abi.FailureSize-1]
	return (*policy.Failure)(unsafe.Pointer(&a[off]))
}
