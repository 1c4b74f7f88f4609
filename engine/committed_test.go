package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// gatedStore is a memory store whose commits can be held at a gate until
// released, or refused; durable says what the engine is told.
type gatedStore struct {
	*memory.Store
	durable bool

	mu   sync.Mutex
	gate chan struct{} // commits wait until it is closed; nil: they pass
	fail error         // commits fail with it
	held int           // commits that reached the gate
}

func (s *gatedStore) Durable() bool { return s.durable }

func (s *gatedStore) Commit(ctx context.Context, b *engine.Batch) error {
	s.mu.Lock()
	gate, fail := s.gate, s.fail
	if gate != nil {
		s.held++
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if fail != nil {
		return fail
	}
	return s.Store.Commit(ctx, b)
}

// hold makes the next commits wait; the returned function lets them through.
func (s *gatedStore) hold() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	}
}

func (s *gatedStore) heldCommits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// stored is the task as the store has it committed.
func (s *gatedStore) stored(t *testing.T, id string) *engine.Task {
	t.Helper()
	st, err := s.Store.Task(context.Background(), id)
	require.NoError(t, err)
	return st
}

// startGated starts an engine over a gated store, with attempts that end
// when told, and submits one task whose attempt has started (ASSIGNED,
// committed).
func startGated(t *testing.T, durable bool) (*engine.Engine, *gatedStore, *enginetest.Executor, string) {
	t.Helper()
	ctx := context.Background()
	st := &gatedStore{Store: memory.New(memory.Options{}), durable: durable}
	exec := enginetest.NewExecutor()
	e, err := engine.New(engine.Options{Config: engine.Config{CommitTimeout: time.Minute}, Store: st, Executor: exec})
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		st.mu.Lock()
		st.fail = nil
		if st.gate != nil {
			close(st.gate)
			st.gate = nil
		}
		st.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = e.Shutdown(sctx)
	})
	task, err := e.Submit(ctx, enginetest.Spec("a").Obj())
	require.NoError(t, err)
	synctest.Wait()
	require.NotNil(t, exec.Run(task.ID), "the attempt started: its assignment is committed")
	return e, st, exec, task.ID
}

type readResult struct {
	task *engine.Task
	err  error
}

// readCommitted calls CommittedTask in a goroutine of its own.
func readCommitted(e *engine.Engine, id string) <-chan readResult {
	out := make(chan readResult, 1)
	go func() {
		task, err := e.CommittedTask(context.Background(), id)
		out <- readResult{task, err}
	}()
	return out
}

// With a durable store, CommittedTask never shows a change the store has
// not committed: it waits while the change is pending, and while its
// commit is in the store's hands, and returns it once committed. It asks
// for no commit of its own: the attempt's start is written after
// runningCommitDelay, as it would have been. Task meanwhile shows the
// uncommitted state (which is what the task(id) subscription used to send).
// In a synctest bubble, synctest.Wait is the point where nothing more can
// happen until time passes or the gate opens.
func TestCommittedTaskWaitsForTheCommitOfWhatItShows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, true)
		release := st.hold()
		exec.Run(id).Started("inst", "tab")
		live, err := e.Task(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, engine.StateRunning, live.State, "memory runs ahead of the store")

		res := readCommitted(e, id)
		synctest.Wait()
		require.Empty(t, res, "the start is pending: no answer yet")
		require.Zero(t, st.heldCommits(), "no commit of its own: the start lingers as it would")

		time.Sleep(time.Second) // past runningCommitDelay: the start's commit reaches the store
		synctest.Wait()
		require.Equal(t, 1, st.heldCommits())
		require.Empty(t, res, "the start is in the store's hands: still no answer")
		require.Equal(t, engine.StateAssigned, st.stored(t, id).State)

		release()
		synctest.Wait()
		require.Len(t, res, 1, "answered once the commit landed")
		r := <-res
		require.NoError(t, r.err)
		require.Equal(t, engine.StateRunning, r.task.State)
		require.Equal(t, engine.StateRunning, st.stored(t, id).State, "what it showed is committed")
	})
}

// Once the commit it waited for has landed, CommittedTask answers with the
// task as it is then when that is committed too — here the attempt's end
// rode in the same commit as its start — and otherwise with the snapshot
// it waited for: it does not chase a task that keeps changing. (Without
// the second look, a follower that subscribed while the start was pending
// got RUNNING, then at once SUCCEEDED: one message more on its way.)
func TestCommittedTaskAnswersWithTheLatestCommittedSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, exec, id := startGated(t, true)
		defer e.Follow(id)() // as followers do: the ended task stays in memory for them
		exec.Run(id).Started("inst", "tab")
		res := readCommitted(e, id)
		synctest.Wait()
		require.Empty(t, res)
		require.NoError(t, exec.Succeed(id, `{"ok":true}`)) // joins the start's pending batch
		r := <-res
		require.NoError(t, r.err)
		require.Equal(t, engine.StateSucceeded, r.task.State, "the end was committed with the start")
	})
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, true)
		release := st.hold()
		exec.Run(id).Started("inst", "tab")
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, st.heldCommits(), "the start is in the store's hands")
		res := readCommitted(e, id)
		synctest.Wait()
		require.NoError(t, exec.Succeed(id, `{"ok":true}`)) // pending, behind the start's commit
		release()
		r := <-res
		require.NoError(t, r.err)
		// The start's commit answers the read; its second look may find
		// the end committed too, when the committer wrote it first (the
		// order of the two goroutines is the scheduler's). Either way
		// what it shows is committed, and it is not the state before the
		// start.
		require.Contains(t, []engine.State{engine.StateRunning, engine.StateSucceeded}, r.task.State)
		require.GreaterOrEqual(t, st.stored(t, id).LastSeq, r.task.LastSeq, "what it shows is committed")
	})
}

// A task whose changes are all committed is returned at once, even while
// another task's commit is held in the store's hands: there is nothing to
// wait for. With a store that is not durable nothing is ever waited for.
func TestCommittedTaskAnswersAtOnceWhenNothingIsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, true)
		other, err := e.Submit(context.Background(), enginetest.Spec("b").Obj())
		require.NoError(t, err)
		synctest.Wait()
		release := st.hold()
		exec.Run(other.ID).Finish(engine.Outcome{})
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, st.heldCommits(), "the other task's end is in the store's hands")

		res := readCommitted(e, id)
		synctest.Wait()
		require.Len(t, res, 1, "answered at once")
		r := <-res
		require.NoError(t, r.err)
		require.Equal(t, engine.StateAssigned, r.task.State)
		release()
	})
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, false)
		release := st.hold()
		exec.Run(id).Started("inst", "tab")
		res := readCommitted(e, id)
		synctest.Wait()
		require.Len(t, res, 1, "a store that is not durable: nothing to wait for")
		r := <-res
		require.NoError(t, r.err)
		require.Equal(t, engine.StateRunning, r.task.State)
		release()
	})
}

// A change that no event records (here a webhook delivery's record) is
// waited for too while its commit is in the store's hands, though the
// task's lastSeq is committed.
func TestCommittedTaskWaitsForAChangeWithoutAnEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st, _, id := startGated(t, true)
		release := st.hold()
		require.NoError(t, e.RecordTaskWebhook(context.Background(), id, engine.WebhookDelivery{ID: "d1", URL: "http://hook.test/", Attempt: 1, HTTPStatus: 200, Delivered: true, Final: true}))
		time.Sleep(time.Second)
		synctest.Wait()
		require.Equal(t, 1, st.heldCommits(), "the delivery's record is in the store's hands")

		res := readCommitted(e, id)
		synctest.Wait()
		require.Empty(t, res, "the record is not committed: no answer yet")
		release()
		synctest.Wait()
		r := <-res
		require.NoError(t, r.err)
		require.Len(t, r.task.Webhooks, 1)
		require.Len(t, st.stored(t, id).Webhooks, 1)
	})
}

// When the commit of what the task shows fails for good (here the store
// fences the engine off), CommittedTask answers UNAVAILABLE, never the
// uncommitted state — and so do later reads of the task.
func TestCommittedTaskNeverShowsAChangeWhoseCommitFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, true)
		release := st.hold()
		st.mu.Lock()
		st.fail = fmt.Errorf("another node leads: %w", engine.ErrFenced)
		st.mu.Unlock()
		require.NoError(t, exec.Succeed(id, `{"ok":true}`))
		res := readCommitted(e, id)
		synctest.Wait()
		require.Empty(t, res)
		release()
		synctest.Wait()
		r := <-res
		require.Nil(t, r.task, "the uncommitted end is not shown")
		require.Truef(t, engine.IsCode(r.err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", r.err)
		require.True(t, errors.Is(r.err, engine.ErrFenced), "it says why: %v", r.err)

		again, err := e.CommittedTask(context.Background(), id)
		require.Nil(t, again)
		require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
		require.Equal(t, engine.StateAssigned, st.stored(t, id).State)
	})
}

// A store that keeps failing: the read answers UNAVAILABLE after the
// commit timeout, without the state it could not confirm.
func TestCommittedTaskGivesUpAfterTheCommitTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, st, exec, id := startGated(t, true)
		st.mu.Lock()
		st.fail = errors.New("disk I/O error (injected)")
		st.mu.Unlock()
		require.NoError(t, exec.Succeed(id, `{"ok":true}`))
		start := time.Now()
		task, err := e.CommittedTask(context.Background(), id)
		require.Nil(t, task)
		require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
		require.GreaterOrEqual(t, time.Since(start), time.Minute, "it waits the commit timeout (the bubble's clock)")
	})
}
