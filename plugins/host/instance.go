package host

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/switchyard/switchyard/plugins/internal/meter"
	"github.com/switchyard/switchyard/plugins/sdk/abi"
)

type instanceKey struct{}

// instance is one instantiated module. It is used by one goroutine at a
// time: the pool hands it out.
type instance struct {
	plugin *Plugin
	mod    api.Module
	mem    api.Memory
	decide api.Function // the slot's export
	arena  api.Function
	config api.Function // nil when the guest takes no configuration

	// releaseMem gives the instance's memory back once it is closed
	// (instanceMemory): wazero's Free alone does not unmap it, since the
	// runtime frees every module's memory as it closes, calls running or not.
	releaseMem func(failed bool)

	ctx   context.Context // long-lived; carries the instance to host functions
	fuel  api.MutableGlobal
	depth api.MutableGlobal // the call depth (meter.MaxDepth), zeroed before each call

	// The watchdog's view (see watchdog.go). started is when the running
	// call began on the runtime's clock (ns, 0 when idle) and deadline how
	// long it may run; expired is set once the watchdog has stopped it, and
	// halted too when it stopped it because the runtime closed. mu orders
	// the watchdog's writes of fuel with the caller's.
	mu        sync.Mutex
	started   atomic.Int64
	deadline  atomic.Int64 // time.Duration; read by the watchdog while the next call sets it
	phase     phase        // what the instance's calls are for, which sets their wall-clock bound
	expired   atomic.Bool
	halted    atomic.Bool
	seenStart int64         // the watchdog's last look (under mu): the call it saw
	seenFuel  int64         // and what its tank held
	seenBase  int64         // the watchdog's ledger total when the call began (its starvation credit is total - seenBase)
	graced    bool          // the call was let run on past its deadline (counted in Stats.DeadlineGraces)
	burnt     int64         // fuel the last call burnt
	lastStart time.Duration // when it started, on the runtime's clock

	// The running call's refills (see refill), all used by its own
	// goroutine only but reserve, which the watchdog reads under mu:
	reserve  int64 // the fuel it may still spend beyond its tank (written under mu once it runs)
	lastTank int64 // what the last fill put in the tank
	lastFill int64 // and when, on the runtime's clock (ns)
	cpuLimit int64 // the CPU time it may use (ns), once counted (countCPU); 0: no limit
	cpuFrom  int64 // the thread's CPU clock when the count began
	cpuAt    int64 // and how far into the call that was (ns)
	cpuGrow  bool  // the count began at a memory.grow
	cpuCheck int64 // the runtime's clock before which cpuLimit cannot have been used up
	locked   bool  // countCPU locked the goroutine to its thread
	// Under mu once the call runs: the CPU clock of its thread, which the
	// watchdog reads too (0 until its CPU time is counted), and whether it
	// used up cpuLimit and was ended.
	cpuClock int32
	overCPU  bool

	stack  []uint64
	ptr    uint32 // arena address
	size   uint32 // arena length
	cfgGen uint64 // configuration generation applied
	reason string // the guest's last reason
	stderr tail   // the guest's last stderr output
}

// errBudget marks a call that ran out of fuel, errCPU one that used up its
// CPU time, errDeadline one the watchdog stopped.
var (
	errBudget   = errors.New("out of fuel")
	errCPU      = errors.New("out of CPU time")
	errDeadline = errors.New("past its deadline")
	// errStopped: the runtime is closed and its watchdog stopped (nothing
	// could stop the call), or the plugin is closed, so the call was not
	// started; not the plugin's fault.
	errStopped = errors.New("the runtime or the plugin is closed: the call was not started")
	// errHalted: the runtime or the plugin closed while the call ran, and
	// the call was halted; not the plugin's fault either.
	errHalted = errors.New("the runtime or the plugin closed during the call: halted")
	errDepth  = errors.New("calls nested too deep")
)

// phase is what an instance's calls are for: each has its own wall-clock
// bound (see instance.bound).
type phase uint8

const (
	phaseDecide phase = iota // decisions: Config.Deadline
	phaseBuild               // building the instance (its initialisation, its arena): Config.setupDeadline
	phaseLoad                // the load's checks of its first instance: Config.loadDeadline
)

// newInstance instantiates the plugin's module, initialises it and
// allocates its arena; ph is phaseLoad for the first instance of a load,
// else phaseBuild. The instance is left in ph while a load checks it, in
// phaseDecide otherwise.
//
// The module's own initialisation (its start function, then _initialize)
// runs after instantiation, as the instance's first calls: under the
// watchdog, with the bound of ph, like every other call. wazero would run
// it inside InstantiateModule, where the tank is out of reach until it
// returns, so that only SetupFuel bounded it. A module whose
// initialisation runs past the bound is refused (an
// *InitDeadlineError).
func newInstance(ctx context.Context, p *Plugin, ph phase) (*instance, error) {
	in := &instance{plugin: p, stack: make([]uint64, 4), phase: ph}
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // initialise below, under the watchdog
		WithStdout(&in.stderr).
		WithStderr(&in.stderr).
		WithRandSource(&guestRand{in: in, src: rand.New(rand.NewSource(42))}). // wazero's own deterministic source, charged
		WithWalltime(frozenWalltime, 1).
		WithNanotime(frozenNanotime, 1)
	alloc, release := instanceMemory(in.memoryGrew)
	in.releaseMem = release
	ictx := in.ctx
	if alloc != nil {
		ictx = experimental.WithMemoryAllocator(ictx, alloc)
	}
	mod, err := p.rt.wr.InstantiateModule(ictx, p.compiled, mc)
	if err != nil {
		release(true) // wazero made the memory and may have failed after: no module holds it
		return nil, fmt.Errorf("instantiate: %v%s", err, in.stderr.suffix())
	}
	in.mod = mod
	in.fuel, _ = mod.ExportedGlobal(meter.FuelExport).(api.MutableGlobal)
	in.depth, _ = mod.ExportedGlobal(meter.DepthExport).(api.MutableGlobal)
	if in.fuel == nil || in.depth == nil {
		_ = mod.Close(in.ctx)
		release(false)
		return nil, errors.New("instantiate: the fuel meter is missing")
	}
	p.rt.dog.add(in)
	if err := in.initialise(); err != nil {
		in.close()
		return nil, err
	}
	in.mem = mod.ExportedMemory(abi.ExportMemory)
	in.decide = mod.ExportedFunction(slotExport(p.slot))
	in.arena = mod.ExportedFunction(abi.ExportArena)
	in.config = mod.ExportedFunction(abi.ExportConfigure)
	if err := in.ensureArena(abi.HeaderSize); err != nil {
		in.close()
		return nil, err
	}
	if ph == phaseBuild {
		in.phase = phaseDecide
	}
	return in, nil
}

// initialise runs the module's start function (exported by the meter as
// meter.StartExport) and then its _initialize, if it has them, on one
// SetupFuel between them, each bounded by the setup bound of the
// instance's phase.
func (in *instance) initialise() error {
	cfg := &in.plugin.rt.cfg
	bound := in.bound(true)
	left := cfg.SetupFuel
	stopped := false // a call's tank emptied by the watchdog
	for _, name := range []string{meter.StartExport, abi.ExportInitialize} {
		fn := in.mod.ExportedFunction(name)
		if fn == nil {
			continue
		}
		err := in.callWith(fn, left, bound, 0)
		left -= max(in.burnt, 0)
		stopped = stopped || in.tankEmptied()
		if err == nil {
			continue
		}
		if errors.Is(err, errDeadline) {
			return &InitDeadlineError{Bound: bound, Export: name}
		}
		if errors.Is(err, errStopped) || errors.Is(err, errHalted) {
			return fmt.Errorf("initialisation (%s): %w", name, err)
		}
		kind, reason := in.describe(err)
		if kind == FaultBudget && !errors.Is(err, errDepth) {
			reason = fmt.Sprintf("ran out of fuel (%d units of SetupFuel)", cfg.SetupFuel)
		}
		return fmt.Errorf("initialisation (%s): %s: %s", name, kind, reason)
	}
	if !stopped { // an emptied tank's unspent units are not burnt
		in.plugin.stats.setupFuel.max(uint64(cfg.SetupFuel - left)) // what initialisation burnt
	}
	return nil
}

// bound returns the wall-clock bound of a call in the instance's phase;
// setup is set for the calls that set the instance up (its version, flags
// and configuration), which get at least the setup bound.
func (in *instance) bound(setup bool) time.Duration {
	cfg := &in.plugin.rt.cfg
	switch {
	case in.phase == phaseLoad:
		return cfg.loadDeadline()
	case setup || in.phase == phaseBuild:
		return cfg.setupDeadline()
	}
	return cfg.Deadline
}

// guestRand is the guest's random source (WASI random_get): deterministic,
// as wazero's own, and charged like a bulk operation of its length, so that
// a guest filling its whole memory with random bytes in a loop runs out of
// fuel as one copying it would; a call its deadline has stopped ends there.
type guestRand struct {
	in  *instance
	src *rand.Rand
}

func (r *guestRand) Read(p []byte) (int, error) {
	if r.in.started.Load() != 0 { // not while wazero instantiates: no guest code runs then
		r.in.chargeOrAbort(int64(len(p)/meter.BulkBytesPerUnit) + 1)
	}
	return r.src.Read(p)
}

// The guest's clocks are frozen: time reaches a policy only as an argument,
// so a decision cannot depend on when it runs. The monotonic clock reads one
// second rather than zero because the Go runtime refuses a zero clock.
func frozenWalltime() (int64, int32) { return 0, 0 }
func frozenNanotime() int64          { return 1e9 }

// call runs fn with the instance's stack, a decision's fuel, CPU time and
// deadline. After an error the instance must be discarded.
func (in *instance) call(fn api.Function) error {
	cfg := &in.plugin.rt.cfg
	cpu := time.Duration(0)
	if in.phase == phaseDecide {
		cpu = cfg.DecisionCPU
	}
	return in.callWith(fn, cfg.DecisionFuel, in.bound(false), cpu)
}

// setupCall runs fn with the setup budget rather than the decision one, and
// the setup bound (the load's while the plugin loads).
func (in *instance) setupCall(fn api.Function) error {
	cfg := &in.plugin.rt.cfg
	err := in.callWith(fn, cfg.SetupFuel, in.bound(true), 0)
	if !in.tankEmptied() && (err == nil || !stoppedByHost(err)) { // as timed: what the host stopped depends on the machine
		in.plugin.stats.setupFuel.max(uint64(max(in.burnt, 0)))
	}
	return err
}

// callWith fills the tank, arms the watchdog and calls fn, with fuel to
// spend in all, at most deadline of wall time and, if cpu is not 0, at
// most cpu of CPU time counted from its first refill. The fast path is two
// atomic stores, a clock read and one uncontended lock: a call that runs
// on its first tank never reaches refill.
//
// expired, halted and deadline are stored only when they change: each
// store is a locked instruction on amd64, and on a healthy instance the
// first two are false and the third is its phase's bound already. Only
// the watchdog sets expired or halted, under mu and while started holds
// the call's start; the last call stored started = 0 under mu, so neither
// can change until this call stores its start, after these.
func (in *instance) callWith(fn api.Function, fuel int64, deadline, cpu time.Duration) error {
	rt := in.plugin.rt
	tank := min(fuel, firstTank)
	in.fuel.Set(uint64(tank))
	in.reserve, in.lastTank = fuel-tank, tank
	in.cpuLimit, in.overCPU, in.cpuClock = int64(cpu), false, 0
	in.depth.Set(0)
	if in.expired.Load() {
		in.expired.Store(false)
	}
	if in.halted.Load() {
		in.halted.Store(false)
	}
	if in.deadline.Load() != int64(deadline) {
		in.deadline.Store(int64(deadline))
	}
	in.lastStart = time.Since(rt.epoch)
	in.lastFill = int64(in.lastStart)
	in.started.Store(int64(in.lastStart) | 1) // never 0, which means idle
	rt.dog.arm()
	if rt.dog.stopped.Load() || in.plugin.stopping.Load() {
		// Runtime.Close stopped the watchdog: a guest call started now
		// could be stopped by fuel alone; or Plugin.Close is halting the
		// plugin's calls. (Stored after started, read after stopped or
		// stopping: a call the last look of the watchdog or of the halt
		// missed sees it.)
		in.started.Store(0)
		in.burnt = 0
		return errStopped
	}
	err := fn.CallWithStack(in.ctx, in.stack)
	in.mu.Lock()
	in.started.Store(0)
	left := int64(in.fuel.Get())
	in.mu.Unlock()
	if in.locked {
		runtime.UnlockOSThread()
		in.locked = false
	}
	depth := left <= meter.DepthExceeded/2
	if depth {
		left = 0
	}
	left += in.reserve
	in.burnt = fuel - left
	if err != nil {
		switch {
		case in.halted.Load():
			return errHalted
		case in.expired.Load():
			return errDeadline
		case depth:
			return errDepth
		case in.overCPU:
			return errCPU
		case left <= 0:
			return errBudget
		}
	}
	return err
}

// The meter's slow path hands a call its fuel in tanks (refill): the first
// of firstTank units, the next ones sized to last about refillPeriod at the
// pace the call has run so far, within [minTank, maxTank].
//
// A call that runs on its first tank, as decisions of the built-in and
// example policies over a few candidates do, never leaves its guest code;
// a longer one comes back to the host every refillPeriod or so, where its
// CPU time is measured and where a stop of the world the Go runtime needs
// can proceed (compiled guest code cannot be preempted, so that a garbage
// collection would otherwise wait for the call to end, and the watchdog
// with it). A tank of the densest code lasts maxTank × 0.1–1 ns; one of
// loads that miss the caches at 20–75 ns a unit, minTank of them.
const (
	firstTank    = 10_000
	minTank      = 2_000
	maxTank      = 250_000
	refillPeriod = int64(250 * time.Microsecond)
)

// cpuAfter is how far into a call, on the wall clock, its CPU time starts
// to be counted at the latest refill (cpuUsedUp): a decision's running
// time before that is bounded by the wall clock instead, unless it grows
// its memory first (memoryGrew).
const cpuAfter = int64(250 * time.Microsecond)

// refill is the meter's slow path (meter.RefillImport), run on the guest's
// goroutine and thread: the running call's tank holds less than need
// units. It fills the tank from the call's reserve and returns, or ends the
// call there (the panic errAborted, which wazero turns into the call's
// error and callWith classifies): the watchdog has stopped it, its fuel
// cannot pay need, or it has used up its CPU time.
func (in *instance) refill(need int64) {
	now := int64(time.Since(in.plugin.rt.epoch))
	in.mu.Lock() // the watchdog writes the tank and reads the reserve under it
	left := int64(in.fuel.Get())
	total := left + in.reserve
	switch {
	case in.expired.Load():
		in.fuel.Set(0)
	case total < need:
		in.fuel.Set(0)
		in.reserve = 0
	case in.cpuUsedUp(now):
		in.overCPU = true
		in.fuel.Set(0)
	default:
		next := in.nextTank(left, now)
		if in.cpuClock == 0 && in.cpuLimit != 0 {
			// Until its CPU time is counted, a call refills at least every
			// firstTank units, whatever its pace so far: a tank sized by a
			// fast start could last long, uncounted, if the code turned slow.
			next = min(next, firstTank)
		}
		tank := min(total, max(need, next))
		in.reserve = total - tank
		in.fuel.Set(uint64(tank))
		in.lastTank, in.lastFill = tank, now
		in.mu.Unlock()
		return
	}
	in.mu.Unlock()
	panic(errAborted)
}

// nextTank sizes the next tank for about refillPeriod at the pace the call
// ran on its last one (left of it unspent at now).
func (in *instance) nextTank(left, now int64) int64 {
	burnt, took := in.lastTank-left, now-in.lastFill
	if took <= 0 {
		return maxTank
	}
	return min(max(burnt*refillPeriod/took, minTank), maxTank)
}

// cpuUsedUp reports whether the running call has used up its CPU time, at
// now. The CPU time is counted from the first refill at least cpuAfter
// into the call, by the wall clock, or from the call's first memory.grow
// if that comes sooner (countCPU). Later refills read the thread's CPU
// clock again only once the wall time since then could hold the rest of
// the limit, since the thread cannot have run longer than that. A call
// that runs less than cpuAfter and grows no memory makes no system call,
// and one that runs less than its limit on the wall clock after that one.
func (in *instance) cpuUsedUp(now int64) bool {
	switch {
	case in.overCPU: // the watchdog saw it
		return true
	case in.cpuLimit == 0:
		return false
	case in.cpuClock == 0:
		if now-in.lastStart.Nanoseconds() >= cpuAfter {
			in.countCPU(now, false)
		}
		return false
	case now < in.cpuCheck:
		return false
	}
	used := in.cpuOf()
	if used >= in.cpuLimit {
		return true
	}
	in.cpuCheck = now + in.cpuLimit - used
	return false
}

// countCPU starts counting the running call's CPU time, at now on the
// runtime's clock (under mu, on the call's own goroutine): it locks the
// goroutine to its thread (callWith unlocks it) and reads the thread's
// CPU clock, which it records for the watchdog too (cpuClock), since a
// tank sized by a fast part of the call may last long if the code turns
// slow. grow tells that a memory.grow started it. Where no per-thread
// clock can be read, fuel and the deadline alone bound the call.
func (in *instance) countCPU(now int64, grow bool) {
	runtime.LockOSThread() // first: the clock is this thread's
	in.locked = true
	clock, ok := threadClock()
	if !ok {
		in.cpuLimit = 0
		return
	}
	in.cpuClock, in.cpuGrow = clock, grow
	in.cpuFrom, in.cpuAt = clockRead(clock), now-in.lastStart.Nanoseconds()
	in.cpuCheck = now + in.cpuLimit
}

// memoryGrew is called on the call's goroutine when its memory.grow has
// lengthened the memory (instanceMemory). The new pages are mapped as they
// are first touched, and on a virtual machine each such page fault can
// cost tens of microseconds, far beyond what fuel charges for a load:
// from a grow on, the call's CPU time is counted, whatever its wall time,
// so that the watchdog ends one that chases through fresh pages as it
// ends any call past its CPU time.
func (in *instance) memoryGrew() {
	if in.cpuLimit == 0 || in.started.Load() == 0 {
		return // no call, or one whose CPU time is not limited
	}
	now := int64(time.Since(in.plugin.rt.epoch))
	in.mu.Lock()
	// cpuLimit was read above without mu, and needs no second look: only
	// this goroutine, the call's own, writes it (callWith, countCPU).
	// cpuClock is the one the watchdog reads, under mu.
	if in.cpuClock == 0 {
		in.countCPU(now, true)
	}
	// The grow's charge was paid from the tank: the next tank is sized by
	// the pace of what runs after it.
	in.lastTank, in.lastFill = int64(in.fuel.Get()), now
	in.mu.Unlock()
}

// cpuOf returns the CPU time the running call has used since its CPU time
// began to be counted (under mu, or on the call's own goroutine).
func (in *instance) cpuOf() int64 { return clockRead(in.cpuClock) - in.cpuFrom }

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
	in.plugin.rt.dog.remove(in)
	if in.mod != nil {
		_ = in.mod.Close(context.Background())
	}
	if in.releaseMem != nil {
		in.releaseMem(false) // nothing runs on the instance now: its memory may go
	}
}

// describe turns a call error into a fault kind and a reason.
func (in *instance) describe(err error) (FaultKind, string) {
	if errors.Is(err, errBudget) {
		return FaultBudget, fmt.Sprintf("ran out of fuel (%d units, about as many instructions)", in.plugin.rt.cfg.DecisionFuel)
	}
	if errors.Is(err, errCPU) {
		from := "from " + time.Duration(in.cpuAt).Round(time.Microsecond).String() + " into the decision"
		if in.cpuGrow {
			from = "from its memory.grow, " + time.Duration(in.cpuAt).Round(time.Microsecond).String() + " into the decision"
		}
		return FaultBudget, fmt.Sprintf("used more than its %s of CPU time (counted %s)", in.plugin.rt.cfg.DecisionCPU, from)
	}
	if errors.Is(err, errDepth) {
		return FaultBudget, fmt.Sprintf("calls nested more than %d deep: a recursion out of bounds", meter.MaxDepth)
	}
	if errors.Is(err, errDeadline) {
		return FaultDeadline, fmt.Sprintf("still running after its deadline of %s: abandoned", time.Duration(in.deadline.Load()))
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return FaultTrap, sanitize([]byte(fmt.Sprintf("guest exited with code %d%s", exit.ExitCode(), in.stderr.suffix())))
	}
	// A reason is one line: wazero's stack trace stays out (the guest's
	// own last words, from its stderr, say more).
	msg := err.Error()
	if i := strings.Index(msg, "\nwasm stack trace:"); i >= 0 {
		msg = msg[:i]
	}
	return FaultTrap, sanitize([]byte(msg + in.stderr.suffix()))
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

// tail keeps the first bytes a guest writes to stdout or stderr since it was
// instantiated, so that a Go guest's panic or fatal error reaches the fault's
// reason (the instance is discarded right after). Guests log through the
// switchyard.log import, not stdout.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 1024

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := tailSize - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// suffix returns ": <first paragraph of output>" or "".
func (t *tail) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	return ": " + s
}
