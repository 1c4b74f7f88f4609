package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

type timedTask struct {
	ID, State, Reason string
	Attempts          []struct {
		N          int
		AssignedAt time.Time
		EndedAt    *time.Time
		Error      *string
		ErrorCode  *string
	}
}

func readTimedTask(t *testing.T, c *client.Client, id string) timedTask {
	t.Helper()
	var out struct{ Task timedTask }
	require.NoError(t, c.Do(context.Background(), `query($id: ID!) { task(id: $id) {
		id state reason attempts { n assignedAt endedAt error errorCode } } }`, map[string]any{"id": id}, &out))
	return out.Task
}

// waitReleased waits for the RELEASED event of a task, reading the
// server's event stream from its start, and returns its reason.
func waitReleased(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serveStartTimeout)
	defer cancel()
	stream, err := c.SubscribeSSE(ctx, `subscription($id: ID!) {
		taskEvents(filter: {kinds: [RELEASED], taskIds: [$id]}, after: 0) { kind reason } }`,
		map[string]any{"id": id})
	require.NoError(t, err)
	defer stream.Close()
	for {
		m, err := stream.Next()
		require.NoError(t, err, "no RELEASED event for task %s", id)
		require.Empty(t, m.Errors)
		var ev struct{ TaskEvents struct{ Kind, Reason string } }
		require.NoError(t, json.Unmarshal(m.Data, &ev), "%s", m.Data)
		if ev.TaskEvents.Kind == "RELEASED" {
			return ev.TaskEvents.Reason
		}
	}
}

// Through a running server, its executor and PinchTab (the test double, an
// instance that finishes what it started even when the client went away): a
// navigate that the instance answers after the task's timeoutMs, but within
// executor.abortGrace, ends its attempt at the timeout with the code
// timeout, and the task follows its retry policy from then on; the late
// answer (a success) is not taken. The attempt keeps its slot until the
// instance answers, so another task of the lane (ceiling 1) waits until
// then, and so does the retry.
func TestALateAnswerWithinTheAbortGraceIsATimeoutAndHoldsTheSlot(t *testing.T) {
	t.Parallel()
	browser := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeServer, IgnoreAbort: true})
	c := serveWithConfig(t, `
instances:
  - {id: pt, url: "`+browser.URL()+`", kind: pinchtab}
executor:
  abortGrace: 5m
engine:
  leaseGrace: 10m
  lanes:
    - {name: slow, maxInFlight: 1, retry: {maxAttempts: 2, backoff: 1ms, multiplier: 1, maxBackoff: 1ms}}
`, "--store", "memory", "--no-local-instance")
	ctx := context.Background()
	submit := func(agent string, timeoutMs int) string {
		t.Helper()
		var out struct{ SubmitTask struct{ ID string } }
		in := map[string]any{"agentId": agent, "lane": "slow", "timeoutMs": timeoutMs,
			"action": map[string]any{"kind": "navigate", "params": map[string]any{"url": "https://example.test/" + agent}}}
		require.NoError(t, c.Do(ctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": in}, &out))
		return out.SubmitTask.ID
	}
	laneInFlight := func() int {
		t.Helper()
		var out struct{ Lane struct{ InFlight int } }
		require.NoError(t, c.Do(ctx, `{ lane(name: "slow") { inFlight } }`, nil, &out))
		return out.Lane.InFlight
	}

	release := browser.Hold() // the instance answers navigations only when released
	defer release()
	slow := submit("slow", 300)
	waitfor.CheckFor(t, func() error {
		if now, _ := browser.Running(); now != 1 {
			return fmt.Errorf("%d navigations running at the instance, want 1", now)
		}
		return nil
	})

	// At its timeout the attempt ends, coded timeout, and the retry policy
	// decides: a retry, which waits for the slot (QUEUED), never RUNNING.
	var got timedTask
	waitfor.CheckFor(t, func() error {
		got = readTimedTask(t, c, slow)
		if got.State != "QUEUED" || len(got.Attempts) != 1 {
			return fmt.Errorf("task is %s (%s) with %d attempts, want QUEUED for its retry", got.State, got.Reason, len(got.Attempts))
		}
		return nil
	})
	att := got.Attempts[0]
	require.NotNil(t, att.ErrorCode, "%+v", got)
	require.Equal(t, "timeout", *att.ErrorCode)
	require.NotNil(t, att.Error)
	require.Equal(t, "timed out after 300ms", *att.Error)
	require.NotNil(t, att.EndedAt, "the attempt ended at its timeout")

	// The instance still works on the navigate: its slot is held.
	other := submit("other", 60_000)
	require.Equal(t, 1, laneInFlight(), "the timed-out attempt holds the lane's one slot")
	now, _ := browser.Running()
	require.Equal(t, 1, now, "only the timed-out navigate is at the instance")
	require.Equal(t, "QUEUED", readTimedTask(t, c, other).State, "the other task waits for the slot")
	require.Equal(t, "QUEUED", readTimedTask(t, c, slow).State)

	// The instance answers, with a success: the slot is released (the
	// task says so), and only then do the waiting tasks run.
	answered := time.Now().Truncate(time.Millisecond) // as precise as the API's times, at least
	release()
	require.Contains(t, waitReleased(t, c, slow), "slot of timed-out attempt 1 released: its instance confirmed the end with an answer")
	waitState(t, c, other, "SUCCEEDED")
	waitState(t, c, slow, "SUCCEEDED")
	got = readTimedTask(t, c, slow)
	require.Len(t, got.Attempts, 2, "the late success was not taken: the retry ran")
	require.Equal(t, "timeout", *got.Attempts[0].ErrorCode, "the late answer changed nothing")
	require.Equal(t, att.EndedAt, got.Attempts[0].EndedAt, "it ended at its timeout, not at the answer")
	require.True(t, !got.Attempts[1].AssignedAt.Before(answered), "the retry ran once the slot was released")
	o := readTimedTask(t, c, other)
	require.Len(t, o.Attempts, 1)
	require.True(t, !o.Attempts[0].AssignedAt.Before(answered), "the other task waited for the instance's answer")
}
