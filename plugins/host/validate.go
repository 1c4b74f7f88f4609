// Load-time validation: a module must speak the ABI before any instance of it
// runs. Each refusal says exactly what is wrong.

package host

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/internal/meter"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

type signature struct{ params, results []api.ValueType }

func (s signature) String() string {
	name := func(ts []api.ValueType) string {
		parts := make([]string, len(ts))
		for i, t := range ts {
			parts[i] = api.ValueTypeName(t)
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return name(s.params) + " -> " + name(s.results)
}

func (s signature) matches(f api.FunctionDefinition) bool {
	return slices.Equal(s.params, f.ParamTypes()) && slices.Equal(s.results, f.ResultTypes())
}

var (
	slotExports = map[string]struct {
		slot policy.Slot
		sig  signature
	}{
		abi.ExportSelection: {policy.SlotSelection, signature{[]api.ValueType{i64}, []api.ValueType{i32}}},
		abi.ExportFairness:  {policy.SlotFairness, signature{[]api.ValueType{i64, i64, i32, i32}, []api.ValueType{i32}}},
		abi.ExportRetry:     {policy.SlotRetry, signature{nil, []api.ValueType{i64}}},
	}
	requiredExports = map[string]signature{
		abi.ExportABIVersion: {nil, []api.ValueType{i32}},
		abi.ExportArena:      {[]api.ValueType{i32}, []api.ValueType{i64}},
	}
	optionalExports = map[string]signature{
		abi.ExportConfigure:    {[]api.ValueType{i32}, []api.ValueType{i32}},
		abi.ExportPolicyFlags:  {nil, []api.ValueType{i32}},
		abi.ExportInitialize:   {nil, nil},
		abi.ExportConfigSchema: {nil, []api.ValueType{i64}},
	}
	hostImports = map[string]signature{
		abi.ImportLog:    {[]api.ValueType{i32, i32, i32}, nil},
		abi.ImportReason: {[]api.ValueType{i32, i32}, nil},
	}
)

// wasiModule is the WASI preview 1 module name.
const wasiModule = "wasi_snapshot_preview1"

// wasiAllowed lists the WASI functions a language runtime needs to start and
// report a crash. In the sandbox they see no arguments, no environment, no
// preopened directories, clocks that read zero and a deterministic random
// source; writes to stdout and stderr are kept for fault reasons. Nothing
// that opens a path or a socket is offered.
var wasiAllowed = map[string]bool{
	"args_get": true, "args_sizes_get": true,
	"environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true,
	"fd_write": true, "fd_read": true, "fd_close": true, "fd_seek": true,
	"fd_fdstat_get": true, "fd_fdstat_set_flags": true,
	"fd_prestat_get": true, "fd_prestat_dir_name": true,
	"poll_oneoff": true, "proc_exit": true, "random_get": true, "sched_yield": true,
}

// validate checks a compiled module's imports and exports and returns its slot.
func validate(cm wazero.CompiledModule) (policy.Slot, error) {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case abi.ImportModule:
			sig, ok := hostImports[name]
			if !ok {
				return 0, fmt.Errorf("%w: imports %s.%s, which does not exist (the host offers %s.%s and %s.%s)",
					ErrInvalid, mod, name, abi.ImportModule, abi.ImportLog, abi.ImportModule, abi.ImportReason)
			}
			if !sig.matches(f) {
				return 0, fmt.Errorf("%w: imports %s.%s with signature %s, want %s",
					ErrInvalid, mod, name, signature{f.ParamTypes(), f.ResultTypes()}, sig)
			}
		case meter.RefillModule: // the meter's own: it refuses a module that imports from it
			if name != meter.RefillImport {
				return 0, fmt.Errorf("%w: imports %s.%s, which the meter reserves", ErrInvalid, mod, name)
			}
		case wasiModule:
			if !wasiAllowed[name] {
				return 0, fmt.Errorf("%w: imports %s.%s: plugins have no filesystem, network or other system access", ErrInvalid, mod, name)
			}
		default:
			return 0, fmt.Errorf("%w: imports %s.%s: plugins may import only %s.%s, %s.%s and a subset of %s",
				ErrInvalid, mod, name, abi.ImportModule, abi.ImportLog, abi.ImportModule, abi.ImportReason, wasiModule)
		}
	}
	for _, kind := range []struct {
		what string
		n    int
	}{{"memories", len(cm.ImportedMemories())}} {
		if kind.n > 0 {
			return 0, fmt.Errorf("%w: imports %s: a plugin must define and export its own memory", ErrInvalid, kind.what)
		}
	}
	exports := cm.ExportedFunctions()
	for _, name := range sortedKeys(requiredExports) { // sorted: the same module, the same message
		sig := requiredExports[name]
		f, ok := exports[name]
		if !ok {
			return 0, fmt.Errorf("%w: missing export %s %s", ErrInvalid, name, sig)
		}
		if !sig.matches(f) {
			return 0, fmt.Errorf("%w: export %s has signature %s, want %s", ErrInvalid, name, signature{f.ParamTypes(), f.ResultTypes()}, sig)
		}
	}
	for _, name := range sortedKeys(optionalExports) {
		sig := optionalExports[name]
		if f, ok := exports[name]; ok && !sig.matches(f) {
			return 0, fmt.Errorf("%w: export %s has signature %s, want %s", ErrInvalid, name, signature{f.ParamTypes(), f.ResultTypes()}, sig)
		}
	}
	var slot policy.Slot
	for _, name := range sortedKeys(slotExports) {
		se := slotExports[name]
		f, ok := exports[name]
		if !ok {
			continue
		}
		if !se.sig.matches(f) {
			return 0, fmt.Errorf("%w: export %s has signature %s, want %s", ErrInvalid, name, signature{f.ParamTypes(), f.ResultTypes()}, se.sig)
		}
		if slot != 0 {
			return 0, fmt.Errorf("%w: exports both %s and %s: a plugin fills exactly one slot", ErrInvalid, slotExport(slot), name)
		}
		slot = se.slot
	}
	if slot == 0 {
		return 0, fmt.Errorf("%w: exports none of %s, %s, %s: a plugin must fill one slot",
			ErrInvalid, abi.ExportSelection, abi.ExportFairness, abi.ExportRetry)
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		return 0, fmt.Errorf("%w: missing export %q (the guest's linear memory)", ErrInvalid, abi.ExportMemory)
	}
	return slot, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
