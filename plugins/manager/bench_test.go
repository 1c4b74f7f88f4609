package manager_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/enginebench"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

// BenchmarkEngineThroughput is `switchyard bench --mode engine` as a Go
// benchmark: submit→dispatch→complete through the engine's API with the
// built-in policies native and as the WebAssembly modules that ship (100
// agents, a submitter per GOMAXPROCS, a no-op executor, the memory store).
// It reports tasks/s, timed without the plugins' load, and for wasm the
// share of plugin decisions its native fallbacks answered (fallbacks/decision):
// a module quarantined for a decision that ran past its deadline while its
// thread waited for a core is replaced by the fallback, and those
// decisions measure the fallback, not the module.
func BenchmarkEngineThroughput(b *testing.B) {
	for _, mode := range []string{"native", "wasm"} {
		b.Run(mode, func(b *testing.B) {
			var ms []*manager.Manager
			defer func() {
				for _, m := range ms {
					_ = m.Close(context.Background())
				}
			}()
			var setup enginebench.Setup
			if mode == "wasm" {
				setup = func(e *engine.Engine) error {
					var m *manager.Manager
					rt, err := host.New(host.Config{CacheDir: cacheDir(b), OnEvent: func(ev host.Event) { m.HostEvent(ev) }})
					if err != nil {
						return err
					}
					m = manager.New(e, rt, manager.Options{})
					ms = append(ms, m)
					return m.Start(context.Background())
				}
			}
			r, err := enginebench.RunThroughput(context.Background(), b.N, 100, runtime.GOMAXPROCS(0), setup)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(r.TasksPerSec, "tasks/s")
			if len(ms) > 0 {
				var calls, fallbacks uint64
				for _, in := range ms[len(ms)-1].List(context.Background()) {
					calls += in.Stats.Calls
					fallbacks += in.Stats.Fallbacks
				}
				if calls > 0 {
					b.ReportMetric(float64(fallbacks)/float64(calls), "fallbacks/decision")
				}
			}
		})
	}
}

// BenchmarkConfigure is configurePlugin on a Go guest (the drr example):
// the configuration is tried on an instance of its own (instantiation, the
// guest's configure, the load's smoke decision) before the plugin's own
// instance takes it.
func BenchmarkConfigure(b *testing.B) {
	h := enginetest.New(b, nil)
	m := newManager(b, h.Engine, false)
	ctx := context.Background()
	if _, err := m.Load(ctx, "drr", readExample(b, "drr.wasm"), nil); err != nil {
		b.Fatal(err)
	}
	docs := [][]byte{[]byte(`{"quantum": 2}`), []byte(`{"quantum": 3}`)}
	for i := 0; b.Loop(); i++ {
		if _, err := m.Configure(ctx, "drr", docs[i%2]); err != nil {
			b.Fatal(err)
		}
	}
}
