package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// brokenDurable is a durable memory store whose commits can be made to fail
// or to hang until released.
type brokenDurable struct {
	*memory.Store
	fail atomic.Bool
	hang atomic.Pointer[chan struct{}]
}

var errInjectedDisk = errors.New("disk I/O error (injected)")

func (s *brokenDurable) Durable() bool { return true }

func (s *brokenDurable) Commit(ctx context.Context, b *engine.Batch) error {
	if h := s.hang.Load(); h != nil {
		<-*h
	}
	if s.fail.Load() {
		return errInjectedDisk
	}
	return s.Store.Commit(ctx, b)
}

func startBroken(t *testing.T, timeout time.Duration) (*engine.Engine, *brokenDurable) {
	t.Helper()
	st := &brokenDurable{Store: memory.New(memory.Options{})}
	e, err := engine.New(engine.Options{Config: engine.Config{CommitTimeout: timeout}, Store: st,
		Executor: engine.ExecutorFunc(func(context.Context, *engine.Run) engine.Outcome { return engine.Outcome{} })})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		st.fail.Store(false)
		if h := st.hang.Swap(nil); h != nil {
			close(*h)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return e, st
}

func keyedSpec(key string) engine.TaskSpec {
	return engine.TaskSpec{AgentID: "a", IdempotencyKey: key, Action: &engine.Action{Kind: "click", Selector: "#go"}}
}

// requireUnavailableWithin runs f and checks that it answers UNAVAILABLE,
// well within bound (a generous multiple of the commit timeout: the point
// is that it does not hang).
func requireUnavailableWithin(t *testing.T, bound time.Duration, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.Less(t, time.Since(start), bound, "the call answers within the commit timeout, not never")
	return err
}

// A store that fails every commit: callers get UNAVAILABLE within the commit
// timeout instead of hanging, the engine says so (CommitError, Stats), new
// submissions are refused at once once it has lasted longer than the timeout,
// and everything recovers on its own when the store does — what was pending
// is committed then, and a resubmission with the same idempotency key finds
// its task.
func TestAFailingStoreIsVisibleAndBounded(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	e, st := startBroken(t, timeout)
	ctx := context.Background()
	_, err := e.Submit(ctx, keyedSpec("before"))
	require.NoError(t, err)
	require.NoError(t, e.CommitError())

	st.fail.Store(true)
	err = requireUnavailableWithin(t, 5*time.Second, func() error { _, err := e.Submit(ctx, keyedSpec("during")); return err })
	require.ErrorIs(t, err, errInjectedDisk, "the answer carries the store's error")
	require.Error(t, e.CommitError(), "the engine says its store is failing")
	require.True(t, e.Stats(ctx).CommitFailing)
	require.Positive(t, e.Stats(ctx).CommitErrors)
	requireUnavailableWithin(t, 5*time.Second, func() error { return e.Sync(ctx) })

	// Failing for longer than the timeout: new work is refused at once.
	waitfor.Eventually(t, "submissions are refused without waiting", func() bool {
		start := time.Now()
		_, err := e.Submit(ctx, keyedSpec("refused"))
		return engine.IsCode(err, engine.CodeUnavailable) && time.Since(start) < timeout
	})

	ok := commitSucceeded(e)
	st.fail.Store(false)
	waitSignal(t, ok, "a commit succeeds once the store does: commits recover on their own")
	require.NoError(t, e.CommitError())
	require.False(t, e.Stats(ctx).CommitFailing)
	again, err := e.Submit(ctx, keyedSpec("during"))
	require.NoError(t, err)
	tasks, err := e.Tasks(ctx, engine.TaskQuery{Filter: engine.TaskFilter{AgentID: "a"}, Limit: 10})
	require.NoError(t, err)
	keys := map[string]string{}
	for _, tk := range tasks {
		keys[tk.Spec.IdempotencyKey] = tk.ID
	}
	require.Equal(t, map[string]string{"before": keys["before"], "during": again.ID}, keys,
		"the submission made during the failure was committed once the store recovered; the refused one was never recorded")
}

// A store that hangs is as unavailable as one that fails.
func TestAHangingStoreIsVisibleAndBounded(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	e, st := startBroken(t, timeout)
	ctx := context.Background()
	release := make(chan struct{})
	st.hang.Store(&release)
	requireUnavailableWithin(t, 5*time.Second, func() error { _, err := e.Submit(ctx, keyedSpec("stuck")); return err })
	waitfor.Eventually(t, "a commit stuck for longer than the timeout makes the engine unavailable", func() bool { return e.CommitError() != nil })
	require.ErrorContains(t, e.CommitError(), "in progress")
	require.True(t, e.Stats(ctx).CommitFailing)

	ok := commitSucceeded(e)
	st.hang.Store(nil)
	close(release)
	waitSignal(t, ok, "the released commit succeeds")
	require.NoError(t, e.CommitError())
	got, err := e.Submit(ctx, keyedSpec("stuck"))
	require.NoError(t, err)
	require.Equal(t, "stuck", got.Spec.IdempotencyKey)
}

// commitSucceeded returns a channel that is signalled once a commit of e
// succeeds from now on.
func commitSucceeded(e *engine.Engine) <-chan struct{} {
	ch := make(chan struct{}, 1)
	engine.ObserveCommits(e, func(err error) {
		if err == nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return ch
}

// waitSignal waits for ch, failing t after waitfor.Timeout.
func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitfor.Timeout):
		t.Fatalf("not so after %v: %s", waitfor.Timeout, what)
	}
}

// failChosen is a durable memory store that fails every commit of the
// batches chose picks, and writes the others.
type failChosen struct {
	durableMemory
	chose func(*engine.Batch) bool
}

func (s *failChosen) Commit(ctx context.Context, b *engine.Batch) error {
	if s.chose(b) {
		return errInjectedDisk
	}
	return s.durableMemory.Commit(ctx, b)
}

// admitsTo reports whether b admits a task to lane.
func admitsTo(lane string) func(*engine.Batch) bool {
	return func(b *engine.Batch) bool {
		for _, ev := range b.Events {
			if ev.Type == engine.EventState && ev.From == 0 && ev.Lane == lane {
				return true
			}
		}
		return false
	}
}

// A submission whose lane ranks outside the lock records its task in one
// batch, and its rank in another when the committer swaps the first out
// while the policy decides. If the first batch fails (here: the store
// refuses it, and it is given up at shutdown) and the second is written,
// the submission must not answer success: its task was never written.
// Each step is a signal — the ranking call entered, the first batch's
// commit failed, the task dispatched once ranked — so the interleaving is
// the same every run.
func TestASubmissionAnswersForEveryBatchThatHoldsItsTask(t *testing.T) {
	t.Parallel()
	st := &failChosen{durableMemory: durableMemory{memory.New(memory.Options{})}, chose: admitsTo("a")}
	cfg := engine.Config{CommitTimeout: time.Minute, Lanes: []engine.LaneConfig{{Name: "a", MaxInFlight: 10}}}
	e, err := engine.New(engine.Options{Config: cfg, Store: st, Executor: enginetest.NewExecutor()})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	g := newGate(t)
	require.NoError(t, e.SetSelection("a", "held", heldSelection{g}))

	answer := make(chan error, 1)
	go func() {
		_, err := e.Submit(context.Background(), enginetest.Spec("alice").Lane("a").Obj())
		answer <- err
	}()
	waitFor(t, g.entered, "the ranking call") // the task's admission is pending; its rank is being decided

	// The committer takes the pending batch (the task's admission) and the
	// store refuses it.
	failed := make(chan struct{}, 1)
	engine.ObserveCommits(e, func(err error) {
		if err != nil {
			select {
			case failed <- struct{}{}:
			default:
			}
		}
	})
	sctx, stopSync := context.WithCancel(context.Background())
	go func() { _ = e.Sync(sctx) }()
	waitSignal(t, failed, "the commit of the task's admission fails")
	stopSync()

	// The rank is applied in the next batch, and the task dispatched there.
	g.open()
	waitfor.Eventually(t, "the ranked task is dispatched", func() bool { return e.Stats(context.Background()).InFlight == 1 })

	// Shutdown gives the failing batch up and writes the next one.
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, e.Shutdown(stopped))
	err = waitFor(t, answer, "the submission's answer")
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "the task's admission was not written: want UNAVAILABLE, got %v", err)
	require.ErrorIs(t, err, errInjectedDisk)
	evs, err := st.Events(context.Background(), 0, 1<<20)
	require.NoError(t, err)
	require.False(t, admitsTo("a")(&engine.Batch{Events: evs}), "the store holds no admission to lane a")
	require.NotEmpty(t, evs, "while the batch after it was written")
}
