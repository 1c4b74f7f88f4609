package chromium_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// hugePage has a button, then 200,000 paragraphs.
func hugePage(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`<!doctype html><title>Huge</title><body><button id="first" onclick="this.textContent='clicked'">First</button>`)
	for i := range 200_000 {
		fmt.Fprintf(&b, "<p>item %d</p>", i)
	}
	page := b.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAHugePagesSnapshotIsBoundedAndTheHealthCheckAnswers: a page of
// 200,000 elements gets a snapshot of at most SnapshotMaxNodes nodes, which
// says it was cut short and how many nodes there were, well within the
// action cap; its refs work; and the instance's health check answers ok
// all the while.
func TestAHugePagesSnapshotIsBoundedAndTheHealthCheckAnswers(t *testing.T) {
	t.Parallel()
	page := hugePage(t)
	// Generous: loading 200,000 elements takes a busy machine a while.
	inst := startOwn(t, chromium.Options{ActionTimeout: 3 * time.Minute})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	tab, err := c.OpenTab(ctx, "")
	require.NoError(t, err)
	_, err = c.Navigate(ctx, tab.TabID, page, nil)
	require.NoError(t, err)

	type answer struct {
		raw json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	start := time.Now()
	go func() {
		raw, err := c.Read(ctx, tab.TabID, "snapshot", nil)
		done <- answer{raw, err}
	}()
	checks := 0
	var got answer
	for got.raw == nil && got.err == nil {
		hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.Health(hctx)
		hcancel()
		require.NoError(t, err, "the health check answers while a tab's snapshot runs (check %d, %v in)", checks+1, time.Since(start))
		checks++
		select {
		case got = <-done:
		case <-time.After(200 * time.Millisecond):
		}
	}
	require.NoError(t, got.err, "the snapshot ends within the action cap")
	require.Less(t, time.Since(start), 2*time.Minute, "far within it")
	t.Logf("snapshot of 200,000 elements: %v, %d bytes, %d health checks meanwhile", time.Since(start), len(got.raw), checks)

	var snap struct {
		Nodes      []chromium.SnapshotNode `json:"nodes"`
		Count      int                     `json:"count"`
		Truncated  bool                    `json:"truncated"`
		TotalNodes int                     `json:"totalNodes"`
	}
	require.NoError(t, json.Unmarshal(got.raw, &snap))
	require.Len(t, snap.Nodes, chromium.SnapshotMaxNodes, "bounded")
	require.Equal(t, chromium.SnapshotMaxNodes, snap.Count)
	require.True(t, snap.Truncated, "the answer says it was cut short")
	require.Greater(t, snap.TotalNodes, 200_000, "and how many nodes the page has")
	require.Equal(t, "button", snap.Nodes[0].Role)
	require.Equal(t, "First", snap.Nodes[0].Name)
	require.Equal(t, "paragraph", snap.Nodes[1].Role)
	require.Equal(t, "item 0", snap.Nodes[1].Name)

	_, err = c.Act(ctx, tab.TabID, pinchtab.Action{Kind: "click", Ref: snap.Nodes[0].Ref})
	require.NoError(t, err, "its refs name the elements")
	text, err := c.Read(ctx, tab.TabID, "text", url.Values{"selector": {"#first"}})
	require.NoError(t, err)
	require.Contains(t, string(text), "clicked")

	small, err := c.Read(ctx, tab.TabID, "snapshot", url.Values{"maxNodes": {"3"}})
	require.NoError(t, err)
	require.Equal(t, 3, field[int](t, small, "count"), "maxNodes asks for fewer")
	require.True(t, field[bool](t, small, "truncated"))
}

// TestTheHealthCheckDoesNotQueueBehindATabsWork: an operation whose answer
// is tens of megabytes holds the one connection to the browser for
// seconds; the health check answers all the while — ok, or, when the
// browser has not answered its probe for 30 s (a busy machine), that the
// browser is not answering — rather than once the operation has ended.
func TestTheHealthCheckDoesNotQueueBehindATabsWork(t *testing.T) {
	t.Parallel()
	inst := startOwn(t, chromium.Options{ActionTimeout: 3 * time.Minute})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Health(ctx)
	require.NoError(t, err, "healthy before")
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Evaluate(ctx, tab, `"x".repeat(40 * 1024 * 1024)`, nil)
		done <- err
	}()
	// A health check queued behind the tab would answer only once the
	// evaluation ended: the checks must answer while it runs. Each has a
	// bound far above what a busy machine takes, only to end a hang.
	answered, down := 0, 0
	for {
		hctx, hcancel := context.WithTimeout(ctx, time.Minute)
		_, err := c.Health(hctx)
		hcancel()
		var answer *pinchtab.Error
		if errors.As(err, &answer) && answer.Code == "browser_down" {
			down++ // an answer: the browser itself is slow to answer the probe
		} else {
			require.NoError(t, err, "the health check answers while a tab's work holds the browser's connection (check %d, %v in)", answered+1, time.Since(start))
		}
		select {
		case err := <-done:
			t.Logf("the large evaluation took %v (%v), %d health checks answered meanwhile, %d of them browser_down", time.Since(start), err, answered, down)
			require.GreaterOrEqual(t, answered, 3, "health checks answered while the tab's work ran")
			return
		default:
			answered++
		}
		time.Sleep(200 * time.Millisecond)
	}
}
