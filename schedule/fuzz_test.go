package schedule_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/schedule"
)

// FuzzCron feeds arbitrary cron expressions and time zones to Create: each
// is refused with a typed error or accepted with a next run in the future,
// and walking its timetable always moves forward.
func FuzzCron(f *testing.F) {
	for _, seed := range []struct{ expr, tz string }{
		{"0 9 * * *", "America/New_York"}, {"*/5 * * * *", ""}, {"30 2 * 3 0", "Europe/Berlin"},
		{"@daily", "UTC"}, {"61 * * * *", ""}, {"* * *", "Nowhere/Else"}, {"0 0 31 2 *", ""}, {"0 0 1-31/7 * 1,3,5", "Asia/Kolkata"},
	} {
		f.Add(seed.expr, seed.tz)
	}
	f.Fuzz(func(t *testing.T, expr, tz string) {
		h := enginetest.New(t, &engine.Config{EventBuffer: 64})
		s := schedule.New(h.Engine, h.Clock, nil)
		defer s.Stop()
		sc, err := s.Create(context.Background(), schedule.Spec{Name: "fuzz", Kind: schedule.KindCron, Cron: expr, TimeZone: tz,
			SpreadWindow: -1, Enabled: true, Template: enginetest.Spec("a").Obj()})
		if err != nil {
			var ee *engine.Error
			if !errors.As(err, &ee) || ee.Code != engine.CodeInvalidInput {
				t.Fatalf("untyped or unexpected error for %q/%q: %v", expr, tz, err)
			}
			return
		}
		now := h.Clock.Now()
		if !sc.NextRunAt.IsZero() && !sc.NextRunAt.After(now) {
			t.Fatalf("%q/%q: next run %v is not after %v", expr, tz, sc.NextRunAt, now)
		}
		prev := now
		for i := 0; i < 3 && !sc.NextRunAt.IsZero() && sc.NextRunAt.Sub(now) < 5*365*24*time.Hour; i++ {
			h.Clock.Set(sc.NextRunAt)
			got, err := s.Get(context.Background(), sc.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.NextRunAt.IsZero() && !got.NextRunAt.After(prev) {
				t.Fatalf("%q/%q: the timetable went back: %v after %v", expr, tz, got.NextRunAt, prev)
			}
			prev, sc = sc.NextRunAt, got
		}
	})
}
