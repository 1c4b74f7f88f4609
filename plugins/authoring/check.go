// Check: the conformance suite behind `switchyard plugin check`.

package authoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/sdk/schema"
)

// Names of the checks, in the order Check runs them.
const (
	CheckABI           = "abi"           // loads: exports, imports, ABI version, configuration, a smoke decision
	CheckDeterministic = "deterministic" // two fresh instances answer a sequence of inputs identically
	CheckInRange       = "in-range"      // varied input: no answer out of range, no trap, no refusal
	CheckEmpty         = "empty"         // no candidates or tasks, or no slots
	CheckLarge         = "large"         // as many candidates as the server offers (8 and 64 slots), or 1,000 tasks
	CheckConfig        = "config"        // the configuration is accepted again, and a broken one refused
	CheckHolds         = "holds"         // fairness only: a module that answers hold declares HOLDS
	CheckDryRun        = "dry-run"       // fairness only: a DRY_RUN decision (a plan's preview) answers as the real one, without faulting
	CheckBudget        = "budget"        // retry only: no retry answered at or past the attempt budget
	CheckSize          = "size"          // the module is no larger than the server takes (plugins.maxWasmBytes)
)

// CheckReport is what Check found. It marshals to JSON for tools.
type CheckReport struct {
	Slot      string `json:"slot,omitempty"` // selection, fairness or retry
	Stateless bool   `json:"stateless"`
	// Flags are the module's policy_flags the host acts on, as the ABI
	// names them: STATELESS, NAMES, HOLDS, DETAILS (see host.Plugin.Flags);
	// absent for none.
	Flags  []string      `json:"flags,omitempty"`
	Hash   string        `json:"sha256,omitempty"`
	Passed bool          `json:"passed"` // every check passed
	Checks []CheckResult `json:"checks"`
	// Decided says whether the module loaded and made decisions: false
	// when it failed to load, or refused the configuration given to the
	// checks (then only that failure is reported, and no fuel).
	Decided bool `json:"decided"`
	// FuelMax is the most fuel one decision burnt during the checks, and
	// SetupFuel the most that instantiation or a configure call did (see
	// host.Config.DecisionFuel); both absent when no decision was made.
	FuelMax   uint64 `json:"fuelMax,omitempty"`
	SetupFuel uint64 `json:"setupFuel,omitempty"`
	// ConfigSchema is the configuration schema the module declares (ABI
	// v2), absent when it declares none. The configuration given to the
	// checks (Options.Config) was checked against it at load.
	ConfigSchema json.RawMessage `json:"configSchema,omitempty"`

	// smokeFaulted says that the configuration was refused because the
	// module's smoke decision faults under it: one decision was made.
	smokeFaulted bool
}

// CheckResult is one check's outcome.
type CheckResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"` // why it failed, or what it covered
}

// String renders the report for people, one line per check.
func (r *CheckReport) String() string {
	var b strings.Builder
	verdict := "FAIL"
	if r.Passed {
		verdict = "ok"
	}
	switch {
	case r.Decided:
		flags := "none"
		if len(r.Flags) > 0 {
			flags = strings.Join(r.Flags, ", ")
		}
		fmt.Fprintf(&b, "%s  %s plugin (policy_flags: %s), fuel per decision up to %d, setup %d\n", verdict, r.Slot, flags, r.FuelMax, r.SetupFuel)
	case r.Slot != "" && r.smokeFaulted:
		fmt.Fprintf(&b, "%s  %s plugin, not checked: its smoke decision faults under the configuration\n", verdict, r.Slot)
	case r.Slot != "":
		fmt.Fprintf(&b, "%s  %s plugin, no decision made: it refused the configuration\n", verdict, r.Slot)
	default:
		fmt.Fprintf(&b, "%s  the module did not load, no decision made\n", verdict)
	}
	if len(r.ConfigSchema) > 0 {
		fmt.Fprintf(&b, "  configuration schema: %s\n", r.ConfigSchema)
	}
	for _, c := range r.Checks {
		mark := "FAIL"
		if c.Passed {
			mark = "ok"
		}
		fmt.Fprintf(&b, "  %-4s %-13s %s\n", mark, c.Name, c.Detail)
	}
	return b.String()
}

// Check loads wasm and runs the conformance suite on it. Failed checks are
// in the report; the error is for what stopped the checks from running
// (a cancelled context, no runtime).
func Check(ctx context.Context, wasm []byte, opts Options) (*CheckReport, error) {
	rep := &CheckReport{}
	rec := &faultLog{}
	rt, done, err := opts.runtime(rec.add)
	if err != nil {
		return nil, err
	}
	defer done()

	add := func(name string, err error, covered string) {
		r := CheckResult{Name: name, Passed: err == nil, Detail: covered}
		if err != nil {
			r.Detail = err.Error()
		}
		rep.Checks = append(rep.Checks, r)
	}
	sizeCovered, sizeErr := size(len(wasm), opts.maxWasmBytes())
	a, err := load(ctx, rt, opts.name(), wasm, opts.Config)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var cr *ConfigRefusal
		if errors.As(err, &cr) {
			rep = cr.Report
		} else {
			add(CheckABI, err, "")
		}
		if sizeErr != nil { // what else the server would refuse it for
			add(CheckSize, sizeErr, "")
		}
		return rep, nil
	}
	rep.Decided = true
	defer a.plugin.Close(context.Background())
	p := a.plugin
	rep.Slot, rep.Stateless, rep.Flags, rep.Hash = p.Slot().String(), p.Stateless(), p.Flags(), p.Hash()
	add(CheckABI, nil, fmt.Sprintf("a %s policy, ABI version %d", p.Slot(), p.Version()))
	if text := p.ConfigSchema(); text != nil {
		rep.ConfigSchema = text
	}

	// A name of its own: the fault log is kept by name.
	b, err := load(ctx, rt, opts.name()+" (second instance)", wasm, opts.Config)
	if err != nil {
		return nil, fmt.Errorf("check: a second instance: %w", err)
	}
	defer b.plugin.Close(context.Background())
	add(CheckDeterministic, deterministic(a, b), "a sequence of 100 varied decisions, twice")

	step := func(name string, covered string, run func(s *subject)) {
		if ctx.Err() != nil {
			return
		}
		before := a.plugin.Stats()
		run(a)
		add(name, faultsSince(a.plugin, before, rec), covered)
	}
	step(CheckInRange, "300 decisions over varied input", func(s *subject) { varied(s, 300, 7) })
	step(CheckEmpty, "no candidates or tasks; no slots", empty)
	step(CheckLarge, largeCovered(a, opts.candidates()), func(s *subject) { large(s, opts.candidates()) })
	if a.fairness != nil && ctx.Err() == nil {
		before := a.plugin.Stats()
		covered, err := holds(a)
		if err == nil {
			err = faultsSince(a.plugin, before, rec)
		}
		add(CheckHolds, err, covered)
		if ctx.Err() == nil {
			covered, err := dryRun(b)
			add(CheckDryRun, err, covered)
		}
	}
	if a.retry != nil && ctx.Err() == nil {
		before := a.plugin.Stats()
		covered, err := budget(a)
		if err == nil {
			err = faultsSince(a.plugin, before, rec)
		}
		add(CheckBudget, err, covered)
	}
	if ctx.Err() == nil {
		add(CheckConfig, config(ctx, a, opts.Config, rec), "the same document again; a broken one")
	}
	add(CheckSize, sizeErr, sizeCovered)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	st := a.plugin.Stats()
	rep.FuelMax, rep.SetupFuel = st.FuelMax, st.SetupFuelMax
	rep.Passed = !slices.ContainsFunc(rep.Checks, func(c CheckResult) bool { return !c.Passed })
	return rep, nil
}

// ConfigRefusal is the error of Check's load, Bench and Simulate when the
// module loaded as far as its configuration (Options.Config) and refused
// it, by its schema or its configure, or faulted in its smoke decision
// under it but not under none. Report is what Check reports for
// it, and so what each of them shows: the module's slot and schema, and
// a failed config check that names the field the schema refused. No
// decision was made, so there is no fuel to report.
type ConfigRefusal struct {
	Report *CheckReport
	Err    *host.ConfigError
}

func (e *ConfigRefusal) Error() string { return e.Err.Error() }

// Unwrap returns the host's error.
func (e *ConfigRefusal) Unwrap() error { return e.Err }

// configRefused returns err as a *ConfigRefusal when it is a configuration
// refused at load (a *host.ConfigError), else err unchanged.
func configRefused(err error) error {
	var ce *host.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	var sm *host.SmokeError
	rep := &CheckReport{Slot: ce.Slot.String(), Stateless: ce.Stateless, ConfigSchema: ce.Schema, smokeFaulted: errors.As(ce.Err, &sm)}
	rep.Checks = append(rep.Checks, CheckResult{Name: CheckConfig, Detail: configRefusal(ce)})
	return &ConfigRefusal{Report: rep, Err: ce}
}

// configRefusal says why the configuration given to the tools was
// refused, naming the field when the schema refused it.
func configRefusal(ce *host.ConfigError) string {
	var se *schema.Error
	if errors.As(ce.Err, &se) {
		return fmt.Sprintf("the configuration does not satisfy the module's schema: %s: %s; the checks, the bench and the simulation need a configuration the module accepts", se.Path, se.Msg)
	}
	var sm *host.SmokeError
	if errors.As(ce.Err, &sm) {
		return fmt.Sprintf("the module's smoke decision faults under the configuration (%s: %s), not under none; the checks, the bench and the simulation need a configuration the module decides under", sm.Kind, sm.Reason)
	}
	var cf *host.ConfigureFault
	if errors.As(ce.Err, &cf) {
		return fmt.Sprintf("the module's configure faults under the configuration (%s: %s), not under none; the checks, the bench and the simulation need a configuration the module accepts", cf.Kind, cf.Reason)
	}
	return fmt.Sprintf("the module refused the configuration: %v; the checks, the bench and the simulation need a configuration the module accepts", ce.Err)
}

// faultLog keeps the latest fault reason per plugin, when Check owns the
// runtime and so sees its events.
type faultLog struct {
	mu   sync.Mutex
	last map[string]string
}

func (l *faultLog) add(e host.Event) {
	if e.Kind != host.EventFault {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]string{}
	}
	l.last[e.Plugin] = e.Fault.String() + ": " + e.Reason
}

func (l *faultLog) reason(plugin string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[plugin]
}

// faultsSince returns an error describing the faults and fallbacks of p
// since before, or nil.
func faultsSince(p *host.Plugin, before host.Stats, rec *faultLog) error {
	st := p.Stats()
	fallbacks := st.Fallbacks - before.Fallbacks
	if fallbacks == 0 {
		return nil
	}
	var kinds []string
	for k, n := range st.Faults {
		if d := n - before.Faults[k]; d > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, d))
		}
	}
	sort.Strings(kinds)
	msg := fmt.Sprintf("%d %s fell back to the built-in", fallbacks, plural(fallbacks, "decision", "decisions"))
	if len(kinds) > 0 {
		msg += " (faults: " + strings.Join(kinds, ", ") + ")"
	}
	switch st.State {
	case host.StateQuarantined:
		msg += "; the breaker quarantined the plugin: " + st.Reason
	case host.StateDisabled:
		msg += "; the plugin is disabled: " + st.Reason
	}
	if r := rec.reason(p.Name()); r != "" {
		msg += "; last fault: " + r
	}
	return errors.New(msg)
}

// plural returns one for a count of 1, else many.
func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// holdChecks is how many varied decisions, and how many over a single
// candidate, the holds check makes.
const holdChecks, holdSingles = 300, 50

// holds makes fairness decisions over varied input and over a single
// candidate, and counts the holds. A module that answers hold must say so
// in its policy_flags (HOLDS): the engine does not ask a STATELESS policy
// that has not said so about a lone candidate, and dispatches it instead,
// so a forgotten flag lets through exactly the task a hold was for.
func holds(s *subject) (string, error) {
	var held, single int
	lo, hi := int64(-1), int64(-1)
	note := func(hint int64) {
		if lo < 0 || hint < lo {
			lo = hint
		}
		hi = max(hi, hint)
	}
	answers := varied(s, holdChecks, 11)
	for i := 0; i < len(answers); i++ {
		if answers[i] == -2 { // a hold and its hint (see varied)
			held++
			note(answers[i+1])
			i++
		}
	}
	picks := make([]uint32, 1)
	for k := range uint64(holdSingles) {
		m := s.fairness.Pick(policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: 1, Names: SyntheticNames{}, Details: SyntheticNames{}}, host.SyntheticCandidates(1, k), picks)
		if hint, ok := policy.HoldHint(m); ok {
			single++
			note(hint)
		}
	}
	p := s.plugin
	declared := slices.Contains(p.Flags(), "HOLDS")
	if held+single == 0 {
		if declared {
			return fmt.Sprintf("declares HOLDS; held none of %d decisions over varied input, nor any of %d over one candidate (a hold that depends on names, the configuration or the time is not exercised here)", holdChecks, holdSingles), nil
		}
		return fmt.Sprintf("held none of %d decisions over varied input, nor any of %d over one candidate", holdChecks, holdSingles), nil
	}
	what := fmt.Sprintf("held %d of %d decisions over varied input and %d of %d over one candidate (hints %d–%d ms)", held, holdChecks, single, holdSingles, lo, hi)
	switch {
	case declared:
		return what, nil
	case p.Stateless():
		return "", fmt.Errorf("%s, yet does not declare HOLDS in policy_flags: the engine does not ask a STATELESS policy that has not declared it about a single candidate, and dispatches that candidate instead of holding it; register with sdk.Holds (Go), or set bit 2 of policy_flags", what)
	default:
		return what + "; HOLDS is not declared (a stateful policy is asked about a single candidate anyway): declare it with sdk.Holds to say so", nil
	}
}

// size checks a module of n bytes against the largest a server takes,
// limit (plugins.maxWasmBytes): the host loads a larger one here, but a
// server refuses it (LIMIT on input.wasmBase64, and a REFUSED event).
func size(n, limit int) (string, error) {
	if n > limit {
		return "", fmt.Errorf("the module is %d bytes; a server refuses modules over plugins.maxWasmBytes, %d here (--max-wasm-bytes: your server's): make it smaller (strip debug sections, build with optimisation) or raise the server's limit", n, limit)
	}
	return fmt.Sprintf("%d bytes, within plugins.maxWasmBytes (%d here; --max-wasm-bytes: your server's)", n, limit), nil
}

// budgetChecks is how many failures at or past their attempt budget the
// budget check decides on.
const budgetChecks = 60

// budget decides on failures whose attempt is the last of their budget
// (attempt = max_attempts, budgets of 1 to 5) or past it (a budget lowered
// since), transient and otherwise, and counts the retries. The budget is
// the engine's: it starts no attempt past max_attempts, whatever the
// policy answers, and parks or fails the task instead (its exhausted
// setting). A module that answers retry there asks for what it will not
// get — retry_decide ignoring max_attempts, as a policy that retries
// forever does — so its author learns here, not from tasks parked in
// production with "the policy asked for another".
func budget(s *subject) (string, error) {
	fs := failures(budgetChecks)
	var retried int
	var first *policy.Failure
	for i := range fs {
		f := &fs[i]
		f.MaxAttempts = uint16(1 + i%5)
		f.Attempt = f.MaxAttempts + uint16(i%3/2) // every third past it
		if f.Attempt > 1 {
			f.PrevDelayMs = 1000 << (f.Attempt - 2)
		}
		if decide(s.retry, *f).Action == policy.ActionRetry {
			retried++
			if first == nil {
				first = f
			}
		}
	}
	if retried == 0 {
		return fmt.Sprintf("none of %d failures at or past their attempt budget retried", budgetChecks), nil
	}
	return "", fmt.Errorf("retried %d of %d failures at or past their attempt budget (the first at attempt %d of max_attempts %d): the engine starts no attempt past max_attempts and parks or fails the task instead, as its exhausted setting says; answer park (2) or fail (3) when attempt ≥ max_attempts",
		retried, budgetChecks, first.Attempt, first.MaxAttempts)
}

// dryRunChecks is how many varied fairness decisions the dry-run check
// makes, each twice.
const dryRunChecks = 100

// dryRun makes varied fairness decisions twice each on one instance: first
// with DRY_RUN, as a plan's preview asks, then for real. The answers must
// be the same — a preview answers as the decision would and changes none
// of the module's state — and a preview must not fault: the engine counts
// a preview's fault apart, not against the breaker, and previews in its
// native order instead, so the plan would show what dispatch does not do.
func dryRun(s *subject) (string, error) {
	w, ok := s.fairness.(policy.ExplainedFairness)
	if !ok {
		return "", errors.New("no explained fairness wrapper")
	}
	for i := range dryRunChecks {
		k := uint64(i) + 5
		cands := host.SyntheticCandidates(1+int(k*7%90), k)
		slots := 1 + int(k*5%17)
		ctx := policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: uint32(slots), Names: SyntheticNames{}, Details: SyntheticNames{},
			Flags: policy.PickDryRun}
		dry, live := make([]uint32, slots), make([]uint32, slots)
		n, why := w.PickExplained(ctx, cands, dry)
		if why != "" {
			return "", fmt.Errorf("decision %d of %d with DRY_RUN (a plan's preview) fell back to the built-in: %s; a plan would show the built-in's order, not the module's (the server counts such a fault in dryRunFaults, not against the breaker)",
				i+1, dryRunChecks, why)
		}
		ctx.Flags = 0
		m, why := w.PickExplained(ctx, cands, live)
		if why != "" {
			return "", fmt.Errorf("decision %d of %d fell back to the built-in for real, after it was made with DRY_RUN: %s", i+1, dryRunChecks, why)
		}
		if a, b := answer(n, dry), answer(m, live); a != b {
			return "", fmt.Errorf("decision %d of %d answered %s with DRY_RUN and %s for real: a preview must answer as the real decision would, and change none of the module's state",
				i+1, dryRunChecks, a, b)
		}
	}
	return fmt.Sprintf("%d varied decisions with DRY_RUN, each then made for real: the same answers, no fault", dryRunChecks), nil
}

// answer renders a fairness answer: its picks, or a hold.
func answer(n int, picks []uint32) string {
	if hint, held := policy.HoldHint(n); held {
		return fmt.Sprintf("hold (hint %d ms)", hint)
	}
	return fmt.Sprint(picks[:n])
}

// varied makes n decisions over varied synthetic input (seeded); for
// fairness the slots vary too. It returns the answers, flattened.
func varied(s *subject, n int, seed uint64) []int64 {
	var out []int64
	fs := failures(n)
	for i := range n {
		k := uint64(i) + seed
		switch {
		case s.fairness != nil:
			cands := host.SyntheticCandidates(1+int(k*7%90), k)
			slots := 1 + int(k*5%17)
			picks := make([]uint32, slots)
			m := s.fairness.Pick(policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: uint32(slots), Names: SyntheticNames{}, Details: SyntheticNames{}}, cands, picks)
			if hint, held := policy.HoldHint(m); held { // a hold is an answer too
				out = append(out, -2, hint)
				continue
			}
			for _, p := range picks[:m] {
				out = append(out, int64(p))
			}
			out = append(out, -1)
		case s.selection != nil:
			tasks := host.SyntheticTasks(1+int(k*13%120), k)
			ranks := make([]int64, len(tasks))
			rank(s.selection, tasks, ranks)
			out = append(out, ranks...)
		case s.retry != nil:
			d := decide(s.retry, fs[i])
			out = append(out, int64(d.Action), d.DelayMs)
		}
	}
	return out
}

func deterministic(a, b *subject) error {
	before := a.plugin.Stats()
	x, y := varied(a, 100, 1), varied(b, 100, 1)
	if err := faultsSince(a.plugin, before, &faultLog{}); err != nil {
		return fmt.Errorf("cannot compare answers: %w", err)
	}
	if i := firstDiff(x, y); i >= 0 {
		return fmt.Errorf("two fresh instances answered the same input differently (first difference at answer %d: %d vs %d)", i, x[i], y[i])
	}
	if a.plugin.Stateless() { // the same input twice, on one instance
		if x, y := varied(a, 20, 3), varied(a, 20, 3); firstDiff(x, y) >= 0 {
			return errors.New("declared stateless, yet answered the same input differently the second time")
		}
	}
	return nil
}

func firstDiff(x, y []int64) int {
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return i
		}
	}
	if len(x) != len(y) {
		return min(len(x), len(y))
	}
	return -1
}

func empty(s *subject) {
	switch {
	case s.fairness != nil:
		ctx := policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: 4, Names: SyntheticNames{}, Details: SyntheticNames{}}
		s.fairness.Pick(ctx, nil, make([]uint32, 4))
		ctx.Slots = 0
		s.fairness.Pick(ctx, host.SyntheticCandidates(8, 1), nil)
	case s.selection != nil:
		rank(s.selection, nil, nil)
	case s.retry != nil: // a failure record is never empty
		decide(s.retry, policy.Failure{Attempt: 1, MaxAttempts: 1, Class: policy.ClassTransient})
	}
}

// largeCovered says what the large check covers for s.
func largeCovered(s *subject, candidates int) string {
	switch {
	case s.fairness != nil:
		return fmt.Sprintf("%d candidates (engine.fairnessCandidates) with 8 and 64 slots, and with room for all 64 picks", candidates)
	case s.selection != nil:
		return "1,000 tasks"
	}
	return "50 failures at attempt 1,000"
}

// large decides over the largest inputs a server gives: for a fairness
// policy, as many candidates as engine.fairnessCandidates lets through,
// under ceilings that end the picks early and, as plugin bench decides,
// with room for every pick (a policy's costliest decision is often the
// one that makes all its picks).
func large(s *subject, candidates int) {
	switch {
	case s.fairness != nil:
		cands := host.SyntheticCandidates(candidates, 9)
		ctx := policy.PickContext{NowMs: 1_700_000_000_000, AgingMs: 30_000, Slots: 8, Names: SyntheticNames{}, Details: SyntheticNames{}}
		s.fairness.Pick(ctx, cands, make([]uint32, 8))
		ctx.Slots = 64
		s.fairness.Pick(ctx, cands, make([]uint32, 64))
		roomy(cands)
		s.fairness.Pick(ctx, cands, make([]uint32, 64))
	case s.selection != nil:
		tasks := host.SyntheticTasks(1000, 9)
		rank(s.selection, tasks, make([]int64, len(tasks)))
	case s.retry != nil:
		for _, f := range failures(50) {
			f.Attempt, f.MaxAttempts = 1000, 1000
			decide(s.retry, f)
		}
	}
}

// roomy gives every candidate room for every pick of a decision: the
// decision's own cost, not the ceilings', decides how long it takes.
func roomy(cands []policy.Candidate) {
	for i := range cands {
		cands[i].AgentLimit, cands[i].LaneLimit, cands[i].QueueLen = 1000, 10_000, 100
	}
}

// rank ranks tasks with p, with synthetic details when p reads them (ABI
// v2): the checks exercise a module with the table it asked for.
func rank(p policy.Selection, tasks []policy.Task, ranks []int64) {
	rankWith(p, policy.RankContext{NowMs: 1_700_000_000_000, Details: SyntheticNames{}}, tasks, ranks)
}

// decide decides on f with p, with synthetic details when p reads them.
func decide(p policy.Retry, f policy.Failure) policy.Decision {
	return decideWith(p, policy.RetryContext{Details: SyntheticNames{}}, f)
}

func config(ctx context.Context, s *subject, doc []byte, rec *faultLog) error {
	p := s.plugin
	if err := p.Configure(ctx, doc); err != nil {
		return fmt.Errorf("the document it was loaded with, passed again, was refused: %w", err)
	}
	if string(p.Config()) != string(doc) {
		return errors.New("the configuration read back differs from the one passed")
	}
	if err := p.Configure(ctx, []byte(`{"switchyard-check": [`)); err == nil {
		return errors.New("a broken JSON document was accepted")
	}
	before := p.Stats()
	varied(s, 20, 11)
	if err := faultsSince(p, before, rec); err != nil {
		return fmt.Errorf("after refusing a broken document: %w", err)
	}
	return nil
}

// SyntheticNames names the synthetic records of the checks (ABI v2's names
// and details tables): agent-N and lane-N by record index, a few agents
// and lanes over many records, sessions session-N (none for every fourth
// record), task labels kind=search or kind=form, agent labels tier=gold
// for every third agent, weights 1 to 3, ceilings of 10, and the error
// code timeout. The bench sends details of its own, consistent with its
// records (benchDetails).
type SyntheticNames struct{}

var (
	syntheticKinds = [2]policy.Labels{policy.MakeLabels(map[string]string{"kind": "search"}), policy.MakeLabels(map[string]string{"kind": "form"})}
	syntheticTiers = [2]policy.Labels{policy.MakeLabels(map[string]string{"tier": "gold"}), policy.MakeLabels(map[string]string{"tier": "standard"})}
)

// Session implements policy.Details.
func (SyntheticNames) Session(i int) string {
	if i%4 == 3 {
		return ""
	}
	return "session-" + strconv.Itoa(i%5)
}

// Labels implements policy.Details.
func (SyntheticNames) Labels(i int) policy.Labels { return syntheticKinds[i&1] }

// Agent implements policy.Details.
func (SyntheticNames) Agent(i int) policy.AgentInfo {
	tier := syntheticTiers[1]
	if (i%7)%3 == 0 {
		tier = syntheticTiers[0]
	}
	return policy.AgentInfo{Weight: 1 + uint32(i%7%3), MaxInFlight: 10, Labels: tier}
}

// ErrorCode implements policy.Details.
func (SyntheticNames) ErrorCode(int) string { return "timeout" }

// AgentID implements policy.Names.
func (SyntheticNames) AgentID(cand int) string { return "agent-" + strconv.Itoa(cand%7) }

// LaneName implements policy.Names.
func (SyntheticNames) LaneName(cand int) string { return "lane-" + strconv.Itoa(cand%3) }
