package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
	"github.com/switchyard/switchyard/graph/client"
)

// A worker's lease outlives a restart of the server on its SQLite file: the
// task stays RUNNING, and the same lease id renews and completes it after.
func TestAWorkersLeaseSurvivesARestartOnSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "switchyard.db")
	server, stop := serveOn(t, db)
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(ctx, `mutation { createLane(name: "jobs", input: {pull: true, maxInFlight: 1}) { pull } }`, nil, nil))
	res := sw(t, server, "lane", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^jobs\s+0\s+1\s+0\s+100000\s+running \(pull\)\s`, res.stdout, "the operator sees a pull lane")
	var sub struct{ SubmitTask struct{ ID string } }
	require.NoError(t, c.Do(ctx, `mutation { submitTask(input: {agentId: "planner", lane: "jobs", action: {kind: "crawl", params: {url: "https://example.com"}}}) { id } }`, nil, &sub))
	id := sub.SubmitTask.ID
	var leased struct {
		LeaseTasks []struct {
			LeaseID string
			Task    struct{ ID string }
		}
	}
	require.NoError(t, c.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 5, leaseForMs: 600000) { leaseId task { id } } }`, nil, &leased))
	require.Len(t, leased.LeaseTasks, 1)
	require.Equal(t, id, leased.LeaseTasks[0].Task.ID)
	lease := leased.LeaseTasks[0].LeaseID
	leasedEv := watchOne(t, server, "--task", id, "--state", "running", "--after", "0")
	stop()

	server, stop = serveOn(t, db)
	defer stop()
	c = client.New(server + "/graphql")
	var task struct {
		Task struct {
			State string
			Lease *struct {
				Worker  *string
				Attempt int
			}
		}
	}
	require.NoError(t, c.Do(ctx, `query($id: ID!) { task(id: $id) { state lease { worker attempt } } }`, map[string]any{"id": id}, &task))
	require.Equal(t, "RUNNING", task.Task.State, "neither the shutdown nor the start ended the lease")
	require.NotNil(t, task.Task.Lease)
	require.Equal(t, 1, task.Task.Lease.Attempt)
	require.Nil(t, task.Task.Lease.Worker, "who held it was not stored")
	// The task's subscribers learn the new reason: a watch resuming from
	// before the restart receives a LEASE_RESUMED event after the lease's.
	var reason struct{ Task struct{ Reason string } }
	require.NoError(t, c.Do(ctx, `query($id: ID!) { task(id: $id) { reason } }`, map[string]any{"id": id}, &reason))
	require.True(t, strings.HasPrefix(reason.Task.Reason, "lease resumed after a restart"), reason.Task.Reason)
	resumed := watchOne(t, server, "--task", id, "--kind", "lease-resumed", "--after", strconv.FormatInt(leasedEv.Seq, 10))
	require.Equal(t, "LEASE_RESUMED", resumed.Kind)
	require.Greater(t, resumed.Seq, leasedEv.Seq)
	require.Equal(t, "RUNNING", resumed.From)
	require.Equal(t, "RUNNING", resumed.To)
	require.Equal(t, 1, resumed.Attempt)
	require.Equal(t, reason.Task.Reason, resumed.Reason, "the event says what the task says")

	var again struct{ LeaseTasks []struct{ LeaseID string } }
	require.NoError(t, c.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 5) { leaseId } }`, nil, &again))
	require.Empty(t, again.LeaseTasks, "the resumed lease still holds its task and the lane's one slot")

	parts := strings.Split(lease, ".")
	err := c.Do(ctx, `mutation($id: ID!) { renewLease(leaseId: $id) { leaseId } }`,
		map[string]any{"id": parts[0] + "." + parts[1] + "." + strings.Repeat("x", len(parts[2]))}, nil)
	var errs client.Errors
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "LEASE_LOST", errs[0].Code(), "a forged id still does not verify")

	require.NoError(t, c.Do(ctx, `mutation($id: ID!) { renewLease(leaseId: $id, leaseForMs: 60000) { leaseId } }`, map[string]any{"id": lease}, nil))
	var done struct {
		CompleteTask struct {
			Task struct {
				State  string
				Result json.RawMessage
			}
		}
	}
	require.NoError(t, c.Do(ctx, `mutation($id: ID!) { completeTask(leaseId: $id, result: {pages: 2}) { task { state result } } }`,
		map[string]any{"id": lease}, &done))
	require.Equal(t, "SUCCEEDED", done.CompleteTask.Task.State)
	require.JSONEq(t, `{"pages": 2}`, string(done.CompleteTask.Task.Result))
}

// watchOne runs `switchyard watch ARGS --count 1 --json` and returns the
// event it printed.
func watchOne(t *testing.T, server string, args ...string) cli.Event {
	t.Helper()
	res := sw(t, server, append([]string{"watch"}, append(args, "--count", "1", "--json")...)...)
	require.Equal(t, 0, res.code, res.stderr)
	evs := lines(res.stdout)
	require.Len(t, evs, 1, res.stdout)
	var ev cli.Event
	require.NoError(t, json.Unmarshal([]byte(evs[0]), &ev))
	return ev
}
