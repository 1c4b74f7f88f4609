// Bench: the measurements behind `switchyard plugin bench`.

package authoring

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/host"
)

// BenchOptions configure Bench.
type BenchOptions struct {
	Options
	// Decisions is how many decisions each case times, for the plugin and
	// for the built-in alike. Default 2,000.
	Decisions int
}

// BenchReport is what Bench measured. It marshals to JSON for tools.
type BenchReport struct {
	Slot    string      `json:"slot"`
	Builtin string      `json:"builtin"` // the native policy compared with
	Cases   []BenchCase `json:"cases"`
	// Faults counts the plugin's decisions that fell back during the
	// measurements; a plugin that faults is not measured fairly.
	Faults uint64 `json:"faults"`
}

// BenchCase is one input shape, timed through the guarded plugin and
// through the native built-in of the same slot.
type BenchCase struct {
	Name       string  `json:"name"`
	Candidates int     `json:"candidates,omitempty"` // fairness: queue heads offered
	Slots      int     `json:"slots,omitempty"`      // fairness: dispatches asked for
	Tasks      int     `json:"tasks"`                // tasks one decision decides (picks, ranks, 1 for retry)
	Plugin     Latency `json:"plugin"`
	Native     Latency `json:"native"`
	Ratio      float64 `json:"ratio"` // plugin mean ÷ native mean
	Fuel       uint64  `json:"fuel"`  // the most fuel one decision burnt (cumulative over the cases so far)
}

// Latency summarises the timed decisions of one case. For the plugin, a
// decision that faulted (fuel or deadline exhausted, a trap, an invalid
// answer) or that its fallback answered (a quarantined plugin) is not the
// plugin's: it is counted in Faulted and left out of the figures, which
// cover the Decisions that the plugin answered; when it answered none, the
// figures are 0 and the case is reported as faulted.
type Latency struct {
	Decisions int     `json:"decisions"`
	Faulted   int     `json:"faulted,omitempty"`
	MeanNs    float64 `json:"meanNs"`
	P50Ns     float64 `json:"p50Ns"`
	P99Ns     float64 `json:"p99Ns"`
	PerTaskNs float64 `json:"perTaskNs"` // mean ÷ tasks decided
}

// String renders the report as a table for people.
func (r *BenchReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s plugin vs built-in %q (ns; guarded wasm / native)\n", r.Slot, r.Builtin)
	fmt.Fprintf(&b, "%-28s %17s %17s %17s %13s %6s\n", "case", "mean", "p50", "p99", "per task", "ratio")
	for _, c := range r.Cases {
		if c.Plugin.Decisions == 0 {
			fmt.Fprintf(&b, "%-28s FAULTED: all %d decisions fell back (native mean %.0f ns)\n", c.Name, c.Plugin.Faulted, c.Native.MeanNs)
			continue
		}
		fmt.Fprintf(&b, "%-28s %8.0f/%-8.0f %8.0f/%-8.0f %8.0f/%-8.0f %6.0f/%-6.0f %6.1f", c.Name,
			c.Plugin.MeanNs, c.Native.MeanNs, c.Plugin.P50Ns, c.Native.P50Ns, c.Plugin.P99Ns, c.Native.P99Ns,
			c.Plugin.PerTaskNs, c.Native.PerTaskNs, c.Ratio)
		if c.Plugin.Faulted > 0 {
			fmt.Fprintf(&b, "  FAULTED %d of %d (not in the figures)", c.Plugin.Faulted, c.Plugin.Faulted+c.Plugin.Decisions)
		}
		b.WriteByte('\n')
	}
	if r.Faults > 0 {
		fmt.Fprintf(&b, "WARNING: %d decisions faulted or fell back, and are not in the plugin's figures; run plugin check\n", r.Faults)
	}
	return b.String()
}

// benchCase is one input shape with a decision to time on either policy.
type benchCase struct {
	name              string
	cands, slots, per int
	decide            func(plugin bool)
}

// Bench loads wasm and times its decisions against the native built-in
// policy of its slot over input shapes of several sizes: fairness over 16,
// 64 and 256 candidates with 1, 8 and 64 slots, selection of 1, 100 and
// 1,000 tasks, retry of varied failures.
func Bench(ctx context.Context, wasm []byte, opts BenchOptions) (*BenchReport, error) {
	if opts.Decisions <= 0 {
		opts.Decisions = 2000
	}
	rt, done, err := opts.runtime(nil)
	if err != nil {
		return nil, err
	}
	defer done()
	s, err := load(ctx, rt, "bench", wasm, opts.Config)
	if err != nil {
		return nil, err
	}
	defer s.plugin.Close(context.Background())
	rep := &BenchReport{Slot: s.plugin.Slot().String(), Builtin: s.builtin.Name}
	for _, c := range benchCases(s) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		bc := BenchCase{Name: c.name, Candidates: c.cands, Slots: c.slots, Tasks: c.per}
		for range opts.Decisions / 10 { // warm both up
			c.decide(true)
			c.decide(false)
		}
		bc.Plugin = measure(opts.Decisions, c.per, s.plugin.Fallbacks, func() { c.decide(true) })
		bc.Native = measure(opts.Decisions, c.per, nil, func() { c.decide(false) })
		if bc.Native.MeanNs > 0 {
			bc.Ratio = bc.Plugin.MeanNs / bc.Native.MeanNs
		}
		bc.Fuel = s.plugin.Stats().FuelMax
		rep.Cases = append(rep.Cases, bc)
	}
	rep.Faults = s.plugin.Stats().Fallbacks
	return rep, nil
}

func benchCases(s *subject) []benchCase {
	const now = 1_700_000_000_000
	var cases []benchCase
	switch {
	case s.fairness != nil:
		native := s.native.Fairness
		for _, n := range []int{16, 64, 256} {
			cands := host.SyntheticCandidates(n, 7)
			for i := range cands { // room for every pick: the decision, not the ceilings
				cands[i].AgentLimit, cands[i].LaneLimit, cands[i].QueueLen = 1000, 10_000, 100
			}
			for _, slots := range []int{1, 8, 64} {
				ctx := policy.PickContext{NowMs: now, AgingMs: 30_000, Slots: uint32(slots)}
				picks := make([]uint32, slots)
				cases = append(cases, benchCase{
					name: fmt.Sprintf("fairness/cands=%d/slots=%d", n, slots), cands: n, slots: slots, per: slots,
					decide: func(plugin bool) {
						if plugin {
							s.fairness.Pick(ctx, cands, picks)
						} else {
							native.Pick(ctx, cands, picks)
						}
					},
				})
			}
		}
	case s.selection != nil:
		native := s.native.Selection
		for _, n := range []int{1, 100, 1000} {
			tasks := host.SyntheticTasks(n, 7)
			ranks := make([]int64, n)
			cases = append(cases, benchCase{
				name: fmt.Sprintf("selection/tasks=%d", n), per: n,
				decide: func(plugin bool) {
					if plugin {
						s.selection.Rank(now, tasks, ranks)
					} else {
						native.Rank(now, tasks, ranks)
					}
				},
			})
		}
	case s.retry != nil:
		native := s.native.Retry
		fs := failures(64)
		i := 0
		cases = append(cases, benchCase{
			name: "retry/varied", per: 1,
			decide: func(plugin bool) {
				f := fs[i%len(fs)]
				i++
				if plugin {
					s.retry.Decide(f)
				} else {
					native.Decide(f)
				}
			},
		})
	}
	return cases
}

// measure times n calls of decide one by one. fallbacks, when not nil,
// counts the decisions that fell back: one that did is counted as faulted
// and its time left out.
func measure(n, tasks int, fallbacks func() uint64, decide func()) Latency {
	ds := make([]time.Duration, 0, n)
	var sum time.Duration
	faulted := 0
	for range n {
		var fb uint64
		if fallbacks != nil {
			fb = fallbacks()
		}
		start := time.Now()
		decide()
		d := time.Since(start)
		if fallbacks != nil && fallbacks() != fb {
			faulted++
			continue
		}
		ds = append(ds, d)
		sum += d
	}
	l := Latency{Decisions: len(ds), Faulted: faulted}
	if len(ds) == 0 {
		return l
	}
	slices.Sort(ds)
	q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Nanoseconds()) }
	l.MeanNs, l.P50Ns, l.P99Ns = float64(sum.Nanoseconds())/float64(len(ds)), q(0.50), q(0.99)
	if tasks > 0 {
		l.PerTaskNs = l.MeanNs / float64(tasks)
	}
	return l
}
