// Package builtin ships Switchyard's built-in policies as WebAssembly
// modules, compiled from the very packages the engine runs natively
// (engine/policy/priority, fairshare and backoff) through the thin shims in
// shim/. They are the default policies at run time; the native packages stay
// as their fallbacks and as the benchmark baseline.
//
// The modules are built by go generate (reproducibly: two builds are
// compared byte for byte) and committed, so a plain go build needs no wasm
// toolchain step.
package builtin

import (
	_ "embed"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/policy/priority"
)

//go:generate go run ../internal/wasmgen priority.wasm=./shim/priority fairshare.wasm=./shim/fairshare backoff.wasm=./shim/backoff

var (
	//go:embed priority.wasm
	priorityWasm []byte
	//go:embed fairshare.wasm
	fairshareWasm []byte
	//go:embed backoff.wasm
	backoffWasm []byte
)

// Module is a built-in policy: its registered name, its slot, its module
// bytes and a constructor for the native policy it was compiled from (the
// fallback for the plugin).
type Module struct {
	Name   string
	Slot   policy.Slot
	Wasm   []byte
	Native func() policy.Policy // a fresh native policy of the slot
}

// Modules returns the built-in policies, one per slot, in slot order. The
// byte slices are shared: do not modify them.
func Modules() []Module {
	return []Module{
		{Name: priority.Name, Slot: policy.SlotSelection, Wasm: priorityWasm, Native: func() policy.Policy { return policy.Policy{Selection: priority.Selection{}} }},
		{Name: fairshare.Name, Slot: policy.SlotFairness, Wasm: fairshareWasm, Native: func() policy.Policy { return policy.Policy{Fairness: &fairshare.Fairness{}} }},
		{Name: backoff.Name, Slot: policy.SlotRetry, Wasm: backoffWasm, Native: func() policy.Policy { return policy.Policy{Retry: backoff.Retry{}} }},
	}
}

// ForSlot returns the built-in policy of slot s.
func ForSlot(s policy.Slot) (Module, bool) {
	for _, m := range Modules() {
		if m.Slot == s {
			return m, true
		}
	}
	return Module{}, false
}
