package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// tourOperations returns the README's tour: each ```graphql block after a
// <!-- tour: name --> marker.
func tourOperations(t *testing.T) map[string]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- tour: ([a-z-]+) -->\\s*```graphql\\n(.*?)```")
	ops := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(readme), -1) {
		ops[m[1]] = m[2]
	}
	require.NotEmpty(t, ops, "the README has a tour")
	return ops
}

func TestTheReadmeTourWorksAgainstARealServer(t *testing.T) {
	t.Parallel()
	ops := tourOperations(t)
	for _, name := range []string{"submit", "watch", "read", "pause", "submit-paused", "cancel", "browser", "browser-result", "overview"} {
		require.Contains(t, ops, name, "the README's tour has the %q step", name)
	}
	_, browser := chromium.Find()
	if !browser {
		t.Log("chromium is not installed: the tour runs without a local browser and skips its browser steps")
	}
	args := []string{"--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "switchyard.db")}
	if !browser {
		args = append(args, "--no-local-instance")
	}
	c := client.New(startServe(t, args...).URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Watch first, then submit: the subscription sees the task's events.
	conn, err := c.Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	watch, err := conn.Subscribe(ctx, ops["watch"], nil)
	require.NoError(t, err)
	waitSubscribed(t, strings.TrimSuffix(c.URL, "/graphql"), "taskEvents") // it starts with the next event
	var sub struct {
		SubmitTask struct {
			ID, State string
			Seq       uint64
		}
	}
	// The tour's page is served by the server itself, at the README's default
	// address; this server listens elsewhere.
	here := func(op string) string {
		return strings.ReplaceAll(op, "http://127.0.0.1:8080/", strings.TrimSuffix(c.URL, "graphql"))
	}
	require.NoError(t, c.Do(ctx, here(ops["submit"]), nil, &sub))
	require.NotEmpty(t, sub.SubmitTask.ID)
	for {
		m, err := watch.Next(ctx)
		require.NoError(t, err)
		var ev struct{ TaskEvents struct{ TaskID, To string } }
		require.NoError(t, json.Unmarshal(m.Data, &ev))
		require.Equal(t, sub.SubmitTask.ID, ev.TaskEvents.TaskID)
		if ev.TaskEvents.To == "QUEUED" && !browser || ev.TaskEvents.To == "SUCCEEDED" {
			break
		}
	}

	var read struct{ Tasks struct{ TotalCount int } }
	require.NoError(t, c.Do(ctx, ops["read"], nil, &read))
	require.Equal(t, 1, read.Tasks.TotalCount)

	var paused struct{ UpdateLane struct{ Paused bool } }
	require.NoError(t, c.Do(ctx, ops["pause"], nil, &paused))
	require.True(t, paused.UpdateLane.Paused)
	var later struct{ SubmitTask struct{ ID, State string } }
	require.NoError(t, c.Do(ctx, ops["submit-paused"], nil, &later))
	require.Equal(t, "QUEUED", later.SubmitTask.State)
	var cancelled struct {
		CancelTask struct{ State, Reason string }
	}
	require.NoError(t, c.Do(ctx, ops["cancel"], map[string]any{"id": later.SubmitTask.ID}, &cancelled))
	require.Equal(t, "CANCELLED", cancelled.CancelTask.State)
	err = c.Do(ctx, ops["cancel"], map[string]any{"id": later.SubmitTask.ID}, nil)
	var errs client.Errors
	require.ErrorAs(t, err, &errs)
	require.Equal(t, "CONFLICT", errs[0].Code())

	require.NoError(t, c.Do(ctx, ops["overview"], nil, nil))

	if !browser {
		return
	}
	var batch struct {
		SubmitTasks struct {
			Items []struct {
				Key   string
				Error *struct{ Message string }
			}
		}
	}
	tourOp := here(ops["browser"])
	require.NotEqual(t, ops["browser"], tourOp, "the tour navigates to the server's own page")
	require.NoError(t, c.Do(ctx, tourOp, nil, &batch))
	require.Len(t, batch.SubmitTasks.Items, 4)
	for _, it := range batch.SubmitTasks.Items {
		require.Nil(t, it.Error, it.Key)
	}
	var result struct {
		Tasks struct {
			Nodes []struct {
				State  string
				Result json.RawMessage
			}
		}
	}
	waitfor.CheckForWithin(t, 45*time.Second, func() error { // a browser under -race on a busy machine
		require.NoError(t, c.Do(ctx, ops["browser-result"], nil, &result))
		nodes := result.Tasks.Nodes
		require.Len(t, nodes, 4)
		if nodes[3].State == "SUCCEEDED" {
			return nil
		}
		for _, n := range nodes {
			require.NotContains(t, []string{"FAILED", "CANCELLED", "PARKED"}, n.State, "%s", strings.TrimSpace(string(n.Result)))
		}
		return fmt.Errorf("the browser tour did not finish: %+v", nodes)
	})
	var text struct{ Text string }
	require.NoError(t, json.Unmarshal(result.Tasks.Nodes[3].Result, &text))
	require.Equal(t, "Hello, Ada", text.Text, "the page was opened, filled, clicked and read in one tab")
}

// waitSubscribed waits until the server counts a running subscription of a
// field.
func waitSubscribed(t *testing.T, base, field string) {
	t.Helper()
	want := `switchyard_graphql_subscriptions{subscription="` + field + `"} 1`
	waitfor.Eventually(t, "the metrics show "+want, func() bool {
		res, err := http.Get(base + "/metrics")
		require.NoError(t, err)
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return strings.Contains(string(body), want)
	})
}
