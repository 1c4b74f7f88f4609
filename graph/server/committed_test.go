package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// openHeld opens a SQLite store whose commits can be held at a gate.
func openHeld(t *testing.T) *enginetest.HeldStore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), "held.db")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // after the engine's shutdown (cleanups run last first)
	return enginetest.NewHeldStore(st)
}

// watchedEngine is the engine as the server sees it, checking every task it
// hands out against the store at that moment: a task whose latest event the
// store has not committed yet is a state a crash would roll back. It tells
// the test when a follower's read (CommittedTask) begins.
type watchedEngine struct {
	*engine.Engine
	store   *enginetest.HeldStore
	reading chan string
}

func watch(st *enginetest.HeldStore) (*watchedEngine, func(*setupOptions)) {
	w := &watchedEngine{store: st, reading: make(chan string, 16)}
	return w, func(o *setupOptions) {
		o.store = st
		o.engine = func(e *engine.Engine) resolvers.Engine {
			w.Engine = e
			return w
		}
	}
}

func (w *watchedEngine) Task(ctx context.Context, id string) (*engine.Task, error) {
	t, err := w.Engine.Task(ctx, id)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	select {
	case w.reading <- id:
	default:
	}
	t, err := w.Engine.CommittedTask(ctx, id)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) handedOutUncommitted() []string { return w.store.Uncommitted() }

// drainReads forgets the follower reads told so far.
func (w *watchedEngine) drainReads() {
	for {
		select {
		case <-w.reading:
		default:
			return
		}
	}
}

const taskSubQ = `subscription($id: ID!) { task(id: $id) { id state } }`

type taskMsg struct {
	State string
	Err   error
}

// follow subscribes to a task and passes its messages on.
func follow(t *testing.T, ctx context.Context, b *bundle, id string) <-chan taskMsg {
	t.Helper()
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	sub, err := conn.Subscribe(ctx, taskSubQ, map[string]any{"id": id})
	require.NoError(t, err)
	out := make(chan taskMsg, 16)
	go func() {
		for {
			m, err := sub.Next(ctx)
			var errs client.Errors
			switch {
			case errors.As(err, &errs) && len(errs) > 0:
				err = errs[0]
			case err == nil && len(m.Errors) > 0:
				err = m.Errors[0]
			}
			if err != nil {
				out <- taskMsg{Err: err}
				return
			}
			var d struct{ Task struct{ State string } }
			if err := json.Unmarshal(m.Data, &d); err != nil {
				out <- taskMsg{Err: err}
				return
			}
			out <- taskMsg{State: d.Task.State}
		}
	}()
	return out
}

// nextAfterRead waits for the subscription's next message; when the
// server's follower read begins first, it opens the gate (the read waits
// for the held commit, which only then lands).
func nextAfterRead(t *testing.T, ctx context.Context, w *watchedEngine, msgs <-chan taskMsg) taskMsg {
	t.Helper()
	for {
		select {
		case <-w.reading:
			w.store.Open()
		case m := <-msgs:
			return m
		case <-ctx.Done():
			t.Fatal("no message")
		}
	}
}

// The first message of task(id), subscribed while the task's start
// (RUNNING) is recorded in the engine but its commit is held at the store's
// gate: the server hands the subscription nothing the store has not
// committed, and the message arrives once the commit has landed, showing
// RUNNING. (It used to be read from memory and sent at once: RUNNING, which
// a crash at that moment would roll back to ASSIGNED.)
func TestTaskSubscriptionsFirstMessageWaitsForItsCommit(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt)
	t.Cleanup(st.Open) // before the engine's last commit
	ctx := ctxFor(t)

	id := b.submit(t, "held", nil)
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })
	st.Hold()
	b.exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })
	live, err := b.eng.Task(ctx, id)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, live.State, "the engine's memory has the start")
	require.Equal(t, engine.StateAssigned, st.Committed(t, id).State, "the store has not committed it")

	msgs := follow(t, ctx, b, id)
	first := nextAfterRead(t, ctx, w, msgs)
	require.Empty(t, w.handedOutUncommitted(), "the subscription is handed only committed states")
	require.NoError(t, first.Err)
	require.Equal(t, "RUNNING", first.State)
	require.Equal(t, engine.StateRunning, st.Committed(t, id).State, "it arrived once the commit landed")

	require.NoError(t, b.exec.Succeed(id, `{"ok":true}`))
	last := nextAfterRead(t, ctx, w, msgs)
	require.NoError(t, last.Err)
	require.Equal(t, "SUCCEEDED", last.State)
	require.Empty(t, w.handedOutUncommitted())
}

// A later message: the subscription wakes for the start's commit while the
// end is already recorded and its commit held. It must not send the end
// before the store has it: the read waits for the end's commit.
func TestTaskSubscriptionsLaterMessagesWaitForTheirCommit(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", nil)
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })
	msgs := follow(t, ctx, b, id)
	first := <-msgs
	require.NoError(t, first.Err)
	require.Equal(t, "ASSIGNED", first.State, "committed: sent as it is")

	st.Hold()
	b.exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })
	require.NoError(t, b.exec.Succeed(id, `{"ok":true}`))
	w.drainReads()
	st.LetOne() // the start lands and wakes the subscription; the end stays held
	next := nextAfterRead(t, ctx, w, msgs)
	require.Empty(t, w.handedOutUncommitted(), "the subscription is handed only committed states")
	require.NoError(t, next.Err)
	require.Equal(t, "SUCCEEDED", next.State, "read once the end's commit landed")
	require.Equal(t, engine.StateSucceeded, st.Committed(t, id).State)
}

// A commit that does not land within the commit timeout: the subscription
// answers UNAVAILABLE instead of the state it could not confirm.
func TestTaskSubscriptionNeverShowsAStateItsStoreDidNotCommit(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt, func(o *setupOptions) { o.config.CommitTimeout = 500 * time.Millisecond })
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", nil)
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })
	st.Hold()
	b.exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })

	m := <-follow(t, ctx, b, id)
	require.Empty(t, w.handedOutUncommitted(), "the subscription is handed only committed states")
	require.Errorf(t, m.Err, "want an error, got %s", m.State)
	var gerr *client.Error
	require.ErrorAs(t, m.Err, &gerr)
	require.Equal(t, "UNAVAILABLE", gerr.Code())
	require.Equal(t, engine.StateAssigned, st.Committed(t, id).State)
}
