package storetest

// The Store contract, method by method: the list of its tests and the
// builders and checks they share. The tests are in files by area: tasks.go,
// queries.go, settings.go, events.go and purge.go.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// epoch is the suite's fixed "now".
var epoch = time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)

var bg = context.Background()

func runStore(t *testing.T, d Driver) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, Driver)
	}{
		{"EmptyStoreHoldsNothingAndSaysNotFound", testEmpty},
		{"CommittedTaskReadsBackEveryField", testRoundTrip},
		{"LargeAndUnicodeValuesSurvive", testLargeValues},
		{"CommitUpsertsByID", testUpsert},
		{"FailingCommitWritesNothing", testAtomic},
		{"TasksPageByKeysetInBothOrders", testKeyset},
		{"TasksAndCountsMatchEveryFilter", testFilters},
		{"IdempotencyKeysAreScopedToTheAgent", testIdempotency},
		{"BatchesReadBack", testBatches},
		{"LanesAndSettingsLatestWinsAndNilDeletes", testLanesSettings},
		{"LanesMadeAndRemovedAtRunTimeSurviveARestart", testRunTimeLanes},
		{"EventsAfterSeqRespectLimitAndOrder", testEvents},
		{"LoadReturnsLiveTasksInSeqOrderWithTheirBatches", testLoad},
		{"PurgeDeletesEndedTasksBeforeTheCutoffWithTheirEvents", testPurge},
		{"PurgeWorksInLimitedBatches", testPurgeLimit},
		{"PurgeDeletesEventsOfNoTaskBeforeTheCutoff", testPurgeTaskless},
		{"LastSeqSurvivesPurgingEveryEvent", testLastSeqSurvives},
		{"ManyTasksAndEventsInOneCommit", testBigCommit},
		{"ReadsRunConcurrentlyWithCommits", testConcurrentReads},
		{"PipelinedCommitsLandInOrderAndFailTogether", testPipelined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.f(t, d)
		})
	}
}

// --- builders -------------------------------------------------------------

func id(n uint64) string { return fmt.Sprintf("T%06d", n) }

// mkTask returns a QUEUED task whose seq is n.
func mkTask(n uint64, agent string) *engine.Task {
	at := epoch.Add(time.Duration(n) * time.Millisecond)
	return &engine.Task{
		ID:  id(n),
		Seq: n,
		Spec: &engine.TaskSpec{AgentID: agent, Lane: "main", Priority: engine.PriorityNormal,
			Action: &engine.Action{Kind: "click", Selector: "css:#go"}, SubmittedAt: at},
		State: engine.StateQueued, Reason: "submitted", CreatedAt: at, UpdatedAt: at, QueuedAt: at,
		LastSeq: n, Position: -1,
	}
}

// with returns a copy of t changed by f (the spec is shared, as the engine
// shares it).
func with(t *engine.Task, f func(*engine.Task)) *engine.Task {
	c := *t
	c.Attempts = slices.Clone(t.Attempts)
	f(&c)
	return &c
}

// ended returns t terminal in state s at time at.
func ended(t *engine.Task, s engine.State, at time.Time) *engine.Task {
	return with(t, func(c *engine.Task) {
		c.State, c.EndedAt, c.UpdatedAt, c.Reason = s, at, at, strings.ToLower(s.String())
	})
}

func ev(seq uint64, t *engine.Task, from, to engine.State) engine.Event {
	return engine.Event{Seq: seq, At: epoch.Add(time.Duration(seq) * time.Microsecond), Type: engine.EventState,
		TaskID: t.ID, AgentID: t.Spec.AgentID, Lane: t.Spec.Lane, SessionKey: t.Spec.Session(), BatchID: t.Spec.BatchID,
		From: from, To: to, Reason: "to " + to.String(), Webhook: seq%3 == 0}
}

func commit(t *testing.T, s engine.Store, b *engine.Batch) {
	t.Helper()
	require.NoError(t, s.Commit(bg, b))
}

// --- comparisons ------------------------------------------------------------

func nt(x time.Time) time.Time {
	if x.IsZero() {
		return time.Time{}
	}
	return x.UTC()
}

// norm returns a copy of t that compares equal to any faithful copy: times
// in UTC without monotonic readings, empty slices and maps as nil.
func norm(t *engine.Task) engine.Task {
	c := *t
	s := *t.Spec
	s.SubmittedAt, s.Deadline = nt(s.SubmittedAt), nt(s.Deadline)
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	if len(s.DependsOn) == 0 {
		s.DependsOn = nil
	}
	if s.Action != nil {
		a := *s.Action
		if len(a.Params) == 0 {
			a.Params = nil
		}
		s.Action = &a
	}
	if s.Retry != nil {
		r := *s.Retry
		s.Retry = &r
	}
	c.Spec = &s
	c.CreatedAt, c.UpdatedAt, c.QueuedAt, c.NextRunAt, c.EndedAt = nt(c.CreatedAt), nt(c.UpdatedAt), nt(c.QueuedAt), nt(c.NextRunAt), nt(c.EndedAt)
	if len(c.Attempts) == 0 {
		c.Attempts = nil
	} else {
		c.Attempts = slices.Clone(c.Attempts)
		for i := range c.Attempts {
			a := &c.Attempts[i]
			a.AssignedAt, a.StartedAt, a.EndedAt = nt(a.AssignedAt), nt(a.StartedAt), nt(a.EndedAt)
		}
	}
	if len(c.Result) == 0 {
		c.Result = nil
	}
	return c
}

func requireTask(t *testing.T, want, got *engine.Task, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, got, msgAndArgs...)
	require.Equal(t, norm(want), norm(got), msgAndArgs...)
}

func normEvent(e engine.Event) engine.Event {
	e.At = nt(e.At)
	return e
}

func requireEvents(t *testing.T, want, got []engine.Event, msgAndArgs ...any) {
	t.Helper()
	w := make([]engine.Event, len(want))
	for i := range want {
		w[i] = normEvent(want[i])
	}
	g := make([]engine.Event, len(got))
	for i := range got {
		g[i] = normEvent(got[i])
	}
	require.Equal(t, w, g, msgAndArgs...)
}

func ids(ts []*engine.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func getTask(t *testing.T, s engine.Store, id string) *engine.Task {
	t.Helper()
	got, err := s.Task(bg, id)
	require.NoError(t, err, "task %s", id)
	return got
}

func requireNotFound(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	require.ErrorIs(t, err, engine.ErrNotFound, "%s: the error wraps engine.ErrNotFound", what)
}

func load(t *testing.T, s engine.Store) *engine.Snapshot {
	t.Helper()
	snap, err := s.Load(bg)
	require.NoError(t, err)
	return snap
}

// --- tests -------------------------------------------------------------------
