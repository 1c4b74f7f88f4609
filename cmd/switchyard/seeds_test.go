package main

// What users of the seed systems expect of a running server (issue 22):
// each test starts `switchyard serve` with a configuration file and talks to
// it over HTTP like a client would, with a real instance (an HTTP server)
// and a real webhook receiver on loopback.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// hookReceiver records the webhook bodies it is sent, by path.
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{bodies: map[string][]map[string]any{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			h.mu.Lock()
			h.bodies[r.URL.Path] = append(h.bodies[r.URL.Path], body)
			h.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(h.Close)
	return h
}

// wait returns the bodies sent to path once there are n of them.
func (h *hookReceiver) wait(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	var got []map[string]any
	waitfor.CheckFor(t, func() error {
		h.mu.Lock()
		got = append([]map[string]any(nil), h.bodies[path]...)
		h.mu.Unlock()
		if len(got) < n {
			return fmt.Errorf("%s received %d webhooks, want %d: %v", path, len(got), n, got)
		}
		return nil
	})
	return got
}

// brokenInstance is a browser instance that is healthy but answers every
// action with 500: every attempt fails, transiently.
func brokenInstance(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/health":
			_, _ = w.Write([]byte(`{"status":"ok","tabs":0}`))
			return
		case r.URL.Path == "/tabs" && r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"tabs":[]}`))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":"boom"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serveWithConfig starts `switchyard serve` with the YAML configuration
// yml and returns a client of its API.
func serveWithConfig(t *testing.T, yml string, args ...string) *client.Client {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "switchyard.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(yml), 0o600))
	base, logs := startServeLogged(t, append([]string{"--listen", "127.0.0.1:0", "--config", cfg}, args...)...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return client.New(base + "/graphql")
}

type seedTask struct {
	ID, State, Reason, Error string
}

func readTask(t *testing.T, c *client.Client, id string) seedTask {
	t.Helper()
	var out struct{ Task seedTask }
	require.NoError(t, c.Do(context.Background(), `query($id: ID!) { task(id: $id) { id state reason error } }`, map[string]any{"id": id}, &out))
	return out.Task
}

func waitState(t *testing.T, c *client.Client, id, state string) seedTask {
	t.Helper()
	var got seedTask
	waitfor.CheckFor(t, func() error {
		if got = readTask(t, c, id); got.State != state {
			return fmt.Errorf("task %s is %s (%s), want %s", id, got.State, got.Reason, state)
		}
		return nil
	})
	return got
}

// TestATaskWhoseRetriesAreSpentHangsNothing runs the workflow of issue 22
// §1 in both modes: a task against an instance that always answers 500,
// with a dependent, in a batch, both with webhooks.
func TestATaskWhoseRetriesAreSpentHangsNothing(t *testing.T) {
	t.Parallel()
	inst := brokenInstance(t)
	hooks := newHookReceiver(t)
	c := serveWithConfig(t, `
webhooks:
  allowPrivate: true
  maxAttempts: 1
  endpoints:
    - {prefix: "`+hooks.URL+`/bros", format: browseros}
instances:
  - {id: broken, url: "`+inst.URL+`"}
engine:
  lanes:
    - {name: cw, maxInFlight: 4, exhausted: park, retry: {maxAttempts: 2, backoff: 10ms}}
    - {name: bros, maxInFlight: 4, exhausted: fail, retry: {maxAttempts: 2, backoff: 10ms}}
`)
	ctx := context.Background()
	submit := func(lane, hookPath string) (string, string, string) {
		t.Helper()
		var out struct {
			SubmitTasks struct {
				BatchID string
				Items   []struct{ Task struct{ ID string } }
			}
		}
		task := func(extra map[string]any) map[string]any {
			m := map[string]any{"agentId": "a-" + lane, "lane": lane, "action": map[string]any{"kind": "click", "selector": "css:#go"}}
			for k, v := range extra {
				m[k] = v
			}
			return m
		}
		require.NoError(t, c.Do(ctx, `mutation($in: SubmitTasksInput!) { submitTasks(input: $in) { batchId items { task { id } } } }`,
			map[string]any{"in": map[string]any{"webhookUrl": hooks.URL + "/batch-" + lane, "items": []map[string]any{
				{"key": "first", "task": task(map[string]any{"webhookUrl": hooks.URL + hookPath})},
				{"key": "then", "task": task(map[string]any{"dependsOn": []string{"first"}, "webhookUrl": hooks.URL + "/then-" + lane})},
			}}}, &out))
		return out.SubmitTasks.BatchID, out.SubmitTasks.Items[0].Task.ID, out.SubmitTasks.Items[1].Task.ID
	}

	t.Run("park", func(t *testing.T) {
		batch, first, then := submit("cw", "/first-cw")
		got := waitState(t, c, first, "PARKED")
		require.Contains(t, got.Reason, "retry budget spent")
		dep := waitState(t, c, then, "CANCELLED")
		require.Equal(t, "dependency "+first+" parked", dep.Reason, "the dependent is cancelled, not left WAITING")

		parked := hooks.wait(t, "/first-cw", 1)[0]
		require.Equal(t, "task.parked", parked["event"])
		task := parked["task"].(map[string]any)
		require.Equal(t, "PARKED", task["state"])
		require.Equal(t, float64(2), task["attempts"])
		require.Contains(t, task, "executionTimeMs")
		require.Equal(t, "CANCELLED", hooks.wait(t, "/then-cw", 1)[0]["task"].(map[string]any)["state"])
		b := hooks.wait(t, "/batch-cw", 1)[0]
		require.Equal(t, "batch.ended", b["event"])
		require.Equal(t, batch, b["batch"].(map[string]any)["id"])
		require.Equal(t, map[string]any{"PARKED": float64(1), "CANCELLED": float64(1)}, b["batch"].(map[string]any)["counts"],
			"the parked task counts as ended for its batch")
		var bs struct{ Batch struct{ Done bool } }
		require.NoError(t, c.Do(ctx, `query($id: ID!) { batch(id: $id) { done } }`, map[string]any{"id": batch}, &bs))
		require.True(t, bs.Batch.Done)

		// A reset runs it again with a fresh budget; parking again is
		// announced again.
		require.NoError(t, c.Do(ctx, `mutation($id: ID!) { resetTask(id: $id) { id } }`, map[string]any{"id": first}, nil))
		hooks.wait(t, "/first-cw", 2) // the second parking is announced
		require.Equal(t, "PARKED", readTask(t, c, first).State)
		require.Equal(t, "CANCELLED", readTask(t, c, then).State, "a reset does not revive cancelled dependents")
		require.Len(t, hooks.wait(t, "/batch-cw", 1), 1, "the batch ended once")
	})

	t.Run("fail", func(t *testing.T) {
		batch, first, then := submit("bros", "/bros/first")
		got := waitState(t, c, first, "FAILED")
		require.Contains(t, got.Reason, "retry budget spent")
		require.NotEmpty(t, got.Error)
		require.Equal(t, "dependency "+first+" failed", waitState(t, c, then, "CANCELLED").Reason)

		// The BrowserOS endpoint gets the flat body.
		body := hooks.wait(t, "/bros/first", 1)[0]
		require.Equal(t, first, body["taskId"])
		require.Equal(t, "failed", body["state"])
		require.Equal(t, "FAILED", body["switchyardState"])
		require.NotEmpty(t, body["error"])
		require.Contains(t, body, "executionTimeMs")
		require.NotContains(t, body, "task", "no envelope in the BrowserOS format")
		b := hooks.wait(t, "/batch-bros", 1)[0]
		require.Equal(t, batch, b["batch"].(map[string]any)["id"])
		require.Equal(t, map[string]any{"FAILED": float64(1), "CANCELLED": float64(1)}, b["batch"].(map[string]any)["counts"])
		require.True(t, strings.HasPrefix(hooks.wait(t, "/then-bros", 1)[0]["event"].(string), "task."))
	})
}

// TestOneLaneOverrideKeepsTheDefaultLanesAndAPartialRetryGrows is issue 22
// §2 through a running server: a file that tunes one lane keeps the others
// (schedules still find the cron lane), and a retry given in part takes the
// defaults for the rest, so its delay doubles.
func TestOneLaneOverrideKeepsTheDefaultLanesAndAPartialRetryGrows(t *testing.T) {
	t.Parallel()
	inst := brokenInstance(t)
	c := serveWithConfig(t, `
instances:
  - {id: broken, url: "`+inst.URL+`"}
engine:
  lanes:
    - {name: main, maxInFlight: 8, retry: {maxAttempts: 3, backoff: 1s}}
`)
	ctx := context.Background()
	var lanes struct {
		Lanes []struct {
			Name        string
			MaxInFlight int
			RetryPolicy struct {
				MaxAttempts, BackoffMs, MaxBackoffMs int
				Multiplier                           float64
			}
		}
	}
	require.NoError(t, c.Do(ctx, `{ lanes { name maxInFlight retryPolicy { maxAttempts backoffMs multiplier maxBackoffMs } } }`, nil, &lanes))
	var names []string
	for _, l := range lanes.Lanes {
		names = append(names, l.Name)
		if l.Name == "main" {
			require.Equal(t, 8, l.MaxInFlight)
			require.Equal(t, 3, l.RetryPolicy.MaxAttempts)
			require.Equal(t, 1000, l.RetryPolicy.BackoffMs)
			require.Equal(t, 2.0, l.RetryPolicy.Multiplier, "unset: the default")
			require.Equal(t, 60000, l.RetryPolicy.MaxBackoffMs, "unset: the default")
		}
	}
	require.ElementsMatch(t, []string{"main", "subagent", "team", "cron"}, names)

	var sc struct{ CreateSchedule struct{ ID string } }
	require.NoError(t, c.Do(ctx, `mutation { createSchedule(input: {name: "daily", kind: CRON, cron: "0 9 * * 1-5",
		template: {agentId: "reporter", action: {kind: "click"}}}) { id } }`, nil, &sc), "the cron lane is still there")
	var got struct {
		Schedule struct {
			OffsetMs  int64
			NextRunAt time.Time
		}
	}
	require.NoError(t, c.Do(ctx, `query($id: ID!) { schedule(id: $id) { offsetMs nextRunAt } }`, map[string]any{"id": sc.CreateSchedule.ID}, &got))
	require.Zero(t, got.Schedule.OffsetMs, "cron runs at the expression's time unless spreading is asked for")
	require.Equal(t, "09:00:00", got.Schedule.NextRunAt.UTC().Format("15:04:05"))

	// The task's own events say why it waited each time: follow them from
	// before the submission (polling could miss a one-second wait on a busy
	// machine).
	var now struct{ Stats struct{ LastSeq int64 } }
	require.NoError(t, c.Do(ctx, `{ stats { lastSeq } }`, nil, &now))
	var sub struct{ SubmitTask struct{ ID string } }
	require.NoError(t, c.Do(ctx, `mutation { submitTask(input: {agentId: "a", action: {kind: "click"}}) { id } }`, nil, &sub))
	id := sub.SubmitTask.ID
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	stream, err := c.SubscribeSSE(sctx, `subscription($id: ID!, $after: Int64) {
		taskEvents(filter: {taskIds: [$id], kinds: [STATE]}, after: $after) { to reason } }`,
		map[string]any{"id": id, "after": now.Stats.LastSeq})
	require.NoError(t, err)
	defer stream.Close()
	seen := map[string]bool{}
	for !seen["PARKED"] {
		msg, err := stream.Next()
		require.NoError(t, err, "the task did not park; seen %v", seen)
		require.Empty(t, msg.Errors)
		var ev struct{ TaskEvents struct{ To, Reason string } }
		require.NoError(t, json.Unmarshal(msg.Data, &ev))
		if ev.TaskEvents.To == "RETRY_WAIT" {
			seen[strings.SplitN(ev.TaskEvents.Reason, ":", 2)[0]] = true
		}
		seen[ev.TaskEvents.To] = true
	}
	require.True(t, seen["retry in 1s"], "the first retry waits the backoff: %v", seen)
	require.True(t, seen["retry in 2s"], "the second waits twice as long: %v", seen)
}

// TestLanesMadeAndRemovedThroughTheAPISurviveARestart runs serve twice on
// one SQLite file: a lane created and a default lane deleted through the API
// are as they were after the restart.
func TestLanesMadeAndRemovedThroughTheAPISurviveARestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "switchyard.db")
	serve := func() (*client.Client, func()) {
		s := startServe(t, "--listen", "127.0.0.1:0", "--no-local-instance", "--log-format", "json", "--shutdown-grace", "1s", "--db", db)
		return client.New(s.URL), func() { require.Equal(t, 0, s.Stop(t), s.Logs.String()) }
	}
	lanes := func(c *client.Client) map[string]int {
		var out struct {
			Lanes []struct {
				Name        string
				MaxInFlight int
			}
		}
		require.NoError(t, c.Do(context.Background(), `{ lanes { name maxInFlight } }`, nil, &out))
		m := map[string]int{}
		for _, l := range out.Lanes {
			m[l.Name] = l.MaxInFlight
		}
		return m
	}
	c, stop := serve()
	require.NoError(t, c.Do(context.Background(), `mutation { createLane(name: "groupchat", input: {maxInFlight: 3}) { name } }`, nil, nil))
	require.NoError(t, c.Do(context.Background(), `mutation { deleteLane(name: "team") { name } }`, nil, nil))
	require.Equal(t, map[string]int{"main": 30, "subagent": 50, "cron": 30, "groupchat": 3}, lanes(c))
	stop()

	c, stop = serve()
	defer stop()
	require.Equal(t, map[string]int{"main": 30, "subagent": 50, "cron": 30, "groupchat": 3}, lanes(c),
		"the lane made at run time is back, the one removed stays removed")
}
