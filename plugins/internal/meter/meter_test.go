package meter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/internal/meter"
)

// section frames a section's payload.
func section(id byte, payload ...byte) []byte {
	return append([]byte{id, byte(len(payload))}, payload...)
}

// recursive is a module whose export f(n) calls f(n-1) twice when n > 0:
// 2^(n+1) - 1 calls, and not a loop anywhere.
func recursive() []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7F, 0)...) // type 0: (i32) -> ()
	m = append(m, section(3, 1, 0)...)                // func 0: type 0
	m = append(m, section(7, 1, 1, 'f', 0, 0)...)     // export "f" = func 0
	body := []byte{0,                                 // no locals
		0x20, 0, 0x04, 0x40, // local.get 0; if
		0x20, 0, 0x41, 1, 0x6B, 0x10, 0, // f(n-1)
		0x20, 0, 0x41, 1, 0x6B, 0x10, 0, // f(n-1)
		0x0B, 0x0B} // end; end
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return m
}

// filling is a module whose export f(n) fills n bytes of its memory with
// memory.fill, and whose function takes a local already.
func filling() []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7F, 0)...) // type 0: (i32) -> ()
	m = append(m, section(3, 1, 0)...)                // func 0: type 0
	m = append(m, section(5, 1, 0, 4)...)             // memory: 4 pages
	m = append(m, section(7, 1, 1, 'f', 0, 0)...)     // export "f" = func 0
	body := []byte{1, 1, 0x7E,                        // one i64 local
		0x41, 0, 0x41, 7, 0x20, 0, 0xFC, 0x0B, 0, // memory.fill(0, 7, n)
		0x0B}
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return m
}

// errEmpty is what the tests' refill traps with.
var errEmpty = errors.New("out of fuel")

// newRuntime returns a runtime whose refill gives nothing: it empties the
// tank and traps, so that a call runs on the fuel the test put in the tank.
func newRuntime(t *testing.T) wazero.Runtime {
	t.Helper()
	return newRuntimeRefilling(t, func(_ api.MutableGlobal, _ int64) bool { return false })
}

// newRuntimeRefilling returns a runtime whose refill asks give: it may put
// at least need units in the tank and report true, or report false, and
// the call traps with the tank emptied.
func newRuntimeRefilling(t *testing.T, give func(fuel api.MutableGlobal, need int64) bool) wazero.Runtime {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = r.Close(ctx) })
	refill := func(_ context.Context, mod api.Module, stack []uint64) {
		fuel := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
		if !give(fuel, int64(stack[0])) {
			fuel.Set(0)
			panic(errEmpty)
		}
	}
	_, err := r.NewHostModuleBuilder(meter.RefillModule).NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(refill), []api.ValueType{api.ValueTypeI64}, nil).
		Export(meter.RefillImport).Instantiate(ctx)
	require.NoError(t, err)
	return r
}

func instantiate(t *testing.T, wasm []byte) (api.Function, api.MutableGlobal) {
	t.Helper()
	ctx := context.Background()
	r := newRuntime(t)
	metered, err := meter.Instrument(wasm, 0)
	require.NoError(t, err)
	mod, err := r.Instantiate(ctx, metered)
	require.NoError(t, err)
	return mod.ExportedFunction("f"), mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
}

func TestEveryCallBurnsFuelSoRecursionWithoutLoopsRunsOut(t *testing.T) {
	t.Parallel()
	f, fuel := instantiate(t, recursive())
	fuel.Set(10_000)
	_, err := f.Call(context.Background(), 5)
	require.NoError(t, err)
	// local.get, if, 2 × (local.get, i32.const, i32.sub, call), end, end
	body := 2 + 2*(3+meter.Weight(0x10))
	require.Equal(t, uint64(10_000-63*body), fuel.Get(), "f(5) makes 63 calls, each charged its body")

	fuel.Set(1_000_000)
	_, err = f.Call(context.Background(), 40) // 2^41 calls: hours without the meter
	require.Error(t, err, "the recursion must run out of fuel")
	require.Zero(t, fuel.Get())
}

func TestBulkMemoryBurnsFuelByLength(t *testing.T) {
	t.Parallel()
	f, fuel := instantiate(t, filling())
	fuel.Set(10_000)
	_, err := f.Call(context.Background(), 64<<10)
	require.NoError(t, err)
	require.Equal(t, uint64(10_000-4-(64<<10)/meter.BulkBytesPerUnit-1), fuel.Get(), "the call's four instructions, then 64 KiB")

	fuel.Set(100)
	_, err = f.Call(context.Background(), 200<<10)
	require.Error(t, err, "200 KiB is more than 100 units")
	require.Zero(t, fuel.Get(), "the tank is emptied, as the host expects of a budget fault")
}

func TestInstrumentRefusesWhatItCannotMeter(t *testing.T) {
	t.Parallel()
	_, err := meter.Instrument([]byte("not wasm"), 1)
	require.Error(t, err)
	m := recursive()
	m[len(m)-9] = 0xFD // a SIMD prefix in place of the second local.get
	_, err = meter.Instrument(m, 1)
	require.ErrorIs(t, err, meter.ErrUnsupported)
}

// dense is a module whose export f(n) runs a loop n times, each iteration
// k multiplications of a local by itself: the shape of code that does much
// work per loop header.
func dense(k int) []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7F, 0)...) // type 0: (i32) -> ()
	m = append(m, section(3, 1, 0)...)                // func 0: type 0
	m = append(m, section(7, 1, 1, 'f', 0, 0)...)     // export "f" = func 0
	body := []byte{1, 1, 0x7E,                        // one i64 local, $x
		0x03, 0x40} // loop
	for range k {
		body = append(body, 0x20, 1, 0x20, 1, 0x7E, 0x21, 1) // x = x * x
	}
	body = append(body,
		0x20, 0, 0x41, 1, 0x6B, 0x22, 0, 0x0D, 0, // br_if 0 (n = n - 1)
		0x0B, 0x0B) // end loop; end
	code := append(uleb(uint32(len(body))), body...)
	code = append([]byte{1}, code...)
	m = append(m, 10)
	m = append(m, uleb(uint32(len(code)))...)
	return append(m, code...)
}

func uleb(v uint32) []byte {
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

func TestLoopHeadersAreChargedTheirBodysInstructions(t *testing.T) {
	t.Parallel()
	const k = 20_000
	f, fuel := instantiate(t, dense(k))
	fuel.Set(1 << 40)
	_, err := f.Call(context.Background(), 10)
	require.NoError(t, err)
	perIteration := uint64(4*k + 5) // local.get ×2, i64.mul, local.set; then local.get, i32.const, i32.sub, local.tee, br_if
	require.Equal(t, uint64(1<<40)-1-10*perIteration, fuel.Get(), "one unit at entry (the loop instruction), then each iteration's instructions")

	// The shape that ran for minutes under a budget of two million
	// iterations now runs out after two million instructions.
	fuel.Set(2_000_000)
	_, err = f.Call(context.Background(), 1<<30)
	require.Error(t, err)
	require.Zero(t, fuel.Get())
}

// early is a module whose export f(n) leaves by return from code after a
// block, whose charge is gathered in a local: it must still reach the tank.
func early() []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7F, 0)...) // type 0: (i32) -> ()
	m = append(m, section(3, 1, 0)...)                // func 0: type 0
	m = append(m, section(7, 1, 1, 'f', 0, 0)...)     // export "f" = func 0
	body := []byte{0,                                 // no locals
		0x02, 0x40, 0x0B, // block; end
		0x20, 0, 0x1A, 0x20, 0, 0x1A, // local.get 0; drop; twice
		0x0F, // return
		0x0B}
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return m
}

func TestChargesAfterABranchTargetArePaidOnTheWayOut(t *testing.T) {
	t.Parallel()
	f, fuel := instantiate(t, early())
	fuel.Set(100)
	_, err := f.Call(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, uint64(100-1-5), fuel.Get(), "the entry's one unit, then five instructions after the block")
}

// chain is a module whose export f(n) calls f(n-1) when n > 0: a
// recursion n calls deep, without a loop.
func chain() []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7F, 0)...) // type 0: (i32) -> ()
	m = append(m, section(3, 1, 0)...)                // func 0: type 0
	m = append(m, section(7, 1, 1, 'f', 0, 0)...)     // export "f" = func 0
	body := []byte{0,                                 // no locals
		0x20, 0, 0x04, 0x40, // local.get 0; if
		0x20, 0, 0x41, 1, 0x6B, 0x10, 0, // f(n-1)
		0x0B, 0x0B} // end; end
	m = append(m, section(10, append([]byte{1, byte(len(body))}, body...)...)...)
	return m
}

func TestCallsNestAtMostMaxDepth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRuntime(t)
	metered, err := meter.Instrument(chain(), 0)
	require.NoError(t, err)
	mod, err := r.Instantiate(ctx, metered)
	require.NoError(t, err)
	f := mod.ExportedFunction("f")
	fuel := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
	depth := mod.ExportedGlobal(meter.DepthExport).(api.MutableGlobal)
	for range 3 {
		fuel.Set(1 << 40)
		_, err := f.Call(ctx, meter.MaxDepth)
		require.NoError(t, err, "MaxDepth calls below the host's is allowed")
		require.Equal(t, uint64(1), depth.Get(), "every call counted out but the host's own")
		depth.Set(0) // as the host does before each call
	}
	fuel.Set(1 << 40)
	_, err = f.Call(ctx, meter.MaxDepth+1)
	require.Error(t, err, "one more is not")
	require.Equal(t, int64(meter.DepthExceeded), int64(fuel.Get()), "the tank tells the host why")
}

// A start section runs inside instantiation, where the host cannot stop
// it: Instrument removes it and exports its function as StartExport, so
// that instantiating the metered module runs none of the module's code,
// and the host's call of the export runs it, metered.
func TestTheStartFunctionIsExportedNotRunAtInstantiation(t *testing.T) {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 0, 0)...)             // type 0: () -> ()
	m = append(m, section(3, 1, 0)...)                      // func 0: type 0
	m = append(m, section(6, 1, 0x7F, 1, 0x41, 0, 0x0B)...) // global 0: mut i32 = 0
	m = append(m, section(7, 1, 1, 'g', 3, 0)...)           // export "g" = global 0
	m = append(m, section(8, 0)...)                         // start: func 0
	body := []byte{0, 0x41, 7, 0x24, 0, 0x0B}               // g = 7
	m = append(m, section(10, 1, byte(len(body)), body[0], body[1], body[2], body[3], body[4], body[5])...)
	ctx := context.Background()
	r := newRuntime(t)
	plain, err := r.InstantiateWithConfig(ctx, m, wazero.NewModuleConfig().WithName("plain"))
	require.NoError(t, err)
	require.Equal(t, uint64(7), plain.ExportedGlobal("g").Get(), "the start function runs at instantiation")

	metered, err := meter.Instrument(m, 1000)
	require.NoError(t, err)
	mod, err := r.InstantiateWithConfig(ctx, metered, wazero.NewModuleConfig().WithName("metered"))
	require.NoError(t, err)
	require.Zero(t, mod.ExportedGlobal("g").Get(), "no code of the module's runs at instantiation")
	start := mod.ExportedFunction(meter.StartExport)
	require.NotNil(t, start)
	_, err = start.Call(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(7), mod.ExportedGlobal("g").Get())
	require.Less(t, mod.ExportedGlobal(meter.FuelExport).Get(), uint64(1000), "it paid for its code")
}

// A long call pays the same, whether it runs on one tank or on many
// refills: the refill is a slow path, not a price.
func TestRefillsLetACallGoOnAtTheSamePrice(t *testing.T) {
	t.Parallel()
	const k, n = 50, 1000
	perIteration := int64(4*k + 5)
	want := 1 + n*perIteration // as TestLoopHeadersAreChargedTheirBodysInstructions counts

	refills, given := 0, int64(0)
	r := newRuntimeRefilling(t, func(fuel api.MutableGlobal, need int64) bool {
		require.Less(t, int64(fuel.Get()), need, "a refill is asked for only when the tank cannot pay")
		refills++
		top := max(need, 500)
		given += top - int64(fuel.Get())
		fuel.Set(uint64(top))
		return true
	})
	metered, err := meter.Instrument(dense(k), 0)
	require.NoError(t, err)
	mod, err := r.Instantiate(context.Background(), metered)
	require.NoError(t, err)
	fuel := mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
	fuel.Set(300)
	given = 300
	_, err = mod.ExportedFunction("f").Call(context.Background(), n)
	require.NoError(t, err)
	require.Greater(t, refills, n/3, "tanks of 500 units hold two or three iterations")
	require.Equal(t, want, given-int64(fuel.Get()), "what was given less what is left is what the code costs")
}

// renumbered is a module with an imported function, a table filled by an
// element segment of function indices, one of expressions and a global
// initialised with ref.func, a name section, and an export run() that adds
// up calls through all of them: h() + 4 × f0() = 100 + 28.
func renumbered() []byte {
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 0, 1, 0x7F)...)                                           // type 0: () -> i32
	m = append(m, section(2, 1, 3, 'e', 'n', 'v', 1, 'h', 0x00, 0)...)                          // import env.h: func 0, type 0
	m = append(m, section(3, 2, 0, 0)...)                                                       // func 1 (f0), func 2 (run): type 0
	m = append(m, section(4, 1, 0x70, 0x00, 3)...)                                              // table: 3 funcrefs
	m = append(m, section(6, 1, 0x70, 0, 0xD2, 1, 0x0B)...)                                     // global 0: funcref = ref.func 1
	m = append(m, section(7, 1, 3, 'r', 'u', 'n', 0, 2)...)                                     // export "run" = func 2
	m = append(m, section(9, 2, 0, 0x41, 0, 0x0B, 1, 1, 4, 0x41, 1, 0x0B, 1, 0xD2, 1, 0x0B)...) // table[0] = func 1; table[1] = ref.func 1
	f0 := []byte{0, 0x41, 7, 0x0B}
	run := []byte{0,
		0x41, 2, 0x23, 0, 0x26, 0, // table[2] = global 0
		0x10, 0, // h()
		0x41, 0, 0x11, 0, 0, 0x6A, // + table[0]()
		0x41, 1, 0x11, 0, 0, 0x6A, // + table[1]()
		0x41, 2, 0x11, 0, 0, 0x6A, // + table[2]()
		0x10, 1, 0x6A, // + f0()
		0x0B}
	code := []byte{2, byte(len(f0))}
	code = append(code, f0...)
	code = append(append(code, byte(len(run))), run...)
	m = append(m, section(10, code...)...)
	m = append(m, section(0, 4, 'n', 'a', 'm', 'e', 1, 5, 1, 1, 2, 'f', '0')...) // function 1 is "f0"
	return m
}

// The refill import shifts every defined function's index by one: calls,
// call_indirect through tables filled by either form of element segment
// and by a global, and exports all still reach the function they named.
func TestFunctionIndicesAreRenumberedAroundTheRefillImport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRuntime(t)
	_, err := r.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithGoFunction(api.GoFunc(func(_ context.Context, stack []uint64) { stack[0] = 100 }), nil, []api.ValueType{api.ValueTypeI32}).
		Export("h").Instantiate(ctx)
	require.NoError(t, err)

	plain, err := r.InstantiateWithConfig(ctx, renumbered(), wazero.NewModuleConfig().WithName("plain"))
	require.NoError(t, err)
	res, err := plain.ExportedFunction("run").Call(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(128), res[0], "the module as written")

	metered, err := meter.Instrument(renumbered(), 1_000)
	require.NoError(t, err)
	require.NotContains(t, string(metered), "\x04name\x01", "the name section, whose indices would be stale, is dropped")
	mod, err := r.InstantiateWithConfig(ctx, metered, wazero.NewModuleConfig().WithName("metered"))
	require.NoError(t, err)
	res, err = mod.ExportedFunction("run").Call(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(128), res[0], "every path still reaches f0")
}

func TestAModuleMayNotImportTheRefill(t *testing.T) {
	t.Parallel()
	m := []byte("\x00asm\x01\x00\x00\x00")
	m = append(m, section(1, 1, 0x60, 1, 0x7E, 0)...)
	imp := append([]byte{1, byte(len(meter.RefillModule))}, meter.RefillModule...)
	imp = append(append(imp, byte(len(meter.RefillImport))), meter.RefillImport...)
	m = append(m, section(2, append(imp, 0x00, 0)...)...)
	_, err := meter.Instrument(m, 1)
	require.ErrorContains(t, err, "reserves")
}

// BenchmarkInstrument instruments the built-in policies, the modules every
// server instruments when it starts.
func BenchmarkInstrument(b *testing.B) {
	for _, m := range builtin.Modules() {
		b.Run(m.Name, func(b *testing.B) {
			b.SetBytes(int64(len(m.Wasm)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := meter.Instrument(m.Wasm, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
