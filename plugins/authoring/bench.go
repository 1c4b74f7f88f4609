// Bench: the measurements behind `switchyard plugin bench`.

package authoring

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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
	// Deadline is the wall-clock backstop of one of the plugin's decisions
	// in the private runtime (the server's plugins.deadline): a decision
	// still running after it is abandoned, as the server abandons it, and
	// counted as a deadline fault. 0 means host.DefaultDeadline, the
	// server's default. A Runtime given in Options keeps its own.
	Deadline time.Duration
	// DecisionCPU is the CPU time one of the plugin's decisions may use
	// (the server's plugins.decisionCPU; Linux only): one that uses it up
	// ends with a fuel fault, as on the server. 0 means
	// host.DefaultDecisionCPU. A Runtime given in Options keeps its own.
	DecisionCPU time.Duration
}

// BenchReport is what Bench measured. It marshals to JSON for tools.
type BenchReport struct {
	Slot    string `json:"slot"`
	Builtin string `json:"builtin"` // the native policy compared with
	// DeadlineNs, DecisionCPUNs and DecisionFuel bound each of the
	// plugin's decisions, as the server's plugins.deadline,
	// plugins.decisionCPU and plugins.decisionFuel do.
	DeadlineNs    int64 `json:"deadlineNs"`
	DecisionCPUNs int64 `json:"decisionCpuNs"`
	DecisionFuel  int64 `json:"decisionFuel"`
	// Names and Details say which ABI v2 table went with each of the
	// plugin's decisions: the one the module asks for (policy_flags NAMES
	// or DETAILS), filled with synthetic names and details that match the
	// records (benchDetails). Both are false for a module that asks for
	// neither (and for every version 1 module): it is sent none, as the
	// server sends it none.
	Names   bool        `json:"names"`
	Details bool        `json:"details"`
	Cases   []BenchCase `json:"cases"`
	// Faults counts the plugin's faults over the whole bench by kind
	// (deadline, fuel, trap, invalid, refused), as the server counts them
	// (switchyard_plugin_faults_total): the sum of the cases' faults, in
	// their timed decisions (Plugin.Faults) and in their warm-ups
	// (WarmUp.Faults). Fallbacks counts the decisions its fallback answered
	// (its faults, and those made while it was quarantined), the sum of
	// the cases' Plugin.Faulted and WarmUp.Faulted; Quarantines the
	// breaker's trips. A plugin that faults is not measured fairly.
	Faults      map[string]uint64 `json:"faults"`
	Fallbacks   uint64            `json:"fallbacks"`
	Quarantines uint64            `json:"quarantines"`
	// Graces counts the plugin's timed decisions that ran past the
	// deadline in wall time while the machine was starved of CPU and were
	// let run on, as a server lets them (Stats.DeadlineGraces): they are
	// in the figures, and a p99 above the deadline is theirs.
	Graces uint64 `json:"graces,omitempty"`
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
	// Ratio is the plugin's median over the native median (p50 ÷ p50): the
	// mean would swing with a few slow decisions (a garbage collection, a
	// busy core). 0 when the plugin answered none of the case's decisions.
	Ratio float64 `json:"ratio"`
	// Fuel is the most fuel one of the plugin's decisions of this case
	// burnt, warm-up included: the case's own figure, not the most over
	// the cases so far. It is deterministic: it is measured apart from
	// the timed decisions (fuelPass), over the same decisions made in the
	// same order on an instance of its own, in a runtime whose deadline
	// and CPU time are set far out as Check's are. The timed decisions
	// could not give it: a decision the machine's load takes past the
	// deadline (or the CPU time) is stopped and its instance rebuilt, and
	// a plugin that keeps state pays for rebuilding it in the next
	// decision (drr's first decision over 64 candidates with 64 slots on
	// a fresh instance burns 0.6 million, its later ones 0.3 million).
	Fuel uint64 `json:"fuel"`
	// WarmUp counts the plugin's warm-up decisions of this case (a tenth
	// as many as the timed ones, not timed), and those the fallback
	// answered, by kind, as Plugin counts the timed ones.
	WarmUp WarmUp `json:"warmUp"`
}

// WarmUp counts a case's warm-up decisions: Decisions the plugin answered,
// Faulted ones it did not, and Faults those by kind (as Latency.Faults).
type WarmUp struct {
	Decisions int            `json:"decisions"`
	Faulted   int            `json:"faulted,omitempty"`
	Faults    map[string]int `json:"faults,omitempty"`
}

// FaultFallback is the kind, in Latency.Faults, of a timed decision that
// the fallback answered without a fault of the plugin's in it: the plugin
// was quarantined by an earlier fault (or disabled, an instance that could
// not be rebuilt), or the decision's table would not fit its memory.
const FaultFallback = "fallback"

// Latency summarises the timed decisions of one case. For the plugin, a
// decision that faulted (fuel or deadline exhausted, a trap, an invalid
// answer, an error returned) or that its fallback answered (a quarantined
// plugin) is not the plugin's: it is counted in Faulted, by kind in Faults,
// and left out of the figures, which cover the Decisions that the plugin
// answered; when it answered none, the figures are 0 and the case is
// reported as faulted.
type Latency struct {
	Decisions int `json:"decisions"`
	Faulted   int `json:"faulted,omitempty"`
	// Faults counts the Faulted decisions by kind: the server's fault
	// kinds (deadline, fuel, trap, invalid, refused) and FaultFallback.
	Faults    map[string]int `json:"faults,omitempty"`
	P50Ns     float64        `json:"p50Ns"`
	P99Ns     float64        `json:"p99Ns"`
	MeanNs    float64        `json:"meanNs"`    // swings with outliers; the ratio is taken from the medians
	PerTaskNs float64        `json:"perTaskNs"` // p50 ÷ tasks decided
	// Graces counts the decisions, among those in the figures, that ran
	// past the deadline while the machine was starved of CPU and were let
	// run on (the plugin's only; see BenchReport.Graces).
	Graces int `json:"graces,omitempty"`
}

// String renders the report as a table for people.
func (r *BenchReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s plugin vs built-in %q (ns; guarded wasm / native)\n", r.Slot, r.Builtin)
	fmt.Fprintf(&b, "each decision: deadline %s, CPU time %s, %d fuel; %s\n", time.Duration(r.DeadlineNs), time.Duration(r.DecisionCPUNs), r.DecisionFuel, r.sent())
	fmt.Fprintf(&b, "%-28s %17s %17s %13s %6s\n", "case", "p50", "p99", "p50 per task", "ratio")
	for _, c := range r.Cases {
		if c.Plugin.Decisions == 0 {
			fmt.Fprintf(&b, "%-28s FAULTED: all %d decisions fell back (%s; native p50 %.0f ns)\n", c.Name, c.Plugin.Faulted, kinds(c.Plugin.Faults), c.Native.P50Ns)
			continue
		}
		fmt.Fprintf(&b, "%-28s %8.0f/%-8.0f %8.0f/%-8.0f %6.0f/%-6.0f %6.1f", c.Name,
			c.Plugin.P50Ns, c.Native.P50Ns, c.Plugin.P99Ns, c.Native.P99Ns,
			c.Plugin.PerTaskNs, c.Native.PerTaskNs, c.Ratio)
		if c.Plugin.Faulted > 0 {
			fmt.Fprintf(&b, "  FAULTED %d of %d (%s; not in the figures)", c.Plugin.Faulted, c.Plugin.Faulted+c.Plugin.Decisions, kinds(c.Plugin.Faults))
		}
		b.WriteByte('\n')
	}
	if r.Graces > 0 {
		fmt.Fprintf(&b, "NOTE: %d of the plugin's decisions ran past the deadline (%s) while this machine was starved of CPU, and were let run on as a server lets them (deadline_graces_total): their times are in the figures; a quieter machine, or a server given priority, does not see them\n",
			r.Graces, time.Duration(r.DeadlineNs))
	}
	if r.Fallbacks > 0 {
		var timed, warm int
		for _, c := range r.Cases {
			timed += c.Plugin.Faulted
			warm += c.WarmUp.Faulted
		}
		fmt.Fprintf(&b, "WARNING: the fallback answered %d decisions, none in the plugin's figures (%d timed, %d in the warm-ups)", r.Fallbacks, timed, warm)
		if len(r.Faults) > 0 {
			all := make(map[string]int, len(r.Faults))
			for k, v := range r.Faults {
				all[k] = int(v)
			}
			fmt.Fprintf(&b, "; the plugin faulted: %s", kinds(all))
		}
		if r.Faults[host.FaultDeadline.String()] > 0 {
			fmt.Fprintf(&b, "; a server abandons a decision past its deadline (%s) and quarantines the plugin", time.Duration(r.DeadlineNs))
		}
		b.WriteString("; run plugin check" + r.checkArgs() + "\n")
	}
	return b.String()
}

// checkArgs are the flags that make plugin check decide over the most
// candidates of a case with a fault check would see too (fuel, a trap, an
// invalid answer, a refusal; not the deadline, which check does not
// apply), when they are more than check offers by default: it would pass
// where that case faulted.
func (r *BenchReport) checkArgs() string {
	most := 0
	for _, c := range r.Cases {
		for _, k := range host.FaultKinds {
			if k != host.FaultDeadline && c.Plugin.Faults[k.String()]+c.WarmUp.Faults[k.String()] > 0 {
				most = max(most, c.Candidates)
			}
		}
	}
	if most <= DefaultCandidates {
		return ""
	}
	return fmt.Sprintf(" --candidates %d, as many as the largest case that faulted (check offers %d by default, a server engine.fairnessCandidates; plugin bench --candidates N benches up to yours)", most, DefaultCandidates)
}

// sent says which table went with each decision.
func (r *BenchReport) sent() string {
	switch {
	case r.Details:
		return "sent names and details (ABI v2)"
	case r.Names:
		return "sent names (ABI v2; the module asks for no details)"
	}
	return "sent no names or details (the module asks for none)"
}

// kinds renders fault counts by kind, in upper case, in the order of
// host.FaultKinds and then FaultFallback: "DEADLINE 1, FALLBACK 19".
func kinds(m map[string]int) string {
	var parts []string
	for _, k := range append(faultKindNames(), FaultFallback) {
		if n := m[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToUpper(k), n))
		}
	}
	return strings.Join(parts, ", ")
}

func faultKindNames() []string {
	names := make([]string, len(host.FaultKinds))
	for i, k := range host.FaultKinds {
		names[i] = k.String()
	}
	return names
}

// benchCase is one input shape with a decision to time on either policy.
type benchCase struct {
	name              string
	cands, slots, per int
	decide            func(plugin bool)
}

// Bench loads wasm and times its decisions against the native built-in
// policy of its slot over input shapes of several sizes: fairness over 16,
// 64 and 256 candidates (or, with Options.Candidates set, those below it
// and it) with 1, 8 and 64 slots, selection of 1, 100 and
// 1,000 tasks, retry of varied failures. The plugin runs as a server runs
// it: under the same deadline and fuel budget, its breaker included, and
// with the names or details it asks for (ABI v2). Each case, and its timed
// decisions after the warm-up, start as an operator's enablePlugin leaves
// the plugin: its breaker reset, so that a quarantine that one case's
// faults began does not hand the next one to the fallback.
func Bench(ctx context.Context, wasm []byte, opts BenchOptions) (*BenchReport, error) {
	if opts.Decisions <= 0 {
		opts.Decisions = 2000
	}
	rt, done, err := opts.runtimeWith(host.Config{Deadline: opts.Deadline, DecisionCPU: opts.DecisionCPU})
	if err != nil {
		return nil, err
	}
	defer done()
	s, err := load(ctx, rt, opts.name(), wasm, opts.Config)
	if err != nil {
		return nil, err
	}
	defer s.plugin.Close(context.Background())
	cfg := rt.Config()
	rep := &BenchReport{Slot: s.plugin.Slot().String(), Builtin: s.builtin.Name,
		DeadlineNs: cfg.Deadline.Nanoseconds(), DecisionCPUNs: cfg.DecisionCPU.Nanoseconds(), DecisionFuel: cfg.DecisionFuel}
	rep.Names, rep.Details = s.plugin.Reads()
	rep.Faults = map[string]uint64{}
	fuel, err := fuelPass(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	for i, c := range benchCases(s, opts.Candidates) {
		if err := fresh(ctx, s.plugin); err != nil {
			return nil, err
		}
		bc := BenchCase{Name: c.name, Candidates: c.cands, Slots: c.slots, Tasks: c.per, Fuel: fuel[i]}
		w := watch(s.plugin)
		for range opts.Decisions / 10 { // warm both up
			if _, kind := w.run(func() { c.decide(true) }); kind != "" {
				bc.WarmUp.Faulted++
				bc.WarmUp.Faults = count(bc.WarmUp.Faults, kind)
			} else {
				bc.WarmUp.Decisions++
			}
			c.decide(false)
		}
		if err := fresh(ctx, s.plugin); err != nil {
			return nil, err
		}
		graces := s.plugin.Stats().DeadlineGraces
		bc.Plugin = measure(opts.Decisions, c.per, w, func() { c.decide(true) })
		bc.Plugin.Graces = int(s.plugin.Stats().DeadlineGraces - graces)
		rep.Graces += uint64(bc.Plugin.Graces)
		bc.Native = measure(opts.Decisions, c.per, nil, func() { c.decide(false) })
		if bc.Plugin.P50Ns > 0 && bc.Native.P50Ns > 0 {
			bc.Ratio = bc.Plugin.P50Ns / bc.Native.P50Ns
		}
		for _, m := range []map[string]int{bc.WarmUp.Faults, bc.Plugin.Faults} {
			for k, v := range m {
				if k != FaultFallback {
					rep.Faults[k] += uint64(v)
				}
			}
		}
		rep.Fallbacks += uint64(bc.WarmUp.Faulted + bc.Plugin.Faulted)
		rep.Cases = append(rep.Cases, bc)
	}
	rep.Quarantines = s.plugin.Stats().Quarantines
	return rep, nil
}

// fuelPass returns each bench case's Fuel: it makes the plugin's
// decisions of every case as Bench does (its warm-up's, then its timed
// ones, the breaker reset before each), untimed and without the native
// policy's, on the plugin loaded apart in Check's runtime (Options.runtime),
// whose deadline, CPU time and breaker's stall allowance are set far out.
// Fuel depends only on the module, its input and the state its earlier
// decisions left in the instance, and here that state does not depend on
// the machine: a decision is stopped, and its instance rebuilt with none
// of it, only for what the module does (its fuel, a trap, an invalid
// answer), the same on every run. A Runtime given in Options keeps its
// own limits.
func fuelPass(ctx context.Context, wasm []byte, opts BenchOptions) ([]uint64, error) {
	rt, done, err := opts.runtime(nil)
	if err != nil {
		return nil, err
	}
	defer done()
	s, err := load(ctx, rt, opts.name(), wasm, opts.Config)
	if err != nil {
		return nil, err
	}
	defer s.plugin.Close(context.Background())
	var fuel []uint64
	for _, c := range benchCases(s, opts.Candidates) {
		if err := fresh(ctx, s.plugin); err != nil {
			return nil, err
		}
		s.plugin.ResetFuelMax() // this case's fuel, not the cases' before it
		for range opts.Decisions / 10 {
			c.decide(true)
		}
		if err := fresh(ctx, s.plugin); err != nil {
			return nil, err
		}
		for range opts.Decisions {
			c.decide(true)
		}
		fuel = append(fuel, s.plugin.ResetFuelMax())
	}
	return fuel, nil
}

// count adds one decision of kind to m, making m if need be.
func count(m map[string]int, kind string) map[string]int {
	if m == nil {
		m = make(map[string]int)
	}
	m[kind]++
	return m
}

// faultWatch tells which of the plugin's decisions its fallback answered,
// and why, from its counters read around each decision.
type faultWatch struct {
	p      *host.Plugin
	faults map[host.FaultKind]uint64
}

func watch(p *host.Plugin) *faultWatch {
	return &faultWatch{p: p, faults: p.Stats().Faults}
}

// run times decide, one of the plugin's decisions. kind is "" when the
// plugin answered it; else the kind of the fault it made (a decision makes
// at most one), or FaultFallback for a fallback with none, the breaker's
// (or a table too large to send).
func (w *faultWatch) run(decide func()) (took time.Duration, kind string) {
	fb := w.p.Fallbacks()
	start := time.Now()
	decide()
	took = time.Since(start)
	if w.p.Fallbacks() == fb {
		return took, ""
	}
	now, kind := w.p.Stats().Faults, FaultFallback
	for _, k := range host.FaultKinds {
		if now[k] > w.faults[k] {
			kind = k.String()
		}
	}
	w.faults = now
	return took, kind
}

// fresh ends the plugin's quarantine and resets its breaker, as
// enablePlugin would.
func fresh(ctx context.Context, p *host.Plugin) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.Enable()
	return nil
}

// benchCandidates returns the candidate counts of the fairness cases: 16,
// 64 and 256, or with most set (a server's engine.fairnessCandidates) those
// below most, then most itself.
func benchCandidates(most int) []int {
	counts := []int{16, 64, 256}
	if most <= 0 {
		return counts
	}
	var below []int
	for _, n := range counts {
		if n < most {
			below = append(below, n)
		}
	}
	return append(below, most)
}

func benchCases(s *subject, most int) []benchCase {
	const now = 1_700_000_000_000
	var cases []benchCase
	switch {
	case s.fairness != nil:
		native := s.native.Fairness
		for _, n := range benchCandidates(most) {
			cands := host.SyntheticCandidates(n, 7)
			roomy(cands)
			d := make(benchDetails, n)
			for i, c := range cands {
				d[i] = detailFor(int(c.Agent), int(c.Lane), c.HeadSeq, policy.AgentInfo{Weight: c.AgentWeight, MaxInFlight: c.AgentLimit}, "")
			}
			for _, slots := range []int{1, 8, 64} {
				// The engine gives every fairness policy names and details;
				// the plugin's wrapper sends the table the module asks for.
				ctx := policy.PickContext{NowMs: now, AgingMs: 30_000, Slots: uint32(slots), Names: d, Details: d}
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
			d := make(benchDetails, n)
			for i, t := range tasks {
				d[i] = detailFor(int(t.Agent), int(t.Lane), t.Seq, agentInfo(int(t.Agent)), "")
			}
			ctx := policy.RankContext{NowMs: now, Details: d}
			ranks := make([]int64, n)
			cases = append(cases, benchCase{
				name: fmt.Sprintf("selection/tasks=%d", n), per: n,
				decide: func(plugin bool) {
					if plugin {
						rankWith(s.selection, ctx, tasks, ranks)
					} else {
						rankWith(native, ctx, tasks, ranks)
					}
				},
			})
		}
	case s.retry != nil:
		native := s.native.Retry
		fs := failures(64)
		ctxs := make([]policy.RetryContext, len(fs))
		for i, f := range fs {
			code := benchCodes[i%len(benchCodes)]
			ctxs[i] = policy.RetryContext{Details: benchDetails{detailFor(int(f.Agent), int(f.Lane), f.TaskSeq, agentInfo(int(f.Agent)), code)}}
		}
		i := 0
		cases = append(cases, benchCase{
			name: "retry/varied", per: 1,
			decide: func(plugin bool) {
				f, ctx := fs[i%len(fs)], ctxs[i%len(fs)]
				i++
				if plugin {
					decideWith(s.retry, ctx, f)
				} else {
					decideWith(native, ctx, f)
				}
			},
		})
	}
	return cases
}

// rankWith asks p as the engine does: with ctx's details, if p reads them.
func rankWith(p policy.Selection, ctx policy.RankContext, tasks []policy.Task, ranks []int64) {
	if dp, ok := p.(policy.DetailedSelection); ok {
		dp.RankDetailed(ctx, tasks, ranks)
		return
	}
	p.Rank(ctx.NowMs, tasks, ranks)
}

// decideWith asks p as the engine does: with ctx's details, if p reads
// them.
func decideWith(p policy.Retry, ctx policy.RetryContext, f policy.Failure) policy.Decision {
	if dp, ok := p.(policy.DetailedRetry); ok {
		return dp.DecideDetailed(ctx, f)
	}
	return p.Decide(f)
}

// benchDetails are the names and details (ABI v2) the bench sends about its
// records, by record index, made to look like a server's: each record's
// agent index names one agent (an id such as crawler-3, its weight and
// ceiling those of the record where it has them, tier and region labels),
// its lane index one of the default lanes (main, subagent, team, cron);
// two tasks in three have a session; a task carries two or three labels
// (kind, team, and on some urgent=true or retry=never); a retry's attempt
// carries one of the error codes executors and the engine report, or none.
type benchDetails []benchDetail

type benchDetail struct {
	agent, lane, session, code string
	labels                     policy.Labels
	info                       policy.AgentInfo
}

var (
	benchAgents = []string{"planner", "researcher", "crawler", "checkout-bot", "support-agent", "qa-runner", "scraper"}
	benchLanes  = []string{"main", "subagent", "team", "cron"}
	benchKinds  = []string{"search", "form", "checkout", "extract", "login"}
	benchTeams  = []string{"growth", "ops", "billing"}
	benchTiers  = []string{"gold", "standard", "standard", "bronze"}
	benchCodes  = []string{"timeout", "tab_not_found", "navigation_changed", "element_not_found", "instance_fault",
		"lease_expired", "upstream_503", "", "invalid_selector", "restart"}
)

// detailFor returns the details of a record of agent a and lane l whose
// task has sequence number seq.
func detailFor(a, l int, seq uint64, info policy.AgentInfo, code string) benchDetail {
	info.Labels = policy.MakeLabels(map[string]string{"tier": benchTiers[a%len(benchTiers)], "region": []string{"eu-west", "us-east"}[a%2]})
	labels := map[string]string{"kind": benchKinds[seq%uint64(len(benchKinds))], "team": benchTeams[a%len(benchTeams)]}
	if seq%8 == 0 {
		labels["urgent"] = "true"
	}
	if seq%16 == 5 {
		labels["retry"] = "never"
	}
	var session string
	if seq%3 != 2 {
		session = benchAgents[a%len(benchAgents)] + "-session-" + strconv.FormatUint(seq%5, 10)
	}
	return benchDetail{
		agent: benchAgents[a%len(benchAgents)] + "-" + strconv.Itoa(a), lane: benchLanes[l%len(benchLanes)],
		session: session, code: code, labels: policy.MakeLabels(labels), info: info,
	}
}

// agentInfo is what is configured for agent a where the record does not
// say: weights 1 to 3, a ceiling of 10.
func agentInfo(a int) policy.AgentInfo {
	return policy.AgentInfo{Weight: 1 + uint32(a%3), MaxInFlight: 10}
}

func (d benchDetails) at(i int) benchDetail {
	if i < 0 || i >= len(d) {
		return benchDetail{}
	}
	return d[i]
}

// AgentID implements policy.Names.
func (d benchDetails) AgentID(i int) string { return d.at(i).agent }

// LaneName implements policy.Names.
func (d benchDetails) LaneName(i int) string { return d.at(i).lane }

// Session implements policy.Details.
func (d benchDetails) Session(i int) string { return d.at(i).session }

// Labels implements policy.Details.
func (d benchDetails) Labels(i int) policy.Labels { return d.at(i).labels }

// Agent implements policy.Details.
func (d benchDetails) Agent(i int) policy.AgentInfo { return d.at(i).info }

// ErrorCode implements policy.Details.
func (d benchDetails) ErrorCode(i int) string { return d.at(i).code }

// measure times n calls of decide one by one. w, watching the plugin when
// decide asks it, tells which decisions fell back: one that did is counted
// as faulted, by kind, and its time left out.
func measure(n, tasks int, w *faultWatch, decide func()) Latency {
	ds := make([]time.Duration, 0, n)
	var sum time.Duration
	var l Latency
	for range n {
		var d time.Duration
		if w == nil {
			start := time.Now()
			decide()
			d = time.Since(start)
		} else {
			var kind string
			if d, kind = w.run(decide); kind != "" { // not timed
				l.Faults = count(l.Faults, kind)
				l.Faulted++
				continue
			}
		}
		ds = append(ds, d)
		sum += d
	}
	l.Decisions = len(ds)
	if len(ds) == 0 {
		return l
	}
	slices.Sort(ds)
	q := func(f float64) float64 { return float64(ds[int(f*float64(len(ds)-1))].Nanoseconds()) }
	l.MeanNs, l.P50Ns, l.P99Ns = float64(sum.Nanoseconds())/float64(len(ds)), q(0.50), q(0.99)
	if tasks > 0 {
		l.PerTaskNs = l.P50Ns / float64(tasks)
	}
	return l
}
