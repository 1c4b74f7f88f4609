package host_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
)

// With KeepCompiled, a runtime keeps that many of the modules no plugin
// uses any more compiled, the most recently released, so that loading one
// again finds it compiled; a module in use again is not pushed out, and
// closing the runtime releases them. Without it, a module goes with its
// last plugin.
func TestKeepCompiledKeepsTheMostRecentlyReleasedModules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := plugintest.RetryAnswer(1), plugintest.RetryAnswer(2)
	load := func(rt *host.Runtime, wasm []byte) *host.Plugin {
		t.Helper()
		p, err := rt.Load(ctx, "p", wasm, nil)
		require.NoError(t, err)
		return p
	}

	rt := newRuntime(t, host.Config{})
	require.NoError(t, load(rt, a).Close(ctx))
	require.Equal(t, []bool{false}, host.Compiled(rt, a), "without KeepCompiled, a module goes with its last plugin")

	keep := newRuntime(t, host.Config{KeepCompiled: 1})
	require.NoError(t, load(keep, a).Close(ctx))
	require.Equal(t, []bool{true, false}, host.Compiled(keep, a, b), "kept after its last plugin closed")
	require.NoError(t, load(keep, b).Close(ctx))
	require.Equal(t, []bool{false, true}, host.Compiled(keep, a, b), "the more recently released module pushes it out")

	pb := load(keep, b) // in use again
	require.NoError(t, load(keep, a).Close(ctx))
	require.Equal(t, []bool{true, true}, host.Compiled(keep, a, b), "a module in use is not pushed out")
	require.NoError(t, pb.Close(ctx))
	require.Equal(t, []bool{false, true}, host.Compiled(keep, a, b))

	_, err := keep.Load(ctx, "refused", a, []byte(`not json`))
	require.Error(t, err)
	require.Equal(t, []bool{true, false}, host.Compiled(keep, a, b), "a refused load releases its module as a closed plugin does")

	require.NoError(t, keep.Close(ctx))
	require.Equal(t, []bool{false, false}, host.Compiled(keep, a, b), "closing the runtime releases what it kept")

	_, err = host.New(host.Config{KeepCompiled: -1})
	require.ErrorContains(t, err, "KeepCompiled -1 is negative")
}

// Loads of one module at once on a fresh runtime, whose compile reads it
// from the file cache, all get it ready to run: the first compile is
// waited for, not raced (wazero publishes a module read from its cache
// before it can be instantiated).
func TestConcurrentLoadsOfOneModuleShareItsCompile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mod, ok := builtin.ForSlot(policy.SlotRetry)
	require.True(t, ok)
	for range 3 {
		rt := newRuntime(t, host.Config{})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				p, err := rt.Load(ctx, "backoff", mod.Wasm, nil)
				if err == nil {
					err = p.Close(ctx)
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.NoError(t, rt.Close(ctx))
	}
}

// Precompile compiles a module without loading it, kept under
// KeepCompiled: a load of it then compiles nothing (what a cluster's
// follower does ahead of a takeover), and a second Precompile neither.
func TestAPrecompiledModuleLoadsWithoutACompile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a := plugintest.RetryAnswer(3)
	rt := newRuntime(t, host.Config{KeepCompiled: 1})
	require.NoError(t, rt.Precompile(ctx, a))
	require.Equal(t, []bool{true}, host.Compiled(rt, a), "kept compiled, loaded by no plugin")
	require.Equal(t, int64(1), rt.Compiles())
	require.NoError(t, rt.Precompile(ctx, a))
	p, err := rt.Load(ctx, "p", a, nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), rt.Compiles(), "found compiled: neither the second Precompile nor the load compiled it")
	require.NoError(t, p.Close(ctx))
	require.ErrorIs(t, rt.Precompile(ctx, []byte("not a module")), host.ErrInvalid)
}
