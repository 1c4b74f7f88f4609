package host

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/switchyard/switchyard/plugins/abi"
)

// Runtime compiles, instantiates and watches plugins. Use one per process:
// it owns the wazero runtime, the compilation cache and the watchdog
// goroutine. It is safe for concurrent use.
type Runtime struct {
	cfg   Config
	wr    wazero.Runtime
	cache wazero.CompilationCache

	mu        sync.Mutex
	closed    bool
	compiled  map[[32]byte]*compiledModule
	instances map[*instance]struct{} // live instances, for the watchdog
	plugins   map[*Plugin]struct{}

	// The watchdog advances epoch every tick (a quarter of the decision
	// timeout). A call stamps the epoch it started in; a call still stamped
	// four ticks later has run past its deadline. The watchdog sleeps when no
	// call has been seen for a while, and the next call wakes it.
	epoch    atomic.Int64
	sleeping atomic.Bool
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

type compiledModule struct {
	cm   wazero.CompiledModule
	refs int
}

// New starts a runtime.
func New(cfg Config) (*Runtime, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var cache wazero.CompilationCache
	if cfg.NoFileCache {
		cache = wazero.NewCompilationCache()
	} else if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
		return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
	}
	ctx := context.Background()
	wr := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(cfg.MemoryLimitPages).
		WithCompilationCache(cache))
	rt := &Runtime{
		cfg:       cfg,
		wr:        wr,
		cache:     cache,
		compiled:  make(map[[32]byte]*compiledModule),
		instances: make(map[*instance]struct{}),
		plugins:   make(map[*Plugin]struct{}),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
		_ = wr.Close(ctx)
		return nil, fmt.Errorf("host: instantiate WASI: %w", err)
	}
	if err := rt.instantiateHostModule(ctx); err != nil {
		_ = wr.Close(ctx)
		return nil, err
	}
	rt.epoch.Store(1)
	go rt.watchdog()
	return rt, nil
}

// Config returns the runtime's configuration with defaults filled in.
func (rt *Runtime) Config() Config { return rt.cfg }

// Close closes every plugin and releases the runtime. Wrappers of closed
// plugins keep answering through their fallbacks.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil
	}
	rt.closed = true
	plugins := make([]*Plugin, 0, len(rt.plugins))
	for p := range rt.plugins {
		plugins = append(plugins, p)
	}
	rt.mu.Unlock()
	for _, p := range plugins {
		_ = p.Close(ctx)
	}
	close(rt.stop)
	<-rt.done
	err := rt.wr.Close(ctx)
	if cerr := rt.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// compile returns the compiled form of wasm, compiling it at most once per
// runtime (and, with the file cache, once per machine).
func (rt *Runtime) compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, [32]byte, error) {
	key := sha256.Sum256(wasm)
	rt.mu.Lock()
	if rt.closed {
		rt.mu.Unlock()
		return nil, key, ErrClosed
	}
	if c, ok := rt.compiled[key]; ok {
		c.refs++
		rt.mu.Unlock()
		return c.cm, key, nil
	}
	rt.mu.Unlock()
	cm, err := rt.wr.CompileModule(ctx, wasm)
	if err != nil {
		return nil, key, fmt.Errorf("%w: compile: %v", ErrInvalid, err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if c, ok := rt.compiled[key]; ok { // compiled concurrently: keep the first
		_ = cm.Close(ctx)
		c.refs++
		return c.cm, key, nil
	}
	rt.compiled[key] = &compiledModule{cm: cm, refs: 1}
	return cm, key, nil
}

func (rt *Runtime) releaseCompiled(ctx context.Context, key [32]byte) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	c, ok := rt.compiled[key]
	if !ok {
		return
	}
	if c.refs--; c.refs == 0 {
		delete(rt.compiled, key)
		_ = c.cm.Close(ctx)
	}
}

func (rt *Runtime) track(in *instance) {
	rt.mu.Lock()
	rt.instances[in] = struct{}{}
	rt.mu.Unlock()
}

func (rt *Runtime) untrack(in *instance) {
	rt.mu.Lock()
	delete(rt.instances, in)
	rt.mu.Unlock()
}

// timeoutTicks is how many watchdog ticks make a decision timeout.
const timeoutTicks = 4

// idleTicks is how many quiet ticks send the watchdog to sleep.
const idleTicks = 64

// watchdog cancels the context of any instance whose call has run for
// timeoutTicks ticks. Its cost to a call is two atomic stores and a load.
func (rt *Runtime) watchdog() {
	defer close(rt.done)
	tick := rt.cfg.DecisionTimeout / timeoutTicks
	t := time.NewTicker(tick)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-rt.stop:
			return
		case <-t.C:
		}
		now := rt.epoch.Add(1)
		busy := false
		rt.mu.Lock()
		for in := range rt.instances {
			s := in.stamp.Load()
			if s <= 0 {
				continue
			}
			busy = true
			if now-s > timeoutTicks && in.stamp.CompareAndSwap(s, -1) {
				in.cancel()
			}
		}
		rt.mu.Unlock()
		if busy {
			quiet = 0
			continue
		}
		if quiet++; quiet < idleTicks {
			continue
		}
		// Go to sleep; a call that starts after the Store below sees
		// sleeping and wakes us, and a call that started before it has
		// stamped its instance, which the scan below sees.
		rt.sleeping.Store(true)
		if rt.anyBusy() {
			rt.sleeping.Store(false)
			continue
		}
		t.Stop()
		select {
		case <-rt.stop:
			return
		case <-rt.wake:
		}
		quiet = 0
		t.Reset(tick)
	}
}

func (rt *Runtime) anyBusy() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for in := range rt.instances {
		if in.stamp.Load() > 0 {
			return true
		}
	}
	return false
}

// beginCall is called by a call after stamping its instance.
func (rt *Runtime) beginCall() {
	if rt.sleeping.Load() && rt.sleeping.CompareAndSwap(true, false) {
		select {
		case rt.wake <- struct{}{}:
		default:
		}
	}
}

// instantiateHostModule defines the switchyard import module.
func (rt *Runtime) instantiateHostModule(ctx context.Context) error {
	_, err := rt.wr.NewHostModuleBuilder(abi.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostLog), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("level", "ptr", "len").
		Export(abi.ImportLog).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostReason), []api.ValueType{api.ValueTypeI32, api.ValueTypeI32}, nil).
		WithParameterNames("ptr", "len").
		Export(abi.ImportReason).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiate %s module: %w", abi.ImportModule, err)
	}
	return nil
}

// maxGuestText bounds a log line or reason read from a guest.
const maxGuestText = 1024

func guestText(mod api.Module, ptr, n uint32) string {
	if n > maxGuestText {
		n = maxGuestText
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return "(text out of guest memory)"
	}
	return string(b)
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		return
	}
	msg := guestText(mod, uint32(stack[1]), uint32(stack[2]))
	in.plugin.logGuest(int32(stack[0]), msg)
}

func hostReason(ctx context.Context, mod api.Module, stack []uint64) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		return
	}
	in.reason = guestText(mod, uint32(stack[0]), uint32(stack[1]))
}
