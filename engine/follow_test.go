package engine_test

import (
	"context"
	"errors"
	"slices"
	"sync"
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

type committed struct{ ended, queued []string }

func (s *batchRecorder) Commit(ctx context.Context, b *engine.Batch) error {
	var c committed
	for _, ev := range b.Events {
		switch {
		case ev.Type == engine.EventState && ev.To.Terminal():
			c.ended = append(c.ended, ev.TaskID)
		case ev.Type == engine.EventState && ev.To == engine.StateQueued:
			c.queued = append(c.queued, ev.TaskID)
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
		exec := enginetest.NewExecutor()
		st := &batchRecorder{durableMemory: durableMemory{memory.New(memory.Options{})}}
		e, err := engine.New(engine.Options{Store: st, Executor: exec})
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		defer func() { _ = e.Shutdown(ctx) }()
		ended := func(id string) bool {
			i, _ := st.commitOf(id)
			return i >= 0
		}
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
		require.True(t, ended(followed.ID), "the followed task's end is committed at once")
		unfollow()
		unfollow() // harmless

		alone, err := e.Submit(ctx, enginetest.Spec("a").Obj())
		require.NoError(t, err)
		finish(alone.ID)
		require.False(t, ended(alone.ID), "nobody follows it: its end lingers for company")
		next, err := e.Submit(ctx, enginetest.Spec("b").Obj())
		require.NoError(t, err)
		_, c := st.commitOf(alone.ID)
		require.Contains(t, c.queued, next.ID, "the end rode in the next submission's commit")

		finish(next.ID)
		time.Sleep(time.Second) // fake time: the linger passes
		synctest.Wait()
		require.True(t, ended(next.ID), "alone, a lingering end is written after lazyCommitDelay")

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
		exec := enginetest.NewExecutor()
		st := &batchRecorder{durableMemory: durableMemory{memory.New(memory.Options{})}}
		e, err := engine.New(engine.Options{Store: st, Executor: exec})
		require.NoError(t, err)
		require.NoError(t, e.Start(ctx))
		defer func() { _ = e.Shutdown(ctx) }()
		ended := func(id string) bool {
			i, _ := st.commitOf(id)
			return i >= 0
		}

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
		require.True(t, ended(expiring.ID), "the followed task's expiry is committed at once")

		// Its dependency fails: the cascade cancels it.
		synctest.Wait()
		require.NoError(t, exec.Fail(blocker.ID, engine.Permanent(errors.New("no such page"))))
		synctest.Wait()
		require.Equal(t, engine.StateCancelled, taskState(t, e, cascaded.ID))
		require.True(t, ended(cascaded.ID), "the followed task's cancellation by a cascade is committed at once")
		require.True(t, ended(blocker.ID), "and the dependency's end rode with it")
	})
}

func taskState(t *testing.T, e *engine.Engine, id string) engine.State {
	t.Helper()
	got, err := e.Task(context.Background(), id)
	require.NoError(t, err)
	return got.State
}
