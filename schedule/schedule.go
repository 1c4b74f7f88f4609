// Package schedule creates tasks on a timetable: once at a time ("at"), at a
// fixed interval ("every"), or on a five-field cron expression in a time zone
// ("cron"). Each schedule holds a task template; every run submits it to the
// engine (the cron lane by default), labelled with the schedule's id, so the
// full run history is in the task list and the last runs are kept on the
// schedule itself.
//
// Schedules are persisted as engine settings. After downtime, runs that were
// missed follow the schedule's policy: skip them, or run once now. When a run
// falls due while the previous run is still active, the overlap policy
// decides: skip this run, queue it anyway, or cancel the previous one. Runs
// are due at the timetable's exact times; a schedule may opt in to a stable
// per-schedule offset (SpreadWindow) that spreads schedules sharing a minute
// so they do not stampede. An at schedule may delete itself once it has run.
//
// Cron times follow the schedule's time zone through daylight-saving
// changes the way the classic cron does: a job at a fixed time of day runs
// once when that time occurs twice, and at the end of the gap when it does
// not occur at all; jobs that run hourly or more often follow real time.
package schedule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/robfig/cron/v3"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
)

// Kind is how a schedule's times are defined.
type Kind string

// Kinds.
const (
	KindAt    Kind = "at"
	KindEvery Kind = "every"
	KindCron  Kind = "cron"
)

// MissedPolicy says what happens to runs missed while the server was down.
type MissedPolicy string

// Missed-run policies.
const (
	MissedSkip    MissedPolicy = "skip"     // record them as missed and wait for the next time
	MissedRunOnce MissedPolicy = "run-once" // run once at start, however many were missed
)

// OverlapPolicy says what happens when a run falls due while the previous
// run's task has not ended.
type OverlapPolicy string

// Overlap policies.
const (
	OverlapSkip           OverlapPolicy = "skip"            // skip this run
	OverlapQueue          OverlapPolicy = "queue"           // submit it anyway: it queues behind
	OverlapCancelPrevious OverlapPolicy = "cancel-previous" // cancel the previous run's task, then submit
)

// Label is the task label that ties a task to the schedule that created it.
const Label = "switchyard.schedule"

// DefaultHistoryLength is how many recent runs a schedule keeps unless it
// says otherwise (all runs are tasks), as GoClaw keeps 200.
const DefaultHistoryLength = 200

// MaxHistoryLength bounds Spec.HistoryLength.
const MaxHistoryLength = 10_000

// Spec is what an operator defines.
type Spec struct {
	Name     string
	Kind     Kind
	At       time.Time     // KindAt
	Every    time.Duration // KindEvery (≥ 1 s)
	Cron     string        // KindCron: minute hour day-of-month month day-of-week
	TimeZone string        // IANA name for KindCron; "" means UTC
	Template engine.TaskSpec
	// DeadlineAfter gives each run's task a deadline this long after it is
	// created (a template cannot hold an absolute deadline).
	DeadlineAfter time.Duration
	Missed        MissedPolicy  // default skip
	Overlap       OverlapPolicy // default skip
	// SpreadWindow, when positive, bounds a stable offset added to every
	// run time of a cron or every schedule (for every, capped at a tenth of
	// the interval), so that schedules sharing a minute do not all fire at
	// once. Zero or negative (the default): runs are due at the exact time.
	SpreadWindow time.Duration
	Enabled      bool
	// DeleteAfterRun deletes an at schedule once it has run (or once its
	// time was missed while the server was down). Its task stays.
	DeleteAfterRun bool
	// HistoryLength is how many recent runs it keeps (0 means
	// DefaultHistoryLength; at most MaxHistoryLength).
	HistoryLength int
}

// Run is one time a schedule fell due.
type Run struct {
	Due     time.Time // when it was due (offset included)
	FiredAt time.Time // when it was handled
	TaskID  string    // the task it created, if any
	Outcome string    // "submitted", "skipped: …", "missed …", "failed: …"
}

// Schedule is a schedule and its state.
type Schedule struct {
	ID        string
	Spec      Spec
	Offset    time.Duration // the stable spread offset
	CreatedAt time.Time
	UpdatedAt time.Time
	NextRunAt time.Time // zero when it will not run again (disabled, or an "at" that ran)
	LastRunAt time.Time
	LastTask  string
	Runs      []Run // the latest Spec.HistoryLength, oldest first
}

// Scheduler runs schedules on the engine's clock.
type Scheduler struct {
	e     *engine.Engine
	clock clock.Clock
	log   hclog.Logger

	mu      sync.Mutex
	entries map[string]*entry
	stopped bool
	seq     uint64
}

type entry struct {
	s     Schedule
	cron  cron.Schedule
	loc   *time.Location
	timer clock.Timer
}

const settingPrefix = "schedule/"

// New returns a scheduler over e. Call Start to load and arm the stored
// schedules.
func New(e *engine.Engine, clk clock.Clock, log hclog.Logger) *Scheduler {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Scheduler{e: e, clock: clk, log: log.Named("schedule"), entries: map[string]*entry{}}
}

// Start loads the stored schedules, applies their missed-run policies and arms
// their timers.
func (s *Scheduler) Start(ctx context.Context) error {
	stored := s.e.Settings(settingPrefix)
	keys := slices.Sorted(maps.Keys(stored))
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		var sc Schedule
		if err := json.Unmarshal(stored[k], &sc); err != nil {
			return fmt.Errorf("schedule: stored %s does not parse: %w", k, err)
		}
		en, err := compile(sc)
		if err != nil {
			return fmt.Errorf("schedule: stored %s: %w", k, err)
		}
		s.entries[sc.ID] = en
		if sc.Spec.Enabled && !sc.NextRunAt.IsZero() && sc.NextRunAt.Before(now) {
			s.catchUpLocked(ctx, en, now)
		}
		s.armLocked(en)
	}
	return nil
}

// catchUpLocked applies the missed-run policy to a schedule that was due
// while the server was down.
func (s *Scheduler) catchUpLocked(ctx context.Context, en *entry, now time.Time) {
	missed := 0
	for t := en.s.NextRunAt; !t.IsZero() && !t.After(now); t = en.next(t) {
		missed++
		if missed > 1_000_000 {
			break
		}
	}
	first := en.s.NextRunAt
	switch en.s.Spec.Missed {
	case MissedRunOnce:
		en.record(Run{Due: first, FiredAt: now, Outcome: fmt.Sprintf("missed %d run(s) while down; running once now", missed)})
		s.fireLocked(ctx, en, now, now)
	default:
		en.record(Run{Due: first, FiredAt: now, Outcome: fmt.Sprintf("missed %d run(s) while down; skipped", missed)})
	}
	en.s.NextRunAt = en.nextAfter(now)
	if en.s.Spec.Kind == KindAt && en.s.Spec.DeleteAfterRun && en.s.NextRunAt.IsZero() {
		s.deleteSpentLocked(ctx, en)
		return
	}
	s.saveLocked(ctx, en)
}

// deleteSpentLocked deletes an at schedule that has run and asked to go.
func (s *Scheduler) deleteSpentLocked(ctx context.Context, en *entry) {
	en.stop()
	delete(s.entries, en.s.ID)
	if err := s.e.SaveSetting(ctx, settingPrefix+en.s.ID, nil); err != nil {
		s.log.Error("deleting a schedule that has run", "schedule", en.s.ID, "error", err)
		return
	}
	s.log.Info("schedule ran and deleted itself", "schedule", en.s.ID, "task", en.s.LastTask)
}

// Create adds a schedule.
func (s *Scheduler) Create(ctx context.Context, spec Spec) (*Schedule, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("sch-%s-%d", now.UTC().Format("20060102T150405"), s.seq)
	for s.entries[id] != nil {
		s.seq++
		id = fmt.Sprintf("sch-%s-%d", now.UTC().Format("20060102T150405"), s.seq)
	}
	if err := checkAt(spec, nil, now); err != nil {
		return nil, err
	}
	sc := Schedule{ID: id, Spec: spec, CreatedAt: now, UpdatedAt: now}
	en, err := s.prepare(sc)
	if err != nil {
		return nil, err
	}
	en.s.NextRunAt = en.nextAfter(now)
	if !spec.Enabled {
		en.s.NextRunAt = time.Time{}
	}
	s.entries[id] = en
	if err := s.saveLocked(ctx, en); err != nil {
		delete(s.entries, id)
		return nil, err
	}
	s.armLocked(en)
	return en.snapshot(), nil
}

// Update replaces a schedule's spec; its history stays.
func (s *Scheduler) Update(ctx context.Context, id string, spec Spec) (*Schedule, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.entries[id]
	if old == nil {
		return nil, notFound(id)
	}
	if err := checkAt(spec, &old.s.Spec, now); err != nil {
		return nil, err
	}
	sc := old.s
	sc.Spec, sc.UpdatedAt = spec, now
	en, err := s.prepare(sc)
	if err != nil {
		return nil, err
	}
	en.s.NextRunAt = time.Time{}
	if spec.Enabled {
		en.s.NextRunAt = en.nextAfter(now)
	}
	old.stop()
	s.entries[id] = en
	if err := s.saveLocked(ctx, en); err != nil {
		return nil, err
	}
	s.armLocked(en)
	return en.snapshot(), nil
}

// SetEnabled enables or disables a schedule.
func (s *Scheduler) SetEnabled(ctx context.Context, id string, enabled bool) (*Schedule, error) {
	s.mu.Lock()
	en := s.entries[id]
	if en == nil {
		s.mu.Unlock()
		return nil, notFound(id)
	}
	spec := en.s.Spec
	s.mu.Unlock()
	spec.Enabled = enabled
	sc, err := s.Update(ctx, id, spec)
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Field == "at" {
		// Nothing in the request is at fault: the schedule's time has passed.
		return nil, &engine.Error{Code: engine.CodeConflict, Message: "at schedule " + id + " cannot be enabled: its time " + ee.Message}
	}
	return sc, err
}

// Trigger runs a schedule now, whatever its timetable, under its overlap
// policy. Its next regular run is unchanged.
func (s *Scheduler) Trigger(ctx context.Context, id string) (*Run, error) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entries[id]
	if en == nil {
		return nil, notFound(id)
	}
	run := s.fireLocked(ctx, en, now, now)
	run.Outcome = "triggered: " + run.Outcome
	en.s.Runs[len(en.s.Runs)-1].Outcome = run.Outcome
	if err := s.saveLocked(ctx, en); err != nil {
		return nil, err
	}
	return &run, nil
}

// Delete removes a schedule. The tasks it created stay.
func (s *Scheduler) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entries[id]
	if en == nil {
		return notFound(id)
	}
	en.stop()
	delete(s.entries, id)
	return s.e.SaveSetting(ctx, settingPrefix+id, nil)
}

// Get returns one schedule.
func (s *Scheduler) Get(ctx context.Context, id string) (*Schedule, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entries[id]
	if en == nil {
		return nil, notFound(id)
	}
	return en.snapshot(), nil
}

// List returns every schedule, by id.
func (s *Scheduler) List(ctx context.Context) []*Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Schedule, 0, len(s.entries))
	for _, id := range slices.Sorted(maps.Keys(s.entries)) {
		out = append(out, s.entries[id].snapshot())
	}
	return out
}

// Stop disarms every timer.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	for _, en := range s.entries {
		en.stop()
	}
}

// checkAt refuses an at schedule whose time is not in the future: it would
// never run, and stay enabled for ever. An update (old: the schedule as it
// is) may keep a time that has passed — an at schedule that ran is renamed,
// disabled, given a new template — but not set one, nor enable a schedule
// whose time has passed.
func checkAt(spec Spec, old *Spec, now time.Time) error {
	if spec.Kind != KindAt || spec.At.IsZero() || spec.At.After(now) {
		return nil
	}
	if old != nil && old.Kind == KindAt && old.At.Equal(spec.At) && (!spec.Enabled || old.Enabled) {
		return nil
	}
	return invalid("at", "%s is not in the future", spec.At.UTC().Format(time.RFC3339Nano))
}

// prepare validates a schedule and compiles its timetable.
func (s *Scheduler) prepare(sc Schedule) (*entry, error) {
	sp := &sc.Spec
	if sp.Template.Lane == "" {
		sp.Template.Lane = "cron"
	}
	if sp.Missed == "" {
		sp.Missed = MissedSkip
	}
	if sp.Overlap == "" {
		sp.Overlap = OverlapSkip
	}
	switch {
	case sp.Name == "" || len(sp.Name) > 128:
		return nil, invalid("name", "is required (at most 128 bytes)")
	case sp.Missed != MissedSkip && sp.Missed != MissedRunOnce:
		return nil, invalid("missedPolicy", "must be skip or run-once")
	case sp.Overlap != OverlapSkip && sp.Overlap != OverlapQueue && sp.Overlap != OverlapCancelPrevious:
		return nil, invalid("overlapPolicy", "must be skip, queue or cancel-previous")
	case sp.DeadlineAfter < 0:
		return nil, invalid("deadlineAfter", "must not be negative")
	case !sp.Template.Deadline.IsZero():
		return nil, invalid("template.deadline", "a template cannot hold an absolute deadline: use deadlineAfter")
	}
	if err := s.e.Validate(sp.Template); err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) && ee.Field != "" {
			ee.Field = "template." + ee.Field
		}
		return nil, err
	}
	en, err := compile(sc)
	if err != nil {
		return nil, err
	}
	return en, nil
}

// compile parses the timetable and works out the spread offset.
func compile(sc Schedule) (*entry, error) {
	en := &entry{s: sc, loc: time.UTC}
	sp := &en.s.Spec
	if sp.DeleteAfterRun && sp.Kind != KindAt {
		return nil, invalid("deleteAfterRun", "only an at schedule runs once and may delete itself")
	}
	if sp.HistoryLength < 0 || sp.HistoryLength > MaxHistoryLength {
		return nil, invalid("historyLength", "must be within 0 (the default, %d) .. %d, got %d", DefaultHistoryLength, MaxHistoryLength, sp.HistoryLength)
	}
	switch sp.Kind {
	case KindAt:
		if sp.At.IsZero() {
			return nil, invalid("at", "is required for an at schedule")
		}
	case KindEvery:
		if sp.Every < time.Second {
			return nil, invalid("every", "must be at least 1s, got %s", sp.Every)
		}
	case KindCron:
		if sp.TimeZone != "" {
			loc, err := time.LoadLocation(sp.TimeZone)
			if err != nil {
				return nil, invalid("timeZone", "unknown time zone %q", sp.TimeZone)
			}
			en.loc = loc
		}
		if strings.HasPrefix(strings.TrimSpace(sp.Cron), "CRON_TZ=") || strings.HasPrefix(strings.TrimSpace(sp.Cron), "TZ=") {
			return nil, invalid("cron", "give the time zone in timeZone, not in the expression")
		}
		c, err := cron.ParseStandard(sp.Cron)
		if err != nil {
			return nil, invalid("cron", "%v", err)
		}
		en.cron = c
	default:
		return nil, invalid("kind", "must be at, every or cron")
	}
	en.s.Offset = spreadOffset(en.s.ID, sp)
	return en, nil
}

// spreadOffset is a stable offset in [0, window) derived from the id.
func spreadOffset(id string, sp *Spec) time.Duration {
	if sp.Kind == KindAt || sp.SpreadWindow <= 0 {
		return 0
	}
	w := sp.SpreadWindow
	if sp.Kind == KindEvery {
		w = min(w, sp.Every/10)
	}
	if w <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return time.Duration(h.Sum64() % uint64(w))
}

// base returns the timetable time a due time belongs to.
func (en *entry) base(due time.Time) time.Time { return due.Add(-en.s.Offset) }

// next returns the due time after the run due at `due`.
func (en *entry) next(due time.Time) time.Time {
	return en.nextBase(en.base(due)).addOffset(en.s.Offset)
}

// nextAfter returns the first due time strictly after t.
func (en *entry) nextAfter(t time.Time) time.Time {
	b := en.nextBase(en.base(t))
	return b.addOffset(en.s.Offset)
}

type optTime struct{ t time.Time }

func (o optTime) addOffset(d time.Duration) time.Time {
	if o.t.IsZero() {
		return time.Time{}
	}
	return o.t.Add(d)
}

// nextBase returns the first timetable time strictly after b.
func (en *entry) nextBase(b time.Time) optTime {
	sp := &en.s.Spec
	switch sp.Kind {
	case KindAt:
		if sp.At.After(b) {
			return optTime{sp.At}
		}
		return optTime{}
	case KindEvery:
		anchor := en.s.CreatedAt
		if b.Before(anchor) {
			return optTime{anchor.Add(sp.Every)}
		}
		k := b.Sub(anchor)/sp.Every + 1
		return optTime{anchor.Add(k * sp.Every)}
	default:
		return optTime{en.nextCron(b.In(en.loc)).UTC()}
	}
}

// nextCron is the cron library's next time, with the daylight-saving rules
// of the classic cron for jobs at a fixed time of day (one hour and one
// minute): a wall-clock time that occurs twice (clocks fall back) runs once,
// and one that does not occur (clocks spring forward) runs when the clock
// jumps past it, instead of being skipped that day. Jobs that run every
// hour or more often follow real time through the change.
func (en *entry) nextCron(b time.Time) time.Time {
	n := en.cron.Next(b)
	ss, ok := en.cron.(*cron.SpecSchedule)
	if !ok || bits.OnesCount64(ss.Hour&^starBit) != 1 || bits.OnesCount64(ss.Minute&^starBit) != 1 || ss.Hour&starBit != 0 {
		return n
	}
	if sameWallClock(n, b) {
		n = en.cron.Next(n) // the repeat of a time that already ran
	}
	hour, minute := bits.TrailingZeros64(ss.Hour), bits.TrailingZeros64(ss.Minute)
	for d := dateOf(b); !d.After(dateOf(n)); d = d.AddDate(0, 0, 1) {
		if !dayMatches(ss, d) {
			continue
		}
		t := time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, b.Location())
		if t.Hour() == hour && t.Minute() == minute {
			continue // the time exists that day
		}
		// It does not: run at the end of the gap, the first instant of the
		// day whose wall clock is past the job's time.
		for t = d; t.Hour()*60+t.Minute() < hour*60+minute && dateOf(t).Equal(d); t = t.Add(time.Minute) {
		}
		if t.After(b) && t.Before(n) {
			return t
		}
	}
	return n
}

// starBit marks a cron field written as "*" (the library's convention).
const starBit = 1 << 63

func sameWallClock(a, b time.Time) bool {
	return a.Year() == b.Year() && a.YearDay() == b.YearDay() && a.Hour() == b.Hour() && a.Minute() == b.Minute()
}

func dateOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, t.Location())
}

// dayMatches applies cron's day rules: month, and day of month or day of
// week (both must match when either is "*").
func dayMatches(s *cron.SpecSchedule, t time.Time) bool {
	if 1<<uint(t.Month())&s.Month == 0 {
		return false
	}
	dom := 1<<uint(t.Day())&s.Dom != 0
	dow := 1<<uint(t.Weekday())&s.Dow != 0
	if s.Dom&starBit != 0 || s.Dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

func (en *entry) record(r Run) {
	en.s.Runs = append(en.s.Runs, r)
	keep := en.s.Spec.HistoryLength
	if keep == 0 {
		keep = DefaultHistoryLength
	}
	if over := len(en.s.Runs) - keep; over > 0 {
		en.s.Runs = slices.Delete(en.s.Runs, 0, over)
	}
}

func (en *entry) stop() {
	if en.timer != nil {
		en.timer.Stop()
		en.timer = nil
	}
}

func (en *entry) snapshot() *Schedule {
	c := en.s
	c.Runs = slices.Clone(c.Runs)
	return &c
}

// armLocked schedules the entry's next run on the clock.
func (s *Scheduler) armLocked(en *entry) {
	en.stop()
	if s.stopped || !en.s.Spec.Enabled || en.s.NextRunAt.IsZero() {
		return
	}
	id, due := en.s.ID, en.s.NextRunAt
	en.timer = s.clock.AfterFunc(due.Sub(s.clock.Now()), func() { s.onDue(id, due) })
}

// onDue handles a run falling due.
func (s *Scheduler) onDue(id string, due time.Time) {
	ctx := context.Background()
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	en := s.entries[id]
	if en == nil || s.stopped || !en.s.NextRunAt.Equal(due) {
		return // deleted or rescheduled meanwhile
	}
	s.fireLocked(ctx, en, due, now)
	en.s.NextRunAt = en.nextAfter(now)
	if en.s.Spec.Kind == KindAt {
		en.s.NextRunAt = time.Time{}
		if en.s.Spec.DeleteAfterRun {
			s.deleteSpentLocked(ctx, en)
			return
		}
	}
	if err := s.saveLocked(ctx, en); err != nil {
		s.log.Error("saving schedule", "schedule", id, "error", err)
	}
	s.armLocked(en)
}

// fireLocked makes one run: overlap policy, then submission.
func (s *Scheduler) fireLocked(ctx context.Context, en *entry, due, now time.Time) Run {
	run := Run{Due: due, FiredAt: now}
	defer func() { en.record(run) }()
	en.s.LastRunAt = now
	if prev := en.s.LastTask; prev != "" {
		if t, err := s.e.Task(ctx, prev); err == nil && !t.State.Terminal() {
			switch en.s.Spec.Overlap {
			case OverlapSkip:
				run.Outcome = "skipped: the previous run " + prev + " is still " + strings.ToLower(t.State.String())
				return run
			case OverlapCancelPrevious:
				_, _ = s.e.Cancel(ctx, prev, "superseded by the next run of schedule "+en.s.ID)
			}
		}
	}
	spec := en.s.Spec.Template
	spec.Labels = maps.Clone(spec.Labels)
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[Label] = en.s.ID
	if d := en.s.Spec.DeadlineAfter; d > 0 {
		spec.Deadline = now.Add(d)
	}
	t, err := s.e.Submit(ctx, spec)
	switch {
	case t != nil:
		en.s.LastTask = t.ID
		run.TaskID = t.ID
		run.Outcome = "submitted"
		if err != nil {
			run.Outcome = "refused: " + err.Error()
		}
	default:
		run.Outcome = "failed: " + err.Error()
		s.log.Warn("scheduled run failed", "schedule", en.s.ID, "error", err)
	}
	return run
}

func (s *Scheduler) saveLocked(ctx context.Context, en *entry) error {
	raw, err := json.Marshal(en.s)
	if err != nil {
		return fmt.Errorf("schedule %s: %w", en.s.ID, err)
	}
	return s.e.SaveSetting(ctx, settingPrefix+en.s.ID, raw)
}

func invalid(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(id string) error {
	return &engine.Error{Code: engine.CodeNotFound, Message: "no schedule " + id}
}
