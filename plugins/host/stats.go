package host

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a plugin's counters.
type Stats struct {
	Calls     uint64               // decisions asked of the plugin's wrappers
	Faults    map[FaultKind]uint64 // faulted decisions, by kind
	Fallbacks uint64               // decisions answered by the fallback (faults, disabled, rebuilding)
	// FallbacksBy counts the Fallbacks by cause (the causes with none are
	// left out): the plugin faulted on the decision, was out (quarantined
	// or disabled), closed or rebuilding an instance, or the decision's
	// table would not fit its memory.
	FallbacksBy map[FallbackCause]uint64
	Holds       uint64 // fairness decisions that held (ABI v2), plan previews not counted
	// DryRunFaults counts the dry-run decisions (DRY_RUN: a plan's
	// preview) that faulted. They are not in Faults and do not feed the
	// breaker: a reader's preview cannot quarantine a plugin.
	DryRunFaults uint64
	Disabled     bool      // the plugin does not decide now: quarantined by its breaker, or disabled
	Reason       string    // why
	State        State     // active, on probation, quarantined or disabled
	Until        time.Time // when a quarantine ends
	// Quarantines counts the breaker's trips.
	Quarantines uint64
	// LogLines and LogDropped count the guest's switchyard.log lines
	// written and dropped by the rate limit (Config.LogLines).
	LogLines, LogDropped uint64
	Instances            int // instances alive or being rebuilt
	// Guest call latency over all decisions made by the plugin, including
	// the guard; quantiles are accurate to about 12%, and all zero while
	// Observed is 0.
	LatencyP50, LatencyP99, LatencyMax time.Duration
	Observed                           uint64 // calls the latency figures cover
	// Latency is the same distribution as cumulative buckets, for
	// Prometheus.
	Latency Histogram
	// FuelMax is the most fuel one decision has burnt (calls and loop
	// iterations; see Config.DecisionFuel), of the decisions that ended or
	// ran out of fuel: one the host stopped (its deadline, its CPU time, a
	// close) is left out, since what it burnt depends on the machine. It
	// is deterministic. SetupFuelMax is the most that instantiation or a
	// configure call has burnt, of those the host did not stop, likewise.
	FuelMax, SetupFuelMax uint64
	// DeadlineGraces counts the calls the watchdog let run on past their
	// deadline in wall time because the process was starved while they ran
	// (its own ticks ran late) or because they were not running (burnt no
	// fuel since its last look): time spent waiting for a core. Such a call
	// is still abandoned once it is past its deadline net of that time and
	// running, or past the hard cap on its wall time.
	DeadlineGraces uint64
}

// FaultTotal returns the number of faulted decisions of every kind.
func (s Stats) FaultTotal() uint64 {
	var n uint64
	for _, v := range s.Faults {
		n += v
	}
	return n
}

// Fallbacks returns how many decisions the plugin's wrappers have answered
// through their fallbacks (Stats.Fallbacks), without the rest of a
// snapshot: a tool that times decisions one by one reads it around each.
func (p *Plugin) Fallbacks() uint64 { return p.stats.fallbacks.Load() }

// ResetFuelMax returns the most fuel one decision has burnt (Stats.FuelMax)
// and starts that count again from zero: a tool that decides over one
// input shape after another (plugin bench) reads each shape's own figure.
func (p *Plugin) ResetFuelMax() uint64 { return p.stats.fuel.Swap(0) }

// Stats returns a snapshot of the plugin's counters.
func (p *Plugin) Stats() Stats {
	s := Stats{
		Calls:        p.stats.calls.Load(),
		Fallbacks:    p.stats.fallbacks.Load(),
		FallbacksBy:  make(map[FallbackCause]uint64, 2),
		Holds:        p.stats.holds.Load(),
		DryRunFaults: p.stats.dryRunFaults.Load(),
		Faults:       make(map[FaultKind]uint64, 4),
		Instances:    int(p.live.Load()),
	}
	for _, c := range FallbackCauses {
		if v := p.stats.fallbacksBy[c].Load(); v > 0 {
			s.FallbacksBy[c] = v
		}
	}
	s.State, s.Reason, s.Until = p.state()
	s.Disabled = s.State == StateQuarantined || s.State == StateDisabled
	s.Quarantines = p.stats.quarantines.Load()
	s.LogLines, s.LogDropped = p.stats.logLines.Load(), p.stats.logDropped.Load()
	for _, k := range FaultKinds {
		if v := p.stats.faults[k].Load(); v > 0 {
			s.Faults[k] = v
		}
	}
	s.LatencyP50, s.LatencyP99, s.LatencyMax, s.Observed = p.stats.latency.quantiles()
	s.Latency = p.stats.latency.cumulative()
	s.FuelMax, s.SetupFuelMax = p.stats.fuel.Load(), p.stats.setupFuel.Load()
	s.DeadlineGraces = p.stats.graces.Load()
	return s
}

type stats struct {
	calls, fallbacks     atomic.Uint64
	holds                atomic.Uint64
	dryRunFaults         atomic.Uint64 // Stats.DryRunFaults
	quarantines          atomic.Uint64
	graces               atomic.Uint64 // calls let run on past their deadline (Stats.DeadlineGraces)
	logLines, logDropped atomic.Uint64
	faults               [FaultDeadline + 1]atomic.Uint64
	fallbacksBy          [FallbackTooLarge + 1]atomic.Uint64
	latency              histogram
	fuel, setupFuel      maxGauge
}

// FallbackCause says why a decision was answered by the plugin's native
// fallback rather than by the plugin.
type FallbackCause uint8

// Fallback causes.
const (
	FallbackFault      FallbackCause = iota // the plugin faulted on the decision (Stats.Faults says how)
	FallbackBreaker                         // the plugin was quarantined or disabled
	FallbackClosed                          // the plugin or the runtime was closed, or closed during the call
	FallbackRebuilding                      // its instance was being rebuilt after a fault
	FallbackTooLarge                        // the decision's names or details would not fit its memory: it was not asked
)

// FallbackCauses lists every cause, in order.
var FallbackCauses = []FallbackCause{FallbackFault, FallbackBreaker, FallbackClosed, FallbackRebuilding, FallbackTooLarge}

// String returns the cause's name, as used in metrics.
func (c FallbackCause) String() string {
	switch c {
	case FallbackFault:
		return "fault"
	case FallbackBreaker:
		return "breaker"
	case FallbackClosed:
		return "closed"
	case FallbackRebuilding:
		return "rebuilding"
	case FallbackTooLarge:
		return "too-large"
	}
	return "unknown"
}

// cause is the fallback cause of a decision that ended in o (not decided).
func (o outcome) cause() FallbackCause {
	switch o {
	case out:
		return FallbackBreaker
	case closed:
		return FallbackClosed
	case rebuilding:
		return FallbackRebuilding
	case tooLarge:
		return FallbackTooLarge
	}
	return FallbackFault
}

// maxGauge keeps the largest value it has seen.
type maxGauge struct{ atomic.Uint64 }

func (g *maxGauge) max(v uint64) {
	for {
		m := g.Load()
		if v <= m || g.CompareAndSwap(m, v) {
			return
		}
	}
}

func (s *stats) init() {}

func (s *stats) observe(d time.Duration) { s.latency.observe(uint64(d)) }

// histogram is a log-linear histogram of nanoseconds: for each power of two,
// subBuckets linear buckets. Recording is one atomic add.
type histogram struct {
	counts [64 * subBuckets]atomic.Uint64
	max    atomic.Uint64
	sum    atomic.Uint64
}

const subBits = 3
const subBuckets = 1 << subBits

func bucketOf(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1))
	sub := (v >> (e - subBits)) & (subBuckets - 1)
	return (e-subBits+1)*subBuckets + int(sub)
}

// upper returns the largest value that falls in bucket i.
func upper(i int) uint64 {
	if i < subBuckets {
		return uint64(i)
	}
	e := i/subBuckets + subBits - 1
	sub := uint64(i % subBuckets)
	return (1<<e | (sub+1)<<(e-subBits)) - 1
}

func (h *histogram) observe(v uint64) {
	h.counts[bucketOf(v)].Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

func (h *histogram) reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.max.Store(0)
	h.sum.Store(0)
}

func (h *histogram) quantiles() (p50, p99, max time.Duration, n uint64) {
	var counts [len(h.counts)]uint64
	for i := range counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	if n == 0 {
		return 0, 0, 0, 0
	}
	q := func(f float64) time.Duration {
		rank := uint64(f*float64(n-1)) + 1
		var seen uint64
		for i, c := range counts {
			if seen += c; seen >= rank {
				return time.Duration(upper(i))
			}
		}
		return time.Duration(h.max.Load())
	}
	// A bucket's upper bound may lie above the largest value seen: clamp,
	// so that p50 <= p99 <= max always holds.
	top := time.Duration(h.max.Load())
	hi := min(q(0.99), top)
	return min(q(0.50), hi), hi, top, n
}

// Histogram is a latency distribution as cumulative buckets: Counts[i]
// decisions took at most Bounds[i]; Count took any time, Sum in total.
type Histogram struct {
	Bounds []time.Duration
	Counts []uint64
	Count  uint64
	Sum    time.Duration
}

// HistogramBounds are the upper bounds of Histogram's buckets: from a
// microsecond, what a simple decision takes, to the default deadline and
// past it.
var HistogramBounds = []time.Duration{
	time.Microsecond, 2 * time.Microsecond, 5 * time.Microsecond,
	10 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond,
}

// cumulative folds the log-linear buckets into HistogramBounds. A bucket
// counts under the first bound its largest value does not exceed, so a
// count may land one bound high, never low.
func (h *histogram) cumulative() Histogram {
	out := Histogram{Bounds: HistogramBounds, Counts: make([]uint64, len(HistogramBounds))}
	for i := range h.counts {
		c := h.counts[i].Load()
		if c == 0 {
			continue
		}
		out.Count += c
		for j, b := range HistogramBounds {
			if upper(i) <= uint64(b) {
				out.Counts[j] += c
				break
			}
		}
	}
	for j := 1; j < len(out.Counts); j++ {
		out.Counts[j] += out.Counts[j-1]
	}
	out.Sum = time.Duration(h.sum.Load())
	return out
}
