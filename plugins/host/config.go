package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// DefaultDecisionFuel is Config.DecisionFuel's default.
const DefaultDecisionFuel = 5_000_000

// DefaultDecisionCPU is Config.DecisionCPU's default, and so the server's
// plugins.decisionCPU.
const DefaultDecisionCPU = 2500 * time.Microsecond

// DefaultDeadline is Config.Deadline's default, and so the server's
// plugins.deadline.
const DefaultDeadline = 10 * time.Millisecond

// LogFuel is what one switchyard.log call burns from the budget of the call
// that makes it, whether the line is written or dropped: about what
// writing a line costs.
const LogFuel = 10_000

// Config configures a Runtime. The zero value is usable: every field has a
// default.
type Config struct {
	// CacheDir holds wazero's compilation cache, so a module compiled once is
	// loaded in milliseconds by the next process. Empty means
	// os.UserCacheDir()/switchyard/wazero; if that cannot be determined, or
	// NoFileCache is set, compiled code is cached in memory only.
	CacheDir    string
	NoFileCache bool

	// KeepCompiled is how many modules that no plugin uses any more stay
	// compiled, the most recently released kept, so that loading one of
	// them again (a load refused under its configuration and retried, a
	// plugin closed and loaded back) neither meters nor compiles it again.
	// Each costs the memory of its compiled code until it is loaded again,
	// a more recently released module pushes it out, or the runtime closes.
	// Default 0: a module is released with its last plugin.
	KeepCompiled int

	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages.
	// A Go guest needs about 40 pages just to start. Default 128 (8 MiB).
	MemoryLimitPages uint32

	// DecisionFuel bounds one decision, in fuel: about one unit per
	// WebAssembly instruction executed (see plugins/internal/meter.Weight:
	// division, memory access and calls weigh more), paid at every function
	// entry, loop header and branch target for the code that follows, and
	// by bulk memory operations and memory.grow by their length. A guest
	// that runs out traps, its instance is replaced and the decision falls
	// back. The budget is deterministic: the same input ends the same way
	// on any machine. Default 5,000,000: straight-line arithmetic, the
	// densest code fuel prices right, runs out in 1.3-9 ms on the 2-core
	// machines here (the more under load); the built-in fairness policy
	// burns about 40,000 deciding over 64 candidates with 8 slots, and the
	// costliest example policy (examples/plugins/wfq) 3.9 million over 64
	// candidates with 64 slots, the most a default server asks. Calls nest
	// at most meter.MaxDepth deep. The shape that costs more time than its
	// instructions say (loads missing the caches all over the memory) is
	// stopped by Deadline. See plugins/ABI.md, "Cost model".
	DecisionFuel int64

	// DecisionCPU bounds one decision's CPU time, measured on the thread
	// that runs it (Linux only; elsewhere fuel and Deadline bound it). Fuel
	// counts instructions, and an instruction may cost far more time than
	// its weight says: a load that misses every cache costs 20-80 ns where
	// fuel counts about one. A decision comes back to the host at each
	// refill of its tank (every 10,000 units at first, then every 250 µs
	// or so of running), where its CPU time, counted from 250 µs into it
	// or from its first memory.grow, is checked, as the watchdog checks it
	// every 0.5 ms; one that has used DecisionCPU ends with a budget
	// fault, like one out of fuel.
	// The machine's load does not count: time the thread waits for a core
	// is not CPU time. Default 2.5 ms, so that a decision of any shape ends
	// within about 4.5 ms of running; the costliest example policy uses
	// under 1 ms.
	DecisionCPU time.Duration

	// SetupFuel bounds an instance's initialisation (the guest's start
	// function and _initialize, on one tank) and each configure call, in
	// the same units. Default 20,000,000: a Go guest's runtime starts with
	// about 900,000. Their wall-clock bound is the setup bound (see
	// Deadline), or the load's for the first instance of a load.
	SetupFuel int64

	// Deadline is the wall-clock backstop of a decision, independent of
	// fuel: a decision still running after Deadline is abandoned (its
	// instance is stopped at its next metered point, closed and replaced),
	// the native fallback decides, and a deadline fault quarantines the
	// plugin at once. Calls that set a guest up (its initialisation, arena
	// and configure) get ten times as long, at least a second; those a load
	// makes on its first instance a hundred times, at least 5 s. Default 10 ms; it is checked every Deadline/4 (at least every
	// millisecond), so an abandoned decision ends within 1.25 × Deadline
	// plus the time to its next metered point. An overdue call that burnt no
	// fuel since the last check was not running (its thread waited for a
	// core) and is left to finish unless it runs on.
	Deadline time.Duration

	// FuelSetting and CPUSetting name the settings that set DecisionFuel
	// and DecisionCPU, for messages that blame a budget too small for a
	// plugin (a server's "plugins.decisionFuel (SWITCHYARD_…)"); default
	// "DecisionFuel" and "DecisionCPU".
	FuelSetting, CPUSetting string

	// AwaitRebuilds makes a decision that finds no idle instance while one
	// is being rebuilt after a fault wait for it, instead of falling back
	// at once as a server's decisions do: for tools that judge a module's
	// own decisions (switchyard plugin check, bench and simulate), where
	// a fallback would stand in for the module's answer.
	AwaitRebuilds bool

	// Instances is the pool size of a plugin that declares itself stateless;
	// a stateful plugin always runs on one instance at a time. Default 2.
	Instances int

	// BreakerThreshold is how many faults, net of forgiveness, quarantine a
	// plugin. Default 5.
	BreakerThreshold int

	// BreakerForgive is how many good decisions forgive one fault, so that a
	// rare fault never accumulates into a trip while a plugin that faults
	// more often than once in BreakerForgive decisions does. Default 100.
	BreakerForgive int

	// BreakerStall is how much time faulted decisions of a plugin may cost
	// in total, net of forgiveness, before it is quarantined, whatever their
	// count: the breaker acts on time as well as on counts. A deadline
	// fault quarantines at once. Default 20 ms.
	BreakerStall time.Duration

	// QuarantineBase is how long a plugin's first quarantine lasts; each
	// further quarantine before it has passed a probation doubles it, up to
	// QuarantineMax. While quarantined, the fallback decides. Defaults 1 s
	// and 10 min.
	QuarantineBase, QuarantineMax time.Duration

	// Probation is how many good decisions a plugin back from quarantine
	// must make before its quarantine time is reset to QuarantineBase; a
	// fault on probation quarantines it again at once. Default 100.
	Probation int

	// LogLines is how many switchyard.log lines per second one plugin may
	// write (a burst of twice as many is allowed); the excess is counted
	// (Stats.LogDropped), not written. Every call also burns LogFuel from
	// the decision's budget, written or not. Default 20.
	LogLines int

	// Logger receives the guests' log lines and stderr output, with the
	// plugin's name, and a line for each change of a plugin's breaker
	// state: quarantined or disabled (WARN), enabled again (INFO). Nil
	// discards them.
	Logger *slog.Logger

	// OnEvent is called for every fault and breaker change. It runs on the
	// deciding goroutine, possibly under the engine's lock: it must not block.
	OnEvent func(Event)
}

func (c Config) withDefaults() (Config, error) {
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = 128
	}
	if c.KeepCompiled < 0 {
		return c, fmt.Errorf("host config: KeepCompiled %d is negative", c.KeepCompiled)
	}
	if c.MemoryLimitPages < 16 || c.MemoryLimitPages > 65536 {
		return c, fmt.Errorf("host config: MemoryLimitPages %d out of [16, 65536]", c.MemoryLimitPages)
	}
	if c.DecisionFuel == 0 {
		c.DecisionFuel = DefaultDecisionFuel
	}
	if c.SetupFuel == 0 {
		c.SetupFuel = 20_000_000
	}
	if c.FuelSetting == "" {
		c.FuelSetting = "DecisionFuel"
	}
	if c.CPUSetting == "" {
		c.CPUSetting = "DecisionCPU"
	}
	if c.Deadline == 0 {
		c.Deadline = DefaultDeadline
	}
	if c.DecisionCPU == 0 {
		c.DecisionCPU = DefaultDecisionCPU
	}
	if c.DecisionCPU < 100*time.Microsecond {
		return c, fmt.Errorf("host config: DecisionCPU %s is under 100µs", c.DecisionCPU)
	}
	if c.Deadline < time.Millisecond {
		return c, fmt.Errorf("host config: Deadline %s is under a millisecond", c.Deadline)
	}
	if c.BreakerStall == 0 {
		c.BreakerStall = 20 * time.Millisecond
	}
	if c.QuarantineBase == 0 {
		c.QuarantineBase = time.Second
	}
	if c.QuarantineMax == 0 {
		c.QuarantineMax = max(10*time.Minute, c.QuarantineBase)
	}
	if c.BreakerStall < 0 || c.QuarantineBase < 0 || c.QuarantineMax < c.QuarantineBase {
		return c, errors.New("host config: BreakerStall and QuarantineBase must be positive, QuarantineMax at least QuarantineBase")
	}
	if c.Probation == 0 {
		c.Probation = 100
	}
	if c.LogLines == 0 {
		c.LogLines = 20
	}
	if c.Probation < 1 || c.LogLines < 1 {
		return c, errors.New("host config: Probation and LogLines must be positive")
	}
	if c.DecisionFuel < 1000 || c.SetupFuel < 1000 {
		return c, errors.New("host config: DecisionFuel and SetupFuel must be at least 1000")
	}
	if c.Instances == 0 {
		c.Instances = 2
	}
	if c.Instances < 1 || c.Instances > 64 {
		return c, fmt.Errorf("host config: Instances %d out of [1, 64]", c.Instances)
	}
	if c.BreakerThreshold == 0 {
		c.BreakerThreshold = 5
	}
	if c.BreakerForgive == 0 {
		c.BreakerForgive = 100
	}
	if c.BreakerThreshold < 1 || c.BreakerForgive < 1 {
		return c, errors.New("host config: BreakerThreshold and BreakerForgive must be positive")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.CacheDir == "" && !c.NoFileCache {
		if d, err := os.UserCacheDir(); err == nil {
			c.CacheDir = filepath.Join(d, "switchyard", "wazero")
		} else {
			c.NoFileCache = true
		}
	}
	return c, nil
}

// setupDeadline is the wall-clock bound of the calls that set an instance up
// (allocating its arena, reading its version, configuring it): ten times a
// decision's, at least a second. Fuel bounds their work; this only ends a
// call that hangs, and a busy machine must not make a rebuild fail.
func (c *Config) setupDeadline() time.Duration { return max(10*c.Deadline, time.Second) }

// loadDeadline is the wall-clock bound of the calls a plugin's load makes on
// its first instance (its arena, ABI version, configuration and smoke
// decision).
// A load runs on its caller's goroutine (loadPlugin, or a server's start),
// never in the scheduler's way, so this bound only ends a module that hangs
// there, and fuel still bounds its work; a decision's Deadline would refuse
// a healthy module, the built-in policies included, whenever the machine is
// busy.
func (c *Config) loadDeadline() time.Duration { return max(100*c.Deadline, 5*time.Second) }
