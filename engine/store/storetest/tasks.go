package storetest

// Tasks: what a commit writes reads back whole, and commits are atomic.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

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
	spec.Exhausted = engine.ExhaustedFail
	spec.SessionMaxInFlight = 3
	spec.SessionReplay = true
	t.Spec = &spec
	t.Depth, t.Rank = 2, -42
	t.State, t.Reason = engine.StateRetryWait, "backing off: 502"
	t.Attempts = []engine.Attempt{
		{N: 1, LeaseID: 9, InstanceID: "inst-1", TabID: "tab-1", AssignedAt: epoch, StartedAt: epoch.Add(time.Millisecond),
			EndedAt: epoch.Add(time.Second), Class: policy.ClassTransient, HTTPStatus: 502, Error: "instance fault: bad gateway",
			Code: "upstream_502", TabTime: 800 * time.Microsecond, ActionTime: 998*time.Millisecond + 7, InstanceFault: true,
			EndedBy: engine.EndedByExecutor},
		{N: 2, LeaseID: 11, AssignedAt: epoch.Add(2 * time.Second)},
	}
	t.Result = json.RawMessage(`{"partial": true}`)
	t.Error, t.Class, t.RetryOf = "bad gateway", policy.ClassTransient, "T000000"
	t.NextRunAt, t.Unmet, t.ResetAt = epoch.Add(3*time.Second), 1, 1
	t.Webhooks = []engine.WebhookDelivery{{ID: "d1", Attempt: 1, URL: "https://example.com/h", At: epoch, Duration: time.Second, HTTPStatus: 503, Error: "the receiver answered 503"}}
	return t
}

// requireEveryField fails when a field of the struct v is its zero value:
// a field added to it later must be set in the round trip too, or the test
// would not see a store that drops it.
func requireEveryField(t *testing.T, v any, what string) {
	t.Helper()
	rv := reflect.ValueOf(v)
	for i := range rv.NumField() {
		require.False(t, rv.Field(i).IsZero(), "%s: set %s, so that the round trip covers it", what, rv.Type().Field(i).Name)
	}
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
	requireEveryField(t, rich.Attempts[0], "richTask's first attempt")
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

	// A new task twice in one batch (submitted and started before the
	// commit), beside new tasks enough for a driver to write in several
	// statements: the later snapshot wins, and the task's events are its
	// own once.
	c := mkTask(6, "c")
	startedC := with(c, func(t *engine.Task) { t.State, t.Reason, t.LastSeq = engine.StateRunning, "started", 7 })
	many := &engine.Batch{Tasks: []*engine.Task{c, startedC},
		Events: []engine.Event{ev(6, c, 0, engine.StateQueued), ev(7, c, engine.StateQueued, engine.StateRunning)}}
	for n := uint64(8); n < 8+40; n++ {
		x := mkTask(n, "x")
		many.Tasks = append(many.Tasks, x)
		many.Events = append(many.Events, ev(n, x, 0, engine.StateQueued))
	}
	commit(t, s, many)
	requireTask(t, startedC, getTask(t, s, c.ID), "the later snapshot of a new task wins")
	for _, x := range many.Tasks[2:] {
		requireTask(t, x, getTask(t, s, x.ID))
	}
	counts, err = s.CountTasks(bg, engine.TaskFilter{})
	require.NoError(t, err)
	require.Equal(t, map[engine.State]int{engine.StateQueued: 41, engine.StateRunning: 1, engine.StateSucceeded: 1}, counts)
	doneC := ended(startedC, engine.StateSucceeded, epoch.Add(time.Second))
	commit(t, s, &engine.Batch{Tasks: []*engine.Task{doneC}, Events: []engine.Event{ev(48, c, engine.StateRunning, engine.StateSucceeded)}})
	purged, err := s.Purge(bg, epoch.Add(time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 2, purged, "both ended tasks are purged")
	evs, err := s.Events(bg, 0, 100)
	require.NoError(t, err)
	for _, e := range evs {
		require.NotContains(t, []string{a.ID, c.ID}, e.TaskID, "a purged task's events go with it (event %d)", e.Seq)
	}
	require.Len(t, evs, 41, "the other tasks' events stay")
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
