package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/poison"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// poisonItem is what one item of a batch sent: every value distinct to
// its request and item, so that a value read from another request's
// memory shows as well as the poison does.
type poisonItem struct {
	key, agent, session, idem, instruction, selector, label, priority, round string
	timeoutMs, maxAttempts, n                                                int
	action, dependsOnFirst                                                   bool
}

// poisonBatch builds request (w, r)'s batch of n items and its variables.
func poisonBatch(w, r, n int) ([]poisonItem, map[string]any) {
	priorities := []string{"CRITICAL", "HIGH", "NORMAL", "LOW"}
	var sent []poisonItem
	var items []map[string]any
	for i := range n {
		s := poisonItem{
			key:         fmt.Sprintf("w%d-r%d-i%d", w, r, i),
			agent:       fmt.Sprintf("agent-w%d-r%d", w, r),
			session:     fmt.Sprintf("session-w%d-r%d-%d", w, r, i%3),
			idem:        fmt.Sprintf("idem-w%d-r%d-i%d", w, r, i),
			instruction: fmt.Sprintf("instruction of w%d r%d item %d", w, r, i),
			selector:    fmt.Sprintf("css:#w%d-r%d-i%d", w, r, i),
			label:       fmt.Sprintf("w%d-r%d-i%d", w, r, i),
			round:       fmt.Sprint(r),
			priority:    priorities[(w+r+i)%4],
			timeoutMs:   1000 + 100*w + 10*r + i,
			maxAttempts: 1 + (w+r+i)%5,
			n:           1000*w + 100*r + i,
			action:      i%2 == 1,
			// The first item is another's dependency: the engine resolves
			// the key the item sent to the first item's task.
			dependsOnFirst: i > 0 && i%3 == 0,
		}
		sent = append(sent, s)
		task := map[string]any{
			"agentId": s.agent, "sessionKey": s.session, "idempotencyKey": s.idem, "priority": s.priority,
			"timeoutMs": s.timeoutMs, "retryPolicy": map[string]any{"maxAttempts": s.maxAttempts},
			"labels": []map[string]any{{"key": "item", "value": s.label}, {"key": "round", "value": s.round}},
		}
		if s.action {
			task["action"] = map[string]any{"kind": "click", "selector": s.selector, "params": map[string]any{"n": s.n}}
		} else {
			task["instruction"] = s.instruction
		}
		if s.dependsOnFirst {
			task["dependsOn"] = []string{sent[0].key}
		}
		items = append(items, map[string]any{"key": s.key, "task": task})
	}
	return sent, map[string]any{"in": map[string]any{"items": items}}
}

const (
	// poisonFull selects every item's task, poisonBare none (the engine is
	// asked for ids only, and the audit reads them from the payload).
	poisonFull = `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted refused
		items { index key error { code message } task { id agentId lane sessionKey priority instruction dependsOn
			timeoutMs idempotencyKey batchId action { kind selector params } retryPolicy { maxAttempts } labels { key value } } } } }`
	poisonBare = `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId accepted refused items { index key error { code message } } } }`
)

// Batches read typed into pooled room, released under tests with poison
// (internal/poison), submitted concurrently over HTTP: every response,
// every task the engine keeps, every event and every audit line holds
// what its own request sent — nothing of the poison, nothing of another
// request. Something that reads a batch's input, or the resolver's engine
// items, after the room went back (an asynchronous audit or log sink, a
// response written after the request's run, a forwarder that encodes late,
// an engine that keeps the resolver's action) reads the poison, and this
// test fails where production would have read another request's items.
func TestConcurrentBatchesShowNoPoisonAnywhere(t *testing.T) {
	t.Parallel()
	require.True(t, poison.On(), "released room is poisoned in tests")
	var logs lockedBuffer
	b := setup(t, func(o *setupOptions) { o.logs = &logs })
	// One request of each query first: from then on the query is cached
	// and the body decoder reads the batch typed, into pooled room.
	for _, q := range []string{poisonFull, poisonBare} {
		_, vars := poisonBatch(9, 9, 1)
		_, _, err := b.c.Raw(ctxFor(t), client.Request{Query: q, Variables: vars})
		require.NoError(t, err)
	}

	type request struct {
		w, r    int
		full    bool
		sent    []poisonItem
		batchID string
	}
	const workers, rounds = 4, 6
	var mu sync.Mutex
	var done []*request
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				req := &request{w: w, r: r, full: (w+r)%2 == 0}
				var vars map[string]any
				req.sent, vars = poisonBatch(w, r, 8+3*((w+r)%5))
				q := poisonBare
				if req.full {
					q = poisonFull
				}
				res, _, err := b.c.Raw(ctxFor(t), client.Request{Query: q, Variables: vars})
				if !assertResponse(t, req.sent, req.full, res, err) {
					return
				}
				var out struct{ SubmitTasks struct{ BatchID string } }
				_ = json.Unmarshal(res.Data, &out)
				req.batchID = out.SubmitTasks.BatchID
				mu.Lock()
				done = append(done, req)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, done, workers*rounds)

	// Every task the engine keeps, and every event of it.
	byTask := map[string]poisonItem{}
	for _, req := range done {
		tasks, err := b.eng.Tasks(ctxFor(t), engine.TaskQuery{Filter: engine.TaskFilter{BatchID: req.batchID}, Limit: 1000})
		require.NoError(t, err)
		require.Len(t, tasks, len(req.sent), "the tasks of batch %s", req.batchID)
		byIdem := map[string]*engine.Task{}
		for _, task := range tasks {
			byIdem[task.Spec.IdempotencyKey] = task
		}
		for i, s := range req.sent {
			task := byIdem[s.idem]
			require.NotNil(t, task, "request w%d r%d item %d: no task with its idempotency key", req.w, req.r, i)
			checkSpec(t, s, *task.Spec, byIdem[req.sent[0].idem].ID)
			byTask[task.ID] = s
		}
	}
	evs, _ := b.eng.Events().Read(0, 1<<20, nil)
	seen := 0
	for _, ev := range evs {
		s, ok := byTask[ev.TaskID]
		if !ok {
			continue
		}
		seen++
		require.Equal(t, s.agent, ev.AgentID, "event %d of %s", ev.Seq, ev.TaskID)
		require.Equal(t, s.session, ev.SessionKey, "event %d of %s", ev.Seq, ev.TaskID)
		require.Equal(t, "main", ev.Lane, "event %d of %s", ev.Seq, ev.TaskID)
		require.NotContains(t, ev.Reason, poison.Text, "event %d of %s", ev.Seq, ev.TaskID)
	}
	require.GreaterOrEqual(t, seen, len(byTask), "every task has its events")

	// Every request's audit line names its own agent, batch and tasks.
	auditLines := func() []string {
		return regexp.MustCompile(`op=submitTasks .*`).FindAllString(logs.String(), -1)
	}
	waitfor.Eventually(t, "an audit line per request", func() bool { return len(auditLines()) >= workers*rounds+2 })
	for line := range strings.Lines(logs.String()) {
		require.NotContains(t, line, poison.Text, "a line of the server's log")
	}
	lines := map[string]string{} // by the agent it names
	for _, line := range auditLines() {
		if m := regexp.MustCompile(`"agent:([^"]*)"`).FindAllStringSubmatch(line, -1); len(m) == 1 {
			lines[m[0][1]] = line
		} else {
			t.Fatalf("an audit line names %d agents: %s", len(m), line)
		}
	}
	for _, req := range done {
		line, ok := lines[req.sent[0].agent]
		require.True(t, ok, "no audit line names %s", req.sent[0].agent)
		var tasks []string
		for _, m := range regexp.MustCompile(`"(\w+):([^"]*)"`).FindAllStringSubmatch(line, -1) {
			switch m[1] {
			case "batch":
				require.Equal(t, req.batchID, m[2], line)
			case "task":
				require.Equal(t, req.sent[0].agent, byTask[m[2]].agent, "the audit line of %s names another request's task: %s", req.sent[0].agent, line)
				tasks = append(tasks, m[2])
			}
		}
		require.Len(t, tasks, len(req.sent), line)
		require.Contains(t, line, fmt.Sprintf("accepted=%d refused=0", len(req.sent)), line)
	}
}

// assertResponse checks a batch's response against what it sent (its
// items' tasks too when full), reporting whether it held.
func assertResponse(t *testing.T, sent []poisonItem, full bool, res *client.Response, err error) bool {
	t.Helper()
	if !assert(t, err == nil, "submitTasks: %v", err) || !assert(t, len(res.Errors) == 0, "errors: %v", res.Errors) {
		return false
	}
	if !assert(t, !strings.Contains(string(res.Data), poison.Text), "the response holds the poison: %s", res.Data) {
		return false
	}
	var out struct {
		SubmitTasks struct {
			BatchID           string
			Accepted, Refused int
			Items             []struct {
				Index int
				Key   *string
				Error *struct{ Code, Message string }
				Task  *struct {
					ID, AgentID, Lane, Priority string
					SessionKey, Instruction     *string
					IdempotencyKey, BatchID     *string
					DependsOn                   []string
					TimeoutMs                   *int
					Action                      *struct {
						Kind, Selector string
						Params         map[string]int
					}
					RetryPolicy *struct{ MaxAttempts int }
					Labels      []struct{ Key, Value string }
				}
			}
		}
	}
	if !assert(t, json.Unmarshal(res.Data, &out) == nil, "decoding %s", res.Data) {
		return false
	}
	p := out.SubmitTasks
	ok := assert(t, p.Accepted == len(sent) && p.Refused == 0 && p.BatchID != "" && len(p.Items) == len(sent),
		"accepted %d refused %d batch %q items %d, want %d accepted", p.Accepted, p.Refused, p.BatchID, len(p.Items), len(sent))
	for i := 0; ok && i < len(sent); i++ {
		s, it := sent[i], p.Items[i]
		ok = assert(t, it.Index == i && it.Key != nil && *it.Key == s.key && it.Error == nil, "item %d: index %d key %v error %v, want key %s", i, it.Index, it.Key, it.Error, s.key)
		if !ok || !full {
			continue
		}
		task := it.Task
		ok = assert(t, task != nil, "item %d has no task", i) &&
			assert(t, task.AgentID == s.agent && task.Lane == "main" && task.Priority == s.priority &&
				deref(task.SessionKey) == s.session && deref(task.IdempotencyKey) == s.idem && deref(task.BatchID) == p.BatchID &&
				task.TimeoutMs != nil && *task.TimeoutMs == s.timeoutMs &&
				task.RetryPolicy != nil && task.RetryPolicy.MaxAttempts == s.maxAttempts,
				"item %d: task %+v, sent %+v", i, *task, s) &&
			assert(t, len(task.DependsOn) == 0 && !s.dependsOnFirst ||
				len(task.DependsOn) == 1 && s.dependsOnFirst && p.Items[0].Task != nil && task.DependsOn[0] == p.Items[0].Task.ID,
				"item %d depends on %v", i, task.DependsOn) &&
			assert(t, slices.Equal(labelsOf(task.Labels), []string{"item=" + s.label, "round=" + s.round}),
				"item %d: labels %v, sent %s", i, task.Labels, s.label)
		if ok && s.action {
			ok = assert(t, task.Action != nil && task.Action.Kind == "click" && task.Action.Selector == s.selector &&
				maps.Equal(task.Action.Params, map[string]int{"n": s.n}) && task.Instruction == nil,
				"item %d: action %+v, sent %s %d", i, task.Action, s.selector, s.n)
		} else if ok {
			ok = assert(t, task.Action == nil && deref(task.Instruction) == s.instruction, "item %d: instruction %v", i, task.Instruction)
		}
	}
	return ok
}

// checkSpec holds a task the engine keeps to what its item sent.
func checkSpec(t *testing.T, s poisonItem, spec engine.TaskSpec, firstID string) {
	t.Helper()
	require.Equal(t, s.agent, spec.AgentID)
	require.Equal(t, "main", spec.Lane)
	require.Equal(t, s.session, spec.SessionKey)
	require.Equal(t, s.idem, spec.IdempotencyKey)
	require.Equal(t, int64(s.timeoutMs), spec.Timeout.Milliseconds())
	require.NotNil(t, spec.Retry)
	require.Equal(t, s.maxAttempts, spec.Retry.MaxAttempts)
	require.Equal(t, map[string]string{"item": s.label, "round": s.round}, spec.Labels)
	if s.dependsOnFirst {
		require.Equal(t, []string{firstID}, spec.DependsOn, "item %s", s.key)
	} else {
		require.Empty(t, spec.DependsOn, "item %s", s.key)
	}
	if s.action {
		require.NotNil(t, spec.Action, "item %s", s.key)
		require.Equal(t, "click", spec.Action.Kind)
		require.Equal(t, s.selector, spec.Action.Selector)
		require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, s.n), string(spec.Action.Params))
		require.Empty(t, spec.Instruction)
	} else {
		require.Nil(t, spec.Action, "item %s", s.key)
		require.Equal(t, s.instruction, spec.Instruction)
	}
}

func labelsOf(ls []struct{ Key, Value string }) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Key+"="+l.Value)
	}
	slices.Sort(out)
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// assert reports a failure from any goroutine (t.Errorf), returning ok.
func assert(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}
