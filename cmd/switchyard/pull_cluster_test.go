package main

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// Workers of a cluster's pull lane call any node; the leases live on the
// leader and survive its kill -9: the next leader takes them back from
// PostgreSQL, and the same lease id completes the task.
func TestAPullLaneOnAClusterServesWorkersOnEveryNodeAndOutlivesItsLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two nodes")
	}
	_, _, leader, follower := startPair(t, "p", "error", `shutdownGrace: 1s
engine:
  lanes:
    - {name: jobs, pull: true, maxInFlight: 4}
`)
	ctx := context.Background()
	lc, fc := client.New(leader.url), client.New(follower.url)

	type leased struct {
		LeaseTasks []struct {
			LeaseID string
			Task    struct{ ID, State string }
		}
	}
	// A worker on the follower waits for work that is submitted on the leader.
	got := make(chan leased, 1)
	errc := make(chan error, 1)
	go func() {
		var out leased
		err := fc.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 2, leaseForMs: 300000, waitMs: 30000) { leaseId task { id state } } }`, nil, &out)
		errc <- err
		got <- out
	}()
	var sub struct{ SubmitTask struct{ ID string } }
	require.NoError(t, lc.Do(ctx, `mutation { submitTask(input: {agentId: "planner", lane: "jobs", action: {kind: "crawl"}}) { id } }`, nil, &sub))
	require.NoError(t, <-errc)
	first := <-got
	require.Len(t, first.LeaseTasks, 1)
	require.Equal(t, sub.SubmitTask.ID, first.LeaseTasks[0].Task.ID)
	require.Equal(t, "RUNNING", first.LeaseTasks[0].Task.State)
	lease := first.LeaseTasks[0].LeaseID

	// The lease renews through the follower too.
	require.NoError(t, fc.Do(ctx, `mutation($id: ID!) { renewLease(leaseId: $id, leaseForMs: 300000) { leaseId } }`, map[string]any{"id": lease}, nil))

	// A completion through the follower may be resent through it (its
	// first answer was lost, say): the leader answers as the first time.
	var sub2 struct{ SubmitTask struct{ ID string } }
	require.NoError(t, lc.Do(ctx, `mutation { submitTask(input: {agentId: "planner", lane: "jobs", action: {kind: "crawl"}}) { id } }`, nil, &sub2))
	var second leased
	require.NoError(t, fc.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 300000) { leaseId task { id state } } }`, nil, &second))
	require.Len(t, second.LeaseTasks, 1)
	lease2 := second.LeaseTasks[0].LeaseID
	type ended struct {
		CompleteTask struct{ Task struct{ ID, State string } }
	}
	completeQ := `mutation($id: ID!, $r: JSON) { completeTask(leaseId: $id, result: $r) { task { id state } } }`
	for range 2 {
		var out ended
		require.NoError(t, fc.Do(ctx, completeQ, map[string]any{"id": lease2, "r": map[string]any{"pages": 2}}, &out), "a completion resent through the follower")
		require.Equal(t, "SUCCEEDED", out.CompleteTask.Task.State)
	}

	// kill -9 the leader; the follower takes over and resumes the lease.
	require.NoError(t, leader.cmd.Process.Kill())
	_ = leader.cmd.Wait()
	waitfor.Eventually(t, "the follower leads", func() bool { return leaderOf(ctx, follower.url) == follower.id })
	var done struct {
		CompleteTask struct{ Task struct{ State string } }
	}
	waitfor.CheckFor(t, func() error {
		err := fc.Do(ctx, `mutation($id: ID!) { completeTask(leaseId: $id, result: {ok: true}) { task { state } } }`, map[string]any{"id": lease}, &done)
		var errs client.Errors
		if errors.As(err, &errs) && errs[0].Code() == "LEASE_LOST" {
			require.NoError(t, err, "the lease id works on the new leader") // lost: no use asking again
		}
		return err
	})
	require.Equal(t, "SUCCEEDED", done.CompleteTask.Task.State)

	// The new leader remembers no ended lease of the old one's: it answers
	// a resend from the task as PostgreSQL has it, and a different result
	// is a CONFLICT.
	var again ended
	require.NoError(t, fc.Do(ctx, completeQ, map[string]any{"id": lease2, "r": map[string]any{"pages": 2}}, &again), "resent to the new leader")
	require.Equal(t, "SUCCEEDED", again.CompleteTask.Task.State)
	require.Equal(t, sub2.SubmitTask.ID, again.CompleteTask.Task.ID)
	err := fc.Do(ctx, `mutation($id: ID!) { completeTask(leaseId: $id, result: 1) { task { state } } }`, map[string]any{"id": lease}, nil)
	var errs client.Errors
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "CONFLICT", errs[0].Code())
	require.Equal(t, "result", errs[0].Extensions["field"])
	err = fc.Do(ctx, `mutation($id: ID!) { renewLease(leaseId: $id) { leaseId } }`, map[string]any{"id": lease}, nil)
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "LEASE_LOST", errs[0].Code())
	require.Equal(t, "COMPLETED", errs[0].Extensions["leaseState"])
}
