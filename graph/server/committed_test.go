package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
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

	cancelling chan string // told when a cancellation (Cancel) begins

	mu    sync.Mutex
	early []string // cancellations answered before the store had them
}

func watch(st *enginetest.HeldStore) (*watchedEngine, func(*setupOptions)) {
	w := &watchedEngine{store: st, reading: make(chan string, 16), cancelling: make(chan string, 16)}
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

func (w *watchedEngine) Retry(ctx context.Context, id string) (*engine.Task, error) {
	t, err := w.Engine.Retry(ctx, id)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) Reset(ctx context.Context, id string) (*engine.Task, error) {
	t, err := w.Engine.Reset(ctx, id)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) Cancel(ctx context.Context, id, reason string) (*engine.Task, error) {
	select {
	case w.cancelling <- id:
	default:
	}
	t, err := w.Engine.Cancel(ctx, id, reason)
	w.store.Check(t)
	return t, err
}

func (w *watchedEngine) CancelWhere(ctx context.Context, f engine.TaskFilter, reason string) ([]string, error) {
	ids, err := w.Engine.CancelWhere(ctx, f, reason)
	w.checkCancelled(ids)
	return ids, err
}

func (w *watchedEngine) StopSession(ctx context.Context, key string, all bool) ([]string, error) {
	ids, err := w.Engine.StopSession(ctx, key, all)
	w.checkCancelled(ids)
	return ids, err
}

// checkCancelled records every task of ids, answered as cancelled, whose
// cancellation the store has not committed.
func (w *watchedEngine) checkCancelled(ids []string) {
	for _, id := range ids {
		st, err := w.store.Store.Task(context.Background(), id)
		if err == nil && st.State == engine.StateCancelled {
			continue
		}
		w.mu.Lock()
		if err != nil {
			w.early = append(w.early, fmt.Sprintf("task %s answered cancelled while the store has no such task (%v)", id, err))
		} else {
			w.early = append(w.early, fmt.Sprintf("task %s answered cancelled while the store has %s", id, st.State))
		}
		w.mu.Unlock()
	}
}

func (w *watchedEngine) handedOutUncommitted() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(w.store.Uncommitted(), w.early...)
}

// drainCancels forgets the cancellations told so far.
func (w *watchedEngine) drainCancels() {
	for {
		select {
		case <-w.cancelling:
		default:
			return
		}
	}
}

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

// taskQuery reads a task with the task(id) query, passing its answer on.
func taskQuery(ctx context.Context, b *bundle, id string) <-chan taskMsg {
	out := make(chan taskMsg, 1)
	go func() {
		var d struct{ Task struct{ State string } }
		err := b.c.Do(ctx, `query($id: ID!) { task(id: $id) { state } }`, map[string]any{"id": id}, &d)
		out <- taskMsg{State: d.Task.State, Err: err}
	}()
	return out
}

// The task(id) query, asked while the task's start (RUNNING) is recorded in
// the engine but its commit is held at the store's gate: it shows nothing
// the store has not committed, and answers once the commit has landed.
// (It used to answer from memory at once: RUNNING, which a crash at that
// moment would roll back to ASSIGNED.)
func TestTaskQueryShowsOnlyCommittedState(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", nil)
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })
	require.Equal(t, "ASSIGNED", b.state(t, id), "committed: answered as it is")
	w.drainReads()
	st.Hold()
	b.exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })
	require.Equal(t, engine.StateAssigned, st.Committed(t, id).State, "the store has not committed the start")

	got := nextAfterRead(t, ctx, w, taskQuery(ctx, b, id))
	require.Empty(t, w.handedOutUncommitted(), "the query is handed only committed states")
	require.NoError(t, got.Err)
	require.Equal(t, "RUNNING", got.State)
	require.Equal(t, engine.StateRunning, st.Committed(t, id).State, "it answered once the commit landed")
}

// A task(id) query whose change is not committed within the commit timeout
// answers UNAVAILABLE, not the state it could not confirm.
func TestTaskQueryNeverShowsAStateItsStoreDidNotCommit(t *testing.T) {
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

	got := <-taskQuery(ctx, b, id)
	require.Empty(t, w.handedOutUncommitted(), "the query is handed only committed states")
	require.Equal(t, "UNAVAILABLE", gqlErr(t, got.Err).Code(), "got %s", got.State)
	require.Equal(t, engine.StateAssigned, st.Committed(t, id).State)
}

const eventTaskQ = `subscription($agent: String!) { taskEvents(filter: {agentId: $agent, kinds: [STATE]}) { seq taskId to task { state lastSeq } } }`

type eventMsg struct {
	Seq    int64
	TaskID string
	To     string
	Task   struct {
		State   string
		LastSeq int64
	}
	Err error
}

// followEvents subscribes to agent's STATE events, with their task, and
// passes them on.
func followEvents(t *testing.T, ctx context.Context, b *bundle, agent string) <-chan eventMsg {
	t.Helper()
	conn, err := b.c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	sub, err := conn.Subscribe(ctx, eventTaskQ, map[string]any{"agent": agent})
	require.NoError(t, err)
	out := make(chan eventMsg, 16)
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
			var d struct{ TaskEvents eventMsg }
			if err == nil {
				err = json.Unmarshal(m.Data, &d)
			}
			if err != nil {
				out <- eventMsg{Err: err}
				return
			}
			out <- d.TaskEvents
		}
	}()
	return out
}

// An event's task, read while the task has moved on in memory and that
// change's commit is held: the RUNNING event is published once its commit
// lands, but the attempt's end is recorded by then and held at the gate.
// The event's task shows the task as committed at or after the event —
// here the end, once its commit has landed — never the end before it.
// (It used to be read from memory: SUCCEEDED while the store had RUNNING.)
func TestAnEventsTaskShowsOnlyCommittedState(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	events := followEvents(t, ctx, b, "held")
	b.waitSubscribed(t, "taskEvents", 1)
	id := b.submit(t, "held", nil)
	for ev := range events {
		require.NoError(t, ev.Err)
		require.Equal(t, id, ev.TaskID)
		require.NotEmpty(t, ev.Task.State, "an event of a task carries it")
		require.GreaterOrEqual(t, ev.Task.LastSeq, ev.Seq, "the task is at or after its event")
		if ev.To == "ASSIGNED" {
			break
		}
	}
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })

	st.Hold()
	b.exec.Run(id).Started("inst", "tab")
	waitfor.Eventually(t, "the start's commit reaches the store", func() bool { return st.Waiting() == 1 })
	require.NoError(t, b.exec.Succeed(id, `{"ok":true}`))
	w.drainReads()
	st.LetOne() // the start lands and its event goes out; the end stays held
	var running eventMsg
	for running.To == "" {
		select {
		case <-w.reading: // the event's task waits for the end's commit: let it land
			st.Open()
		case running = <-events:
			require.NoError(t, running.Err)
		case <-ctx.Done():
			t.Fatal("no event")
		}
	}
	require.Empty(t, w.handedOutUncommitted(), "the event is handed only committed states")
	require.Equal(t, "RUNNING", running.To)
	require.Equal(t, "SUCCEEDED", running.Task.State, "the task as committed after its event")
	require.Equal(t, engine.StateSucceeded, st.Committed(t, id).State)
	require.Greater(t, running.Task.LastSeq, running.Seq)
}

type retryMsg struct {
	ID, State, RetryOf string
	Err                error
}

// retry calls retryTask, passing its answer on.
func retry(ctx context.Context, b *bundle, id string) <-chan retryMsg {
	out := make(chan retryMsg, 1)
	go func() {
		var d struct{ RetryTask retryMsg }
		err := b.c.Do(ctx, `mutation($id: ID!) { retryTask(id: $id) { id state retryOf } }`, map[string]any{"id": id}, &d)
		d.RetryTask.Err = err
		out <- d.RetryTask
	}()
	return out
}

// retryUnderHeldCommits fails a task as fail says, holds the store's
// commits, calls retryTask and lets one commit through once it reaches the
// gate: the retry's, if it asked for one. Later commits stay held.
func retryUnderHeldCommits(t *testing.T, fail error, extra map[string]any, settled engine.State) (*enginetest.HeldStore, *watchedEngine, string, retryMsg) {
	t.Helper()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", extra)
	waitfor.Eventually(t, "the attempt starts", func() bool { return b.exec.Run(id) != nil })
	require.NoError(t, b.exec.Fail(id, fail))
	waitfor.Eventually(t, "the failure is committed", func() bool { return st.Committed(t, id).State == settled })

	st.Hold()
	answer := retry(ctx, b, id)
	waitfor.Eventually(t, "the retry's commit reaches the store", func() bool { return st.Waiting() == 1 })
	st.LetOne()
	select {
	case got := <-answer:
		return st, w, id, got
	case <-ctx.Done():
		t.Fatal("retryTask did not answer")
		return nil, nil, "", retryMsg{}
	}
}

// retryTask on a FAILED task answers with the new task, which names the
// old one in retryOf, once both are committed: the link is committed with
// the task. (It used to be recorded after the task's commit and answered
// before its own: a crash then left a new task that retried nothing.)
func TestRetryTaskAnswersOnceTheNewTaskAndItsLinkAreCommitted(t *testing.T) {
	t.Parallel()
	st, w, id, got := retryUnderHeldCommits(t, engine.Permanent(errors.New("gone")), nil, engine.StateFailed)
	require.NoError(t, got.Err)
	require.Empty(t, w.handedOutUncommitted(), "retryTask answers with what is committed")
	require.NotEqual(t, id, got.ID, "a new task")
	require.Equal(t, id, got.RetryOf)
	require.Equal(t, id, st.Committed(t, got.ID).RetryOf, "the link is committed")
}

// retryTask on a task backing off (RETRY_WAIT) answers QUEUED once that is
// committed. (It used to answer at once, before the commit.)
func TestRetryTaskOfABackingOffTaskAnswersOnceCommitted(t *testing.T) {
	t.Parallel()
	policy := map[string]any{"retryPolicy": map[string]any{"maxAttempts": 3, "backoffMs": 3_600_000}}
	st, w, id, got := retryUnderHeldCommits(t, errors.New("flaky"), policy, engine.StateRetryWait)
	require.NoError(t, got.Err)
	require.Empty(t, w.handedOutUncommitted(), "retryTask answers with what is committed")
	require.Equal(t, id, got.ID, "the same task")
	require.Equal(t, "QUEUED", got.State)
	require.NotEqual(t, engine.StateRetryWait, st.Committed(t, id).State, "the retry is committed")
}

// retryTask on a PARKED task resets it, and answers QUEUED once the reset
// is committed (resetTask answers the same way).
func TestRetryTaskOfAParkedTaskAnswersOnceCommitted(t *testing.T) {
	t.Parallel()
	policy := map[string]any{"retryPolicy": map[string]any{"maxAttempts": 1}}
	st, w, id, got := retryUnderHeldCommits(t, errors.New("flaky"), policy, engine.StateParked)
	require.NoError(t, got.Err)
	require.Empty(t, w.handedOutUncommitted(), "retryTask answers with what is committed")
	require.Equal(t, id, got.ID, "the same task")
	require.Equal(t, "QUEUED", got.State)
	require.NotEqual(t, engine.StateParked, st.Committed(t, id).State, "the reset is committed")
}

// A retry whose commit is not confirmed within the commit timeout answers
// UNAVAILABLE, saying it is the retry that may still be committed (not the
// submission's advice to resubmit with an idempotency key, which a retry
// has none of).
func TestRetryTaskWhoseCommitIsNotConfirmedIsUnavailable(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	_, opt := watch(st)
	b := setup(t, opt, func(o *setupOptions) { o.config.CommitTimeout = 500 * time.Millisecond })
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", nil)
	waitfor.Eventually(t, "the attempt starts", func() bool { return b.exec.Run(id) != nil })
	require.NoError(t, b.exec.Fail(id, engine.Permanent(errors.New("gone"))))
	waitfor.Eventually(t, "the failure is committed", func() bool { return st.Committed(t, id).State == engine.StateFailed })
	st.Hold()
	got := <-retry(ctx, b, id)
	e := gqlErr(t, got.Err)
	require.Equal(t, "UNAVAILABLE", e.Code())
	require.Contains(t, e.Message, "the retry of task "+id)
	require.NotContains(t, e.Message, "idempotency")
}

// cancelling is one of the mutations that cancel: the query, its variables
// for the agent "held" and the session "s1", and its answer's ids.
type cancelling struct {
	name, query string
	vars        func(id string) map[string]any
	ids         func(data json.RawMessage) []string
}

var cancellings = []cancelling{
	{"cancelTask", `mutation($id: ID!) { cancelTask(id: $id) { id state } }`,
		func(id string) map[string]any { return map[string]any{"id": id} },
		func(data json.RawMessage) []string {
			var d struct{ CancelTask struct{ ID, State string } }
			if json.Unmarshal(data, &d) != nil || d.CancelTask.State != "CANCELLED" {
				return nil
			}
			return []string{d.CancelTask.ID}
		}},
	{"cancelTasks", `mutation { cancelTasks(filter: {agentId: "held"}) { ids } }`,
		func(string) map[string]any { return nil },
		func(data json.RawMessage) []string {
			var d struct{ CancelTasks struct{ IDs []string } }
			_ = json.Unmarshal(data, &d)
			return d.CancelTasks.IDs
		}},
	{"stopSession", `mutation { stopSession(sessionKey: "s1", all: true) { ids } }`,
		func(string) map[string]any { return nil },
		func(data json.RawMessage) []string {
			var d struct{ StopSession struct{ IDs []string } }
			_ = json.Unmarshal(data, &d)
			return d.StopSession.IDs
		}},
}

type cancelMsg struct {
	IDs []string
	Err error
}

// call runs the mutation for task id, passing its answer on.
func (m cancelling) call(ctx context.Context, b *bundle, id string) <-chan cancelMsg {
	out := make(chan cancelMsg, 1)
	go func() {
		var data json.RawMessage
		err := b.c.Do(ctx, m.query, m.vars(id), &data)
		out <- cancelMsg{IDs: m.ids(data), Err: err}
	}()
	return out
}

// cancelUnderHeldCommits submits a task of the agent "held" in the session
// "s1", waits for its assignment's commit, holds the store's commits and
// cancels it with m.
func cancelUnderHeldCommits(t *testing.T, m cancelling, opts ...func(*setupOptions)) (*enginetest.HeldStore, *watchedEngine, *bundle, string, <-chan cancelMsg) {
	t.Helper()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, append([]func(*setupOptions){opt}, opts...)...)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submit(t, "held", map[string]any{"sessionKey": "s1"})
	waitfor.Eventually(t, "the attempt starts (its assignment committed)", func() bool { return b.exec.Run(id) != nil })
	require.Equal(t, engine.StateAssigned, st.Committed(t, id).State)
	st.Hold()
	return st, w, b, id, m.call(ctx, b, id)
}

// cancelTask, cancelTasks and stopSession answer once the cancellation is
// committed: while its commit waits at the store's gate they do not answer,
// and what they answer the store has. (They used to answer from memory at
// once: CANCELLED, which a crash at that moment would roll back to a task
// that runs.)
func TestCancellingAnswersOnceTheCancellationIsCommitted(t *testing.T) {
	t.Parallel()
	for _, m := range cancellings {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			st, w, _, id, answer := cancelUnderHeldCommits(t, m)
			waitfor.Eventually(t, "the cancellation's commit reaches the store", func() bool { return st.Waiting() >= 1 })
			select {
			case got := <-answer:
				t.Fatalf("%s answered while its commit was held: %v %v", m.name, got.IDs, got.Err)
			default:
			}
			st.LetOne()
			var got cancelMsg
			select {
			case got = <-answer:
			case <-ctxFor(t).Done():
				t.Fatalf("%s did not answer once its commit landed", m.name)
			}
			require.NoError(t, got.Err)
			require.Equal(t, []string{id}, got.IDs)
			require.Empty(t, w.handedOutUncommitted(), "%s answers with what is committed", m.name)
			require.Equal(t, engine.StateCancelled, st.Committed(t, id).State)
		})
	}
}

// A cancellation whose commit is not confirmed within the commit timeout
// answers UNAVAILABLE, saying, as retryTask does, that it may still be
// committed; never the cancellation it could not confirm.
func TestCancellingWhoseCommitIsNotConfirmedIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, m := range cancellings {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			st, w, _, id, answer := cancelUnderHeldCommits(t, m, func(o *setupOptions) { o.config.CommitTimeout = 500 * time.Millisecond })
			got := <-answer
			require.Empty(t, w.handedOutUncommitted(), "%s answers with what is committed", m.name)
			e := gqlErr(t, got.Err)
			require.Equal(t, "UNAVAILABLE", e.Code(), e.Message)
			require.Contains(t, e.Message, "was not confirmed committed in time (it may still be, once the store takes it)")
			require.NotContains(t, e.Message, "idempotency")
			if m.name == "cancelTask" {
				require.Contains(t, e.Message, "the cancellation of task "+id)
			}
			require.Equal(t, engine.StateAssigned, st.Committed(t, id).State)
		})
	}
}

// A second cancelTask while the first one's commit is held is a CONFLICT
// once that commit has landed: it names the task's state as committed,
// never the cancellation the store does not have yet. (It used to answer at
// once from memory: "already ended (CANCELLED)".)
func TestCancellingATaskWhoseCancellationIsNotCommittedYetWaitsForIt(t *testing.T) {
	t.Parallel()
	m := cancellings[0]
	st, w, b, id, first := cancelUnderHeldCommits(t, m)
	ctx := ctxFor(t)
	waitfor.Eventually(t, "the first cancellation's commit reaches the store", func() bool { return st.Waiting() >= 1 })
	w.drainCancels()
	second := m.call(ctx, b, id)
	select {
	case <-w.cancelling: // the second cancellation reached the engine
	case <-ctx.Done():
		t.Fatal("the second cancelTask did not reach the engine")
	}
	st.LetOne()
	got := <-first
	require.NoError(t, got.Err)
	got = <-second
	e := gqlErr(t, got.Err)
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Contains(t, e.Message, "has already ended (CANCELLED)")
	require.Equal(t, id, e.Extensions["taskId"])
	require.Empty(t, w.handedOutUncommitted(), "cancelTask answers with what is committed")
}

// pullCall runs leaseTasks or failTask and passes on the state of the task
// it answers with (the first lease's).
func pullCall(ctx context.Context, b *bundle, query string, vars map[string]any) <-chan taskMsg {
	out := make(chan taskMsg, 1)
	go func() {
		var d struct {
			LeaseTasks []struct{ Task struct{ State string } }
			FailTask   struct{ Task struct{ State string } }
		}
		err := b.c.Do(ctx, query, vars, &d)
		m := taskMsg{State: d.FailTask.Task.State, Err: err}
		if len(d.LeaseTasks) > 0 {
			m.State = d.LeaseTasks[0].Task.State
		}
		out <- m
	}()
	return out
}

// failTask's task, read once the failure is committed while the task has
// moved on in memory (its backoff ended: QUEUED) and that change's commit
// is held: it shows the task as committed, waiting for that commit, never
// the change before it lands. completeTask and releaseTask answer the same
// way. (It used to be read from memory: QUEUED while the store had
// RETRY_WAIT.)
func TestFailTasksTaskShowsOnlyCommittedState(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt, pullLanes)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submitJob(t, "jobs", nil)
	got, err := lease(t, b.c, "jobs", 1, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	st.Hold()
	answer := pullCall(ctx, b, `mutation($id: ID!) { failTask(leaseId: $id, error: "503 upstream") { task { state } } }`, map[string]any{"id": got[0].LeaseID})
	waitfor.Eventually(t, "the failure's commit reaches the store", func() bool { return st.Waiting() == 1 })
	waitfor.Eventually(t, "the backoff ends in memory", func() bool { return b.task(t, id).State == engine.StateQueued })
	require.Equal(t, engine.StateRunning, st.Committed(t, id).State, "the store has neither")
	w.drainReads()
	st.LetOne() // the failure lands; the end of the backoff stays held

	m := nextAfterRead(t, ctx, w, answer)
	require.Empty(t, w.handedOutUncommitted(), "failTask is handed only committed states")
	require.NoError(t, m.Err)
	require.Equal(t, "QUEUED", m.State)
	require.Equal(t, engine.StateQueued, st.Committed(t, id).State, "it answered once the commit landed")
}

// leaseTasks' task, read once the lease is committed while the task was
// cancelled meanwhile and that cancellation's commit is held: it shows the
// task as committed, waiting for that commit.
func TestLeaseTasksTaskShowsOnlyCommittedState(t *testing.T) {
	t.Parallel()
	st := openHeld(t)
	w, opt := watch(st)
	b := setup(t, opt, pullLanes)
	t.Cleanup(st.Open)
	ctx := ctxFor(t)

	id := b.submitJob(t, "jobs", nil)
	st.Hold()
	answer := pullCall(ctx, b, `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 30000, waitMs: 0) { task { state } } }`, nil)
	waitfor.Eventually(t, "the lease's commit reaches the store", func() bool { return st.Waiting() == 1 })
	cancelled := make(chan error, 1)
	go func() {
		_, err := b.eng.Cancel(ctx, id, "changed plans")
		cancelled <- err
	}()
	waitfor.Eventually(t, "the cancellation is recorded in memory", func() bool { return b.task(t, id).State == engine.StateCancelled })
	w.drainReads()
	st.LetOne() // the lease lands; the cancellation stays held

	m := nextAfterRead(t, ctx, w, answer)
	require.Empty(t, w.handedOutUncommitted(), "leaseTasks is handed only committed states")
	require.NoError(t, m.Err)
	require.Equal(t, "CANCELLED", m.State)
	require.Equal(t, engine.StateCancelled, st.Committed(t, id).State, "it answered once the commit landed")
	require.NoError(t, <-cancelled)
}
