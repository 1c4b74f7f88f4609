package storetest

// Purges: ended tasks with their events, in limited batches, and events of no task.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

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
