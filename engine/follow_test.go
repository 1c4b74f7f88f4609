package engine_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// batchRecorder is a durable memory store that remembers, per commit, the
// tasks whose end (a terminal state) it wrote and the tasks it wrote as new
// (QUEUED), so a test can tell what rode with what.
type batchRecorder struct {
	durableMemory
	mu      sync.Mutex
	commits []committed
}

type committed struct{ ended, queued, running []string }

func newBatchRecorder() *batchRecorder {
	return &batchRecorder{durableMemory: durableMemory{memory.New(memory.Options{})}}
}

// startRecorded starts an engine over st (a batchRecorder, or a store built
// on one) with a scripted executor, and shuts it down when the test ends
// (in a synctest bubble, inside the bubble).
func startRecorded(t *testing.T, st engine.Store) (*engine.Engine, *enginetest.Executor) {
	t.Helper()
	exec := enginetest.NewExecutor()
	e, err := engine.New(engine.Options{Store: st, Executor: exec})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e, exec
}

func (s *batchRecorder) Commit(ctx context.Context, b *engine.Batch) error {
	var c committed
	for _, ev := range b.Events {
		switch {
		case ev.Type == engine.EventState && ev.To.Terminal():
			c.ended = append(c.ended, ev.TaskID)
		case ev.Type == engine.EventState && ev.To == engine.StateQueued:
			c.queued = append(c.queued, ev.TaskID)
		case ev.Type == engine.EventState && ev.To == engine.StateRunning:
			c.running = append(c.running, ev.TaskID)
		}
	}
	if err := s.durableMemory.Commit(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	s.commits = append(s.commits, c)
	s.mu.Unlock()
	return nil
}

// runningIn returns the commit that wrote id's start (RUNNING), or -1.
func (s *batchRecorder) runningIn(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.commits {
		if slices.Contains(c.running, id) {
			return i
		}
	}
	return -1
}

// readsFrom counts the store's Task reads (engine.Engine.Task asks the store
// only for a task it no longer holds).
type readsFrom struct {
	*batchRecorder
	reads atomic.Int32
}

func (s *readsFrom) Task(ctx context.Context, id string) (*engine.Task, error) {
	s.reads.Add(1)
	return s.batchRecorder.Task(ctx, id)
}

// ended reports whether a commit wrote id's end.
func (s *batchRecorder) ended(id string) bool {
	i, _ := s.commitOf(id)
	return i >= 0
}

// commitOf returns the commit that wrote id's end, or -1.
func (s *batchRecorder) commitOf(id string) (int, committed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.commits {
		if slices.Contains(c.ended, id) {
			return i, c
		}
	}
	return -1, committed{}
}

// TestAFollowedTaskEndsWithoutLingering: with a durable store, the end of a
// task nobody follows lingers until the next commit someone waits for (the
// next submission's), while the end of a followed task is committed — and
// so published — at once. It runs in a synctest bubble: synctest.Wait is
// the point where the committer has done all it was going to do, and the
// linger (lazyCommitDelay) passes only when every goroutine waits.
func TestAFollowedTaskEndsWithoutLingering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newBatchRecorder()
		e, exec := startRecorded(t, st)
		finish := func(id string) {
			synctest.Wait()
			require.NotNil(t, exec.Run(id), "the attempt of %s started", id)
			exec.Run(id).Finish(engine.Outcome{})
			synctest.Wait()
		}

		followed, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		unfollow := e.Follow(followed.ID)
		finish(followed.ID)
		require.True(t, st.ended(followed.ID), "the followed task's end is committed at once")
		unfollow()
		unfollow() // harmless

		alone, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		finish(alone.ID)
		require.False(t, st.ended(alone.ID), "nobody follows it: its end lingers for company")
		next, err := e.Submit(ctx, enginetest.Spec("b").Obj())
		require.NoError(t, err)
		_, c := st.commitOf(alone.ID)
		require.Contains(t, c.queued, next.ID, "the end rode in the next submission's commit")

		finish(next.ID)
		time.Sleep(time.Second) // fake time: the linger passes
		synctest.Wait()
		require.True(t, st.ended(next.ID), "alone, a lingering end is written after lazyCommitDelay")

		require.NotPanics(t, func() { e.Follow("no-such-task")() })
	})
}

// TestAFollowedTaskEndedByATimerOrACascadeEndsWithoutLingering: what ends a
// followed task does not matter — its deadline's timer, or a dependency's
// failure cascading to it, is committed at once as its attempt's end is,
// not after lazyCommitDelay. Nothing else is followed, so without the
// follower both ends would linger. synctest: the test's clock stands still
// while it looks (synctest.Wait), so a lingering end is still unwritten.
func TestAFollowedTaskEndedByATimerOrACascadeEndsWithoutLingering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newBatchRecorder()
		e, exec := startRecorded(t, st)

		blocker, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		expiring, err := e.Submit(ctx, enginetest.Spec("b").DependsOn(blocker.ID).Deadline(time.Now().Add(time.Second)).Obj())
		require.NoError(t, err)
		cascaded, err := e.Submit(ctx, enginetest.Spec("c").DependsOn(blocker.ID).Obj())
		require.NoError(t, err)
		defer e.Follow(expiring.ID)()
		defer e.Follow(cascaded.ID)()

		// The deadline passes while it waits: the timer expires it. The
		// test wakes 1 ms later, before a lingering commit would be due.
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		require.Equal(t, engine.StateExpired, taskState(t, e, expiring.ID))
		require.True(t, st.ended(expiring.ID), "the followed task's expiry is committed at once")

		// Its dependency fails: the cascade cancels it.
		synctest.Wait()
		require.NoError(t, exec.Fail(blocker.ID, engine.Permanent(errors.New("no such page"))))
		synctest.Wait()
		require.Equal(t, engine.StateCancelled, taskState(t, e, cascaded.ID))
		require.True(t, st.ended(cascaded.ID), "the followed task's cancellation by a cascade is committed at once")
		require.True(t, st.ended(blocker.ID), "and the dependency's end rode with it")
	})
}

func taskState(t *testing.T, e *engine.Engine, id string) engine.State {
	t.Helper()
	got, err := e.Task(context.Background(), id)
	require.NoError(t, err)
	return got.State
}

// TestAFollowedTaskIsReadFromMemoryUntilUnfollowed: once a followed task's
// end is committed, its follower's read of it (the task(id) subscription
// reads the task as it learns of the end) is answered from memory, not the
// store; the task is forgotten, and read from the store, once the follower
// stops — as a task nobody follows is forgotten once its end is committed.
func TestAFollowedTaskIsReadFromMemoryUntilUnfollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := &readsFrom{batchRecorder: newBatchRecorder()}
		e, exec := startRecorded(t, st)

		task, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		unfollow := e.Follow(task.ID)
		synctest.Wait()
		exec.Run(task.ID).Finish(engine.Outcome{})
		synctest.Wait()
		i, _ := st.commitOf(task.ID)
		require.GreaterOrEqual(t, i, 0, "the followed task's end is committed")

		got, err := e.Task(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, engine.StateSucceeded, got.State)
		require.Zero(t, st.reads.Load(), "followed, the ended task is read from memory")

		unfollow()
		got, err = e.Task(ctx, task.ID)
		require.NoError(t, err)
		require.Equal(t, engine.StateSucceeded, got.State)
		require.EqualValues(t, 1, st.reads.Load(), "unfollowed, it is forgotten: the store answers for it")

		// A follower that comes and goes before the end changes nothing.
		other, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		e.Follow(other.ID)()
		synctest.Wait()
		exec.Run(other.ID).Finish(engine.Outcome{})
		time.Sleep(time.Second) // fake time: the lingering end is written
		synctest.Wait()
		_, err = e.Task(ctx, other.ID)
		require.NoError(t, err)
		require.EqualValues(t, 2, st.reads.Load(), "nobody follows it: forgotten once committed")
	})
}

// TestAnAttemptsStartRidesWithItsEnd: with a durable store, an attempt's
// start (RUNNING) waits runningCommitDelay for company, so that an attempt
// that ends within it is written in one commit with its end — never in a
// commit of its own that a followed end would then wait behind — and a
// start alone is still written within runningCommitDelay.
func TestAnAttemptsStartRidesWithItsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newBatchRecorder()
		e, exec := startRecorded(t, st)

		task, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		defer e.Follow(task.ID)()
		synctest.Wait()
		exec.Run(task.ID).Started("", "")
		time.Sleep(5 * time.Millisecond) // fake time: past lazyCommitDelay (2 ms)
		synctest.Wait()
		require.Equal(t, -1, st.runningIn(task.ID), "the start waits for company past lazyCommitDelay")
		exec.Run(task.ID).Finish(engine.Outcome{})
		synctest.Wait()
		ended, _ := st.commitOf(task.ID)
		require.GreaterOrEqual(t, ended, 0, "the followed end is committed at once")
		require.Equal(t, ended, st.runningIn(task.ID), "the start rode in the end's commit")

		long, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		synctest.Wait()
		exec.Run(long.ID).Started("", "")
		time.Sleep(25 * time.Millisecond) // fake time: past runningCommitDelay (20 ms)
		synctest.Wait()
		require.GreaterOrEqual(t, st.runningIn(long.ID), 0, "a start alone is written after runningCommitDelay")
		exec.Run(long.ID).Finish(engine.Outcome{})
	})
}

// TestAFollowedEndWakesTheCommitterOnce: a followed task's end asks for its
// commit twice — its own change, then the dispatch round that runs after it
// while the end is still pending — and both are answered by the one commit
// that writes the end: the committer is not woken again, on the follower's
// way, to find nothing to write. With one P the order is certain: the
// committer runs only once the test's goroutine waits, after both signals.
func TestAFollowedEndWakesTheCommitterOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		exec := enginetest.NewExecutor()
		st := &batchRecorder{durableMemory: durableMemory{memory.New(memory.Options{})}}
		e, err := engine.New(engine.Options{Store: st, Executor: exec})
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		defer func() { _ = e.Shutdown(ctx) }()

		for range 3 {
			task, err := e.Submit(ctx, enginetest.Spec("a").Obj())
			require.NoError(t, err)
			unfollow := e.Follow(task.ID)
			synctest.Wait()
			exec.Run(task.ID).Started("", "")
			synctest.Wait()
			idle := engine.IdleCommits(e)
			exec.Run(task.ID).Finish(engine.Outcome{})
			synctest.Wait()
			ended, _ := st.commitOf(task.ID)
			require.GreaterOrEqual(t, ended, 0, "the followed end is committed at once")
			require.Equal(t, idle, engine.IdleCommits(e), "no wake-up of the committer found nothing to write")
			unfollow()
		}
	})
}
