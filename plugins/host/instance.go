package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/switchyard/switchyard/plugins/abi"
)

type instanceKey struct{}

// instance is one instantiated module. It is used by one goroutine at a
// time (the pool hands it out), except for stamp and cancel, which the
// watchdog touches.
type instance struct {
	plugin *Plugin
	mod    api.Module
	mem    api.Memory
	decide api.Function // the slot's export
	arena  api.Function
	config api.Function // nil when the guest takes no configuration

	ctx    context.Context // long-lived, cancelled only by the watchdog
	cancel context.CancelFunc
	stamp  atomic.Int64 // epoch of the running call; 0 idle; -1 timed out

	stack  []uint64
	ptr    uint32 // arena address
	size   uint32 // arena length
	cfgGen uint64 // configuration generation applied
	reason string // the guest's last reason
	stderr tail   // the guest's last stderr output
}

// errTimeout marks a call stopped by the watchdog.
var errTimeout = errors.New("decision timed out")

// newInstance instantiates the plugin's module and runs _initialize.
func newInstance(ctx context.Context, p *Plugin) (*instance, error) {
	in := &instance{plugin: p, stack: make([]uint64, 4)}
	in.ctx, in.cancel = context.WithCancel(context.WithValue(context.Background(), instanceKey{}, in))
	setup, cancel := context.WithTimeout(in.ctx, p.rt.cfg.SetupTimeout)
	defer cancel()
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(&in.stderr).
		WithStderr(&in.stderr).
		WithWalltime(zeroWalltime, 1).
		WithNanotime(zeroNanotime, 1)
	mod, err := p.rt.wr.InstantiateModule(setup, p.compiled, mc)
	if err != nil {
		in.cancel()
		return nil, fmt.Errorf("instantiate: %v%s", err, in.stderr.suffix())
	}
	in.mod = mod
	in.mem = mod.ExportedMemory(abi.ExportMemory)
	in.decide = mod.ExportedFunction(slotExport(p.slot))
	in.arena = mod.ExportedFunction(abi.ExportArena)
	in.config = mod.ExportedFunction(abi.ExportConfigure)
	if err := in.ensureArena(abi.HeaderSize); err != nil {
		in.close()
		return nil, err
	}
	p.rt.track(in)
	return in, nil
}

func zeroWalltime() (int64, int32) { return 0, 0 }
func zeroNanotime() int64          { return 0 }

// call runs fn under the watchdog with the instance's stack. After an error
// the instance must be discarded.
func (in *instance) call(fn api.Function) error {
	rt := in.plugin.rt
	e := rt.epoch.Load()
	in.stamp.Store(e)
	rt.beginCall()
	err := fn.CallWithStack(in.ctx, in.stack)
	if !in.stamp.CompareAndSwap(e, 0) {
		return errTimeout
	}
	return err
}

// setupCall runs fn with the setup timeout rather than the decision one.
func (in *instance) setupCall(fn api.Function) error {
	ctx, cancel := context.WithTimeout(in.ctx, in.plugin.rt.cfg.SetupTimeout)
	defer cancel()
	return fn.CallWithStack(ctx, in.stack)
}

// ensureArena makes the guest's arena at least n bytes long.
func (in *instance) ensureArena(n uint32) error {
	if n <= in.size {
		return nil
	}
	in.stack[0] = uint64(n)
	if err := in.call(in.arena); err != nil {
		return err
	}
	ptr, size := abi.UnpackArena(int64(in.stack[0]))
	if size < n {
		return fmt.Errorf("arena: guest offered %d bytes, %d needed", size, n)
	}
	if _, ok := in.mem.Read(ptr, size); !ok {
		return fmt.Errorf("arena: [%d, +%d) lies outside guest memory", ptr, size)
	}
	in.ptr, in.size = ptr, size
	return nil
}

// view returns the first n bytes of the arena. Memory may grow during any
// call, so a view is valid only until the next call.
func (in *instance) view(n uint32) []byte {
	b, _ := in.mem.Read(in.ptr, n)
	return b
}

// configure passes doc to the guest.
func (in *instance) configure(doc []byte, gen uint64) error {
	if in.config == nil {
		if !emptyConfig(doc) {
			return fmt.Errorf("%w: the plugin takes no configuration (it has no %s export)", errRefused, abi.ExportConfigure)
		}
		in.cfgGen = gen
		return nil
	}
	if err := in.ensureArena(uint32(len(doc))); err != nil {
		return err
	}
	copy(in.view(uint32(len(doc))), doc)
	in.stack[0] = uint64(len(doc))
	in.reason = ""
	if err := in.setupCall(in.config); err != nil {
		return err
	}
	if int32(in.stack[0]) < 0 {
		return fmt.Errorf("%w: %s", errRefused, in.reasonOr("configure refused"))
	}
	in.cfgGen = gen
	return nil
}

// errRefused marks a guest that answered with an error code.
var errRefused = errors.New("refused")

func (in *instance) reasonOr(def string) string {
	if in.reason != "" {
		return in.reason
	}
	return def
}

// close stops the instance for good.
func (in *instance) close() {
	in.plugin.rt.untrack(in)
	in.cancel()
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
}

// describe turns a call error into a fault kind and a reason.
func (in *instance) describe(err error) (FaultKind, string) {
	if errors.Is(err, errTimeout) {
		return FaultTimeout, fmt.Sprintf("decision exceeded %v", in.plugin.rt.cfg.DecisionTimeout)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return FaultTrap, fmt.Sprintf("guest exited with code %d%s", exit.ExitCode(), in.stderr.suffix())
	}
	return FaultTrap, err.Error() + in.stderr.suffix()
}

func emptyConfig(doc []byte) bool {
	s := string(doc)
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\n' || s[0] == '\t' || s[0] == '\r') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\n' || s[len(s)-1] == '\t' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s == "" || s == "null" || s == "{}"
}

// tail keeps the last bytes a guest wrote to stdout or stderr, so that a
// Go guest's panic message reaches the fault's reason.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

// suffix returns ": <output>" or "".
func (t *tail) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) == 0 {
		return ""
	}
	s := string(t.buf)
	for _, start := range []string{"panic: ", "fatal error: "} {
		if i := strings.LastIndex(s, start); i >= 0 {
			s = s[i:]
			break
		}
	}
	const max = 300
	if len(s) > max {
		s = s[:max] + "…"
	}
	return ": " + strings.TrimSpace(s)
}
