package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func TestSubmitTaskRecordsEveryFieldOfTheInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	deadline := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	in := map[string]any{
		"agentId": "agent-1", "lane": "team", "sessionKey": "s1", "priority": "HIGH",
		"action": map[string]any{"kind": "fill", "selector": "css:#name", "params": map[string]any{"text": "Ada", "n": 2}},
		"tabId":  "tab-1", "instanceId": "inst-1", "deadline": deadline.Format(time.RFC3339Nano), "timeoutMs": 1500,
		"retryPolicy": map[string]any{"maxAttempts": 3, "backoffMs": 250, "multiplier": 1.5, "maxBackoffMs": 5000, "jitter": true},
		"webhookUrl":  "https://hooks.example/done", "idempotencyKey": "k-1",
		"labels":    []map[string]any{{"key": "team", "value": "growth"}, {"key": "a", "value": "1"}},
		"queueMode": "ENQUEUE",
	}
	var out struct {
		SubmitTask struct {
			ID, AgentID, Lane, SessionKey, Session, Priority, TabID, InstanceID, WebhookURL, IdempotencyKey, QueueMode string
			State                                                                                                      string
			Seq                                                                                                        uint64
			Deadline                                                                                                   time.Time
			TimeoutMs                                                                                                  int
			Action                                                                                                     struct {
				Kind, Selector string
				Params         json.RawMessage
			}
			RetryPolicy struct {
				MaxAttempts, BackoffMs, MaxBackoffMs int
				Multiplier                           float64
				Jitter                               bool
			}
			Labels    []struct{ Key, Value string }
			DependsOn []string
			Attempts  []any
			Position  *int
		}
	}
	err := b.c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) {
		id seq agentId lane sessionKey session priority tabId instanceId webhookUrl idempotencyKey queueMode state deadline timeoutMs
		action { kind selector params } retryPolicy { maxAttempts backoffMs maxBackoffMs multiplier jitter }
		labels { key value } dependsOn attempts { n } position } }`, map[string]any{"in": in}, &out)
	require.NoError(t, err)
	got := out.SubmitTask
	require.NotEmpty(t, got.ID)
	require.Positive(t, got.Seq)
	require.Equal(t, "agent-1", got.AgentID)
	require.Equal(t, "team", got.Lane)
	require.Equal(t, "s1", got.SessionKey)
	require.Equal(t, "s1", got.Session)
	require.Equal(t, "HIGH", got.Priority)
	require.Equal(t, "tab-1", got.TabID)
	require.Equal(t, "inst-1", got.InstanceID)
	require.Equal(t, "https://hooks.example/done", got.WebhookURL)
	require.Equal(t, "k-1", got.IdempotencyKey)
	require.Equal(t, "ENQUEUE", got.QueueMode)
	require.True(t, deadline.Equal(got.Deadline), "deadline %s, want %s", got.Deadline, deadline)
	require.Equal(t, 1500, got.TimeoutMs)
	require.Equal(t, "fill", got.Action.Kind)
	require.Equal(t, "css:#name", got.Action.Selector)
	require.JSONEq(t, `{"text":"Ada","n":2}`, string(got.Action.Params))
	require.Equal(t, 3, got.RetryPolicy.MaxAttempts)
	require.Equal(t, 250, got.RetryPolicy.BackoffMs)
	require.Equal(t, 5000, got.RetryPolicy.MaxBackoffMs)
	require.InDelta(t, 1.5, got.RetryPolicy.Multiplier, 1e-9)
	require.True(t, got.RetryPolicy.Jitter)
	require.Equal(t, []struct{ Key, Value string }{{"a", "1"}, {"team", "growth"}}, got.Labels, "labels come sorted by key")
	require.Empty(t, got.DependsOn)
	require.Contains(t, []string{"QUEUED", "ASSIGNED"}, got.State)

	// The same idempotency key returns the original task.
	var again struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`, map[string]any{"in": in}, &again))
	require.Equal(t, got.ID, again.SubmitTask.ID, "a repeated idempotencyKey returns the original task")
}

func TestTaskRunsToSuccessAndShowsResultAttemptsAndDependencies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	first := b.submit(t, "a", nil)
	second := b.submit(t, "a", map[string]any{"dependsOn": []string{first}, "parentId": first})
	waitfor.Eventually(t, "the first task runs", func() bool { return b.exec.Run(first) != nil })
	require.Equal(t, "WAITING", b.state(t, second), "a task waits for its dependencies")
	require.NoError(t, b.exec.Succeed(first, `{"text":"hello"}`))
	waitfor.Eventually(t, "the second task runs", func() bool { return b.exec.Run(second) != nil })
	require.NoError(t, b.exec.Finish(second, engine.Outcome{Result: json.RawMessage(`{"ok":true}`), TabTime: 2 * time.Millisecond, ActionTime: 250 * time.Microsecond}))
	waitfor.Eventually(t, "the second task succeeds", func() bool { return b.state(t, second) == "SUCCEEDED" })

	var out struct {
		Task struct {
			State, ParentID string
			Depth           int
			Result          json.RawMessage
			AttemptCount    int
			Attempts        []struct {
				N                       int
				ErrorClass              string
				AssignedAt              time.Time
				EndedAt                 *time.Time
				TabTimeMs, ActionTimeMs *float64
				InstanceFault           bool
			}
			Dependencies []struct {
				ID, State string
				Result    json.RawMessage
			}
			EndedAt *time.Time
		}
		Parent struct {
			Children []struct{ ID string }
		}
	}
	require.NoError(t, b.c.Do(ctx, `query($id: ID!, $p: ID!) {
		task(id: $id) { state parentId depth result attemptCount attempts { n errorClass assignedAt endedAt tabTimeMs actionTimeMs instanceFault } dependencies { id state result } endedAt }
		parent: task(id: $p) { children { id } } }`, map[string]any{"id": second, "p": first}, &out))
	got := out.Task
	require.Equal(t, "SUCCEEDED", got.State)
	require.Equal(t, first, got.ParentID)
	require.Equal(t, 1, got.Depth)
	require.JSONEq(t, `{"ok":true}`, string(got.Result))
	require.Equal(t, 1, got.AttemptCount)
	require.Len(t, got.Attempts, 1)
	require.Equal(t, 1, got.Attempts[0].N)
	require.Equal(t, "NONE", got.Attempts[0].ErrorClass)
	require.NotNil(t, got.Attempts[0].EndedAt)
	require.Equal(t, 2.0, *got.Attempts[0].TabTimeMs)
	require.Equal(t, 0.25, *got.Attempts[0].ActionTimeMs)
	require.False(t, got.Attempts[0].InstanceFault)
	require.NotNil(t, got.EndedAt)
	require.Len(t, got.Dependencies, 1)
	require.Equal(t, first, got.Dependencies[0].ID)
	require.Equal(t, "SUCCEEDED", got.Dependencies[0].State)
	require.JSONEq(t, `{"text":"hello"}`, string(got.Dependencies[0].Result))
	require.Equal(t, []struct{ ID string }{{second}}, out.Parent.Children)
}

// page is one page of a task listing.
type page struct {
	Tasks struct {
		Edges []struct {
			Cursor string
			Node   struct{ ID string }
		}
		PageInfo struct {
			HasNextPage, HasPreviousPage bool
			EndCursor                    *string
		}
		TotalCount int
	}
}

func (p page) ids() []string {
	var out []string
	for _, e := range p.Tasks.Edges {
		out = append(out, e.Node.ID)
	}
	return out
}

func TestTasksPagesWithStableCursorsWhileTasksAreAdded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	var ids []string
	for i := 0; i < 25; i++ {
		ids = append(ids, b.submit(t, "pager", nil))
	}
	b.submit(t, "someone-else", nil)
	const q = `query($after: String, $order: TaskOrder) {
		tasks(filter: {agentId: "pager"}, first: 10, after: $after, order: $order) {
			edges { cursor node { id } } pageInfo { hasNextPage hasPreviousPage endCursor } totalCount } }`
	read := func(after *string, order string) page {
		var p page
		vars := map[string]any{"order": order}
		if after != nil {
			vars["after"] = *after
		}
		require.NoError(t, b.c.Do(ctx, q, vars, &p))
		return p
	}

	// Newest first: new tasks never shift the pages after the first.
	p1 := read(nil, "NEWEST_FIRST")
	require.Equal(t, reverse(ids[15:25]), p1.ids())
	require.True(t, p1.Tasks.PageInfo.HasNextPage)
	require.False(t, p1.Tasks.PageInfo.HasPreviousPage)
	require.Equal(t, 25, p1.Tasks.TotalCount)
	for i := 0; i < 3; i++ {
		b.submit(t, "pager", nil)
	}
	p2 := read(p1.Tasks.PageInfo.EndCursor, "NEWEST_FIRST")
	require.Equal(t, reverse(ids[5:15]), p2.ids(), "the second page continues where the first ended")
	require.True(t, p2.Tasks.PageInfo.HasPreviousPage)
	p3 := read(p2.Tasks.PageInfo.EndCursor, "NEWEST_FIRST")
	require.Equal(t, reverse(ids[0:5]), p3.ids())
	require.False(t, p3.Tasks.PageInfo.HasNextPage)

	// Oldest first.
	o1 := read(nil, "OLDEST_FIRST")
	require.Equal(t, ids[0:10], o1.ids())
	o2 := read(o1.Tasks.PageInfo.EndCursor, "OLDEST_FIRST")
	require.Equal(t, ids[10:20], o2.ids())
	require.Equal(t, o1.Tasks.Edges[9].Cursor, *o1.Tasks.PageInfo.EndCursor)

	// A cursor that is not one.
	err := b.c.Do(ctx, q, map[string]any{"after": "bogus"}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "after", e.Field())
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestCancelTaskStopsARunningTaskAndRefusesAnEndedOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	id := b.submit(t, "c", nil)
	waitfor.Eventually(t, "the task runs", func() bool { return b.exec.Run(id) != nil })
	var out struct {
		CancelTask struct{ State, Reason string }
	}
	require.NoError(t, b.c.Do(ctx, `mutation($id: ID!) { cancelTask(id: $id, reason: "changed my mind") { state reason } }`, map[string]any{"id": id}, &out))
	require.Equal(t, "CANCELLED", out.CancelTask.State)
	require.Equal(t, "changed my mind", out.CancelTask.Reason)
	select {
	case <-b.exec.Context(id).Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling a running task should cancel its executor call")
	}

	err := b.c.Do(ctx, `mutation($id: ID!) { cancelTask(id: $id) { state } }`, map[string]any{"id": id}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "CONFLICT", e.Code(), "cancelling an ended task is a conflict")
	require.Equal(t, id, e.Extensions["taskId"])
}

func TestCancelTasksAndStopSessionCancelWhatMatches(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) {
		o.config.Lanes = []engine.LaneConfig{{Name: "main", MaxInFlight: 0}} // nothing runs
	})
	ctx := ctxFor(t)
	a1 := b.submit(t, "x", map[string]any{"labels": []map[string]any{{"key": "job", "value": "1"}}})
	a2 := b.submit(t, "x", nil)
	keep := b.submit(t, "y", nil)
	s1 := b.submit(t, "z", map[string]any{"sessionKey": "sess"})
	s2 := b.submit(t, "z", map[string]any{"sessionKey": "sess"})

	var out struct {
		CancelTasks struct {
			IDs   []string
			Count int
		}
	}
	require.NoError(t, b.c.Do(ctx, `mutation { cancelTasks(filter: {labels: [{key: "job", value: "1"}]}) { ids count } }`, nil, &out))
	require.Equal(t, []string{a1}, out.CancelTasks.IDs)
	require.NoError(t, b.c.Do(ctx, `mutation { cancelTasks(filter: {agentId: "x"}, reason: "bulk") { ids count } }`, nil, &out))
	require.Equal(t, []string{a2}, out.CancelTasks.IDs)
	require.Equal(t, 1, out.CancelTasks.Count)
	require.Equal(t, "QUEUED", b.state(t, keep))

	var stop struct{ StopSession struct{ IDs []string } }
	require.NoError(t, b.c.Do(ctx, `mutation { stopSession(sessionKey: "sess", all: true) { ids } }`, nil, &stop))
	require.ElementsMatch(t, []string{s1, s2}, stop.StopSession.IDs)
	require.Equal(t, "CANCELLED", b.state(t, s2))

	err := b.c.Do(ctx, `mutation { cancelTasks(filter: {}) { count } }`, nil, nil)
	require.Equal(t, "INVALID_INPUT", gqlErr(t, err).Code(), "an empty filter cancels nothing")
}

func TestSubmitTasksGivesPerItemResultsAndResolvesKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := ctxFor(t)
	items := []map[string]any{
		{"key": "open", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.com"}}}},
		{"key": "bad", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "click", "params": []int{1, 2}}}},
		{"key": "after-bad", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "click"}, "dependsOn": []string{"bad"}}},
		{"key": "read", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "text"}, "dependsOn": []string{"open"}}},
		{"key": "c1", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "click"}, "dependsOn": []string{"c2"}}},
		{"key": "c2", "task": map[string]any{"agentId": "b", "action": map[string]any{"kind": "click"}, "dependsOn": []string{"c1"}}},
	}
	var out struct {
		SubmitTasks struct {
			BatchID           string
			Accepted, Refused int
			Items             []struct {
				Index int
				Key   string
				Task  *struct {
					ID, State, BatchID string
					DependsOn          []string
				}
				Error *struct {
					Code, Message, Field string
					IDs                  []string
					Retryable            bool
				}
			}
		}
	}
	err := b.c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted refused
		items { index key task { id state batchId dependsOn } error { code message field ids retryable } } } }`,
		map[string]any{"in": map[string]any{"items": items, "parallelism": 2}}, &out)
	require.NoError(t, err)
	res := out.SubmitTasks
	require.NotEmpty(t, res.BatchID)
	require.Equal(t, 2, res.Accepted)
	require.Equal(t, 4, res.Refused)
	require.Len(t, res.Items, 6)
	for i, it := range res.Items {
		require.Equal(t, i, it.Index)
		require.Equal(t, items[i]["key"], it.Key)
	}
	open, bad, afterBad, read, c1, c2 := res.Items[0], res.Items[1], res.Items[2], res.Items[3], res.Items[4], res.Items[5]
	require.Nil(t, open.Error)
	require.Equal(t, res.BatchID, open.Task.BatchID)
	require.Equal(t, "INVALID_INPUT", bad.Error.Code)
	require.Equal(t, "input.items.1.task.action.params", bad.Error.Field)
	require.Nil(t, bad.Task, "a malformed item never reaches the engine")
	require.Equal(t, "INVALID_INPUT", afterBad.Error.Code)
	require.Equal(t, "input.items.2.task.dependsOn", afterBad.Error.Field)
	require.Nil(t, read.Error)
	require.Equal(t, []string{open.Task.ID}, read.Task.DependsOn, "keys are resolved to task ids")
	require.Equal(t, "WAITING", read.Task.State)
	for _, c := range []any{c1.Error, c2.Error} {
		require.NotNil(t, c)
	}
	require.Equal(t, "CYCLE", c1.Error.Code)
	require.Equal(t, "CYCLE", c2.Error.Code)
	require.ElementsMatch(t, []string{"c1", "c2"}, c1.Error.IDs)
	require.Equal(t, "input.items.4.task.dependsOn", c1.Error.Field)

	var batch struct {
		Batch struct {
			ID          string
			Parallelism int
			Total       int
			Done        bool
			Counts      []struct {
				State string
				Count int
			}
			Tasks struct{ Nodes []struct{ ID string } }
		}
	}
	require.NoError(t, b.c.Do(ctx, `query($id: ID!) { batch(id: $id) { id parallelism total done counts { state count } tasks { nodes { id } } } }`,
		map[string]any{"id": res.BatchID}, &batch))
	require.Equal(t, 2, batch.Batch.Parallelism)
	require.Equal(t, 2, batch.Batch.Total)
	require.False(t, batch.Batch.Done)
	require.Equal(t, []struct{ ID string }{{open.Task.ID}, {read.Task.ID}}, batch.Batch.Tasks.Nodes)
}
