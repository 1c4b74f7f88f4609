package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// Config configures a Runtime. The zero value is usable: every field has a
// default.
type Config struct {
	// CacheDir holds wazero's compilation cache, so a module compiled once is
	// loaded in milliseconds by the next process. Empty means
	// os.UserCacheDir()/switchyard/wazero; if that cannot be determined, or
	// NoFileCache is set, compiled code is cached in memory only.
	CacheDir    string
	NoFileCache bool

	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages.
	// A Go guest needs about 40 pages just to start. Default 128 (8 MiB).
	MemoryLimitPages uint32

	// DecisionFuel bounds one decision, in fuel: every call and every loop
	// iteration of the guest burns one unit (Go's WebAssembly code adds a
	// unit for most taken branches), and a bulk memory operation one more
	// per 32 bytes. A guest that runs out traps, its instance is replaced
	// and the decision falls back. The budget is deterministic: the same
	// input ends the same way on any machine. Default 2,000,000: a Go guest
	// spinning in a tight loop burns 100,000 to 300,000 units a millisecond
	// on the 2-core machines here (the fewer under load), so it is stopped
	// after about 7-19 ms; the built-in fairness policy burns about 300
	// deciding over 64 candidates with 8 slots, 740 with 64 slots, and
	// 13,300 over 1,024 candidates with 1,024 slots. See doc/adr/0002-fuel-metering.md.
	DecisionFuel int64

	// SetupFuel bounds instantiation (the guest's _initialize) and each
	// configure call, in the same units. Default 2,000,000, stopped as soon
	// as a runaway decision is: a Go guest's runtime starts with about
	// 15,000.
	SetupFuel int64

	// Instances is the pool size of a plugin that declares itself stateless;
	// a stateful plugin always runs on one instance at a time. Default 2.
	Instances int

	// BreakerThreshold is how many faults, net of forgiveness, disable a
	// plugin. Default 5.
	BreakerThreshold int

	// BreakerForgive is how many good decisions forgive one fault, so that a
	// rare fault never accumulates into a trip while a plugin that faults
	// more often than once in BreakerForgive decisions does. Default 100.
	BreakerForgive int

	// Logger receives the guests' log lines and stderr output, with the
	// plugin's name. Nil discards them.
	Logger *slog.Logger

	// OnEvent is called for every fault and breaker change. It runs on the
	// deciding goroutine, possibly under the engine's lock: it must not block.
	OnEvent func(Event)
}

func (c Config) withDefaults() (Config, error) {
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = 128
	}
	if c.MemoryLimitPages < 16 || c.MemoryLimitPages > 65536 {
		return c, fmt.Errorf("host config: MemoryLimitPages %d out of [16, 65536]", c.MemoryLimitPages)
	}
	if c.DecisionFuel == 0 {
		c.DecisionFuel = 2_000_000
	}
	if c.SetupFuel == 0 {
		c.SetupFuel = 2_000_000
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
