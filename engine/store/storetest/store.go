package storetest

// The Store contract, method by method.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
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
		{"EventsAfterSeqRespectLimitAndOrder", testEvents},
		{"LoadReturnsLiveTasksInSeqOrderWithTheirBatches", testLoad},
		{"PurgeDeletesEndedTasksBeforeTheCutoffWithTheirEvents", testPurge},
		{"PurgeWorksInLimitedBatches", testPurgeLimit},
		{"PurgeDeletesEventsOfNoTaskBeforeTheCutoff", testPurgeTaskless},
		{"LastSeqSurvivesPurgingEveryEvent", testLastSeqSurvives},
		{"ManyTasksAndEventsInOneCommit", testBigCommit},
		{"ReadsRunConcurrentlyWithCommits", testConcurrentReads},
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

func testEmpty(t *testing.T, d Driver) {
	s := d.open(t)
	snap := load(t, s)
	require.Empty(t, snap.Tasks)
	require.Empty(t, snap.Batches)
	require.Empty(t, snap.Lanes)
	require.Empty(t, snap.Settings)
	require.Zero(t, snap.LastSeq)
	_, err := s.Task(bg, "nope")
	requireNotFound(t, err, "Task")
	_, err = s.Batch(bg, "nope")
	requireNotFound(t, err, "Batch")
	_, err = s.FindIdempotent(bg, "agent", "key")
	requireNotFound(t, err, "FindIdempotent")
	ts, err := s.Tasks(bg, engine.TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, ts)
	counts, err := s.CountTasks(bg, engine.TaskFilter{})
	require.NoError(t, err)
	require.Empty(t, counts)
	evs, err := s.Events(bg, 0, 10)
	require.NoError(t, err)
	require.Empty(t, evs)
	n, err := s.Purge(bg, epoch.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, s.Commit(bg, &engine.Batch{}), "an empty batch commits")
}

// richTask sets every field of a task to something other than its zero.
func richTask(n uint64) *engine.Task {
	t := mkTask(n, "agent-rich")
	spec := *t.Spec
	spec.Lane, spec.SessionKey, spec.Priority = "team", "session-1", engine.PriorityCritical
	spec.Action = &engine.Action{Kind: "fill", Ref: "e12", Selector: "css:#name", Params: json.RawMessage(`{"text": "hello",  "delay": 5}`)}
	spec.TabID, spec.InstanceID = "tab-1", "inst-1"
	spec.DependsOn = []string{"T000001", "T000002"}
	spec.BatchID, spec.ParentID = "B1", "T000000"
	spec.Deadline, spec.Timeout = epoch.Add(time.Hour), 90*time.Second
	spec.Retry = &engine.RetryPolicy{MaxAttempts: 7, Backoff: 250 * time.Millisecond, Multiplier: 1.5, MaxBackoff: time.Minute, Jitter: true}
	spec.WebhookURL, spec.IdempotencyKey = "https://example.test/hook?x=1&y=2", "idem-1"
	spec.Labels = map[string]string{"env": "prod", "team": "search"}
	spec.QueueMode = engine.QueueInterrupt
	t.Spec = &spec
	t.Depth, t.Rank = 2, -42
	t.State, t.Reason = engine.StateRetryWait, "backing off: 502"
	t.Attempts = []engine.Attempt{
		{N: 1, LeaseID: 9, InstanceID: "inst-1", TabID: "tab-1", AssignedAt: epoch, StartedAt: epoch.Add(time.Millisecond),
			EndedAt: epoch.Add(time.Second), Class: policy.ClassTransient, HTTPStatus: 502, Error: "bad gateway"},
		{N: 2, LeaseID: 11, AssignedAt: epoch.Add(2 * time.Second)},
	}
	t.Result = json.RawMessage(`{"partial": true}`)
	t.Error, t.Class, t.RetryOf = "bad gateway", policy.ClassTransient, "T000000"
	t.NextRunAt, t.Unmet, t.ResetAt = epoch.Add(3*time.Second), 1, 1
	t.Webhooks = []engine.WebhookDelivery{{ID: "d1", Attempt: 1, URL: "https://example.com/h", At: epoch, Duration: time.Second, HTTPStatus: 503, Error: "the receiver answered 503"}}
	return t
}

func testRoundTrip(t *testing.T, d Driver) {
	s := d.open(t)
	rich := richTask(3)
	plain := mkTask(4, "agent-plain")
	instr := with(mkTask(5, "agent-plain"), func(c *engine.Task) {
		spec := *c.Spec
		spec.Action, spec.Instruction = nil, "book a table for two"
		c.Spec = &spec
	})
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{rich, plain, instr},
		Events: []engine.Event{ev(3, rich, 0, engine.StateQueued), ev(4, plain, 0, engine.StateQueued), ev(5, instr, 0, engine.StateQueued)}})
	for _, want := range []*engine.Task{rich, plain, instr} {
		requireTask(t, want, getTask(t, s, want.ID), "Task(%s)", want.ID)
	}
	ts, err := s.Tasks(bg, engine.TaskQuery{Order: engine.OldestFirst, Limit: 10})
	require.NoError(t, err)
	require.Len(t, ts, 3)
	requireTask(t, rich, ts[0], "Tasks")
	got, err := s.FindIdempotent(bg, "agent-rich", "idem-1")
	require.NoError(t, err)
	requireTask(t, rich, got, "FindIdempotent")
	snap := load(t, s)
	require.Len(t, snap.Tasks, 3)
	requireTask(t, rich, snap.Tasks[0], "Load")
	require.Equal(t, uint64(5), snap.LastSeq)
	require.JSONEq(t, `{"text": "hello", "delay": 5}`, string(getTask(t, s, rich.ID).Spec.Action.Params))
}

func testLargeValues(t *testing.T, d Driver) {
	s := d.open(t)
	big := mkTask(1, "ägent-ß-エージェント-🤖")
	spec := *big.Spec
	params := make(map[string]string, 64)
	for i := range 64 {
		params[fmt.Sprintf("k%02d", i)] = strings.Repeat("é🙂x", 1300)
	}
	raw, err := json.Marshal(params)
	require.NoError(t, err)
	require.Greater(t, len(raw), 250<<10, "params near the engine's 256 KiB cap")
	spec.Action = &engine.Action{Kind: "fill", Selector: `css:input[name="q"]`, Params: raw}
	spec.SessionKey = "セッション/1 \"quoted\" \\ back"
	spec.Labels = map[string]string{}
	for i := range 64 {
		spec.Labels[fmt.Sprintf("label-%02d-ключ.with.dots", i)] = strings.Repeat("значение", 30)
	}
	spec.Labels[`we"ird key`] = `va'lue $.x`
	big.Spec = &spec
	for i := range 100 {
		big.Attempts = append(big.Attempts, engine.Attempt{N: i + 1, LeaseID: uint64(i + 100), InstanceID: "inst-ü",
			AssignedAt: epoch.Add(time.Duration(i) * time.Second), EndedAt: epoch.Add(time.Duration(i)*time.Second + time.Millisecond),
			Class: policy.ClassTransient, HTTPStatus: 500 + i%4, Error: strings.Repeat("stack trace line ✗\n", 50)})
	}
	result := map[string]string{"text": strings.Repeat("résultat 🧾 ", 100_000)}
	big.Result, err = json.Marshal(result)
	require.NoError(t, err)
	big.Reason = "raison: ünïcödé ✓ and a tab\tand a newline\n"
	big = ended(big, engine.StateSucceeded, epoch.Add(time.Hour))
	e := ev(1, big, 0, engine.StateSucceeded)
	e.Reason = strings.Repeat("事件 ", 1000)
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{big}, Events: []engine.Event{e}})
	got := getTask(t, s, big.ID)
	requireTask(t, big, got)
	require.Equal(t, string(raw), string(got.Spec.Action.Params), "params come back byte for byte")
	evs, err := s.Events(bg, 0, 10)
	require.NoError(t, err)
	requireEvents(t, []engine.Event{e}, evs)
	ts, err := s.Tasks(bg, engine.TaskQuery{Filter: engine.TaskFilter{AgentID: big.Spec.AgentID, SessionKey: spec.SessionKey,
		Labels: map[string]string{`we"ird key`: `va'lue $.x`, "label-07-ключ.with.dots": spec.Labels["label-07-ключ.with.dots"]}}, Limit: 5})
	require.NoError(t, err)
	require.Equal(t, []string{big.ID}, ids(ts), "unicode and odd characters filter like any others")
}

func testUpsert(t *testing.T, d Driver) {
	s := d.open(t)
	a, b := mkTask(1, "a"), mkTask(2, "a")
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{a, b}, Events: []engine.Event{ev(1, a, 0, engine.StateQueued), ev(2, b, 0, engine.StateQueued)}})
	running := with(a, func(c *engine.Task) {
		c.State, c.Reason, c.LastSeq = engine.StateRunning, "started", 4
		c.Attempts = []engine.Attempt{{N: 1, LeaseID: 1, InstanceID: "i", AssignedAt: epoch, StartedAt: epoch}}
	})
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{running}, Events: []engine.Event{ev(3, a, engine.StateQueued, engine.StateAssigned), ev(4, a, engine.StateAssigned, engine.StateRunning)}})
	requireTask(t, running, getTask(t, s, a.ID), "the second snapshot replaces the first")
	done := ended(running, engine.StateSucceeded, epoch.Add(time.Second))
	done.Result = json.RawMessage(`{"ok":true}`)
	done.Attempts[0].EndedAt = epoch.Add(time.Second)
	// The same task twice in one batch: the later snapshot wins.
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{running, done}, Events: []engine.Event{ev(5, a, engine.StateRunning, engine.StateSucceeded)}})
	requireTask(t, done, getTask(t, s, a.ID))
	all, err := s.Tasks(bg, engine.TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{b.ID, a.ID}, ids(all), "an upsert adds no row and keeps the task's place")
	counts, err := s.CountTasks(bg, engine.TaskFilter{})
	require.NoError(t, err)
	require.Equal(t, map[engine.State]int{engine.StateQueued: 1, engine.StateSucceeded: 1}, counts)
	snap := load(t, s)
	require.Equal(t, []string{b.ID}, ids(snap.Tasks), "a task that ended leaves Load")
}

func testAtomic(t *testing.T, d Driver) {
	s := d.open(t)
	a := mkTask(1, "a")
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{a}, Events: []engine.Event{ev(1, a, 0, engine.StateQueued), ev(2, a, engine.StateQueued, engine.StateAssigned)}})
	before := load(t, s)
	evsBefore, err := s.Events(bg, 0, 100)
	require.NoError(t, err)

	b := mkTask(3, "b")
	b.Spec.BatchID = "B-bad"
	b.Spec.IdempotencyKey = "k"
	changed := ended(a, engine.StateFailed, epoch.Add(time.Second))
	bad := &engine.Batch{
		Tasks:    []*engine.Task{b, changed},
		Batches:  []engine.BatchInfo{{ID: "B-bad", Parallelism: 2, CreatedAt: epoch}},
		Lanes:    []engine.LaneConfig{{Name: "bad", MaxInFlight: 3}},
		Settings: []engine.Setting{{Key: "policy", Value: []byte("bad")}},
	}
	for name, evs := range map[string][]engine.Event{
		"a seq already committed":         {ev(2, b, 0, engine.StateQueued), ev(3, changed, engine.StateAssigned, engine.StateFailed)},
		"seqs that go backwards":          {ev(4, b, 0, engine.StateQueued), ev(3, changed, engine.StateAssigned, engine.StateFailed)},
		"a seq repeated within the batch": {ev(3, b, 0, engine.StateQueued), ev(3, changed, engine.StateAssigned, engine.StateFailed)},
	} {
		bad.Events = evs
		require.Error(t, s.Commit(bg, bad), "a batch with %s fails", name)
		require.Equal(t, before, load(t, s), "a failed batch (%s) writes nothing", name)
		requireTask(t, a, getTask(t, s, a.ID), "the task keeps its committed snapshot (%s)", name)
		_, err := s.Task(bg, b.ID)
		requireNotFound(t, err, "a new task of a failed batch")
		_, err = s.Batch(bg, "B-bad")
		requireNotFound(t, err, "a batch of a failed batch")
		_, err = s.FindIdempotent(bg, "b", "k")
		requireNotFound(t, err, "an idempotency key of a failed batch")
		evs, err := s.Events(bg, 0, 100)
		require.NoError(t, err)
		requireEvents(t, evsBefore, evs, "no event of a failed batch")
	}
	bad.Events = []engine.Event{ev(3, b, 0, engine.StateQueued), ev(4, changed, engine.StateAssigned, engine.StateFailed)}
	commit(t, s, bad)
	requireTask(t, changed, getTask(t, s, a.ID), "the store still commits after a failure")
	requireTask(t, b, getTask(t, s, b.ID))
	require.Equal(t, uint64(4), load(t, s).LastSeq)
}

func testKeyset(t *testing.T, d Driver) {
	s := d.open(t)
	var all []*engine.Task
	batch := &engine.Batch{}
	for n := uint64(1); n <= 25; n++ {
		// Seqs with gaps, as in a real store where other events interleave.
		task := mkTask(n*3, "a")
		all = append(all, task)
		batch.Tasks = append(batch.Tasks, task)
		batch.Events = append(batch.Events, ev(n*3, task, 0, engine.StateQueued))
	}
	commit(t, s, batch)
	for _, order := range []engine.Order{engine.OldestFirst, engine.NewestFirst} {
		want := ids(all)
		if order == engine.NewestFirst {
			slices.Reverse(want)
		}
		var got []string
		var after uint64
		for page := 0; ; page++ {
			ts, err := s.Tasks(bg, engine.TaskQuery{Order: order, After: after, Limit: 7})
			require.NoError(t, err)
			require.LessOrEqual(t, len(ts), 7, "a page holds at most Limit tasks")
			if len(ts) == 0 {
				break
			}
			got = append(got, ids(ts)...)
			after = ts[len(ts)-1].Seq
			require.Less(t, page, 10, "pagination ends")
		}
		require.Equal(t, want, got, "order %d: pages walk every task once, in order", order)
	}
	// A cursor between seqs, and past either end.
	ts, err := s.Tasks(bg, engine.TaskQuery{Order: engine.OldestFirst, After: 10, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{id(12), id(15)}, ids(ts), "oldest first after 10")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, After: 10, Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []string{id(9), id(6)}, ids(ts), "newest first before 10")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.OldestFirst, After: 75, Limit: 5})
	require.NoError(t, err)
	require.Empty(t, ts, "nothing after the newest")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, After: 3, Limit: 5})
	require.NoError(t, err)
	require.Empty(t, ts, "nothing before the oldest")
	ts, err = s.Tasks(bg, engine.TaskQuery{Order: engine.NewestFirst, Limit: 0})
	require.NoError(t, err)
	require.Empty(t, ts, "a zero limit returns nothing")
}

// filterWorld commits 72 tasks that differ in every filtered field and
// returns them in seq order.
func filterWorld(t *testing.T, s engine.Store) []*engine.Task {
	t.Helper()
	agents := []string{"a", "b", "ägent-ü"}
	lanes := []string{"main", "team"}
	states := []engine.State{engine.StateQueued, engine.StateWaiting, engine.StateRunning, engine.StateSucceeded,
		engine.StateFailed, engine.StateParked, engine.StateCancelled, engine.StateRetryWait}
	var all []*engine.Task
	b := &engine.Batch{Batches: []engine.BatchInfo{{ID: "B1", CreatedAt: epoch}, {ID: "B2", CreatedAt: epoch}}}
	for n := uint64(1); n <= 72; n++ {
		task := mkTask(n, agents[n%3])
		spec := *task.Spec
		spec.Lane = lanes[n%2]
		switch n % 4 {
		case 0:
			spec.SessionKey = "s1"
		case 1:
			spec.TabID = "s1" // no session key: the tab is the session
		case 2:
			spec.SessionKey, spec.TabID = "s2", "s1"
		}
		switch n % 5 {
		case 0:
			spec.BatchID = "B1"
		case 1:
			spec.BatchID = "B2"
		}
		if n%6 == 0 {
			spec.ParentID = id(n - 1)
		}
		spec.Labels = map[string]string{}
		if n%2 == 0 {
			spec.Labels["env"] = "prod"
		} else if n%3 == 0 {
			spec.Labels["env"] = "dev"
		}
		if n%7 < 3 {
			spec.Labels["team"] = "x"
		}
		task.Spec = &spec
		if st := states[n%8]; st != engine.StateQueued {
			task = with(task, func(c *engine.Task) { c.State = st })
			if st.Terminal() {
				task = ended(task, st, epoch.Add(time.Minute))
			}
		}
		all = append(all, task)
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, ev(n, task, 0, task.State))
	}
	commit(t, s, b)
	return all
}

func testFilters(t *testing.T, d Driver) {
	s := d.open(t)
	all := filterWorld(t, s)
	filters := []engine.TaskFilter{
		{},
		{AgentID: "a"}, {AgentID: "ägent-ü"}, {AgentID: "nobody"},
		{Lane: "team"}, {Lane: "main"},
		{SessionKey: "s1"}, {SessionKey: "s2"}, {SessionKey: "tab-that-is-not-a-session"},
		{BatchID: "B1"}, {BatchID: "B2"}, {BatchID: "B3"},
		{ParentID: id(5)}, {ParentID: id(6)},
		{States: []engine.State{engine.StateQueued}},
		{States: []engine.State{engine.StateSucceeded, engine.StateFailed, engine.StateCancelled}},
		{States: []engine.State{engine.StateExpired}},
		{IDs: []string{id(3), id(70), id(71), "missing"}},
		{Labels: map[string]string{"env": "prod"}},
		{Labels: map[string]string{"env": "prod", "team": "x"}},
		{Labels: map[string]string{"env": "dev", "team": "x"}},
		{Labels: map[string]string{"env": "staging"}},
		{Labels: map[string]string{"absent": ""}},
		{AgentID: "b", Lane: "main", SessionKey: "s1"},
		{AgentID: "a", States: []engine.State{engine.StateQueued, engine.StateParked}, Labels: map[string]string{"env": "prod"}},
		{BatchID: "B1", Lane: "team", States: []engine.State{engine.StateRunning, engine.StateSucceeded}},
		{IDs: []string{id(10), id(11), id(12)}, AgentID: "b"},
		{ParentID: id(11), BatchID: "B2", AgentID: "ägent-ü", Lane: "team", SessionKey: "s1",
			States: []engine.State{engine.StateWaiting}, Labels: map[string]string{"env": "prod", "team": "x"}},
	}
	for i, f := range filters {
		var want []string
		wantCounts := map[engine.State]int{}
		for _, task := range all {
			if f.Matches(task) {
				want = append(want, task.ID)
				wantCounts[task.State]++
			}
		}
		for _, order := range []engine.Order{engine.OldestFirst, engine.NewestFirst} {
			var got []string
			var after uint64
			for page := 0; page < 20; page++ {
				ts, err := s.Tasks(bg, engine.TaskQuery{Filter: f, Order: order, After: after, Limit: 7})
				require.NoError(t, err)
				if len(ts) == 0 {
					break
				}
				for _, task := range ts {
					require.True(t, f.Matches(task), "filter %d %+v: task %s does not match", i, f, task.ID)
				}
				got = append(got, ids(ts)...)
				after = ts[len(ts)-1].Seq
			}
			w := slices.Clone(want)
			if order == engine.NewestFirst {
				slices.Reverse(w)
			}
			if len(w) == 0 {
				w = nil
			}
			require.Equal(t, w, got, "filter %d %+v, order %d: every match, in order, across pages", i, f, order)
		}
		counts, err := s.CountTasks(bg, f)
		require.NoError(t, err)
		require.Equal(t, wantCounts, counts, "filter %d %+v: counts by state", i, f)
	}
}

func testIdempotency(t *testing.T, d Driver) {
	s := d.open(t)
	a := mkTask(1, "agent-1")
	a.Spec.IdempotencyKey = "order-42"
	b := mkTask(2, "agent-2")
	b.Spec.IdempotencyKey = "order-43"
	c := mkTask(3, "agent-1") // no key
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{a, b, c}, Events: []engine.Event{ev(1, a, 0, 1), ev(2, b, 0, 1), ev(3, c, 0, 1)}})
	got, err := s.FindIdempotent(bg, "agent-1", "order-42")
	require.NoError(t, err)
	require.Equal(t, a.ID, got.ID)
	_, err = s.FindIdempotent(bg, "agent-2", "order-42")
	requireNotFound(t, err, "another agent's key")
	_, err = s.FindIdempotent(bg, "agent-1", "order-43")
	requireNotFound(t, err, "a key of another agent")
	_, err = s.FindIdempotent(bg, "agent-1", "")
	requireNotFound(t, err, "the empty key")
	// The key follows the task's latest snapshot.
	done := ended(a, engine.StateCancelled, epoch.Add(time.Second))
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{done}, Events: []engine.Event{ev(4, a, 1, engine.StateCancelled)}})
	got, err = s.FindIdempotent(bg, "agent-1", "order-42")
	require.NoError(t, err)
	requireTask(t, done, got)
}

func testBatches(t *testing.T, d Driver) {
	s := d.open(t)
	b1 := engine.BatchInfo{ID: "B1", Parallelism: 3, WebhookURL: "https://example.test/b1", CreatedAt: epoch}
	b2 := engine.BatchInfo{ID: "B2-ü", CreatedAt: epoch.Add(time.Second)}
	commit(t, s, &engine.Batch{Batches: []engine.BatchInfo{b1, b2}})
	for _, want := range []engine.BatchInfo{b1, b2} {
		got, err := s.Batch(bg, want.ID)
		require.NoError(t, err)
		got.CreatedAt = nt(got.CreatedAt)
		require.Equal(t, want, *got)
	}
	_, err := s.Batch(bg, "B3")
	requireNotFound(t, err, "an unknown batch")

	// A batch is replaced by ID: its end and its webhook deliveries.
	ended := b1
	ended.EndedAt = epoch.Add(time.Minute)
	ended.Webhooks = []engine.WebhookDelivery{{ID: "B1.9", Attempt: 1, URL: b1.WebhookURL, At: epoch.Add(time.Minute),
		Duration: 3 * time.Millisecond, HTTPStatus: 200, Delivered: true, Final: true}}
	commit(t, s, &engine.Batch{Batches: []engine.BatchInfo{ended}})
	got, err := d.reopen(t, s).Batch(bg, "B1")
	require.NoError(t, err)
	got.CreatedAt, got.EndedAt = nt(got.CreatedAt), nt(got.EndedAt)
	for i := range got.Webhooks {
		got.Webhooks[i].At = nt(got.Webhooks[i].At)
	}
	require.Equal(t, ended, *got, "a batch's end and deliveries survive a restart")
}

func testLanesSettings(t *testing.T, d Driver) {
	s := d.open(t)
	main := engine.DefaultLanes()[0]
	team := engine.DefaultLanes()[2]
	commit(t, s, &engine.Batch{Lanes: []engine.LaneConfig{main, team},
		Settings: []engine.Setting{{Key: "policy.fairness", Value: []byte(`{"name":"fairshare"}`)}, {Key: "plugins", Value: []byte{0, 1, 2, 255}}}})
	paused := main
	paused.Paused, paused.MaxInFlight = true, 5
	paused.Retry.MaxAttempts = 9
	commit(t, s, &engine.Batch{Lanes: []engine.LaneConfig{paused},
		Settings: []engine.Setting{{Key: "policy.fairness", Value: []byte(`{"name":"drr"}`)}, {Key: "plugins", Value: nil}, {Key: "ü", Value: []byte{}}}})
	snap := load(t, s)
	lanes := slices.Clone(snap.Lanes)
	slices.SortFunc(lanes, func(a, b engine.LaneConfig) int { return strings.Compare(a.Name, b.Name) })
	require.Equal(t, []engine.LaneConfig{paused, team}, lanes, "the latest config of each lane")
	require.Equal(t, map[string][]byte{"policy.fairness": []byte(`{"name":"drr"}`), "ü": {}}, snap.Settings,
		"the latest value of each setting; nil deletes; empty is a value")
	s2 := d.reopen(t, s)
	snap2 := load(t, s2)
	require.ElementsMatch(t, snap.Lanes, snap2.Lanes, "lanes survive a restart")
	require.Equal(t, snap.Settings, snap2.Settings, "settings survive a restart")
}

func testEvents(t *testing.T, d Driver) {
	s := d.open(t)
	var all []engine.Event
	seq := uint64(0)
	// Commits of varied sizes, some larger than a driver's chunking.
	for _, size := range []int{1, 3, 300, 2, 700, 1} {
		b := &engine.Batch{}
		for range size {
			seq++
			task := mkTask(seq, fmt.Sprintf("agent-%d", seq%5))
			e := ev(seq, task, engine.StateQueued, engine.StateRunning)
			e.Attempt = int(seq % 4)
			switch seq % 9 {
			case 0:
				e.Type, e.TaskID, e.AgentID, e.SessionKey, e.BatchID, e.From, e.To = engine.EventLane, "", "", "", "", 0, 0
				e.Lane, e.Reason = "team", "lane team: inflight 40 → 50"
			case 1:
				e.At = time.Time{}
				e.Reason = "ünïcode ✓"
			}
			all = append(all, e)
			b.Events = append(b.Events, e)
		}
		commit(t, s, b)
	}
	for _, c := range []struct{ after, limit int }{
		{0, 5000}, {0, 1}, {3, 2}, {4, 300}, {150, 10}, {303, 700}, {304, 1}, {1000, 10}, {1006, 10}, {1007, 10}, {5000, 10}, {10, 0},
	} {
		evs, err := s.Events(bg, uint64(c.after), c.limit)
		require.NoError(t, err)
		lo := min(c.after, len(all))
		want := all[lo:min(lo+c.limit, len(all))]
		if len(want) == 0 {
			require.Empty(t, evs, "after %d limit %d", c.after, c.limit)
			continue
		}
		requireEvents(t, want, evs, "after %d limit %d", c.after, c.limit)
	}
	require.Equal(t, seq, load(t, s).LastSeq)
}

func testLoad(t *testing.T, d Driver) {
	s := d.open(t)
	b := &engine.Batch{Batches: []engine.BatchInfo{
		{ID: "B-live", Parallelism: 2, CreatedAt: epoch}, {ID: "B-ended", CreatedAt: epoch}, {ID: "B-empty", CreatedAt: epoch}}}
	var live []string
	for n := uint64(1); n <= 24; n++ {
		task := mkTask(n, "a")
		st := engine.State(n%11 + 1)
		task = with(task, func(c *engine.Task) { c.State = st })
		if st.Terminal() {
			task = ended(task, st, epoch)
		} else {
			live = append(live, task.ID)
		}
		spec := *task.Spec
		if st.Terminal() {
			spec.BatchID = "B-ended"
		} else if n%2 == 0 {
			spec.BatchID = "B-live"
		}
		task.Spec = &spec
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, ev(n, task, 0, st))
	}
	// Committed out of seq order: Load still returns seq order.
	slices.Reverse(b.Tasks)
	commit(t, s, b)
	check := func(st engine.Store) {
		snap := load(t, st)
		require.Equal(t, live, ids(snap.Tasks), "every live task, in seq order, and no terminal one")
		require.Len(t, snap.Batches, 1, "only the batches that have live tasks")
		require.Equal(t, "B-live", snap.Batches[0].ID)
		require.Equal(t, 2, snap.Batches[0].Parallelism)
		require.Equal(t, uint64(24), snap.LastSeq)
	}
	check(s)
	check(d.reopen(t, s))
}

func testPurge(t *testing.T, d Driver) {
	s := d.open(t)
	now := epoch.Add(24 * time.Hour)
	oldDone := ended(mkTask(1, "a"), engine.StateSucceeded, now.Add(-3*time.Hour))
	oldDone.Spec.IdempotencyKey = "k1"
	oldFailed := ended(mkTask(2, "a"), engine.StateFailed, now.Add(-2*time.Hour))
	recent := ended(mkTask(3, "a"), engine.StateCancelled, now.Add(-time.Minute))
	oldLive := with(mkTask(4, "a"), func(c *engine.Task) { c.State = engine.StateParked }) // old, but not ended
	b := &engine.Batch{Tasks: []*engine.Task{oldDone, oldFailed, recent, oldLive}}
	for i, task := range b.Tasks {
		b.Events = append(b.Events, ev(uint64(i+1), task, 0, engine.StateQueued))
	}
	commit(t, s, b)
	// More events of the same tasks, in a later commit, and a lane event.
	laneEv := engine.Event{Seq: 9, At: now, Type: engine.EventLane, Lane: "main", Reason: "paused"}
	commit(t, s, &engine.Batch{Events: []engine.Event{
		ev(5, oldDone, engine.StateQueued, engine.StateSucceeded), ev(6, oldFailed, engine.StateQueued, engine.StateFailed),
		ev(7, recent, engine.StateQueued, engine.StateCancelled), ev(8, oldLive, engine.StateQueued, engine.StateParked), laneEv}})

	n, err := s.Purge(bg, now.Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the two tasks that ended before the cutoff")
	for _, gone := range []*engine.Task{oldDone, oldFailed} {
		_, err := s.Task(bg, gone.ID)
		requireNotFound(t, err, "a purged task")
	}
	for _, kept := range []*engine.Task{recent, oldLive} {
		requireTask(t, kept, getTask(t, s, kept.ID), "kept")
	}
	_, err = s.FindIdempotent(bg, "a", "k1")
	requireNotFound(t, err, "a purged task's idempotency key")
	evs, err := s.Events(bg, 0, 100)
	require.NoError(t, err)
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	require.Equal(t, []uint64{3, 4, 7, 8, 9}, seqs, "the purged tasks' events are gone, the others stay")
	ts, err := s.Tasks(bg, engine.TaskQuery{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []string{oldLive.ID, recent.ID}, ids(ts))
	n, err = s.Purge(bg, now.Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n, "nothing more to purge")
	require.Equal(t, uint64(9), load(t, s).LastSeq)
}

func testPurgeLimit(t *testing.T, d Driver) {
	s := d.open(t)
	b := &engine.Batch{}
	for n := uint64(1); n <= 25; n++ {
		task := ended(mkTask(n, "a"), engine.StateSucceeded, epoch.Add(time.Duration(n)*time.Second))
		b.Tasks = append(b.Tasks, task)
		b.Events = append(b.Events, ev(n, task, engine.StateRunning, engine.StateSucceeded))
	}
	commit(t, s, b)
	total := 0
	for range 10 {
		n, err := s.Purge(bg, epoch.Add(time.Hour), 10)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 10, "at most limit tasks per call")
		total += n
		if n == 0 {
			break
		}
	}
	require.Equal(t, 25, total, "repeated calls purge everything eligible")
	counts, err := s.CountTasks(bg, engine.TaskFilter{})
	require.NoError(t, err)
	require.Empty(t, counts)
	evs, err := s.Events(bg, 0, 100)
	require.NoError(t, err)
	require.Empty(t, evs)
}

func testLastSeqSurvives(t *testing.T, d Driver) {
	s := d.open(t)
	task := ended(mkTask(1, "a"), engine.StateSucceeded, epoch)
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{task}, Events: []engine.Event{ev(1, task, 0, engine.StateQueued), ev(2, task, engine.StateQueued, engine.StateSucceeded)}})
	n, err := s.Purge(bg, epoch.Add(time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, uint64(2), load(t, s).LastSeq, "the last seq outlives its events")
	s = d.reopen(t, s)
	require.Equal(t, uint64(2), load(t, s).LastSeq, "and a restart")
	next := mkTask(3, "a")
	require.Error(t, s.Commit(bg, &engine.Batch{Tasks: []*engine.Task{next}, Events: []engine.Event{ev(2, next, 0, engine.StateQueued)}}),
		"a purged seq cannot be reused")
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{next}, Events: []engine.Event{ev(3, next, 0, engine.StateQueued)}})
}

func testBigCommit(t *testing.T, d Driver) {
	s := d.open(t)
	const n = 5000
	b := &engine.Batch{Tasks: make([]*engine.Task, 0, n), Events: make([]engine.Event, 0, 4*n)}
	seq := uint64(0)
	for i := range n {
		task := mkTask(uint64(i*4+1), fmt.Sprintf("agent-%d", i%50))
		for k := range 4 {
			seq++
			b.Events = append(b.Events, ev(seq, task, engine.State(k), engine.State(k+1)))
		}
		b.Tasks = append(b.Tasks, task)
	}
	commit(t, s, b)
	counts, err := s.CountTasks(bg, engine.TaskFilter{})
	require.NoError(t, err)
	require.Equal(t, map[engine.State]int{engine.StateQueued: n}, counts)
	got := 0
	for after := uint64(0); ; {
		evs, err := s.Events(bg, after, 1000)
		require.NoError(t, err)
		if len(evs) == 0 {
			break
		}
		require.Equal(t, after+1, evs[0].Seq, "events continue where the last page ended")
		got += len(evs)
		after = evs[len(evs)-1].Seq
	}
	require.Equal(t, 4*n, got)
	require.Len(t, load(t, s).Tasks, n)
}

func testConcurrentReads(t *testing.T, d Driver) {
	s := d.open(t)
	const commits = 150
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	stop := make(chan struct{})
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch r {
				case 0:
					var evs []engine.Event
					evs, err = s.Events(bg, 0, 100_000)
					for i := range evs {
						if evs[i].Seq != uint64(i+1) {
							err = fmt.Errorf("events read mid-commit: seq %d at %d", evs[i].Seq, i)
							break
						}
					}
				case 1:
					var ts []*engine.Task
					ts, err = s.Tasks(bg, engine.TaskQuery{Filter: engine.TaskFilter{AgentID: "a"}, Limit: 50})
					if err == nil && len(ts)%2 != 0 {
						err = fmt.Errorf("a half-committed batch is visible: %d tasks", len(ts))
					}
				case 2:
					var snap *engine.Snapshot
					snap, err = s.Load(bg)
					if err == nil && uint64(len(snap.Tasks)) != snap.LastSeq {
						err = fmt.Errorf("load is not one state: %d tasks, last seq %d", len(snap.Tasks), snap.LastSeq)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := uint64(0); i < commits; i++ {
		a, b := mkTask(2*i+1, "a"), mkTask(2*i+2, "a")
		require.NoError(t, s.Commit(bg, &engine.Batch{Tasks: []*engine.Task{a, b},
			Events: []engine.Event{ev(2*i+1, a, 0, engine.StateQueued), ev(2*i+2, b, 0, engine.StateQueued)}}))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func testPurgeTaskless(t *testing.T, d Driver) {
	s := d.open(t)
	now := epoch.Add(24 * time.Hour)
	live := mkTask(1, "a")
	old := func(seq uint64, ago time.Duration) engine.Event {
		return engine.Event{Seq: seq, At: now.Add(-ago), Type: engine.EventLane, Lane: "main", Reason: "paused"}
	}
	taskEv := ev(2, live, 0, engine.StateQueued)
	taskEv.At = now.Add(-3 * time.Hour) // old, but its task lives
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{live}, Events: []engine.Event{old(1, 4*time.Hour), taskEv, old(3, 3*time.Hour)}})
	commit(t, s, &engine.Batch{Events: []engine.Event{old(4, 2*time.Hour), old(5, time.Minute)}})
	engineEv := engine.Event{Seq: 6, At: now, Type: engine.EventEngine, Reason: "draining"}
	commit(t, s, &engine.Batch{Events: []engine.Event{engineEv}})

	n, err := s.Purge(bg, now.Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n, "no task ended")
	evs, err := s.Events(bg, 0, 100)
	require.NoError(t, err)
	var seqs []uint64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	require.Equal(t, []uint64{2, 5, 6}, seqs, "the lane events from before the cutoff are gone; a live task's events and newer ones stay")
	requireTask(t, live, getTask(t, s, live.ID), "the task stays")
	require.Equal(t, uint64(6), load(t, s).LastSeq)
	n, err = s.Purge(bg, now.Add(-time.Hour), 100)
	require.NoError(t, err)
	require.Zero(t, n)
	evs, err = s.Events(bg, 0, 100)
	require.NoError(t, err)
	require.Len(t, evs, 3, "nothing more to purge")

	// Many commits of lane events, which a later cutoff passes: a store may
	// take them in several calls, as the engine's purge loop makes them, but
	// gets them all.
	for seq := uint64(7); seq < 207; seq++ {
		commit(t, s, &engine.Batch{Events: []engine.Event{old(seq, -time.Hour)}}) // an hour after now
	}
	for range 30 {
		_, err := s.Purge(bg, now.Add(2*time.Hour), 10)
		require.NoError(t, err)
	}
	evs, err = s.Events(bg, 0, 1000)
	require.NoError(t, err)
	require.Len(t, evs, 1, "every lane and engine event is gone after enough purges")
	require.Equal(t, uint64(2), evs[0].Seq, "the live task's event stays")
}
