// Simulate: the replay behind `switchyard plugin simulate`.

package authoring

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/simulate"
)

// SimulateOptions configure Simulate.
type SimulateOptions struct {
	Options
	// Engine is the engine configuration both runs use (lanes, ceilings,
	// agent weights); the zero value means the engine's defaults.
	Engine engine.Config
	// MaxSteps and Horizon bound each run (simulate.Options); 0 means
	// simulate's defaults.
	MaxSteps int
	Horizon  time.Duration
}

// SimulateReport compares a run of the workload under the plugin with a
// run under the built-in policies. It marshals to JSON for tools.
type SimulateReport struct {
	Plugin  *simulate.Report `json:"plugin"`
	Builtin *simulate.Report `json:"builtin"`
	// Slot is the plugin's policy slot (fairness, selection or retry), and
	// Calls the decisions the run under the plugin asked of it. When Calls
	// is 0 the plugin was never asked: both runs made the built-in's
	// decisions, and the report says so.
	Slot  string `json:"slot"`
	Calls uint64 `json:"calls"`
	// Faults and Fallbacks count the plugin's decisions that failed, and
	// those the built-in answered in its place (its faults, a quarantine
	// they began), during its run: the run "under the plugin" holds the
	// built-in's decisions too when Fallbacks is not 0, and its column is
	// then headed FallbackLabel.
	Faults    uint64 `json:"faults"`
	Fallbacks uint64 `json:"fallbacks"`
}

// JainLegend explains Jain's fairness index under its row of the report:
// what it measures, and what 1.0 and the low end mean.
const JainLegend = `  (how evenly the agents with queued work got the dispatches their weights
   entitle them to, (Σx)²/(n·Σx²) over x = received/entitled: 1.000 means
   every such agent got exactly its share; it falls towards 1/n, for n
   agents, as one agent takes the others' shares)
`

// ShareLegend explains the agents' share column under its header: what it
// counts, and why it is often equal under both policies.
const ShareLegend = `  (share: the agent's fraction of all tasks first dispatched, its
   dispatched/all; when every task runs under both policies it is the same
   for both, since it counts tasks, not when they ran: compare the waits)
`

// duration prints a simulated duration rounded to a unit that fits the
// report's 14-character columns: 0.1 s from a minute up, 1 ms from a second
// up, 1 µs from a millisecond up, else as it is.
func duration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Second:
		d = d.Round(time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}

// NeverAsked returns the note the report prints when the plugin was never
// asked for a decision in its run, and "" when it was.
func (r *SimulateReport) NeverAsked() string {
	if r.Calls > 0 {
		return ""
	}
	who, why := "the plugin", "nothing in this workload called for its decision"
	if r.Slot != "" {
		who = "the plugin's " + r.Slot + " policy"
	}
	if r.Slot == "retry" {
		why = "no attempt failed; give the workload failing attempts:\n" +
			"  outcome transient or permanent, code, attempts (plugins/ABI.md)"
	}
	return "NOTE: " + who + " was never asked in this run, so both columns\n" +
		"  are the built-in's decisions: " + why + "\n"
}

// FallbackLabel heads the plugin's column when the built-in answered some
// of its decisions: the column is not the plugin's alone.
const FallbackLabel = "plugin*"

// FellBack returns the warning the report prints first when the built-in
// answered some of the plugin's decisions (and "" when it answered none):
// how many, and that the plugin's column holds them.
func (r *SimulateReport) FellBack() string {
	if r.Fallbacks == 0 {
		return ""
	}
	return fmt.Sprintf("WARNING: the plugin faulted %d %s and the built-in answered %d of the %d\n"+
		"  decisions asked of it in its place (fallback): the %s column is those\n"+
		"  decisions mixed with the plugin's, not the plugin's alone\n",
		r.Faults, plural(r.Faults, "time", "times"), r.Fallbacks, r.Calls, FallbackLabel)
}

// RetryLegend explains the retry rows under their header.
const RetryLegend = `  (attempts: attempts started; retries: failed attempts the retry policy
   retried; parked, failed: tasks that ended so; retry delay: from the
   decision to retry to the task's queueing again)
`

// String renders the comparison for people: per-agent share and waits,
// overall waits and Jain's fairness index, what selection did (waits and
// mean dispatch position by priority and by label) and what the retry
// policy did (attempts, retries, parks and failures, overall and by error
// code), plugin beside built-in; and a note first when the plugin was
// never asked, a warning first when the built-in answered some of its
// decisions (its column then headed FallbackLabel).
func (r *SimulateReport) String() string {
	var b strings.Builder
	b.WriteString(r.NeverAsked())
	b.WriteString(r.FellBack())
	fmt.Fprintf(&b, "%-22s %14s %14s\n", "", r.pluginLabel(), r.Builtin.Name)
	fmt.Fprintf(&b, "%-22s %14.3f %14.3f\n", "Jain's fairness index", r.Plugin.Jain, r.Builtin.Jain)
	b.WriteString(JainLegend)
	fmt.Fprintf(&b, "%-22s %14s %14s\n", "wait p50", duration(r.Plugin.WaitP50), duration(r.Builtin.WaitP50))
	fmt.Fprintf(&b, "%-22s %14s %14s\n", "wait p99", duration(r.Plugin.WaitP99), duration(r.Builtin.WaitP99))
	fmt.Fprintf(&b, "%-22s %14s %14s\n", "makespan", duration(r.Plugin.Makespan), duration(r.Builtin.Makespan))
	builtin := map[string]simulate.AgentReport{}
	for _, a := range r.Builtin.Agents {
		builtin[a.Agent] = a
	}
	fmt.Fprintf(&b, "%-22s %14s %14s %14s %14s\n", "agent", "share", "(built-in)", "wait p99", "(built-in)")
	b.WriteString(ShareLegend)
	for _, a := range r.Plugin.Agents {
		o := builtin[a.Agent]
		fmt.Fprintf(&b, "%-22s %14.3f %14.3f %14s %14s\n", a.Agent, a.Share, o.Share, duration(a.WaitP99), duration(o.WaitP99))
	}
	groups := func(title string, mine, theirs []simulate.GroupReport) {
		if len(mine) == 0 {
			return
		}
		other := map[string]simulate.GroupReport{}
		for _, g := range theirs {
			other[g.Group] = g
		}
		fmt.Fprintf(&b, "%-22s %14s %14s %14s %14s %14s %14s\n", title, "wait p50", "(built-in)", "mean position", "(built-in)", "ran", "(built-in)")
		// A group none of whose tasks ran (they expired, or were
		// cancelled, queued) has no wait and no position: "—", not 0.
		wait := func(g simulate.GroupReport) string {
			if g.Dispatched == 0 {
				return "—"
			}
			return duration(g.WaitP50)
		}
		position := func(g simulate.GroupReport) string {
			if g.Dispatched == 0 {
				return "—"
			}
			return strconv.FormatFloat(g.MeanPosition, 'f', 1, 64)
		}
		ran := func(g simulate.GroupReport) string { return fmt.Sprintf("%d/%d", g.Dispatched, g.Submitted) }
		for _, g := range mine {
			o := other[g.Group]
			fmt.Fprintf(&b, "%-22s %14s %14s %14s %14s %14s %14s\n", g.Group, wait(g), wait(o), position(g), position(o), ran(g), ran(o))
		}
	}
	groups("priority", r.Plugin.ByPriority, r.Builtin.ByPriority)
	groups("label", r.Plugin.ByLabel, r.Builtin.ByLabel)
	r.retries(&b)
	if r.Faults > 0 || r.Fallbacks > 0 {
		fmt.Fprintf(&b, "WARNING: %d faults, %d decisions fell back to the built-in\n", r.Faults, r.Fallbacks)
	}
	return b.String()
}

// pluginLabel heads the plugin's column: its run's name, or FallbackLabel
// when the built-in answered some of its decisions.
func (r *SimulateReport) pluginLabel() string {
	if r.Fallbacks > 0 {
		return FallbackLabel
	}
	return r.Plugin.Name
}

// retries writes the retry rows: the run's figures, then each error code's.
func (r *SimulateReport) retries(b *strings.Builder) {
	mine, theirs := r.Plugin.Retry, r.Builtin.Retry
	count := func(title string, p, o int) { fmt.Fprintf(b, "%-22s %14d %14d\n", title, p, o) }
	fmt.Fprintf(b, "%-22s %14s %14s\n", "retry", r.pluginLabel(), r.Builtin.Name)
	b.WriteString(RetryLegend)
	count("attempts", mine.Attempts, theirs.Attempts)
	count("failed attempts", mine.Failures, theirs.Failures)
	count("retries", mine.Retries, theirs.Retries)
	count("tasks parked", mine.Parked, theirs.Parked)
	count("tasks failed", mine.Failed, theirs.Failed)
	fmt.Fprintf(b, "%-22s %14.2f %14.2f\n", "attempts per task", mine.MeanAttempts, theirs.MeanAttempts)
	fmt.Fprintf(b, "%-22s %14s %14s\n", "mean retry delay", duration(mine.MeanDelay), duration(theirs.MeanDelay))
	codes := map[string][2]simulate.CodeReport{}
	for _, c := range mine.ByCode {
		v := codes[c.Code]
		v[0] = c
		codes[c.Code] = v
	}
	for _, c := range theirs.ByCode {
		v := codes[c.Code]
		v[1] = c
		codes[c.Code] = v
	}
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		p, o := codes[code][0], codes[code][1]
		if code == "" {
			code = "(none)"
		}
		fmt.Fprintf(b, "%-22s %14s %14s\n", "code "+code, r.pluginLabel(), r.Builtin.Name)
		count("  failed attempts", p.Failures, o.Failures)
		count("  retries", p.Retries, o.Retries)
		count("  then parked", p.Parked, o.Parked)
		count("  then failed", p.Failed, o.Failed)
		fmt.Fprintf(b, "%-22s %14.2f %14.2f\n", "  attempts per task", p.MeanAttempts, o.MeanAttempts)
		fmt.Fprintf(b, "%-22s %14s %14s\n", "  mean retry delay", duration(p.MeanDelay), duration(o.MeanDelay))
	}
}

// Simulate replays workload through the engine on a fake clock twice: with
// the plugin in its slot (for every lane), and with the built-in policies.
// The workload is a list of timed submissions (simulate.ReadWorkload reads
// one from JSON Lines; simulate.Generate makes a synthetic one).
func Simulate(ctx context.Context, wasm []byte, workload []simulate.Submission, opts SimulateOptions) (*SimulateReport, error) {
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
	before := s.plugin.Stats() // the load's smoke decision is not the run's
	run := simulate.Options{Config: opts.Engine, Name: "plugin", Fairness: s.fairness, Selection: s.selection, Retry: s.retry,
		MaxSteps: opts.MaxSteps, Horizon: opts.Horizon}
	plugin, err := simulate.Run(ctx, workload, run)
	if err != nil {
		return nil, fmt.Errorf("simulate under the plugin: %w", err)
	}
	builtin, err := simulate.Run(ctx, workload, simulate.Options{Config: opts.Engine, Name: "built-in",
		MaxSteps: opts.MaxSteps, Horizon: opts.Horizon})
	if err != nil {
		return nil, fmt.Errorf("simulate under the built-in: %w", err)
	}
	st := s.plugin.Stats()
	return &SimulateReport{Plugin: plugin, Builtin: builtin, Slot: s.plugin.Slot().String(), Calls: st.Calls - before.Calls,
		Faults: st.FaultTotal() - before.FaultTotal(), Fallbacks: st.Fallbacks - before.Fallbacks}, nil
}
