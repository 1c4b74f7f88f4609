// Package simulate replays a workload — a list of timed submissions, each
// with how long its attempt takes and how it ends — through the engine's
// decision core (engine.Core: the engine's own decisions, without its store,
// committer or goroutines) on a fake clock, and reports what a policy did
// with it: each agent's share of dispatches, queue-wait percentiles,
// Jain's fairness index, and what the retry policy did with the failed
// attempts (Report.Retry). Policy
// authors use it (switchyard plugin simulate) to compare a plugin with the
// built-in policies offline, in milliseconds, before loading it into a server.
package simulate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/pull"
)

// Submission is one line of a workload.
type Submission struct {
	At       time.Duration // since the start of the simulation
	Agent    string
	Lane     string
	Session  string
	Priority engine.Priority
	Deadline time.Duration // relative to At; 0 for none
	Duration time.Duration // how long each attempt runs
	// Outcome of each attempt: "ok" (default), "transient" or "permanent".
	Outcome string
	// Code is the error code of each failing attempt (Outcome transient or
	// permanent), as an executor reports it (engine.Outcome.Code) and a
	// retry policy reads it (policy.Details.ErrorCode); empty for none.
	Code string
	// Attempts, when given, are the outcomes of the first attempts in
	// order; attempts past them end as Outcome and Code say.
	Attempts []AttemptOutcome
	// Labels are the task's labels, reported on by Report.ByLabel.
	Labels map[string]string
}

// AttemptOutcome is how one attempt of a submission ends.
type AttemptOutcome struct {
	Outcome string `json:"outcome,omitempty"` // "ok" (default), "transient" or "permanent"
	Code    string `json:"code,omitempty"`    // the failing attempt's error code
}

// MaxAttempts bounds a workload line's attempts list.
const MaxAttempts = 64

// outcome returns how attempt n (from 1) of s ends.
func (s *Submission) outcome(n int) AttemptOutcome {
	if n >= 1 && n <= len(s.Attempts) {
		return s.Attempts[n-1]
	}
	return AttemptOutcome{Outcome: s.Outcome, Code: s.Code}
}

// check refuses an outcome that is not one, and a code that is not valid
// (pull.ValidCode: what a pull worker may give) or that is given for an
// attempt that does not fail.
func (o AttemptOutcome) check() error {
	switch o.Outcome {
	case "", "ok", "transient", "permanent":
	default:
		return fmt.Errorf("outcome must be ok, transient or permanent, got %q", o.Outcome)
	}
	if o.Code == "" {
		return nil
	}
	if err := pull.ValidCode(o.Code); err != nil {
		return fmt.Errorf("code %q: %w", o.Code, err)
	}
	if o.Outcome == "" || o.Outcome == "ok" {
		return fmt.Errorf("code %q is given for an attempt that succeeds: a code needs outcome transient or permanent", o.Code)
	}
	return nil
}

// line is the JSON form of a Submission: durations in milliseconds.
type line struct {
	AtMs       float64 `json:"atMs"`
	Agent      string  `json:"agent"`
	Lane       string  `json:"lane,omitempty"`
	Session    string  `json:"session,omitempty"`
	Priority   string  `json:"priority,omitempty"`
	DeadlineMs float64 `json:"deadlineMs,omitempty"`
	DurationMs float64 `json:"durationMs"`
	Outcome    string  `json:"outcome,omitempty"`
	Code       string  `json:"code,omitempty"`
	// Attempts are the first attempts' outcomes, in order.
	Attempts []AttemptOutcome `json:"attempts,omitempty"`
	// Labels are the task's labels (string values).
	Labels map[string]string `json:"labels,omitempty"`
}

var priorities = map[string]engine.Priority{
	"CRITICAL": engine.PriorityCritical, "HIGH": engine.PriorityHigh, "NORMAL": engine.PriorityNormal, "LOW": engine.PriorityLow, "": engine.PriorityNormal,
}

// ReadWorkload reads a workload in JSON Lines: one object per line with
// atMs, agent, durationMs and optionally lane, session, priority
// (CRITICAL/HIGH/NORMAL/LOW), deadlineMs, outcome (ok/transient/permanent),
// code (the failing attempts' error code), attempts (the first attempts'
// own outcome and code, in order) and labels. Unknown fields are refused.
// Blank lines and lines starting with # are skipped.
func ReadWorkload(r io.Reader) ([]Submission, error) {
	var out []Submission
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var l line
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			return nil, fmt.Errorf("workload line %d: %w", n, err)
		}
		p, ok := priorities[strings.ToUpper(l.Priority)]
		switch {
		case l.Agent == "":
			return nil, fmt.Errorf("workload line %d: agent is required", n)
		case !ok:
			return nil, fmt.Errorf("workload line %d: unknown priority %q", n, l.Priority)
		case l.AtMs < 0 || l.DurationMs < 0 || l.DeadlineMs < 0:
			return nil, fmt.Errorf("workload line %d: times must not be negative", n)
		case len(l.Attempts) > MaxAttempts:
			return nil, fmt.Errorf("workload line %d: attempts lists at most %d attempts, got %d", n, MaxAttempts, len(l.Attempts))
		}
		if err := (AttemptOutcome{Outcome: l.Outcome, Code: l.Code}).check(); err != nil {
			return nil, fmt.Errorf("workload line %d: %w", n, err)
		}
		for i, a := range l.Attempts {
			if err := a.check(); err != nil {
				return nil, fmt.Errorf("workload line %d: attempts[%d]: %w", n, i, err)
			}
		}
		out = append(out, Submission{
			At: ms(l.AtMs), Agent: l.Agent, Lane: l.Lane, Session: l.Session, Priority: p,
			Deadline: ms(l.DeadlineMs), Duration: ms(l.DurationMs), Outcome: l.Outcome, Code: l.Code, Attempts: l.Attempts, Labels: l.Labels,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading workload: %w", err)
	}
	slices.SortStableFunc(out, func(a, b Submission) int { return int(a.At - b.At) })
	return out, nil
}

// WriteWorkload writes a workload in the form ReadWorkload reads.
func WriteWorkload(w io.Writer, subs []Submission) error {
	enc := json.NewEncoder(w)
	for _, s := range subs {
		l := line{AtMs: toMs(s.At), Agent: s.Agent, Lane: s.Lane, Session: s.Session, DeadlineMs: toMs(s.Deadline),
			DurationMs: toMs(s.Duration), Outcome: s.Outcome, Code: s.Code, Attempts: s.Attempts, Labels: s.Labels}
		if s.Priority != engine.PriorityNormal {
			for name, p := range priorities {
				if p == s.Priority && name != "" {
					l.Priority = name
				}
			}
		}
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func toMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Synthetic describes a generated workload: agents submitting at different
// rates, the classic test of a fairness policy (a noisy neighbour next to
// quiet ones).
type Synthetic struct {
	Agents   int           // number of agents (default 4)
	Tasks    int           // total submissions (default 1000)
	Span     time.Duration // submissions spread over this long (default 10 s)
	Duration time.Duration // mean attempt duration (default 200 ms)
	// Skew makes agent 0 submit this many times more than each other agent
	// (default 1: all alike).
	Skew int
	Seed uint64
}

// Generate makes a synthetic workload.
func Generate(s Synthetic) []Submission {
	if s.Agents <= 0 {
		s.Agents = 4
	}
	if s.Tasks <= 0 {
		s.Tasks = 1000
	}
	if s.Span <= 0 {
		s.Span = 10 * time.Second
	}
	if s.Duration <= 0 {
		s.Duration = 200 * time.Millisecond
	}
	if s.Skew <= 0 {
		s.Skew = 1
	}
	r := rand.New(rand.NewPCG(s.Seed, 0x5eed))
	weights := s.Agents - 1 + s.Skew
	out := make([]Submission, s.Tasks)
	for i := range out {
		k := r.IntN(weights)
		agent := 0
		if k >= s.Skew {
			agent = k - s.Skew + 1
		}
		out[i] = Submission{
			At:       time.Duration(r.Int64N(int64(s.Span))),
			Agent:    fmt.Sprintf("agent-%d", agent),
			Priority: engine.Priority(r.IntN(4)),
			Duration: time.Duration(r.ExpFloat64() * float64(s.Duration)),
		}
	}
	slices.SortStableFunc(out, func(a, b Submission) int { return int(a.At - b.At) })
	return out
}

// Options choose the engine configuration and the policies under test; nil
// policies mean the built-ins.
type Options struct {
	Config    engine.Config
	Fairness  policy.Fairness
	Selection policy.Selection
	Retry     policy.Retry
	// Name labels the policies in the report.
	Name string
	// MaxSteps bounds the scheduled calls (attempt ends, retries, timers)
	// the replay runs; past it Run fails with ErrLimit. 0 means
	// DefaultMaxSteps.
	MaxSteps int
	// Horizon bounds the simulated time after the last submission; past it
	// Run fails with ErrLimit. 0 means DefaultHorizon.
	Horizon time.Duration
}

// Defaults of Options' bounds.
const (
	DefaultMaxSteps = 5_000_000
	DefaultHorizon  = 24 * time.Hour
)

// ErrLimit is wrapped by Run's error when a replay passes one of its bounds
// (Options.MaxSteps, Options.Horizon): a policy that keeps work waiting
// forever, or a workload too large to replay.
var ErrLimit = errors.New("simulation limit reached")

// AgentReport is one agent's outcome.
type AgentReport struct {
	Agent      string        `json:"agent"`
	Submitted  int           `json:"submitted"`
	Dispatched int           `json:"dispatched"` // first attempts
	Succeeded  int           `json:"succeeded"`
	Share      float64       `json:"share"` // of all first dispatches
	WaitP50    time.Duration `json:"waitP50Ns"`
	WaitP99    time.Duration `json:"waitP99Ns"`
}

// GroupReport is the outcome of a group of tasks (one priority, or one
// label): how many were submitted and dispatched, their waits, and their mean
// position in the order of first dispatches (0 first; lower means served
// earlier).
type GroupReport struct {
	Group        string        `json:"group"`
	Submitted    int           `json:"submitted"`
	Dispatched   int           `json:"dispatched"`
	WaitP50      time.Duration `json:"waitP50Ns"`
	WaitP99      time.Duration `json:"waitP99Ns"`
	MeanPosition float64       `json:"meanPosition"`
}

// RetryReport is what the retry policy did with the run's failed attempts.
// Parked and Failed count tasks by how they ended; the rest count
// attempts and the decisions that followed them.
type RetryReport struct {
	Attempts int `json:"attempts"` // attempts started
	Failures int `json:"failures"` // attempts that failed
	// Decisions counts the failures the retry policy decided on: all but
	// those past their task's deadline, which fail without asking it. 0
	// means the policy was never asked.
	Decisions int `json:"decisions"`
	Retries   int `json:"retries"` // decisions to retry
	Parked    int `json:"parked"`  // tasks that ended PARKED
	Failed    int `json:"failed"`  // tasks that ended FAILED
	// MeanAttempts is attempts per task dispatched.
	MeanAttempts float64 `json:"meanAttempts"`
	// MeanDelay is the mean wait from a decision to retry to the task's
	// queueing again (0 for an immediate retry).
	MeanDelay time.Duration `json:"meanRetryDelayNs"`
	// ByCode breaks the failures down by their error code (sorted; "" for
	// failures without one), when any failure had one.
	ByCode []CodeReport `json:"byCode,omitempty"`
}

// CodeReport is what the retry policy did with the failed attempts of one
// error code: the decisions that followed them, and the tasks that had
// such a failure.
type CodeReport struct {
	Code      string `json:"code"`
	Failures  int    `json:"failures"`  // attempts that failed with the code
	Decisions int    `json:"decisions"` // of them, decided by the retry policy
	Retries   int    `json:"retries"`   // decisions to retry
	Parked    int    `json:"parked"`    // failures after which the task was parked
	Failed    int    `json:"failed"`    // failures after which the task failed
	// MeanDelay is the mean wait from a decision to retry to the task's
	// queueing again.
	MeanDelay time.Duration `json:"meanRetryDelayNs"`
	// Tasks counts the tasks with at least one such failure, and
	// MeanAttempts their mean attempts.
	Tasks        int     `json:"tasks"`
	MeanAttempts float64 `json:"meanAttempts"`
}

// Report is what a simulation found.
type Report struct {
	Name     string        `json:"name"`
	Tasks    int           `json:"tasks"`
	Makespan time.Duration `json:"makespanNs"` // first submission to last end
	WaitP50  time.Duration `json:"waitP50Ns"`  // submission to first dispatch
	WaitP99  time.Duration `json:"waitP99Ns"`
	// Jain is Jain's fairness index (Σx)²/(n·Σx²) over x_i = received_i /
	// entitled_i: at every dispatch, each agent with queued work is entitled
	// to its weight's share of that dispatch, and the agent dispatched
	// receives it. 1 means every backlogged agent got exactly its share (as
	// under ideal processor sharing); it falls towards 1/n as one agent takes
	// the dispatches the others were entitled to.
	Jain   float64       `json:"jain"`
	Agents []AgentReport `json:"agents"`
	// ByPriority and ByLabel show what the selection policy did: for the
	// tasks of each priority (CRITICAL first) and of each label (key=value,
	// sorted), how long they waited and where in the dispatch order they
	// went.
	ByPriority []GroupReport `json:"byPriority"`
	ByLabel    []GroupReport `json:"byLabel"`
	// Retry is what the retry policy did with the failed attempts.
	Retry     RetryReport `json:"retry"`
	Order     []string    `json:"-"` // task ids in first-dispatch order
	Submitted []string    `json:"-"` // task ids in submission order
}

// Run replays subs through the engine's decision core (engine.Core) on a
// fake clock. The replay is the core's driver: it submits each task at its
// time, starts the attempts each round of dispatch returns and ends them
// after their durations, and runs the core's timers when they fall due —
// in the order the Engine would, one call at a time, in this goroutine.
func Run(ctx context.Context, subs []Submission, opts Options) (*Report, error) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	cfg := opts.Config
	if cfg.EventBuffer == 0 {
		cfg.EventBuffer = 1 << 22
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = len(subs) + 1
	}
	if cfg.MaxQueuedPerAgent == 0 {
		cfg.MaxQueuedPerAgent = len(subs) + 1
	}
	if len(cfg.Lanes) == 0 {
		cfg.Lanes = engine.DefaultLanes()
	}
	cfg.Lanes = slices.Clone(cfg.Lanes)
	for i := range cfg.Lanes { // room for the whole workload
		cfg.Lanes[i].MaxQueued = max(cfg.Lanes[i].MaxQueued, len(subs)+1)
	}
	maxSteps, horizon := opts.MaxSteps, opts.Horizon
	if maxSteps <= 0 {
		maxSteps = DefaultMaxSteps
	}
	if horizon <= 0 {
		horizon = DefaultHorizon
	}
	core, err := engine.NewCore(cfg, clk, 1)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		slot policy.Slot
		p    any
		set  bool
	}{
		{policy.SlotFairness, opts.Fairness, opts.Fairness != nil},
		{policy.SlotSelection, opts.Selection, opts.Selection != nil},
		{policy.SlotRetry, opts.Retry, opts.Retry != nil},
	} {
		if p.set {
			if err := core.SetPolicy(p.slot, "", name(opts.Name, p.slot.String()), p.p); err != nil {
				return nil, err
			}
		}
	}
	d := &driver{core: core, clock: clk, subs: subs, tasks: map[string]*engine.Task{}}
	rep := &Report{Name: opts.Name, Tasks: len(subs)}
	byID := map[string]*Submission{}
	steps := 0
	// advance runs the scheduled calls due by t, one at a time, within the
	// bounds, then sets the clock to t.
	advance := func(t time.Time) error {
		for clk.Step(t) {
			if steps++; steps > maxSteps {
				return fmt.Errorf("%w: %d scheduled calls run by %s of simulated time (the bound is %d); %s",
					ErrLimit, maxSteps, clk.Now().Sub(start), maxSteps, d.progress(len(subs)))
			}
			if steps%1024 == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("simulation stopped at %s of simulated time: %w", clk.Now().Sub(start), err)
				}
			}
		}
		clk.Set(t)
		return nil
	}
	for i := range subs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("simulation stopped at submission %d: %w", i, err)
		}
		s := &subs[i]
		if err := advance(start.Add(s.At)); err != nil {
			return nil, err
		}
		spec := engine.TaskSpec{AgentID: s.Agent, Lane: s.Lane, SessionKey: s.Session, Priority: s.Priority,
			Action: &engine.Action{Kind: "simulated"}, Labels: map[string]string{indexLabel: strconv.Itoa(i)}}
		for k, v := range s.Labels {
			spec.Labels[k] = v
		}
		if s.Deadline > 0 {
			spec.Deadline = clk.Now().Add(s.Deadline)
		}
		t, err := core.Submit(spec)
		if err != nil && t == nil {
			return nil, fmt.Errorf("submission %d (agent %s): %w", i, s.Agent, err)
		}
		d.arm()
		d.dispatch()
		byID[t.ID] = s
		rep.Submitted = append(rep.Submitted, t.ID)
	}
	var last time.Duration
	if len(subs) > 0 {
		last = subs[len(subs)-1].At
	}
	for { // run the clock until nothing is left to happen
		st := core.Stats()
		if st.InFlight+st.Pending == 0 {
			break
		}
		next, ok := clk.NextDue()
		if !ok {
			return nil, fmt.Errorf("simulation stalled: %d tasks in flight and %d waiting, but nothing is scheduled", st.InFlight, st.Pending)
		}
		if next.Sub(start) > last+horizon {
			return nil, fmt.Errorf("%w: %d tasks in flight and %d waiting %s after the last submission (the bound is %s)",
				ErrLimit, st.InFlight, st.Pending, horizon, horizon)
		}
		if err := advance(next); err != nil {
			return nil, err
		}
	}
	end := clk.Now()
	d.take()
	if len(subs) > 0 {
		rep.Makespan = end.Sub(start.Add(subs[0].At))
	}
	rep.fill(d.events, byID, cfg.Agents)
	rep.retries(d.events, byID, d.tasks)
	return rep, nil
}

// driver drives the core on the fake clock as the Engine would: after each
// operation it arms one clock call for the core's earliest timer (Next),
// dispatches what the operation made possible, starts the attempts and
// takes the events recorded.
type driver struct {
	core    *engine.Core
	clock   *clock.Fake
	subs    []Submission
	armed   clock.Timer
	armedAt time.Time
	events  []engine.Event
	tasks   map[string]*engine.Task // each task's latest snapshot
}

// take keeps what the core recorded since the last take: its events, and
// each changed task's latest snapshot (its attempts and their codes).
func (d *driver) take() {
	b := d.core.Take()
	d.events = append(d.events, b.Events...)
	for _, t := range b.Tasks {
		d.tasks[t.ID] = t
	}
}

// progress says, for a replay stopped at its bound of scheduled calls,
// what the calls went on: how many of the workload's tasks had ended,
// the attempts started and how many of them were retries, and the task
// retried most. When retries are most of the attempts it says that tasks
// keep being retried, for the retry policy is then what to look at (the
// engine bounds each task's attempts by its budget, but a budget of up to
// 100 over many tasks is a long replay); else the workload is too long
// for the bound.
func (d *driver) progress(tasks int) string {
	d.take()
	ended, attempts, retries := 0, 0, 0
	most, mostID := 0, ""
	for _, id := range slices.Sorted(maps.Keys(d.tasks)) {
		t := d.tasks[id]
		if t.State.Terminal() || t.State == engine.StateParked {
			ended++
		}
		attempts += len(t.Attempts)
		if len(t.Attempts) > most {
			most, mostID = len(t.Attempts), id
		}
	}
	for _, ev := range d.events {
		if ev.Type == engine.EventState && ev.From.InFlight() && (ev.To == engine.StateQueued || ev.To == engine.StateRetryWait) &&
			!strings.HasPrefix(ev.Reason, "released") {
			retries++
		}
	}
	msg := fmt.Sprintf("by then %d of %d tasks had ended, after %d attempts, %d of them retries", ended, tasks, attempts, retries)
	if most > 1 {
		msg += fmt.Sprintf(" (task %s had %d attempts)", mostID, most)
	}
	if retries*2 > attempts {
		return msg + ": tasks keep being retried; look at the retry policy's answers, or allow more calls"
	}
	return msg + ": the workload needs more scheduled calls than the bound allows"
}

// arm makes sure a clock call runs the core's timers when the earliest
// falls due; one armed already for that time or earlier stands.
func (d *driver) arm() {
	next, ok := d.core.Next()
	if !ok || d.armed != nil && !d.armedAt.After(next) {
		return
	}
	if d.armed != nil {
		d.armed.Stop()
	}
	d.armedAt = next
	d.armed = d.clock.AfterFunc(next.Sub(d.clock.Now()), func() {
		d.armed = nil
		d.core.RunDue()
		d.arm()
		d.dispatch()
	})
}

// dispatch runs a round of dispatch, starts its attempts and takes what
// was recorded.
func (d *driver) dispatch() {
	runs := d.core.Dispatch()
	d.arm()
	for _, r := range runs {
		d.start(r)
	}
	d.take()
}

func name(n, slot string) string {
	if n == "" {
		return "simulated-" + slot
	}
	return n
}

// fill computes the report from the events the core recorded.
func (rep *Report) fill(evs []engine.Event, subs map[string]*Submission, weights map[string]engine.AgentConfig) {
	submitted := map[string]time.Time{}
	dispatched := map[string]bool{}
	per := map[string]*AgentReport{}
	waits := map[string][]time.Duration{}
	queued := map[string]int{}
	entitled, received := map[string]float64{}, map[string]float64{}
	weight := func(agent string) float64 {
		if w := weights[agent].Weight; w > 0 {
			return float64(w)
		}
		return 1
	}
	var all []time.Duration
	agent := func(id string) *AgentReport {
		a := per[id]
		if a == nil {
			a = &AgentReport{Agent: id}
			per[id] = a
		}
		return a
	}
	for _, ev := range evs {
		if ev.Type != engine.EventState || subs[ev.TaskID] == nil {
			continue
		}
		a := agent(ev.AgentID)
		if ev.To == engine.StateAssigned {
			// Share this dispatch among the agents with queued work.
			// Sums run in agent order, not map order, so that a report
			// is the same to the last bit on every run.
			var total float64
			for _, id := range slices.Sorted(maps.Keys(queued)) {
				if queued[id] > 0 {
					total += weight(id)
				}
			}
			for id, n := range queued {
				if n > 0 {
					entitled[id] += weight(id) / total
				}
			}
			received[ev.AgentID]++
		}
		if ev.From == engine.StateQueued {
			queued[ev.AgentID]--
		}
		if ev.To == engine.StateQueued {
			queued[ev.AgentID]++
		}
		switch {
		case ev.From == 0:
			submitted[ev.TaskID] = ev.At
			a.Submitted++
		case ev.To == engine.StateAssigned && !dispatched[ev.TaskID]:
			dispatched[ev.TaskID] = true
			a.Dispatched++
			w := ev.At.Sub(submitted[ev.TaskID])
			waits[ev.AgentID] = append(waits[ev.AgentID], w)
			all = append(all, w)
			rep.Order = append(rep.Order, ev.TaskID)
		case ev.To == engine.StateSucceeded:
			a.Succeeded++
		}
	}
	var sum, sumSq, n float64
	for _, id := range slices.Sorted(maps.Keys(per)) {
		a := per[id]
		if len(all) > 0 {
			a.Share = float64(a.Dispatched) / float64(len(all))
		}
		a.WaitP50, a.WaitP99 = percentile(waits[id], 0.50), percentile(waits[id], 0.99)
		if e := entitled[id]; e > 0 {
			x := received[id] / e
			sum += x
			sumSq += x * x
			n++
		}
		rep.Agents = append(rep.Agents, *a)
	}
	if n > 0 && sumSq > 0 {
		rep.Jain = sum * sum / (n * sumSq)
	}
	rep.WaitP50, rep.WaitP99 = percentile(all, 0.50), percentile(all, 0.99)
	rep.groups(subs, submitted, evs)
}

// groups fills ByPriority and ByLabel from the first dispatches in Order.
func (rep *Report) groups(subs map[string]*Submission, submitted map[string]time.Time, evs []engine.Event) {
	first := map[string]time.Time{}
	for _, ev := range evs {
		if ev.Type == engine.EventState && ev.To == engine.StateAssigned && subs[ev.TaskID] != nil {
			if _, ok := first[ev.TaskID]; !ok {
				first[ev.TaskID] = ev.At
			}
		}
	}
	pos := map[string]int{}
	for i, id := range rep.Order {
		pos[id] = i
	}
	type acc struct {
		g     GroupReport
		waits []time.Duration
		sum   int
	}
	prio, label := map[engine.Priority]*acc{}, map[string]*acc{}
	add := func(a *acc, id string) {
		a.g.Submitted++
		if at, ok := first[id]; ok {
			a.g.Dispatched++
			a.waits = append(a.waits, at.Sub(submitted[id]))
			a.sum += pos[id]
		}
	}
	for id, s := range subs {
		a := prio[s.Priority]
		if a == nil {
			a = &acc{g: GroupReport{Group: priorityName(s.Priority)}}
			prio[s.Priority] = a
		}
		add(a, id)
		for k, v := range s.Labels {
			key := k + "=" + v
			if label[key] == nil {
				label[key] = &acc{g: GroupReport{Group: key}}
			}
			add(label[key], id)
		}
	}
	finish := func(a *acc) GroupReport {
		a.g.WaitP50, a.g.WaitP99 = percentile(a.waits, 0.50), percentile(a.waits, 0.99)
		if a.g.Dispatched > 0 {
			a.g.MeanPosition = float64(a.sum) / float64(a.g.Dispatched)
		}
		return a.g
	}
	for _, p := range slices.Sorted(maps.Keys(prio)) {
		rep.ByPriority = append(rep.ByPriority, finish(prio[p]))
	}
	for _, k := range slices.Sorted(maps.Keys(label)) {
		rep.ByLabel = append(rep.ByLabel, finish(label[k]))
	}
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// indexLabel carries a task's index in the workload to the executor.
const indexLabel = "simulate.index"

// start runs an attempt for its submission's duration on the fake clock,
// then ends it as the submission says.
func (d *driver) start(run *engine.Run) {
	var dur time.Duration
	var out AttemptOutcome
	if i, err := strconv.Atoi(run.Spec().Labels[indexLabel]); err == nil && i < len(d.subs) {
		dur, out = d.subs[i].Duration, d.subs[i].outcome(run.Attempt())
	}
	run.Started("sim", "")
	d.arm()
	d.clock.AfterFunc(dur, func() {
		switch out.Outcome {
		case "transient":
			run.Finish(engine.Outcome{Err: engine.Transient(errors.New("simulated transient failure")), Code: out.Code})
		case "permanent":
			run.Finish(engine.Outcome{Err: engine.Permanent(errors.New("simulated permanent failure")), Code: out.Code})
		default:
			run.Finish(engine.Outcome{})
		}
		d.arm()
		d.dispatch()
	})
}

// priorityName is the workload's name of p.
func priorityName(p engine.Priority) string {
	for name, q := range priorities {
		if q == p && name != "" {
			return name
		}
	}
	return strconv.Itoa(int(p))
}

// retries fills Retry from the events the core recorded and the tasks'
// latest snapshots (their attempts' error codes and their end states).
func (rep *Report) retries(evs []engine.Event, subs map[string]*Submission, tasks map[string]*engine.Task) {
	type acc struct {
		c      CodeReport
		delay  time.Duration
		delays int
		tasks  map[string]bool
	}
	r := &rep.Retry
	codes := map[string]*acc{}
	attempts := map[string]int{}
	submitted := map[string]time.Time{}
	waiting := map[string]time.Time{} // in RETRY_WAIT since, by task
	waitCode := map[string]string{}
	var delay time.Duration
	var delays int
	coded := false
	for _, ev := range evs {
		id := ev.TaskID
		s := subs[id]
		if ev.Type != engine.EventState || s == nil {
			continue
		}
		switch {
		case ev.From == 0:
			submitted[id] = ev.At
		case ev.To == engine.StateAssigned:
			r.Attempts++
			attempts[id]++
		}
		if ev.From == engine.StateRetryWait {
			if at, ok := waiting[id]; ok && ev.To == engine.StateQueued {
				delay += ev.At.Sub(at)
				delays++
				a := codes[waitCode[id]]
				a.delay += ev.At.Sub(at)
				a.delays++
			}
			delete(waiting, id)
		}
		if ev.From != engine.StateAssigned && ev.From != engine.StateRunning || ev.To == engine.StateSucceeded || ev.To == engine.StateRunning {
			continue
		}
		// Attempt ev.Attempt failed; ev.To is what followed.
		code := ""
		if t := tasks[id]; t != nil && ev.Attempt >= 1 && ev.Attempt <= len(t.Attempts) {
			code = t.Attempts[ev.Attempt-1].Code
		}
		coded = coded || code != ""
		a := codes[code]
		if a == nil {
			a = &acc{c: CodeReport{Code: code}, tasks: map[string]bool{}}
			codes[code] = a
		}
		r.Failures++
		a.c.Failures++
		a.tasks[id] = true
		switch ev.To {
		case engine.StateParked:
			a.c.Parked++
		case engine.StateFailed:
			a.c.Failed++
		}
		if s.Deadline > 0 && !ev.At.Before(submitted[id].Add(s.Deadline)) {
			continue // past its deadline: failed without asking the policy
		}
		r.Decisions++
		a.c.Decisions++
		switch ev.To {
		case engine.StateQueued: // at once
			r.Retries++
			a.c.Retries++
			delays++
			a.delays++
		case engine.StateRetryWait:
			r.Retries++
			a.c.Retries++
			waiting[id], waitCode[id] = ev.At, code
		}
	}
	for id := range subs {
		if t := tasks[id]; t != nil {
			switch t.State {
			case engine.StateParked:
				r.Parked++
			case engine.StateFailed:
				r.Failed++
			}
		}
	}
	if len(attempts) > 0 {
		r.MeanAttempts = float64(r.Attempts) / float64(len(attempts))
	}
	if delays > 0 {
		r.MeanDelay = delay / time.Duration(delays)
	}
	if !coded {
		return
	}
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		a := codes[code]
		if a.delays > 0 {
			a.c.MeanDelay = a.delay / time.Duration(a.delays)
		}
		n := 0
		for id := range a.tasks {
			n += attempts[id]
		}
		a.c.Tasks = len(a.tasks)
		a.c.MeanAttempts = float64(n) / float64(len(a.tasks))
		r.ByCode = append(r.ByCode, a.c)
	}
}
