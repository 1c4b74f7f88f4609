package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// conflict requires err to be a CONFLICT on field naming the task id.
func conflict(t *testing.T, err error, field, id string) {
	t.Helper()
	var ee *engine.Error
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, engine.CodeConflict, ee.Code, ee.Error())
	require.Equal(t, field, ee.Field, ee.Error())
	require.Equal(t, id, ee.TaskID, ee.Error())
	require.False(t, ee.Retryable)
}

// An idempotency key names one request: sent again with another, it is
// refused with CONFLICT naming the original, and nothing is recorded;
// sent again with the same, it answers with the original. Both hold once
// the original has ended and left the engine's memory (the store's lookup).
func TestAnIdempotencyKeyReusedForAnotherRequestIsAConflict(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	title := enginetest.Spec("a").Action("title").Idempotency("K1").Obj()
	navigate := enginetest.Spec("a").Action("navigate").Params(map[string]any{"url": "https://example.com"}).Idempotency("K1").Obj()

	first := h.Submit(title)
	_, err := h.Engine.Submit(ctx, navigate)
	conflict(t, err, "idempotencyKey", first.ID)
	require.Contains(t, err.Error(), "action.kind")
	require.Equal(t, first.ID, h.Submit(title).ID, "the same request still answers with the original")
	require.EqualValues(t, 1, h.Stats(ctx).Submitted)

	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))
	require.NoError(t, h.Sync(ctx))
	_, err = h.Engine.Submit(ctx, navigate)
	conflict(t, err, "idempotencyKey", first.ID)
	again := h.Submit(title)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, engine.StateSucceeded, again.State)
	require.EqualValues(t, 1, h.Stats(ctx).Submitted)
}

// In a batch, an item whose idempotency key repeats an earlier item's is
// refused at its own path when its request differs, and answered with the
// earlier item's task, marked replayed, when it is the same.
func TestABatchItemRepeatingAnotherItemsKey(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	title := enginetest.Spec("a").Action("title").Idempotency("K1").Obj()
	navigate := enginetest.Spec("a").Action("navigate").Params(map[string]any{"url": "https://example.com"}).Idempotency("K1").Obj()
	res, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: title}, {Spec: navigate}, {Spec: title}}})
	require.NoError(t, err)
	require.NoError(t, res.Items[0].Err)
	require.False(t, res.Items[0].Replayed)
	conflict(t, res.Items[1].Err, "items.1.idempotencyKey", res.Items[0].ID)
	require.Empty(t, res.Items[1].ID)
	require.Nil(t, res.Items[1].Task)
	require.NoError(t, res.Items[2].Err)
	require.True(t, res.Items[2].Replayed)
	require.Equal(t, res.Items[0].ID, res.Items[2].ID)
	require.EqualValues(t, 1, h.Stats(ctx).Submitted)

	// A batch sent again: every keyed item is replayed, even one that
	// depends on another item by its key.
	dep := title
	dep.IdempotencyKey, dep.DependsOn = "K2", []string{"first"}
	batch := engine.BatchSpec{Items: []engine.BatchItem{{Key: "first", Spec: title}, {Spec: dep}}}
	one, err := h.SubmitBatch(ctx, batch)
	require.NoError(t, err)
	two, err := h.SubmitBatch(ctx, batch)
	require.NoError(t, err)
	for i := range two.Items {
		require.NoError(t, two.Items[i].Err)
		require.True(t, two.Items[i].Replayed, i)
		require.Equal(t, one.Items[i].ID, two.Items[i].ID, i)
	}
}

// Which differences make another request, and which do not: the request
// is compared as admission normalized it.
func TestSameRequestComparesWhatTheClientSent(t *testing.T) {
	t.Parallel()
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	base := func() engine.TaskSpec {
		s := enginetest.Spec("a").Action("navigate").Params(map[string]any{"url": "https://example.com", "wait": 1}).
			Label("x", "1").Label("y", "2").Deadline(deadline).Idempotency("k").Obj()
		s.Lane, s.DependsOn = "main", []string{"t1", "t2"}
		return s
	}
	a := base()
	same := map[string]func(*engine.TaskSpec){
		"the params' key order and spacing": func(s *engine.TaskSpec) {
			s.Action = &engine.Action{Kind: "navigate", Params: json.RawMessage(` { "wait" : 1.0, "url":"https://example.com" }`)}
		},
		"the kind's case":               func(s *engine.TaskSpec) { s.Action = &engine.Action{Kind: "NAVIGATE", Params: a.Action.Params} },
		"the dependencies' order":       func(s *engine.TaskSpec) { s.DependsOn = []string{"t2", "t1"} },
		"the deadline's time zone":      func(s *engine.TaskSpec) { s.Deadline = deadline.In(time.FixedZone("x", 3600)) },
		"the batch and submission time": func(s *engine.TaskSpec) { s.BatchID, s.SubmittedAt = "b", deadline },
	}
	for name, change := range same {
		b := base()
		change(&b)
		require.True(t, engine.SameRequest(&a, &b), name)
	}
	require.True(t, engine.SameRequest(
		&engine.TaskSpec{Action: &engine.Action{Kind: "click", Params: json.RawMessage(`{}`)}},
		&engine.TaskSpec{Action: &engine.Action{Kind: "click"}}), "an empty object is no params")
	other := map[string]func(*engine.TaskSpec){
		"action.kind": func(s *engine.TaskSpec) { s.Action = &engine.Action{Kind: "goto", Params: a.Action.Params} },
		"action.params": func(s *engine.TaskSpec) {
			s.Action = &engine.Action{Kind: "navigate", Params: json.RawMessage(`{"url":"https://example.org"}`)}
		},
		"action.selector": func(s *engine.TaskSpec) {
			s.Action = &engine.Action{Kind: "navigate", Selector: "#x", Params: a.Action.Params}
		},
		"action":             func(s *engine.TaskSpec) { s.Action, s.Instruction = nil, "go" },
		"lane":               func(s *engine.TaskSpec) { s.Lane = "team" },
		"sessionKey":         func(s *engine.TaskSpec) { s.SessionKey = "s" },
		"priority":           func(s *engine.TaskSpec) { s.Priority = engine.PriorityHigh },
		"labels":             func(s *engine.TaskSpec) { s.Labels = map[string]string{"x": "1"} },
		"deadline":           func(s *engine.TaskSpec) { s.Deadline = deadline.Add(time.Second) },
		"dependsOn":          func(s *engine.TaskSpec) { s.DependsOn = []string{"t1"} },
		"timeoutMs":          func(s *engine.TaskSpec) { s.Timeout = time.Second },
		"retryPolicy":        func(s *engine.TaskSpec) { s.Retry = &engine.RetryPolicy{MaxAttempts: 2} },
		"webhookUrl":         func(s *engine.TaskSpec) { s.WebhookURL = "https://hooks.example/x" },
		"queueMode":          func(s *engine.TaskSpec) { s.QueueMode = engine.QueueInterrupt },
		"sessionMaxInFlight": func(s *engine.TaskSpec) { s.SessionMaxInFlight = 2 },
		"parentId":           func(s *engine.TaskSpec) { s.ParentID = "p" },
	}
	for name, change := range other {
		b := base()
		change(&b)
		require.False(t, engine.SameRequest(&a, &b), name)
	}
}

// A submission that a follower accepted and the leader ingests: ingested
// twice (the command applied again), it is the same task, not a replay;
// its key reused by another submission with another request is a CONFLICT.
func TestIngestKeepsIdempotencyKeysConsistent(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	title := enginetest.Spec("a").Action("title").Idempotency("K1").Obj()
	in := engine.Inbound{Items: []engine.BatchItem{{ID: "01FOLLOWERCHOSEN0000000001", Spec: title}}}
	one, err := h.Ingest(ctx, in)
	require.NoError(t, err)
	two, err := h.Ingest(ctx, in)
	require.NoError(t, err)
	require.Equal(t, one.Items[0].ID, two.Items[0].ID)
	require.False(t, two.Items[0].Replayed, "the same command applied twice is not a resubmission")

	other := enginetest.Spec("a").Action("navigate").Params(map[string]any{"url": "https://example.com"}).Idempotency("K1").Obj()
	res, err := h.Ingest(ctx, engine.Inbound{Items: []engine.BatchItem{{ID: "01FOLLOWERCHOSEN0000000002", Spec: other}}})
	require.NoError(t, err)
	conflict(t, res.Items[0].Err, "idempotencyKey", one.Items[0].ID)
	res, err = h.Ingest(ctx, engine.Inbound{Items: []engine.BatchItem{{ID: "01FOLLOWERCHOSEN0000000003", Spec: title}}})
	require.NoError(t, err)
	require.NoError(t, res.Items[0].Err)
	require.True(t, res.Items[0].Replayed)
	require.Equal(t, one.Items[0].ID, res.Items[0].ID)
	require.EqualValues(t, 1, h.Stats(ctx).Submitted)
}

// A client that resends a keyed request after its deadline has passed,
// because the answer to the first was lost, gets the task it made in time:
// the deadline is checked against the clock for a new task only. A new
// key, or no key, with a past deadline is refused as before.
func TestAKeyedResendAfterItsDeadlineAnswersWithTheOriginal(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	deadline := enginetest.Epoch.Add(time.Second)
	spec := enginetest.Spec("a").Action("title").Deadline(deadline).Idempotency("K1").Obj()
	first := h.Submit(spec)
	h.Clock.Advance(2 * time.Second)

	again, err := h.Engine.Submit(ctx, spec)
	require.NoError(t, err, "a replay of a task admitted in time")
	require.Equal(t, first.ID, again.ID)
	require.EqualValues(t, 1, h.Stats(ctx).Submitted)

	for _, s := range []engine.TaskSpec{
		enginetest.Spec("a").Action("title").Deadline(deadline).Idempotency("K2").Obj(),
		enginetest.Spec("a").Action("title").Deadline(deadline).Obj(),
	} {
		_, err := h.Engine.Submit(ctx, s)
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), "%v", err)
		require.Equal(t, engine.CodeInvalidInput, ee.Code)
		require.Equal(t, "deadline", ee.Field)
	}
	require.EqualValues(t, 1, h.Stats(ctx).Submitted, "nothing recorded")
}

// SubmitItem says whether a keyed submission was a replay: a first
// submission records a task and is not; the same request again answers with
// that task, recorded before, and is, also once the task has ended and left
// the engine's memory (the store's lookup); another request under the key
// is still refused with CONFLICT, and returns no task.
func TestSubmitItemSaysWhetherTheKeyReplayedATask(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	ctx := context.Background()
	title := enginetest.Spec("a").Action("title").Idempotency("K1").Obj()
	navigate := enginetest.Spec("a").Action("navigate").Params(map[string]any{"url": "https://example.com"}).Idempotency("K1").Obj()

	first, err := h.Engine.SubmitItem(ctx, title)
	require.NoError(t, err)
	require.False(t, first.Replayed, "a first submission records its task")
	require.NotNil(t, first.Task)
	require.Equal(t, first.Task.ID, first.ID)

	again, err := h.Engine.SubmitItem(ctx, title)
	require.NoError(t, err)
	require.True(t, again.Replayed, "the same request under the key answers with the task recorded before")
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.ID, again.Task.ID)

	other, err := h.Engine.SubmitItem(ctx, navigate)
	conflict(t, err, "idempotencyKey", first.ID)
	require.Same(t, err, other.Err)
	require.False(t, other.Replayed)
	require.Nil(t, other.Task)

	unkeyed, err := h.Engine.SubmitItem(ctx, enginetest.Spec("a").Action("title").Obj())
	require.NoError(t, err)
	require.False(t, unkeyed.Replayed, "a submission without a key is never a replay")
	require.NotEqual(t, first.ID, unkeyed.ID)
	require.EqualValues(t, 2, h.Stats(ctx).Submitted)

	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))
	require.NoError(t, h.Sync(ctx))
	ended, err := h.Engine.SubmitItem(ctx, title)
	require.NoError(t, err)
	require.True(t, ended.Replayed, "an ended task is still the key's")
	require.Equal(t, first.ID, ended.ID)
	require.Equal(t, engine.StateSucceeded, ended.Task.State)
	_, err = h.Engine.SubmitItem(ctx, navigate)
	conflict(t, err, "idempotencyKey", first.ID)
	require.EqualValues(t, 2, h.Stats(ctx).Submitted)
}

// readHook is a store that runs f the first time task id is read.
type readHook struct {
	engine.Store
	id   string
	once sync.Once
	f    func()
}

func (s *readHook) Task(ctx context.Context, id string) (*engine.Task, error) {
	if id == s.id && s.f != nil {
		s.once.Do(s.f)
	}
	return s.Store.Task(ctx, id)
}

// newHookedEngine starts a synchronous engine over a readHook store, with an
// executor and a fake clock, and shuts it down when the test ends. ended
// succeeds task id and requires that it has then left memory.
func newHookedEngine(t *testing.T) (e *engine.Engine, store *readHook, ended func(id string)) {
	t.Helper()
	ctx := context.Background()
	store = &readHook{Store: memory.New(memory.Options{})}
	exec := enginetest.NewExecutor()
	e, err := engine.New(enginetest.Synchronous(engine.Options{Store: store, Executor: exec, Clock: clock.NewFake(enginetest.Epoch), Seed: 1}))
	require.NoError(t, err)
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 0)
		defer cancel()
		_ = e.Shutdown(sctx)
	})
	ended = func(id string) {
		t.Helper()
		require.NoError(t, exec.Succeed(id, `{}`))
		require.NoError(t, e.Sync(ctx))
		require.False(t, engine.Live(e, id), "task %s has left memory", id)
	}
	return e, store, ended
}

// A keyed resend whose original is live when admission looks up what it
// needs from the store, and ends and leaves memory before it is admitted,
// still finds the original (in the store): it is a replay, and nothing new
// is recorded.
func TestAKeyedResendFindsAnOriginalThatLeftMemoryDuringItsAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, store, ended := newHookedEngine(t)

	// The resend names a parent that has left memory: admission reads it
	// from the store, and meanwhile the original ends and leaves memory.
	parent, err := e.Submit(ctx, enginetest.Spec("a").Action("title").Obj())
	require.NoError(t, err)
	ended(parent.ID)
	spec := enginetest.Spec("a").Action("title").Parent(parent.ID).Idempotency("K1").Obj()
	orig, err := e.SubmitItem(ctx, spec)
	require.NoError(t, err)
	require.False(t, orig.Replayed)
	ran := false
	store.id, store.f = parent.ID, func() { ended(orig.ID); ran = true }

	again, err := e.SubmitItem(ctx, spec)
	require.NoError(t, err)
	require.True(t, ran, "the original ended during the resend's admission")
	require.Equal(t, orig.ID, again.ID, "the key's task, not a new one")
	require.True(t, again.Replayed)
	require.Equal(t, engine.StateSucceeded, again.Task.State)
	require.EqualValues(t, 2, e.Stats(ctx).Submitted)
}

// A submission ingested again (a follower's command applied twice) whose
// task is live when admission looks up what it needs from the store, and
// ends and leaves memory before it is admitted, answers with that task:
// nothing is recorded twice.
func TestAnIngestAppliedAgainFindsATaskThatLeftMemoryDuringItsAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, store, ended := newHookedEngine(t)

	parent, err := e.Submit(ctx, enginetest.Spec("a").Action("title").Obj())
	require.NoError(t, err)
	ended(parent.ID)
	spec := enginetest.Spec("a").Action("title").Parent(parent.ID).Obj()
	spec.SubmittedAt = enginetest.Epoch
	in := engine.Inbound{Items: []engine.BatchItem{{ID: "follower-chose-this", Spec: spec}}}
	first, err := e.Ingest(ctx, in)
	require.NoError(t, err)
	require.NoError(t, first.Items[0].Err)
	ran := false
	store.id, store.f = parent.ID, func() { ended("follower-chose-this"); ran = true }

	again, err := e.Ingest(ctx, in)
	require.NoError(t, err)
	require.True(t, ran, "the task ended during the second admission")
	require.NoError(t, again.Items[0].Err)
	require.Equal(t, "follower-chose-this", again.Items[0].ID)
	require.Equal(t, engine.StateSucceeded, again.Items[0].Task.State, "the task as it is, not recorded anew")
	require.False(t, again.Items[0].Replayed, "the same submission, not a resend")
	require.EqualValues(t, 2, e.Stats(ctx).Submitted)
}

// A batch resent whole, every item replayed, records no batch of its own:
// it answers with the batch its tasks joined, which a client follows to
// their end, not a new, empty one that would read as finished at once —
// also when it asks for ids only (a submitTasks that selects only counts),
// whose items carry no task to read that batch from. When the replayed
// tasks joined different batches, or an item was refused, it answers with
// none.
func TestABatchResentWholeAnswersWithTheBatchItsTasksJoined(t *testing.T) {
	t.Parallel()
	for _, idsOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("idsOnly=%v", idsOnly), func(t *testing.T) {
			t.Parallel()
			h := enginetest.New(t, nil)
			ctx := context.Background()
			a := enginetest.Spec("a").Action("title").Idempotency("B1").Obj()
			b := enginetest.Spec("a").Action("title").Idempotency("B2").Obj()
			batch := engine.BatchSpec{Items: []engine.BatchItem{{Spec: a}, {Spec: b}}, IDsOnly: idsOnly}
			first, err := h.SubmitBatch(ctx, batch)
			require.NoError(t, err)
			require.NotEmpty(t, first.BatchID)
			again, err := h.SubmitBatch(ctx, batch)
			require.NoError(t, err)
			for i := range again.Items {
				require.True(t, again.Items[i].Replayed, i)
			}
			require.Equal(t, first.BatchID, again.BatchID)
			st, err := h.Batch(ctx, again.BatchID)
			require.NoError(t, err)
			require.Equal(t, 2, st.Total)
			require.False(t, st.Done, "its tasks are still queued")

			c := enginetest.Spec("a").Action("title").Idempotency("B3").Obj()
			other, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: c}}, IDsOnly: idsOnly})
			require.NoError(t, err)
			require.NotEqual(t, first.BatchID, other.BatchID)
			mixed, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: a}, {Spec: c}}, IDsOnly: idsOnly})
			require.NoError(t, err)
			require.True(t, mixed.Items[0].Replayed && mixed.Items[1].Replayed)
			require.Empty(t, mixed.BatchID, "tasks of two batches: no batch")
			bad := enginetest.Spec("").Action("title").Obj() // no agent: refused
			refused, err := h.SubmitBatch(ctx, engine.BatchSpec{Items: []engine.BatchItem{{Spec: a}, {Spec: bad}}, IDsOnly: idsOnly})
			require.NoError(t, err)
			require.True(t, refused.Items[0].Replayed)
			require.Error(t, refused.Items[1].Err)
			require.Empty(t, refused.BatchID, "an item refused: no batch")
			require.NoError(t, h.Sync(ctx))
			require.EqualValues(t, 3, h.Stats(ctx).Submitted)
		})
	}
}
