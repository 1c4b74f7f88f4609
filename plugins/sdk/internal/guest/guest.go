// Package guest holds the state that every Switchyard Go plugin shares,
// whatever its slot: the arena, the registered policy's configuration hook
// and flags, and the abi_version, arena, configure and policy_flags exports.
//
// A WebAssembly instance is a single-threaded process of its own, so this
// package keeps its state in package variables: they are the instance's
// state, initialised by _initialize and never touched by two goroutines.
package guest
