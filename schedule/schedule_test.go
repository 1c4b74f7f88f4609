package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/schedule"
)

func setup(t *testing.T) (*enginetest.Harness, *schedule.Scheduler) {
	t.Helper()
	h := enginetest.New(t, nil)
	s := schedule.New(h.Engine, h.Clock, nil)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	return h, s
}

func tasksOf(t *testing.T, h *enginetest.Harness, id string) []*engine.Task {
	t.Helper()
	ts, err := h.Tasks(context.Background(), engine.TaskQuery{Filter: engine.TaskFilter{Labels: map[string]string{schedule.Label: id}}, Order: engine.OldestFirst, Limit: 100})
	require.NoError(t, err)
	return ts
}

func every(d time.Duration) schedule.Spec {
	return schedule.Spec{Name: "poll", Kind: schedule.KindEvery, Every: d, SpreadWindow: -1, Enabled: true,
		Template: enginetest.Spec("cron-agent").Obj()}
}

func TestEveryRunsOnItsIntervalIntoTheCronLane(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	sc, err := s.Create(context.Background(), every(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, enginetest.Epoch.Add(10*time.Second), sc.NextRunAt)
	h.Clock.Advance(9 * time.Second)
	require.Empty(t, tasksOf(t, h, sc.ID))
	h.Clock.Advance(time.Second)
	for _, tk := range tasksOf(t, h, sc.ID) {
		require.NoError(t, h.Exec.Succeed(tk.ID, `{}`))
	}
	h.Clock.Advance(10 * time.Second)
	ts := tasksOf(t, h, sc.ID)
	require.Len(t, ts, 2)
	require.Equal(t, "cron", ts[0].Spec.Lane, "schedule runs go to the cron lane by default")
	got, err := s.Get(context.Background(), sc.ID)
	require.NoError(t, err)
	require.Len(t, got.Runs, 2)
	require.Equal(t, "submitted", got.Runs[1].Outcome)
	require.Equal(t, ts[1].ID, got.LastTask)
}

func TestAtRunsOnce(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	sc, err := s.Create(context.Background(), schedule.Spec{Name: "once", Kind: schedule.KindAt, At: enginetest.Epoch.Add(time.Minute),
		Enabled: true, Template: enginetest.Spec("a").Obj()})
	require.NoError(t, err)
	h.Clock.Advance(time.Hour)
	require.Len(t, tasksOf(t, h, sc.ID), 1)
	got, _ := s.Get(context.Background(), sc.ID)
	require.True(t, got.NextRunAt.IsZero())
}

func TestAnAtScheduleMayDeleteItselfOnceItHasRun(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	sc, err := s.Create(context.Background(), schedule.Spec{Name: "once", Kind: schedule.KindAt, At: enginetest.Epoch.Add(time.Minute),
		DeleteAfterRun: true, Enabled: true, Template: enginetest.Spec("a").Obj()})
	require.NoError(t, err)
	h.Clock.Advance(time.Hour)
	require.Len(t, tasksOf(t, h, sc.ID), 1, "it ran; its task stays")
	_, err = s.Get(context.Background(), sc.ID)
	require.True(t, engine.IsCode(err, engine.CodeNotFound), "it deleted itself: %v", err)
	s2 := schedule.New(h.Engine, h.Clock, nil)
	require.NoError(t, s2.Start(context.Background()))
	t.Cleanup(s2.Stop)
	require.Empty(t, s2.List(context.Background()), "and stays deleted after a restart")
}

func TestCronRunsAtTheExactTimeUnlessSpreadingIsAskedFor(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	for _, window := range []time.Duration{0, -1} {
		sc, err := s.Create(context.Background(), schedule.Spec{Name: "x", Kind: schedule.KindCron, Cron: "0 9 * * 1-5",
			SpreadWindow: window, Enabled: true, Template: enginetest.Spec("a").Obj()})
		require.NoError(t, err)
		require.Zero(t, sc.Offset)
		require.Equal(t, 9, sc.NextRunAt.Hour())
		require.Zero(t, sc.NextRunAt.Minute()*60+sc.NextRunAt.Second(), "due at 09:00:00 exactly, not %s", sc.NextRunAt)
	}
}

func TestAScheduleKeepsItsConfiguredRunHistory(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	spec := every(10 * time.Second)
	spec.HistoryLength = 3
	short, err := s.Create(context.Background(), spec)
	require.NoError(t, err)
	long, err := s.Create(context.Background(), every(10*time.Second))
	require.NoError(t, err)
	for range 25 {
		h.Clock.Advance(10 * time.Second)
		for _, id := range h.Exec.Running() {
			_ = h.Exec.Succeed(id, `{}`)
		}
	}
	got, err := s.Get(context.Background(), short.ID)
	require.NoError(t, err)
	require.Len(t, got.Runs, 3)
	got, err = s.Get(context.Background(), long.ID)
	require.NoError(t, err)
	require.Len(t, got.Runs, 25, "the default keeps up to %d", schedule.DefaultHistoryLength)
}

// walk returns the next n due times of a cron schedule created at `from`.
func walk(t *testing.T, cronExpr string, from time.Time, n int) []time.Time {
	t.Helper()
	h := enginetest.New(t, &engine.Config{Retention: 365 * 24 * time.Hour})
	s := schedule.New(h.Engine, h.Clock, nil)
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(s.Stop)
	h.Clock.Set(from)
	sc, err := s.Create(context.Background(), schedule.Spec{Name: "x", Kind: schedule.KindCron, Cron: cronExpr,
		TimeZone: "America/New_York", SpreadWindow: -1, Enabled: true, Template: enginetest.Spec("a").Lane("main").Obj()})
	require.NoError(t, err)
	var due []time.Time
	for range n {
		got, err := s.Get(context.Background(), sc.ID)
		require.NoError(t, err)
		due = append(due, got.NextRunAt)
		h.Clock.Set(got.NextRunAt)
		for _, id := range h.Exec.Running() {
			_ = h.Exec.Succeed(id, `{}`)
		}
	}
	require.Len(t, tasksOf(t, h, sc.ID), n, "every due time made one task")
	return due
}

func TestCronAtAFixedTimeRunsOnceThroughDaylightSavingChanges(t *testing.T) {
	t.Parallel()
	// Spring forward, 8 March 2026: 02:00 EST jumps to 03:00 EDT, so 02:30
	// does not exist that day; the job runs at the end of the gap.
	require.Equal(t, []time.Time{
		time.Date(2026, 3, 7, 7, 30, 0, 0, time.UTC), // 02:30 EST
		time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC),  // 03:00 EDT, the gap's end
		time.Date(2026, 3, 9, 6, 30, 0, 0, time.UTC), // 02:30 EDT
	}, walk(t, "30 2 * * *", time.Date(2026, 3, 7, 0, 0, 0, 0, time.UTC), 3))
	// Fall back, 1 November 2026: 01:30 happens twice; the job runs once.
	require.Equal(t, []time.Time{
		time.Date(2026, 10, 31, 5, 30, 0, 0, time.UTC), // 01:30 EDT
		time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),  // 01:30 EDT, not again at 01:30 EST
		time.Date(2026, 11, 2, 6, 30, 0, 0, time.UTC),  // 01:30 EST
	}, walk(t, "30 1 * * *", time.Date(2026, 10, 31, 0, 0, 0, 0, time.UTC), 3))
	// An hourly job follows real time: the repeated hour runs twice.
	require.Equal(t, []time.Time{
		time.Date(2026, 11, 1, 5, 0, 0, 0, time.UTC), // 01:00 EDT
		time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC), // 01:00 EST
		time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC), // 02:00 EST
	}, walk(t, "0 * * * *", time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), 3))
}

func TestCronFollowsItsTimeZone(t *testing.T) {
	t.Parallel()
	require.Equal(t, []time.Time{
		time.Date(2026, 3, 7, 14, 0, 0, 0, time.UTC), // 09:00 EST
		time.Date(2026, 3, 8, 13, 0, 0, 0, time.UTC), // 09:00 EDT: an hour earlier in UTC
		time.Date(2026, 3, 9, 13, 0, 0, 0, time.UTC),
	}, walk(t, "0 9 * * *", time.Date(2026, 3, 6, 15, 0, 0, 0, time.UTC), 3))
}

func TestMissedRunsFollowTheSchedulesPolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy schedule.MissedPolicy
		tasks  int
	}{{schedule.MissedSkip, 0}, {schedule.MissedRunOnce, 1}} {
		t.Run(string(c.policy), func(t *testing.T) {
			h := enginetest.New(t, nil)
			s1 := schedule.New(h.Engine, h.Clock, nil)
			require.NoError(t, s1.Start(context.Background()))
			spec := every(time.Minute)
			spec.Missed = c.policy
			sc, err := s1.Create(context.Background(), spec)
			require.NoError(t, err)
			s1.Stop() // the server goes down…
			h.Clock.Advance(10*time.Minute + 30*time.Second)
			s2 := schedule.New(h.Engine, h.Clock, nil) // …and comes back
			require.NoError(t, s2.Start(context.Background()))
			t.Cleanup(s2.Stop)
			require.Len(t, tasksOf(t, h, sc.ID), c.tasks)
			got, err := s2.Get(context.Background(), sc.ID)
			require.NoError(t, err)
			require.Contains(t, got.Runs[0].Outcome, "missed 10 run(s)")
			require.Equal(t, enginetest.Epoch.Add(11*time.Minute), got.NextRunAt, "the timetable resumes")
		})
	}
}

func TestOverlapPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy    schedule.OverlapPolicy
		tasks     int
		prevState engine.State
	}{
		{schedule.OverlapSkip, 1, engine.StateQueued},
		{schedule.OverlapQueue, 2, engine.StateQueued},
		{schedule.OverlapCancelPrevious, 2, engine.StateCancelled},
	} {
		t.Run(string(c.policy), func(t *testing.T) {
			h, s := setup(t)
			p := true
			_, err := h.UpdateLane(context.Background(), "cron", engine.LaneUpdate{Paused: &p}) // runs stay queued
			require.NoError(t, err)
			spec := every(time.Minute)
			spec.Overlap = c.policy
			sc, err := s.Create(context.Background(), spec)
			require.NoError(t, err)
			h.Clock.Advance(2 * time.Minute)
			ts := tasksOf(t, h, sc.ID)
			require.Len(t, ts, c.tasks)
			require.Equal(t, c.prevState, h.State(ts[0].ID))
		})
	}
}

func TestTriggerRunsNowAndSpreadIsStable(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	spec := every(time.Hour)
	spec.SpreadWindow = 30 * time.Second // opted in
	a, err := s.Create(context.Background(), spec)
	require.NoError(t, err)
	b, err := s.Create(context.Background(), spec)
	require.NoError(t, err)
	require.NotEqual(t, a.Offset, b.Offset, "two schedules on the same timetable are spread apart")
	require.Less(t, a.Offset, 30*time.Second)

	run, err := s.Trigger(context.Background(), a.ID)
	require.NoError(t, err)
	require.NotEmpty(t, run.TaskID)
	require.Len(t, tasksOf(t, h, a.ID), 1)

	s2 := schedule.New(h.Engine, h.Clock, nil)
	require.NoError(t, s2.Start(context.Background()))
	again, err := s2.Get(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, a.Offset, again.Offset, "the offset survives a restart")
	require.Equal(t, a.NextRunAt, again.NextRunAt)
	s2.Stop()
}

func TestInvalidSchedulesAreRefusedWithTheField(t *testing.T) {
	t.Parallel()
	_, s := setup(t)
	for field, spec := range map[string]schedule.Spec{
		"cron":           {Name: "x", Kind: schedule.KindCron, Cron: "* * *", Template: enginetest.Spec("a").Obj()},
		"timeZone":       {Name: "x", Kind: schedule.KindCron, Cron: "* * * * *", TimeZone: "Mars/Olympus", Template: enginetest.Spec("a").Obj()},
		"every":          {Name: "x", Kind: schedule.KindEvery, Every: time.Millisecond, Template: enginetest.Spec("a").Obj()},
		"template.lane":  {Name: "x", Kind: schedule.KindEvery, Every: time.Minute, Template: enginetest.Spec("a").Lane("nope").Obj()},
		"kind":           {Name: "x", Kind: "sometimes", Template: enginetest.Spec("a").Obj()},
		"overlapPolicy":  {Name: "x", Kind: schedule.KindEvery, Every: time.Minute, Overlap: "maybe", Template: enginetest.Spec("a").Obj()},
		"deleteAfterRun": {Name: "x", Kind: schedule.KindEvery, Every: time.Minute, DeleteAfterRun: true, Template: enginetest.Spec("a").Obj()},
		"historyLength":  {Name: "x", Kind: schedule.KindEvery, Every: time.Minute, HistoryLength: schedule.MaxHistoryLength + 1, Template: enginetest.Spec("a").Obj()},
	} {
		_, err := s.Create(context.Background(), spec)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee, field)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, field)
		require.Equal(t, field, ee.Field)
	}
	require.Empty(t, s.List(context.Background()))
}

func TestAnAtScheduleInThePastIsRefused(t *testing.T) {
	t.Parallel()
	h, s := setup(t)
	past := schedule.Spec{Name: "p", Kind: schedule.KindAt, At: enginetest.Epoch.Add(-time.Second), Enabled: true,
		Template: enginetest.Spec("a").Obj()}
	for _, at := range []time.Time{enginetest.Epoch.Add(-time.Second), enginetest.Epoch} {
		past.At = at
		_, err := s.Create(context.Background(), past)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		require.Equal(t, engine.CodeInvalidInput, ee.Code)
		require.Equal(t, "at", ee.Field)
		require.Contains(t, ee.Message, "is not in the future")
	}
	require.Empty(t, s.List(context.Background()), "nothing was created")

	// An update may not set a time that has passed.
	sc, err := s.Create(context.Background(), schedule.Spec{Name: "once", Kind: schedule.KindAt, At: enginetest.Epoch.Add(time.Minute),
		Template: enginetest.Spec("a").Obj()})
	require.NoError(t, err)
	upd := sc.Spec
	upd.At = enginetest.Epoch.Add(-time.Hour)
	_, err = s.Update(context.Background(), sc.ID, upd)
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "%v", err)
	got, err := s.Get(context.Background(), sc.ID)
	require.NoError(t, err)
	require.Equal(t, enginetest.Epoch.Add(time.Minute), got.Spec.At, "the refused update changed nothing")

	// Once its time has passed (disabled, it did not run), it cannot be
	// enabled: it would never run. It can still be renamed.
	h.Clock.Advance(time.Hour)
	_, err = s.SetEnabled(context.Background(), sc.ID, true)
	require.True(t, engine.IsCode(err, engine.CodeConflict), "%v", err)
	upd = got.Spec
	upd.Name = "renamed"
	_, err = s.Update(context.Background(), sc.ID, upd)
	require.NoError(t, err, "keeping a time that has passed is not setting one")
	require.Empty(t, tasksOf(t, h, sc.ID))
}
