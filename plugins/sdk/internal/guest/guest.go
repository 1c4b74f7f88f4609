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

	"github.com/switchyard/switchyard/plugins/sdk/abi"
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
