package host

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/switchyard/switchyard/plugins/internal/meter"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

// Runtime compiles, instantiates and watches plugins. Use one per process:
// it owns the wazero runtime, the compilation cache and the watchdog
// goroutine. It is safe for concurrent use.
type Runtime struct {
	cfg   Config
	dog   *watchdog
	wr    wazero.Runtime
	cache wazero.CompilationCache
	epoch time.Time // for latency measurements on the monotonic clock

	logs     chan logLine  // lines for the logger, written by writeLogs
	logsDone chan struct{} // closed by Close: writeLogs stops

	mu        sync.Mutex
	closed    bool
	compiled  map[[32]byte]*compiledModule
	compiling map[[32]byte]chan struct{} // closed when the module's compile ends
	unused    [][32]byte                 // modules of compiled no plugin uses, oldest release first (Config.KeepCompiled)
	plugins   map[*Plugin]struct{}
	// compiles counts the modules this runtime metered and compiled
	// (Compiles).
	compiles atomic.Int64
}

type compiledModule struct {
	cm   wazero.CompiledModule
	refs int
}

// cacheMu serializes wazero.NewCompilationCacheWithDir: its first call in a
// process reads the module's version into a package variable with no
// synchronization, so two runtimes started at once (two servers in one test
// binary) race on it.
var cacheMu sync.Mutex

func newCacheWithDir(dir string) (wazero.CompilationCache, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	return wazero.NewCompilationCacheWithDir(dir)
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
	} else if cache, err = newCacheWithDir(cfg.CacheDir); err != nil {
		return nil, fmt.Errorf("host: compilation cache %s: %w", cfg.CacheDir, err)
	}
	ctx := context.Background()
	// No WithCloseOnContextDone: modules are metered with fuel instead
	// (see plugins/internal/meter), which is cheaper and deterministic.
	wr := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.MemoryLimitPages).
		WithCompilationCache(cache))
	rt := &Runtime{
		epoch:     time.Now(),
		cfg:       cfg,
		wr:        wr,
		cache:     cache,
		compiled:  make(map[[32]byte]*compiledModule),
		compiling: make(map[[32]byte]chan struct{}),
		plugins:   make(map[*Plugin]struct{}),
		logs:      make(chan logLine, logQueue),
		logsDone:  make(chan struct{}),
	}
	go rt.writeLogs()
	rt.dog = newWatchdog(rt)
	if err := instantiateMeterModule(ctx, wr); err != nil {
		close(rt.logsDone)
		_ = rt.dog.stop(ctx, closeWait) // no call has run
		_ = wr.Close(ctx)
		return nil, err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, wr); err != nil {
		close(rt.logsDone)
		_ = rt.dog.stop(ctx, closeWait) // no call has run
		_ = wr.Close(ctx)
		return nil, fmt.Errorf("host: instantiate WASI: %w", err)
	}
	if err := rt.instantiateHostModule(ctx); err != nil {
		close(rt.logsDone)
		_ = rt.dog.stop(ctx, closeWait) // no call has run
		_ = wr.Close(ctx)
		return nil, err
	}
	return rt, nil
}

// Config returns the runtime's configuration with defaults filled in.
func (rt *Runtime) Config() Config { return rt.cfg }

// wallAt returns the wall-clock time d after the runtime's epoch, without
// the monotonic reading that would follow it into every printed form
// ("m=+12.3"): a time for people (Event.Until, Stats.Until).
func (rt *Runtime) wallAt(d time.Duration) time.Time { return rt.epoch.Add(d).Round(0) }

// closeWait bounds how long Runtime.Close and Plugin.Close wait for the
// guest calls they halt to return. A halted call ends at its next metered point, microseconds away,
// once its thread runs: this only bounds a machine too busy to run it.
const closeWait = 5 * time.Second

// Close closes every plugin and releases the runtime. Wrappers of closed
// plugins keep answering through their fallbacks, at once: once Close has
// stopped the watchdog no guest call starts (it could be stopped by fuel
// alone), and such a fallback counts no fault. A decision already running
// in a guest when Close is called is halted, whatever its deadline and
// fuel: it ends at its next metered point, falls back and counts no fault,
// and its instance is discarded. Close returns once no guest call runs;
// if one still runs after closeWait or when ctx is done, Close releases
// the runtime anyway (the call keeps its memory until it returns) and
// returns an error, and the watchdog goes on halting the call until it
// returns.
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
	var closing sync.WaitGroup
	for _, p := range plugins { // at once: each waits for its calls to be halted
		closing.Go(func() { _ = p.Close(ctx) })
	}
	closing.Wait()
	rt.mu.Lock()
	for _, key := range rt.unused {
		_ = rt.compiled[key].cm.Close(ctx)
		delete(rt.compiled, key)
	}
	rt.unused = nil
	rt.mu.Unlock()
	err := rt.dog.stop(ctx, closeWait)
	close(rt.logsDone)
	if cerr := rt.wr.Close(ctx); err == nil {
		err = cerr
	}
	if cerr := rt.cache.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("host: close: %w", err)
	}
	return nil
}

// compile returns the compiled form of wasm, compiling it at most once per
// runtime while a plugin uses it or Config.KeepCompiled keeps it (and, with
// the file cache, once per machine). A compile of a module already under
// way is waited for, not started again: wazero publishes a module read from
// its file cache before it is ready to instantiate, and a second compile
// of it at that moment would get it unfinished.
func (rt *Runtime) compile(ctx context.Context, wasm []byte) (wazero.CompiledModule, [32]byte, error) {
	key := sha256.Sum256(wasm)
	var done chan struct{}
	for done == nil {
		rt.mu.Lock()
		if rt.closed {
			rt.mu.Unlock()
			return nil, key, ErrClosed
		}
		if c, ok := rt.compiled[key]; ok {
			rt.useLocked(key, c)
			rt.mu.Unlock()
			return c.cm, key, nil
		}
		if wait, ok := rt.compiling[key]; ok {
			rt.mu.Unlock()
			select {
			case <-wait: // compiled, or failed: look again
			case <-ctx.Done():
				return nil, key, ctx.Err()
			}
			continue
		}
		done = make(chan struct{})
		rt.compiling[key] = done
		rt.mu.Unlock()
	}
	cm, err := rt.compileNew(ctx, wasm)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.compiling, key)
	close(done)
	if err != nil {
		return nil, key, err
	}
	rt.compiled[key] = &compiledModule{cm: cm, refs: 1}
	return cm, key, nil
}

// Precompile compiles wasm as a load would, without loading it, so that
// a later load finds it compiled: Config.KeepCompiled must keep it until
// then (it counts as released at once). A module compiled already, or
// being compiled, is not compiled again.
func (rt *Runtime) Precompile(ctx context.Context, wasm []byte) error {
	_, key, err := rt.compile(ctx, wasm)
	if err != nil {
		return err
	}
	rt.releaseCompiled(ctx, key)
	return nil
}

// Compiles returns how many modules the runtime has metered and compiled
// (read from the file cache or not): a load of a module it keeps compiled
// adds none.
func (rt *Runtime) Compiles() int64 { return rt.compiles.Load() }

// compileNew meters and compiles wasm.
func (rt *Runtime) compileNew(ctx context.Context, wasm []byte) (wazero.CompiledModule, error) {
	rt.compiles.Add(1)
	pages, err := precheck(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if pages > uint64(rt.cfg.MemoryLimitPages) {
		// wazero says "min N pages over limit of M pages", which names
		// neither the setting nor what makes a module start so large.
		return nil, fmt.Errorf("%w: the module's memory starts at %d pages (%s), over the %d pages (%s) a plugin's memory may have (plugins.memoryPages): its data and stack do not fit; make them smaller or raise plugins.memoryPages",
			ErrInvalid, pages, mib(pages), rt.cfg.MemoryLimitPages, mib(uint64(rt.cfg.MemoryLimitPages)))
	}
	metered, err := meter.Instrument(wasm, rt.cfg.SetupFuel)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	cm, err := rt.wr.CompileModule(ctx, metered)
	if err != nil {
		return nil, fmt.Errorf("%w: compile: %v", ErrInvalid, err)
	}
	return cm, nil
}

// useLocked takes a reference to c, the compiled module of key, which may
// have been kept unused.
func (rt *Runtime) useLocked(key [32]byte, c *compiledModule) {
	if c.refs == 0 {
		rt.unused = slices.DeleteFunc(rt.unused, func(k [32]byte) bool { return k == key })
	}
	c.refs++
}

func (rt *Runtime) releaseCompiled(ctx context.Context, key [32]byte) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	c, ok := rt.compiled[key]
	if !ok {
		return
	}
	if c.refs--; c.refs > 0 {
		return
	}
	if rt.cfg.KeepCompiled == 0 || rt.closed {
		delete(rt.compiled, key)
		_ = c.cm.Close(ctx)
		return
	}
	rt.unused = append(rt.unused, key)
	if len(rt.unused) > rt.cfg.KeepCompiled {
		oldest := rt.unused[0]
		rt.unused = rt.unused[1:]
		_ = rt.compiled[oldest].cm.Close(ctx)
		delete(rt.compiled, oldest)
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

// instantiateMeterModule defines the module the meter's refill is imported
// from (meter.RefillModule): every instrumented module imports it.
func instantiateMeterModule(ctx context.Context, wr wazero.Runtime) error {
	_, err := wr.NewHostModuleBuilder(meter.RefillModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(hostRefill), []api.ValueType{api.ValueTypeI64}, nil).
		WithParameterNames("need").
		Export(meter.RefillImport).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiate %s module: %w", meter.RefillModule, err)
	}
	return nil
}

// hostRefill is the meter's slow path: see instance.refill.
func hostRefill(ctx context.Context, _ api.Module, stack []uint64) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		panic(errAborted)
	}
	in.refill(int64(stack[0]))
}

// maxGuestText bounds a log line or reason read from a guest.
const maxGuestText = 1024

// guestBytes returns at most maxGuestText bytes of guest memory, unsanitised.
func guestBytes(mod api.Module, ptr, n uint32) []byte {
	b, ok := mod.Memory().Read(ptr, min(n, maxGuestText))
	if !ok {
		return []byte("(text out of guest memory)")
	}
	return b
}

func guestText(mod api.Module, ptr, n uint32) string {
	return sanitize(guestBytes(mod, ptr, n))
}

// sanitize makes guest text safe to log or show: valid UTF-8, no control
// characters (each becomes a space), at most maxGuestText bytes.
func sanitize(b []byte) string {
	var sb strings.Builder
	sb.Grow(len(b))
	for _, r := range strings.ToValidUTF8(string(b), "\uFFFD") {
		if r < 0x20 || r == 0x7F || (r >= 0x80 && r < 0xA0) {
			r = ' '
		}
		if sb.Len()+utf8.RuneLen(r) > maxGuestText {
			break
		}
		sb.WriteRune(r)
	}
	return sb.String()
}

// Host calls are bounded: none of them waits for anything. switchyard.log
// hands its line to a queue that one goroutine of the runtime writes to the
// logger, so a logger that blocks (a full pipe, a stalled collector) drops
// lines, counted, instead of holding a decision where the watchdog cannot
// reach it (it stops a guest at its next metered point, never inside the
// host). And each host call checks first whether its decision may go on: one
// the watchdog has stopped, or whose tank is empty, is ended there and then
// (abortCall), not at the guest's next metered point.

// logQueue is how many lines may wait for the logger before further lines
// are dropped.
const logQueue = 256

// logLine is a line waiting for the logger.
type logLine struct {
	level  slog.Level
	msg    string
	plugin string
	attrs  []any
}

// enqueueLog queues a line for the logger and reports whether there was
// room; it never waits.
func (rt *Runtime) enqueueLog(l logLine) bool {
	select {
	case rt.logs <- l:
		return true
	default:
		return false
	}
}

// writeLogs writes queued lines until the runtime closes.
func (rt *Runtime) writeLogs() {
	for {
		select {
		case l := <-rt.logs:
			rt.cfg.Logger.Log(context.Background(), l.level, l.msg, append([]any{"plugin", l.plugin}, l.attrs...)...)
		case <-rt.logsDone:
			return
		}
	}
}

// errAborted is the panic with which a host function ends a call that may
// not go on; wazero turns it into the call's error, which callWith then
// classifies by the tank and the watchdog's mark (a budget or deadline
// fault).
var errAborted = errors.New("aborted in a host call")

// chargeOrAbort takes n units from the running call's fuel, from inside a
// host function, refilling the tank first if it holds fewer (which ends
// the call if its fuel cannot pay, or it has used up its CPU time), and
// ends the call there if the watchdog has stopped it.
func (in *instance) chargeOrAbort(n int64) {
	in.mu.Lock() // the watchdog writes the tank under it
	short := int64(in.fuel.Get()) < n
	in.mu.Unlock()
	if short {
		in.refill(n)
	}
	in.mu.Lock()
	in.fuel.Set(uint64(int64(in.fuel.Get()) - n))
	in.mu.Unlock()
	if in.expired.Load() {
		panic(errAborted)
	}
}

// hostLog is switchyard.log: it burns LogFuel, whether the line is
// written or dropped by the plugin's rate limit or a full queue.
func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		return
	}
	in.chargeOrAbort(LogFuel)
	in.plugin.logGuest(int32(stack[0]), func() []byte { return guestBytes(mod, uint32(stack[1]), uint32(stack[2])) })
}

func hostReason(ctx context.Context, mod api.Module, stack []uint64) {
	in, ok := ctx.Value(instanceKey{}).(*instance)
	if !ok {
		return
	}
	if in.expired.Load() {
		panic(errAborted)
	}
	in.reason = guestText(mod, uint32(stack[0]), uint32(stack[1]))
}

// mib writes a number of 64 KiB pages in MiB.
func mib(pages uint64) string {
	return strconv.FormatFloat(float64(pages)/16, 'f', -1, 64) + " MiB"
}
