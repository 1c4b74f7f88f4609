package server_test

// Pull lanes through a real server: workers lease tasks, renew, complete,
// fail and release them, and every way of getting a lease wrong is refused
// with a typed error that changes nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// pullLanes: "jobs" (a pull lane of two slots, three quick attempts),
// "other" (another pull lane) and "main" (browser instances).
func pullLanes(o *setupOptions) {
	o.pull = true
	jobs := engine.NewLane("jobs")
	jobs.Pull, jobs.MaxInFlight = true, 2
	jobs.Retry = engine.RetryPolicy{MaxAttempts: 3, Backoff: time.Millisecond, Multiplier: 1, MaxBackoff: time.Millisecond}
	other := engine.NewLane("other")
	other.Pull = true
	o.config.Lanes = []engine.LaneConfig{engine.NewLane("main"), jobs, other}
}

const leaseQ = `mutation($lane: String!, $max: Int!, $for: Int!, $wait: Int!) {
  leaseTasks(lane: $lane, max: $max, leaseForMs: $for, waitMs: $wait) {
    leaseId leaseExpiresAt attempt task { id state lane action { kind params } lease { worker attempt expiresAt } }
  }
}`

type leaseView struct {
	LeaseID        string
	LeaseExpiresAt time.Time
	Attempt        int
	Task           struct {
		ID, State, Lane string
		Action          struct {
			Kind   string
			Params json.RawMessage
		}
		Lease *struct {
			Worker    *string
			Attempt   int
			ExpiresAt time.Time
		}
	}
}

func lease(t *testing.T, c *client.Client, lane string, max, forMs, waitMs int) ([]leaseView, error) {
	t.Helper()
	var out struct{ LeaseTasks []leaseView }
	err := c.Do(ctxFor(t), leaseQ, map[string]any{"lane": lane, "max": max, "for": forMs, "wait": waitMs}, &out)
	return out.LeaseTasks, err
}

// leaseOne leases one task of lane through c for forMs, and requires that
// there was one to lease.
func leaseOne(t *testing.T, c *client.Client, lane string, forMs int) leaseView {
	t.Helper()
	got, err := lease(t, c, lane, 1, forMs, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	return got[0]
}

type endView struct {
	LeaseID string
	Task    struct {
		ID, State string
		Result    json.RawMessage
		Error     *string
		Attempts  []struct {
			N     int
			Error *string
		}
	}
}

const endFields = `{ leaseId task { id state result error attempts { n error } } }`

func complete(t *testing.T, c *client.Client, id, result string) (endView, error) {
	t.Helper()
	var out struct{ CompleteTask endView }
	err := c.Do(ctxFor(t), `mutation($id: ID!, $r: JSON) { completeTask(leaseId: $id, result: $r) `+endFields+` }`,
		map[string]any{"id": id, "r": json.RawMessage(result)}, &out)
	return out.CompleteTask, err
}

func renew(t *testing.T, c *client.Client, id string, forMs int) (leaseView, error) {
	t.Helper()
	var out struct{ RenewLease leaseView }
	err := c.Do(ctxFor(t), `mutation($id: ID!, $f: Int!) { renewLease(leaseId: $id, leaseForMs: $f) { leaseId leaseExpiresAt attempt task { id state } } }`,
		map[string]any{"id": id, "f": forMs}, &out)
	return out.RenewLease, err
}

// submitJob submits a task of a worker-defined kind to lane.
func (b *bundle) submitJob(t *testing.T, lane string, extra map[string]any) string {
	t.Helper()
	in := map[string]any{"agentId": "planner", "lane": lane, "action": map[string]any{"kind": "crawl.site", "params": map[string]any{"url": "https://example.com"}}}
	for k, v := range extra {
		in[k] = v
	}
	var out struct{ SubmitTask struct{ ID string } }
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`, map[string]any{"in": in}, &out))
	return out.SubmitTask.ID
}

func (b *bundle) task(t *testing.T, id string) *engine.Task {
	t.Helper()
	tk, err := b.eng.Task(context.Background(), id)
	require.NoError(t, err)
	return tk
}

// requireConflict checks a CONFLICT error on field.
func requireConflict(t *testing.T, err error, field string) {
	t.Helper()
	e := gqlErr(t, err)
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Equal(t, field, e.Extensions["field"], e.Message)
}

// requireLost checks a LEASE_LOST error and its leaseState.
func requireLost(t *testing.T, err error, state string) {
	t.Helper()
	e := gqlErr(t, err)
	require.Equal(t, "LEASE_LOST", e.Code(), e.Message)
	require.Equal(t, state, e.Extensions["leaseState"], e.Message)
}

func TestAWorkerLeasesRenewsAndCompletesUnderTheLanesCeiling(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	var ids []string
	for range 3 {
		ids = append(ids, b.submitJob(t, "jobs", nil))
	}
	var lanes struct{ Lane struct{ Pull bool } }
	require.NoError(t, b.c.Do(ctxFor(t), `{ lane(name: "jobs") { pull } }`, nil, &lanes))
	require.True(t, lanes.Lane.Pull)
	require.Empty(t, b.exec.Started(), "a pull lane's tasks never go to the executor")

	got, err := lease(t, b.c, "jobs", 10, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, got, 2, "the lane's maxInFlight counts leased tasks")
	require.Equal(t, []string{ids[0], ids[1]}, []string{got[0].Task.ID, got[1].Task.ID}, "in the lane's order")
	l := got[0]
	require.Equal(t, "RUNNING", l.Task.State)
	require.Equal(t, "crawl.site", l.Task.Action.Kind)
	require.JSONEq(t, `{"url":"https://example.com"}`, string(l.Task.Action.Params))
	require.Equal(t, 1, l.Attempt)
	require.NotNil(t, l.Task.Lease)
	require.Equal(t, "anonymous", *l.Task.Lease.Worker)
	require.WithinDuration(t, time.Now().Add(30*time.Second), l.LeaseExpiresAt, 5*time.Second)

	more, err := lease(t, b.c, "jobs", 10, 30_000, 0)
	require.NoError(t, err)
	require.Empty(t, more, "no slot left: nothing, and no error")

	r, err := renew(t, b.c, l.LeaseID, 120_000)
	require.NoError(t, err)
	require.True(t, r.LeaseExpiresAt.After(l.LeaseExpiresAt), "renewed further out")

	done, err := complete(t, b.c, l.LeaseID, `{"pages": 3}`)
	require.NoError(t, err)
	require.Equal(t, "SUCCEEDED", done.Task.State)
	require.JSONEq(t, `{"pages": 3}`, string(done.Task.Result))

	_, err = complete(t, b.c, l.LeaseID, `{"pages": 4}`)
	requireConflict(t, err, "result")
	require.JSONEq(t, `{"pages": 3}`, string(b.task(t, ids[0]).Result), "a second completion changes nothing")
	_, err = renew(t, b.c, l.LeaseID, 60_000)
	requireLost(t, err, "COMPLETED")

	third, err := lease(t, b.c, "jobs", 10, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, third, 1, "the completed lease freed its slot")
	require.Equal(t, ids[2], third[0].Task.ID)
}

func TestLeaseIdsThatAreNotHeldAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	id := b.submitJob(t, "jobs", nil)
	good := leaseOne(t, b.c, "jobs", 30_000).LeaseID
	before := b.task(t, id)

	parts := strings.Split(good, ".")
	forged := parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2]))
	_, err := complete(t, b.c, forged, `1`)
	requireLost(t, err, "UNKNOWN")
	_, err = complete(t, b.c, id+".2."+parts[2], `1`)
	requireLost(t, err, "UNKNOWN")
	_, err = renew(t, b.c, forged, 60_000)
	requireLost(t, err, "UNKNOWN")

	_, err = complete(t, b.c, "not-a-lease", `1`)
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "leaseId", e.Extensions["field"])

	_, err = renew(t, b.c, good, 10)
	e = gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "leaseForMs", e.Extensions["field"])

	err = b.c.Do(ctxFor(t), `mutation($id: ID!) { failTask(leaseId: $id, error: "  ") { leaseId } }`, map[string]any{"id": good}, nil)
	e = gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code())
	require.Equal(t, "error", e.Extensions["field"])

	after := b.task(t, id)
	require.Equal(t, before.State, after.State)
	require.Equal(t, before.LastSeq, after.LastSeq, "no refused call recorded anything")
	_, err = complete(t, b.c, good, `"ok"`)
	require.NoError(t, err, "the real lease still works")

	for _, bad := range []struct {
		lane             string
		max, forMs, wait int
		code, field      string
	}{
		{"jobs", 0, 30_000, 0, "INVALID_INPUT", "max"},
		{"jobs", 101, 30_000, 0, "INVALID_INPUT", "max"},
		{"jobs", 1, 999, 0, "INVALID_INPUT", "leaseForMs"},
		{"jobs", 1, 30_000, 60_001, "INVALID_INPUT", "waitMs"},
		{"bad lane!", 1, 30_000, 0, "INVALID_INPUT", "lane"},
		{"nope", 1, 30_000, 0, "NOT_FOUND", "lane"},
		{"main", 1, 30_000, 0, "CONFLICT", "lane"},
	} {
		_, err := lease(t, b.c, bad.lane, bad.max, bad.forMs, bad.wait)
		e := gqlErr(t, err)
		require.Equal(t, bad.code, e.Code(), "%+v: %s", bad, e.Message)
		require.Equal(t, bad.field, e.Extensions["field"], "%+v", bad)
	}
}

func TestAVanishedWorkersLeaseExpiresAndTheTaskIsLeasedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	id := b.submitJob(t, "jobs", nil)
	first := leaseOne(t, b.c, "jobs", 1000)

	// The worker never calls back: after its second, the attempt has failed
	// and the retry (1 ms later) waits in the lane again.
	var second []leaseView
	waitfor.Eventually(t, "the task is leased again", func() bool {
		var err error
		second, err = lease(t, b.c, "jobs", 1, 30_000, 0)
		require.NoError(t, err)
		return len(second) == 1
	})
	require.Equal(t, id, second[0].Task.ID)
	require.Equal(t, 2, second[0].Attempt)
	tk := b.task(t, id)
	require.Len(t, tk.Attempts, 2)
	require.Contains(t, tk.Attempts[0].Error, "lease expired")

	_, err := complete(t, b.c, first.LeaseID, `"late"`)
	requireLost(t, err, "EXPIRED")
	_, err = renew(t, b.c, first.LeaseID, 60_000)
	requireLost(t, err, "EXPIRED")
	require.Equal(t, engine.StateRunning, b.task(t, id).State, "the late worker changed nothing")
	_, err = complete(t, b.c, second[0].LeaseID, `"on time"`)
	require.NoError(t, err)
}

func TestFailAndReleaseFollowTheLanesRetryPolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	ctx := ctxFor(t)
	perm := b.submitJob(t, "jobs", nil)
	var failed struct{ FailTask endView }
	require.NoError(t, b.c.Do(ctx, `mutation($id: ID!) { failTask(leaseId: $id, error: "404: no such site", retryable: false) `+endFields+` }`,
		map[string]any{"id": leaseOne(t, b.c, "jobs", 30_000).LeaseID}, &failed))
	require.Equal(t, perm, failed.FailTask.Task.ID)
	require.Equal(t, "FAILED", failed.FailTask.Task.State, "a failure that is not retryable ends the task")
	require.Equal(t, "404: no such site", *failed.FailTask.Task.Error)

	id := b.submitJob(t, "jobs", nil)
	for range 4 { // more releases than the lane's three attempts
		var rel struct{ ReleaseTask endView }
		require.NoError(t, b.c.Do(ctx, `mutation($id: ID!) { releaseTask(leaseId: $id, reason: "worker draining") `+endFields+` }`,
			map[string]any{"id": leaseOne(t, b.c, "jobs", 30_000).LeaseID}, &rel))
		require.Equal(t, "QUEUED", rel.ReleaseTask.Task.State)
	}
	for n := range 3 {
		got, err := lease(t, b.c, "jobs", 1, 30_000, 0)
		require.NoError(t, err)
		waitfor.Eventually(t, "the retry waits in the lane", func() bool {
			if len(got) == 1 {
				return true
			}
			got, err = lease(t, b.c, "jobs", 1, 30_000, 0)
			require.NoError(t, err)
			return len(got) == 1
		})
		var f struct{ FailTask endView }
		require.NoError(t, b.c.Do(ctx, `mutation($id: ID!) { failTask(leaseId: $id, error: "503 upstream") `+endFields+` }`,
			map[string]any{"id": got[0].LeaseID}, &f))
		if n < 2 {
			require.Contains(t, []string{"RETRY_WAIT", "QUEUED"}, f.FailTask.Task.State)
		} else {
			require.Equal(t, "PARKED", f.FailTask.Task.State, "three real attempts: the releases spent none")
			require.Len(t, f.FailTask.Task.Attempts, 7)
			require.Equal(t, "released: worker draining", *f.FailTask.Task.Attempts[0].Error)
		}
	}
	require.Equal(t, engine.StateParked, b.task(t, id).State)
}

func TestACancelWhileLeasedReachesTheWorkerOnItsNextCall(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	id := b.submitJob(t, "jobs", nil)
	got := leaseOne(t, b.c, "jobs", 30_000)
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($id: ID!) { cancelTask(id: $id, reason: "operator changed plans") { state } }`,
		map[string]any{"id": id}, nil))
	require.Equal(t, engine.StateCancelled, b.task(t, id).State)

	_, err := renew(t, b.c, got.LeaseID, 60_000)
	requireLost(t, err, "CANCELLED")
	require.Contains(t, gqlErr(t, err).Message, "operator changed plans")
	_, err = complete(t, b.c, got.LeaseID, `"done anyway"`)
	requireLost(t, err, "CANCELLED")
	tk := b.task(t, id)
	require.Equal(t, engine.StateCancelled, tk.State)
	require.Nil(t, tk.Result, "the worker's result of a cancelled task is not taken")
	waitfor.Eventually(t, "the slot is free again", func() bool { return b.eng.Stats(context.Background()).InFlight == 0 })
}

func TestALeaseCallWaitsForWork(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	type answer struct {
		got []leaseView
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		var out struct{ LeaseTasks []leaseView }
		err := b.c.Do(context.Background(), leaseQ, map[string]any{"lane": "jobs", "max": 5, "for": 30_000, "wait": 60_000}, &out)
		ch <- answer{out.LeaseTasks, err}
	}()
	id := b.submitJob(t, "jobs", nil)
	a := <-ch
	require.NoError(t, a.err)
	require.Len(t, a.got, 1, "the waiting worker got the task submitted meanwhile")
	require.Equal(t, id, a.got[0].Task.ID)

	none, err := lease(t, b.c, "other", 1, 30_000, 50)
	require.NoError(t, err)
	require.Empty(t, none, "nothing came within the wait: an empty answer")
}

func TestWorkerTokensWorkTheirOwnLanesOnly(t *testing.T) {
	t.Parallel()
	tokens, secrets := withTokensLanes(t,
		tokenSpec{"root", "admin", "", nil}, tokenSpec{"crawler", "worker", "", []string{"jobs"}}, tokenSpec{"bot", "agent", "planner", nil})
	b := setup(t, pullLanes, tokens)
	admin, worker, agent := b.clientWith(secrets["root"]), b.clientWith(secrets["crawler"]), b.clientWith(secrets["bot"])
	b.c = admin
	job := b.submitJob(t, "jobs", nil)
	other := b.submitJob(t, "other", nil)

	_, err := lease(t, worker, "other", 1, 30_000, 0)
	require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "not its lane")
	_, err = lease(t, agent, "jobs", 1, 30_000, 0)
	require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "agents submit; they do not lease")
	err = worker.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { id } }`, map[string]any{"id": job}, nil)
	require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "a worker reads nothing")
	err = worker.Do(ctxFor(t), `mutation { submitTask(input: {agentId: "x", lane: "jobs", action: {kind: "crawl"}}) { id } }`, nil, nil)
	require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "nor submits")
	require.Equal(t, engine.StateQueued, b.task(t, other).State)

	mine, err := lease(t, worker, "jobs", 5, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, mine, 1)
	require.Equal(t, "crawler", *mine[0].Task.Lease.Worker, "the lease names the token")
	theirs, err := lease(t, admin, "other", 1, 30_000, 0)
	require.NoError(t, err)
	require.Len(t, theirs, 1)
	_, err = complete(t, worker, theirs[0].LeaseID, `1`)
	require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "a lease of another lane")
	require.Equal(t, engine.StateRunning, b.task(t, other).State)
	_, err = complete(t, worker, mine[0].LeaseID, `1`)
	require.NoError(t, err)
}

// lockedBuffer collects a server's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestTheAuditLogNamesTheLeasedTasksAndNeverALeaseId(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	tokens, secrets := withTokensLanes(t, tokenSpec{"root", "admin", "", nil}, tokenSpec{"crawler", "worker", "", []string{"jobs"}})
	b := setup(t, pullLanes, tokens, func(o *setupOptions) { o.logs = &logs })
	b.c = b.clientWith(secrets["root"])
	worker := b.clientWith(secrets["crawler"])
	id := b.submitJob(t, "jobs", nil)
	got := leaseOne(t, worker, "jobs", 30_000)
	_, err := complete(t, worker, got.LeaseID, `1`)
	require.NoError(t, err)
	_, err = renew(t, worker, got.LeaseID, 60_000)
	requireLost(t, err, "COMPLETED")
	waitfor.Eventually(t, "the audit lines are written", func() bool {
		return strings.Count(logs.String(), "op=completeTask") == 1 && strings.Count(logs.String(), "op=renewLease") == 1
	})
	out := logs.String()
	require.Contains(t, out, "op=leaseTasks outcome=ok token=crawler role=worker")
	require.Regexp(t, `op=leaseTasks .*targets=\["lane:jobs", "task:`+id+`"\]`, out)
	require.Regexp(t, `op=completeTask outcome=ok .*targets=\["task:`+id+`"\]`, out)
	require.Contains(t, out, "op=renewLease outcome=LEASE_LOST")
	require.Regexp(t, `op=renewLease outcome=LEASE_LOST .*error="the lease on task `+id+` is not held: `, out,
		"the message as the client reads it, with no position or path before it")
	require.NotContains(t, out, strings.Split(got.LeaseID, ".")[2], "a lease id is its worker's secret")
}

// A lane turns into a pull lane, or back into a lane of browser instances,
// only when it holds no task that has not ended: the tasks were admitted for
// the other kind of lane (a pull lane takes any action kind, which a browser
// refuses). The refusal is a CONFLICT naming how many tasks, and it changes
// nothing.
func TestSwitchingALanesPullIsRefusedWhileItHoldsWork(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	jobs := []string{b.submitJob(t, "jobs", nil), b.submitJob(t, "jobs", nil)}
	before := b.task(t, jobs[0])
	seq := b.eng.Stats(context.Background()).LastSeq

	const switchQ = `mutation($n: String!, $p: Boolean!) { updateLane(name: $n, input: {pull: $p}) { name pull } }`
	err := b.c.Do(ctxFor(t), switchQ, map[string]any{"n": "jobs", "p": false}, nil)
	e := gqlErr(t, err)
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Equal(t, "input.pull", e.Extensions["field"])
	require.Contains(t, e.Message, "2 tasks")
	require.Equal(t, seq, b.eng.Stats(context.Background()).LastSeq, "the refusal recorded nothing")
	var lane struct{ Lane struct{ Pull bool } }
	require.NoError(t, b.c.Do(ctxFor(t), `{ lane(name: "jobs") { pull } }`, nil, &lane))
	require.True(t, lane.Lane.Pull, "still a pull lane")
	require.Equal(t, before.State, b.task(t, jobs[0]).State)
	require.Empty(t, b.exec.Started(), "nothing went to a browser")

	// A leased task counts too; once both have ended, the switch is made.
	got := leaseOne(t, b.c, "jobs", 30_000)
	require.NoError(t, b.c.Do(ctxFor(t), `mutation($id: ID!) { cancelTask(id: $id) { id } }`, map[string]any{"id": jobs[1]}, nil))
	err = b.c.Do(ctxFor(t), switchQ, map[string]any{"n": "jobs", "p": false}, nil)
	e = gqlErr(t, err)
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Contains(t, e.Message, "1 task that")
	_, err = complete(t, b.c, got.LeaseID, `"done"`)
	require.NoError(t, err)
	var out struct{ UpdateLane struct{ Pull bool } }
	require.NoError(t, b.c.Do(ctxFor(t), switchQ, map[string]any{"n": "jobs", "p": false}, &out))
	require.False(t, out.UpdateLane.Pull)

	// The reverse: a queued browser task keeps "main" a lane of instances.
	require.NoError(t, b.c.Do(ctxFor(t), `mutation { updateLane(name: "main", input: {paused: true}) { name } }`, nil, nil))
	queued := b.submitJob(t, "main", map[string]any{"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.com"}}})
	err = b.c.Do(ctxFor(t), switchQ, map[string]any{"n": "main", "p": true}, nil)
	e = gqlErr(t, err)
	require.Equal(t, "CONFLICT", e.Code(), e.Message)
	require.Contains(t, e.Message, "1 task that")
	require.Equal(t, engine.StateQueued, b.task(t, queued).State)
	_, err = lease(t, b.c, "main", 1, 30_000, 0)
	require.Equal(t, "CONFLICT", gqlErr(t, err).Code(), "main is still not a pull lane")
}

// attemptCodes reads the error codes of a task's attempts through the API
// ("-" for none).
func (b *bundle) attemptCodes(t *testing.T, id string) []string {
	t.Helper()
	var out struct {
		Task struct {
			Attempts []struct {
				EndedAt   *time.Time
				ErrorCode *string
			}
		}
	}
	require.NoError(t, b.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { attempts { endedAt errorCode } } }`, map[string]any{"id": id}, &out))
	codes := make([]string, 0, len(out.Task.Attempts))
	for _, a := range out.Task.Attempts {
		switch {
		case a.EndedAt == nil:
			codes = append(codes, "running")
		case a.ErrorCode == nil:
			codes = append(codes, "-")
		default:
			codes = append(codes, *a.ErrorCode)
		}
	}
	return codes
}

// attemptEnders reads who ended each of a task's attempts through the API
// (Attempt.endedBy; "-" for none).
func (b *bundle) attemptEnders(t *testing.T, id string) []string {
	t.Helper()
	var out struct {
		Task struct {
			Attempts []struct {
				EndedBy *string
			}
		}
	}
	require.NoError(t, b.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { attempts { endedBy } } }`, map[string]any{"id": id}, &out))
	enders := make([]string, 0, len(out.Task.Attempts))
	for _, a := range out.Task.Attempts {
		if a.EndedBy == nil {
			enders = append(enders, "-")
		} else {
			enders = append(enders, *a.EndedBy)
		}
	}
	return enders
}

// Attempt.errorCode is the code each attempt's retry policy was given: a
// worker's failTask code (retryable or not), none when it gave none, the
// engine's lease_expired for a lease that ran out, and an executor's own.
// Attempt.endedBy says who ended each: the worker, whatever its code, the
// engine for the lease that ran out, the executor.
func TestAnAttemptsErrorCodeIsReadOnTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, pullLanes)
	ctx := ctxFor(t)
	fail := func(leaseID, code string, retryable bool) {
		t.Helper()
		vars := map[string]any{"id": leaseID, "retryable": retryable}
		if code != "" {
			vars["code"] = code
		}
		require.NoError(t, b.c.Do(ctx, `mutation($id: ID!, $code: String, $retryable: Boolean!) {
			failTask(leaseId: $id, error: "upstream answered 503", code: $code, retryable: $retryable) { leaseId } }`, vars, nil))
	}
	leaseWhenQueued := func(id string, forMs int) string {
		t.Helper()
		var got []leaseView
		waitfor.Eventually(t, "task "+id+" is leased", func() bool {
			var err error
			got, err = lease(t, b.c, "jobs", 1, forMs, 0)
			require.NoError(t, err)
			return len(got) == 1
		})
		require.Equal(t, id, got[0].Task.ID)
		return got[0].LeaseID
	}

	id := b.submitJob(t, "jobs", nil)
	fail(leaseWhenQueued(id, 30_000), "upstream_503", true)
	require.Equal(t, []string{"upstream_503"}, b.attemptCodes(t, id))
	fail(leaseWhenQueued(id, 30_000), "", true)
	require.Equal(t, []string{"upstream_503", "-"}, b.attemptCodes(t, id), "a failTask without a code leaves none")
	leaseID := leaseWhenQueued(id, 1000) // the worker vanishes
	require.Equal(t, []string{"WORKER", "WORKER", "-"}, b.attemptEnders(t, id), "an attempt under way has no ender")
	waitfor.Eventually(t, "the lease expires", func() bool { return b.task(t, id).State == engine.StateParked })
	require.Equal(t, []string{"upstream_503", "-", engine.CodeLeaseExpired}, b.attemptCodes(t, id))
	require.Equal(t, []string{"WORKER", "WORKER", "ENGINE"}, b.attemptEnders(t, id))
	_, err := failCall(t, b.c, leaseID, b.task(t, id).Attempts[2].Error, engine.CodeLeaseExpired, true)
	requireLost(t, err, "EXPIRED")

	coded := b.submitJob(t, "jobs", nil)
	fail(leaseWhenQueued(coded, 30_000), engine.CodeTimeout, false)
	require.Equal(t, []string{engine.CodeTimeout}, b.attemptCodes(t, coded))
	require.Equal(t, []string{"WORKER"}, b.attemptEnders(t, coded), "a worker's code timeout is the worker's")

	perm := b.submitJob(t, "jobs", nil)
	fail(leaseWhenQueued(perm, 30_000), "not_found", false)
	require.Equal(t, engine.StateFailed, b.task(t, perm).State)
	require.Equal(t, []string{"not_found"}, b.attemptCodes(t, perm), "a failure that is not retryable keeps its code")

	pushed := b.submit(t, "planner", nil)
	waitfor.Eventually(t, "the task starts", func() bool { return b.exec.Run(pushed) != nil })
	require.NoError(t, b.exec.Finish(pushed, engine.Outcome{Err: engine.Permanent(errors.New("no such tab")), Code: "tab_not_found"}))
	require.Equal(t, []string{"tab_not_found"}, b.attemptCodes(t, pushed), "an executor's code")
	require.Equal(t, []string{"EXECUTOR"}, b.attemptEnders(t, pushed))
}

// lateTimers is a fake clock whose timers run late: Ahead moves the time it
// reads on while the calls that fall due wait for Advance, as the engine's
// timer does on a busy machine (its callback waits for the engine's lock).
type lateTimers struct {
	*clock.Fake
	ahead atomic.Int64
}

func (c *lateTimers) Now() time.Time { return c.Fake.Now().Add(time.Duration(c.ahead.Load())) }

// Ahead moves the time read on by d without running the calls due.
func (c *lateTimers) Ahead(d time.Duration) { c.ahead.Add(int64(d)) }

// A lease is lost at its term, whenever the engine's timer gets to it: a
// worker's completeTask, failTask or renewLease that arrives after the
// lease's expiresAt is LEASE_LOST (EXPIRED) and its result is not taken,
// even while the engine has not yet seen to the expiry, and during the
// lease grace after it has.
func TestACallAfterTheLeasesTermIsLeaseLostEvenBeforeTheEngineSeesTheExpiry(t *testing.T) {
	t.Parallel()
	clk := &lateTimers{Fake: clock.NewFake(time.Now())}
	b := setup(t, pullLanes, func(o *setupOptions) { o.clock = clk; o.config.LeaseGrace = time.Minute })
	ctx := ctxFor(t)
	id := b.submitJob(t, "jobs", nil)
	leaseAttempt := func(attempt int) leaseView {
		t.Helper()
		l := leaseOne(t, b.c, "jobs", 1000)
		require.Equal(t, attempt, l.Attempt)
		return l
	}

	// completeTask at the term, before the engine's timer ran.
	first := leaseAttempt(1)
	clk.Ahead(time.Second)
	_, err := complete(t, b.c, first.LeaseID, `"late"`)
	requireLost(t, err, "EXPIRED")
	tk := b.task(t, id)
	require.Equal(t, engine.StateRetryWait, tk.State, "the late result was not taken")
	require.Nil(t, tk.Result)
	require.Equal(t, []string{"lease_expired"}, b.attemptCodes(t, id))
	require.Contains(t, tk.Attempts[0].Error, "lease expired: anonymous did not complete or renew it")
	_, err = renew(t, b.c, first.LeaseID, 60_000)
	requireLost(t, err, "EXPIRED")
	clk.Advance(time.Second) // the engine's timers catch up: the retry queues, nothing else changes
	require.Equal(t, []string{"lease_expired"}, b.attemptCodes(t, id))

	// failTask(retryable: false) past the term fails nothing at once, and a
	// renewal past it renews nothing.
	second := leaseAttempt(2)
	clk.Ahead(1500 * time.Millisecond)
	err = b.c.Do(ctx, `mutation($id: ID!) { failTask(leaseId: $id, error: "gave up", retryable: false) { leaseId } }`,
		map[string]any{"id": second.LeaseID}, nil)
	requireLost(t, err, "EXPIRED")
	require.Equal(t, engine.StateRetryWait, b.task(t, id).State, "not FAILED by a worker whose lease had run out")
	require.Equal(t, []string{"lease_expired", "lease_expired"}, b.attemptCodes(t, id))
	clk.Advance(time.Second)

	third := leaseAttempt(3)
	clk.Ahead(time.Second)
	_, err = renew(t, b.c, third.LeaseID, 60_000)
	requireLost(t, err, "EXPIRED")
	_, err = complete(t, b.c, third.LeaseID, `"late"`)
	requireLost(t, err, "EXPIRED")
	tk = b.task(t, id)
	require.Equal(t, engine.StateParked, tk.State, "its last attempt's lease ran out: the retry budget is spent")
	require.Nil(t, tk.Result)
}

// Once the engine has seen to the expiry, its lease grace gives the worker
// nothing: a completion then is LEASE_LOST too.
func TestACompletionWithinTheLeaseGraceIsLeaseLost(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	b := setup(t, pullLanes, func(o *setupOptions) { o.clock = clk; o.config.LeaseGrace = time.Minute })
	id := b.submitJob(t, "jobs", nil)
	l := leaseOne(t, b.c, "jobs", 1000)
	clk.Advance(time.Second) // the term: the engine's timer runs, the lease grace starts
	_, err := complete(t, b.c, l.LeaseID, `"late"`)
	requireLost(t, err, "EXPIRED")
	waitfor.Eventually(t, "the attempt ended", func() bool { return b.task(t, id).State == engine.StateRetryWait })
	tk := b.task(t, id)
	require.Nil(t, tk.Result)
	require.Equal(t, []string{"lease_expired"}, b.attemptCodes(t, id))
}

// reopenable returns a function that opens a SQLite store on one file of
// the test's, the same each time, so that a server set up again on it
// finds what the one before recorded.
func reopenable(t *testing.T) func() engine.Store {
	path := filepath.Join(t.TempDir(), "pull.db")
	return func() engine.Store {
		st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
}

// stop stops the bundle as its process would exit: the server, the engine
// and the pull manager, and then st, its store.
func (b *bundle) stop(t *testing.T, st engine.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, b.srv.Shutdown(ctx))
	require.NoError(t, b.eng.Shutdown(ctx))
	b.pull.Close()
	require.NoError(t, st.Close())
}

type pullAttemptView struct {
	State    string
	Attempts []struct {
		N                     int
		AssignedAt, StartedAt time.Time
	}
	Lease *struct {
		Worker   *string
		Attempt  int
		LeasedAt *time.Time
	}
}

func pullAttempt(t *testing.T, b *bundle, id string) pullAttemptView {
	t.Helper()
	var out struct{ Task pullAttemptView }
	require.NoError(t, b.c.Do(ctxFor(t), `query($id: ID!) { task(id: $id) { state attempts { n assignedAt startedAt } lease { worker attempt leasedAt } } }`,
		map[string]any{"id": id}, &out))
	return out.Task
}

// A pull lane's attempt starts when it is leased: the lease assigns the
// attempt and starts it (RUNNING) at one instant, which its assignedAt,
// its startedAt and the task's lease.leasedAt all show — also after a
// restart that resumes the lease. (leasedAt used to be a later instant,
// when the worker's call answered after the lease's commit, and null for a
// resumed lease.)
func TestAPullAttemptStartsWhenItIsLeased(t *testing.T) {
	t.Parallel()
	open := reopenable(t)
	st := open()
	b := setup(t, pullLanes, func(o *setupOptions) { o.store = st })
	id := b.submitJob(t, "jobs", nil)
	before := time.Now()
	got, err := lease(t, b.c, "jobs", 1, 600_000, 0)
	after := time.Now()
	require.NoError(t, err)
	require.Len(t, got, 1)

	v := pullAttempt(t, b, id)
	require.Equal(t, "RUNNING", v.State)
	require.Len(t, v.Attempts, 1)
	a := v.Attempts[0]
	require.True(t, a.StartedAt.Equal(a.AssignedAt), "started %s, assigned %s: one instant", a.StartedAt, a.AssignedAt)
	require.False(t, a.StartedAt.Before(before) || a.StartedAt.After(after), "leased during the call")
	require.NotNil(t, v.Lease)
	require.NotNil(t, v.Lease.LeasedAt)
	require.True(t, v.Lease.LeasedAt.Equal(a.StartedAt), "leased %s, started %s: one instant", v.Lease.LeasedAt, a.StartedAt)

	// A restart resumes the lease: it was made at the same instant.
	b.stop(t, st)
	b2 := setup(t, pullLanes, func(o *setupOptions) { o.store = open() })
	v2 := pullAttempt(t, b2, id)
	require.Equal(t, "RUNNING", v2.State, "the lease survived the restart")
	require.NotNil(t, v2.Lease)
	require.Nil(t, v2.Lease.Worker, "a resumed lease's worker is not recorded")
	require.NotNil(t, v2.Lease.LeasedAt)
	require.True(t, v2.Lease.LeasedAt.Equal(a.StartedAt), "leased %s, started %s", v2.Lease.LeasedAt, a.StartedAt)
}

func failCall(t *testing.T, c *client.Client, id, msg, code string, retryable bool) (endView, error) {
	t.Helper()
	var out struct{ FailTask endView }
	err := c.Do(ctxFor(t), `mutation($id: ID!, $e: String!, $c: String, $r: Boolean!) { failTask(leaseId: $id, error: $e, code: $c, retryable: $r) `+endFields+` }`,
		map[string]any{"id": id, "e": msg, "c": code, "r": retryable}, &out)
	return out.FailTask, err
}

// A worker resends completeTask or failTask when the first call's answer
// was an error it may retry (the connection broke after the commit): the
// same call answers as the first did, also after a restart on a durable
// store, where the server remembers no ended lease; a different one is a
// CONFLICT naming what differs. Only a token that works the task's lane
// may resend. (A resend used to be LEASE_LOST, COMPLETED or FAILED: the
// worker read that as its result refused.)
func TestAWorkerResendsACompletionOrFailureAfterAnAmbiguousAnswer(t *testing.T) {
	t.Parallel()
	open := reopenable(t)
	tokens, secrets := withTokensLanes(t, tokenSpec{"root", "admin", "", nil},
		tokenSpec{"crawler", "worker", "", []string{"jobs"}}, tokenSpec{"mailer", "worker", "", []string{"mail"}})
	st := open()
	b := setup(t, pullLanes, tokens, func(o *setupOptions) { o.store = st })
	b.c = b.clientWith(secrets["root"])
	w := b.clientWith(secrets["crawler"])
	done, failed, timedOut := b.submitJob(t, "jobs", nil), b.submitJob(t, "jobs", nil), b.submitJob(t, "jobs", nil)
	ls, err := lease(t, w, "jobs", 2, 600_000, 0)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	require.Equal(t, []string{done, failed}, []string{ls[0].Task.ID, ls[1].Task.ID})
	_, err = complete(t, w, ls[0].LeaseID, `{"pages": 3}`)
	require.NoError(t, err)
	_, err = failCall(t, w, ls[1].LeaseID, "404: no such site", "not_found", false)
	require.NoError(t, err)
	ls = append(ls, leaseOne(t, w, "jobs", 600_000))
	require.Equal(t, timedOut, ls[2].Task.ID)
	_, err = failCall(t, w, ls[2].LeaseID, "the site timed out", engine.CodeTimeout, false)
	require.NoError(t, err)

	check := func(b *bundle, w *client.Client) {
		t.Helper()
		again, err := complete(t, w, ls[0].LeaseID, `{ "pages" : 3 }`)
		require.NoError(t, err, "the same completion")
		require.Equal(t, "SUCCEEDED", again.Task.State)
		require.JSONEq(t, `{"pages": 3}`, string(again.Task.Result))
		_, err = complete(t, w, ls[0].LeaseID, `{"pages": 4}`)
		requireConflict(t, err, "result")
		_, err = failCall(t, w, ls[0].LeaseID, "404: no such site", "not_found", false)
		requireConflict(t, err, "leaseId")

		f, err := failCall(t, w, ls[1].LeaseID, "404: no such site", "not_found", false)
		require.NoError(t, err, "the same failure")
		require.Equal(t, "FAILED", f.Task.State)
		_, err = failCall(t, w, ls[1].LeaseID, "404: no such site", "not_found", true)
		requireConflict(t, err, "retryable")
		// A code the engine also gives: the attempt records that the
		// worker failed it (endedBy), which a restart keeps.
		f, err = failCall(t, w, ls[2].LeaseID, "the site timed out", engine.CodeTimeout, false)
		require.NoError(t, err, "the same failure with the code timeout")
		require.Equal(t, "FAILED", f.Task.State)
		_, err = failCall(t, w, ls[2].LeaseID, "the site timed out twice", engine.CodeTimeout, false)
		requireConflict(t, err, "error")

		other := b.clientWith(secrets["mailer"])
		_, err = complete(t, other, ls[0].LeaseID, `{"pages": 3}`)
		require.Equal(t, "FORBIDDEN", gqlErr(t, err).Code(), "a token of another lane")
		for _, id := range []string{done, failed, timedOut} {
			require.Len(t, b.task(t, id).Attempts, 1, "a resend changes nothing")
		}
	}
	check(b, w)

	b.stop(t, st)
	b2 := setup(t, pullLanes, tokens, func(o *setupOptions) { o.store = open() })
	check(b2, b2.clientWith(secrets["crawler"]))
	_, err = renew(t, b2.clientWith(secrets["crawler"]), ls[0].LeaseID, 60_000)
	requireLost(t, err, "UNKNOWN")
}
