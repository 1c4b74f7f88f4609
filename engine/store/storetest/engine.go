package storetest

// The engine on top of the store: an engine dropped without shutdown (as a
// killed process is) and a new engine started on the same data must recover
// as doc/architecture.md ("The store") promises.

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
)

func runEngine(t *testing.T, d Driver) {
	t.Run("RecoveryAfterCrash", func(t *testing.T) {
		t.Parallel()
		testRecovery(t, d)
	})
	t.Run("ResumedLeaseIsAnEventAfterCrash", func(t *testing.T) {
		t.Parallel()
		testResumedLeaseEvent(t, d)
	})
	t.Run("StoppedSessionRefusesLateWorkAfterCrash", func(t *testing.T) {
		t.Parallel()
		testStoppedSession(t, d)
	})
}

func recoveryConfig() *engine.Config {
	return &engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 2}}}
}

// startEngine starts a deterministic engine (synchronous, fake clock,
// scripted executor) on s. It is never shut down: tests drop it, as a crash
// would.
func startEngine(t *testing.T, s engine.Store, now time.Time) (*engine.Engine, *clock.Fake, *enginetest.Executor) {
	t.Helper()
	return startEngineWith(t, s, now, recoveryConfig())
}

// startEngineWith is startEngine with cfg.
func startEngineWith(t *testing.T, s engine.Store, now time.Time, cfg *engine.Config) (*engine.Engine, *clock.Fake, *enginetest.Executor) {
	t.Helper()
	clk, x := clock.NewFake(now), enginetest.NewExecutor()
	e, err := engine.New(enginetest.Synchronous(engine.Options{Config: *cfg, Store: s, Executor: x, Clock: clk, Seed: 7}))
	require.NoError(t, err)
	require.NoError(t, e.Start(bg))
	return e, clk, x
}

func submit(t *testing.T, e *engine.Engine, spec engine.TaskSpec) string {
	t.Helper()
	task, err := e.Submit(bg, spec)
	require.NoError(t, err)
	return task.ID
}

func state(t *testing.T, e *engine.Engine, id string) engine.State {
	t.Helper()
	task, err := e.Task(bg, id)
	require.NoError(t, err)
	return task.State
}

func testRecovery(t *testing.T, d Driver) {
	s := d.open(t)
	e1, _, x1 := startEngine(t, s, epoch)

	failed := submit(t, e1, enginetest.Spec("a").Obj())
	require.NoError(t, x1.Finish(failed, engine.Outcome{Err: engine.Permanent(errors.New("400: unknown action")), Code: "unknown_action"}))
	running := submit(t, e1, enginetest.Spec("a").Obj())
	x1.Run(running).Started("inst-1", "tab-1")
	once := submit(t, e1, enginetest.Spec("a").Retry(engine.RetryPolicy{MaxAttempts: 1}).Obj()) // ASSIGNED, no retry left
	queued := []string{
		submit(t, e1, enginetest.Spec("a").Obj()),
		submit(t, e1, enginetest.Spec("b").Obj()),
		submit(t, e1, enginetest.Spec("a").Obj()),
	}
	waiting := submit(t, e1, enginetest.Spec("b").DependsOn(running).Obj())
	cancelled := submit(t, e1, enginetest.Spec("b").Obj())
	_, err := e1.Cancel(bg, cancelled, "changed my mind")
	require.NoError(t, err)
	paused := true
	_, err = e1.UpdateLane(bg, "main", engine.LaneUpdate{Paused: &paused})
	require.NoError(t, err)

	require.Equal(t, engine.StateRunning, state(t, e1, running))
	require.Equal(t, engine.StateAssigned, state(t, e1, once))
	require.Equal(t, engine.StateWaiting, state(t, e1, waiting))
	lastSeq := e1.Events().Last()
	require.NotZero(t, lastSeq)

	// The process dies: no shutdown. A new one starts on the same data.
	s2 := d.reopen(t, s)
	e2, clk2, x2 := startEngine(t, s2, epoch.Add(time.Minute))

	require.Empty(t, x2.Starts(), "the lane's pause was persisted: nothing is dispatched")
	got, err := e2.Task(bg, running)
	require.NoError(t, err)
	require.Equal(t, engine.StateRetryWait, got.State, "a running task counts an interrupted attempt and backs off")
	require.Len(t, got.Attempts, 1)
	require.Equal(t, "interrupted: the server stopped while it ran", got.Attempts[0].Error)
	require.Equal(t, engine.CodeRestart, got.Attempts[0].Code, "the engine's own code for the interrupted attempt")
	require.False(t, got.Attempts[0].EndedAt.IsZero(), "the interrupted attempt is closed")
	// The old engine's clock stood at epoch throughout: its last event, the
	// last sign of the attempt, is then; the new engine starts a minute on.
	require.WithinDuration(t, epoch, got.Attempts[0].EndedAt, time.Millisecond,
		"the interrupted attempt ends when the store last heard of the engine that ran it, not at the recovery")
	got, err = e2.Task(bg, once)
	require.NoError(t, err)
	require.Equal(t, engine.StateParked, got.State, "an assigned task without retries left parks")
	require.Len(t, got.Attempts, 1)
	require.Equal(t, engine.StateWaiting, state(t, e2, waiting), "a waiting task keeps waiting")
	require.Equal(t, engine.StateFailed, state(t, e2, failed), "terminal tasks are as they were")
	got, err = e2.Task(bg, failed)
	require.NoError(t, err)
	require.Equal(t, "unknown_action", got.Attempts[0].Code, "an attempt's error code survives the restart")
	require.Equal(t, engine.StateCancelled, state(t, e2, cancelled))
	qs, err := e2.Tasks(bg, engine.TaskQuery{Filter: engine.TaskFilter{States: []engine.State{engine.StateQueued}}, Order: engine.OldestFirst, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, queued, ids(qs), "queued tasks stay queued, in order")

	evs, err := e2.StoredEvents(bg, lastSeq, 100)
	require.NoError(t, err)
	require.NotEmpty(t, evs, "recovery is recorded")
	require.Equal(t, lastSeq+1, evs[0].Seq, "seqs continue from the last committed one")
	for i, ev := range evs {
		require.Equal(t, lastSeq+1+uint64(i), ev.Seq)
	}

	// Resume: the queued tasks run first, in order; then everything finishes.
	running2 := false
	_, err = e2.UpdateLane(bg, "main", engine.LaneUpdate{Paused: &running2})
	require.NoError(t, err)
	require.Equal(t, queued[:2], x2.Started(), "the oldest queued tasks go first")
	_, err = e2.Reset(bg, once)
	require.NoError(t, err)
	clk2.Advance(2 * time.Second) // the backoff of the interrupted task elapses (and no lease does)
	for range 20 {
		run := x2.Running()
		if len(run) == 0 {
			break
		}
		for _, id := range run {
			require.NoError(t, x2.Succeed(id, `{"ok":true}`))
		}
	}
	all := append([]string{failed, running, once, waiting, cancelled}, queued...)
	for _, id := range all {
		require.True(t, state(t, e2, id).Terminal(), "task %s ends (%s); running %v", id, state(t, e2, id), x2.Running())
	}
	got, err = e2.Task(bg, running)
	require.NoError(t, err)
	require.Equal(t, engine.StateSucceeded, got.State)
	require.Len(t, got.Attempts, 2, "the interrupted attempt and the one that succeeded")
	require.Empty(t, got.Attempts[1].Code, "a success has no error code")

	// Every task reached exactly one terminal state, and the stored events
	// count from 1 without a gap or a repeat across the restart.
	require.NoError(t, e2.Sync(bg))
	evs, err = e2.StoredEvents(bg, 0, 100_000)
	require.NoError(t, err)
	terminal := map[string]int{}
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Seq, "event %d", i)
		if ev.Type == engine.EventState && ev.To.Terminal() {
			terminal[ev.TaskID]++
		}
	}
	for _, id := range all {
		require.Equal(t, 1, terminal[id], "task %s has one terminal event", id)
	}
	// The interrupted attempt's code, which the second engine made, is
	// stored too: a third engine reads it.
	e3, _, _ := startEngine(t, d.reopen(t, s2), epoch.Add(2*time.Minute))
	got, err = e3.Task(bg, running)
	require.NoError(t, err)
	require.Equal(t, engine.CodeRestart, got.Attempts[0].Code)
}

// testRunTimeLanes: lanes created and removed through the engine at run time
// are what the next engine on the same store has, whatever its
// configuration says (issue 22: GoClaw creates lanes as it goes).
func testRunTimeLanes(t *testing.T, d Driver) {
	s := d.open(t)
	e1, _, _ := startEngine(t, s, epoch)
	maxIn, cap10, oldest := 7, 10, engine.DropOldest
	_, err := e1.CreateLane(bg, "groupchat", engine.LaneUpdate{MaxInFlight: &maxIn, SessionMaxQueued: &cap10, SessionDropPolicy: &oldest})
	require.NoError(t, err)
	_, err = e1.CreateLane(bg, "doomed", engine.LaneUpdate{})
	require.NoError(t, err)
	_, err = e1.DeleteLane(bg, "doomed")
	require.NoError(t, err)
	_, err = e1.DeleteLane(bg, "main")
	require.NoError(t, err, "a configured lane may go too")
	require.NoError(t, e1.Sync(bg))

	e2, _, _ := startEngine(t, d.reopen(t, s), epoch.Add(time.Minute))
	lanes := map[string]engine.LaneConfig{}
	for _, l := range e2.Lanes(bg) {
		lanes[l.Config.Name] = l.Config
	}
	require.Contains(t, lanes, "groupchat", "a lane made at run time survives a restart")
	require.Equal(t, 7, lanes["groupchat"].MaxInFlight)
	require.Equal(t, 10, lanes["groupchat"].SessionMaxQueued)
	require.Equal(t, engine.DropOldest, lanes["groupchat"].SessionDropPolicy)
	require.NotContains(t, lanes, "doomed", "a lane removed at run time stays removed")
	require.NotContains(t, lanes, "main", "even when the configuration names it")
	_, err = e2.Submit(bg, enginetest.Spec("a").Lane("main").Obj())
	require.True(t, engine.IsCode(err, engine.CodeInvalidInput), "a removed lane takes no work: %v", err)
	_, err = e2.CreateLane(bg, "main", engine.LaneUpdate{})
	require.NoError(t, err, "a removed lane can be made again")
	_, err = e2.Submit(bg, enginetest.Spec("a").Lane("main").Obj())
	require.NoError(t, err)
}

// testResumedLeaseEvent: a pull task leased when the process died keeps its
// lease in the next one, and the new reason reaches the task's subscribers
// as a LEASE_RESUMED event, stored and numbered after the events from before
// the crash (a subscriber resuming from its last seq receives it).
func testResumedLeaseEvent(t *testing.T, d Driver) {
	s := d.open(t)
	if !s.Durable() {
		t.Skip("a lease outlives a restart only on a durable store")
	}
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	cfg := &engine.Config{Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
	e1, _, _ := startEngineWith(t, s, epoch, cfg)
	id := submit(t, e1, enginetest.Spec("a").Lane("jobs").Action("crawl").Obj())
	runs, err := e1.Pull(bg, "jobs", 1, 10*time.Minute, "w1")
	require.NoError(t, err)
	require.Len(t, runs, 1)
	lastSeq := e1.Events().Last()

	// The process dies; a new one starts on the same data.
	s2 := d.reopen(t, s)
	restart := epoch.Add(time.Minute)
	e2, _, _ := startEngineWith(t, s2, restart, cfg)
	got, err := e2.Task(bg, id)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State, "the lease is resumed")
	require.Contains(t, got.Reason, "lease resumed after a restart")

	stored, err := e2.StoredEvents(bg, lastSeq, 100)
	require.NoError(t, err)
	live, missed := e2.Events().Read(lastSeq, 100, nil)
	require.Zero(t, missed)
	for _, evs := range [][]engine.Event{stored, live} {
		require.Len(t, evs, 1, "one event: the resumed lease")
		ev := evs[0]
		require.Equal(t, lastSeq+1, ev.Seq, "numbered after the events from before the crash")
		require.Equal(t, engine.EventLeaseResumed, ev.Type)
		require.Equal(t, id, ev.TaskID)
		require.Equal(t, "jobs", ev.Lane)
		require.Equal(t, engine.StateRunning, ev.From)
		require.Equal(t, engine.StateRunning, ev.To)
		require.Equal(t, 1, ev.Attempt)
		require.Equal(t, got.Reason, ev.Reason, "the event says what the stored task says")
		require.True(t, ev.At.Equal(restart), "dated by the start that resumed it: %v", ev.At)
	}

	// The worker still ends it; a third process finds nothing to resume.
	held := e2.Leased("jobs")
	require.Len(t, held, 1)
	held[0].Finish(engine.Outcome{Result: []byte(`1`)})
	require.Equal(t, engine.StateSucceeded, state(t, e2, id))
	lastSeq = e2.Events().Last()
	e3, _, _ := startEngineWith(t, d.reopen(t, s2), restart.Add(time.Minute), cfg)
	evs, err := e3.StoredEvents(bg, lastSeq, 100)
	require.NoError(t, err)
	require.Empty(t, evs, "an ended lease is not resumed")
}

// testStoppedSession: a session stopped with all refuses, after a crash
// too, work for it that was submitted before the stop and arrives after it
// (a follower's submission that the next leader applies), until the stop's
// retention has passed.
func testStoppedSession(t *testing.T, d Driver) {
	s := d.open(t)
	e1, _, _ := startEngine(t, s, epoch)
	live := submit(t, e1, enginetest.Spec("a").Session("s").Obj())
	stopped, err := e1.StopSession(bg, "s", true)
	require.NoError(t, err)
	require.Equal(t, []string{live}, stopped)

	ingest := func(e *engine.Engine, id, session string, at time.Time) *engine.Task {
		t.Helper()
		spec := enginetest.Spec("a").Session(session).Obj()
		spec.SubmittedAt = at
		res, err := e.Ingest(bg, engine.Inbound{Items: []engine.BatchItem{{ID: id, Spec: spec}}})
		require.NoError(t, err)
		require.NoError(t, res.Items[0].Err)
		return res.Items[0].Task
	}

	// The process dies; a new one starts on the same data.
	s2 := d.reopen(t, s)
	e2, clk2, _ := startEngine(t, s2, epoch.Add(time.Minute))
	late := ingest(e2, "late-1", "s", epoch.Add(-time.Second))
	require.Equal(t, engine.StateCancelled, late.State, "submitted before the stop: refused after the restart too")
	require.Equal(t, "session stopped", late.Reason)
	other := ingest(e2, "other-1", "t", epoch.Add(-time.Second))
	require.NotEqual(t, engine.StateCancelled, other.State, "another session is not stopped")
	fresh := ingest(e2, "fresh-1", "s", epoch.Add(time.Second))
	require.NotEqual(t, engine.StateCancelled, fresh.State, "work submitted after the stop is welcome")

	// Past its retention the stop is forgotten, its stored form too: a
	// third process admits such late work.
	for range 11 {
		clk2.Advance(time.Minute) // housekeeping runs at least once a minute
	}
	_, kept := e2.Setting("cutoff/s")
	require.False(t, kept, "the stored stop is deleted with the one in memory")
	require.NoError(t, e2.Sync(bg))
	e3, _, _ := startEngine(t, d.reopen(t, s2), epoch.Add(13*time.Minute))
	later := ingest(e3, "late-2", "s", epoch.Add(-time.Second))
	require.NotEqual(t, engine.StateCancelled, later.State, "the stop was forgotten after its retention")
}
