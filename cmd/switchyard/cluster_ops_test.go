package main

// What a cluster's nodes answer to the probes and scrapes of the machinery
// around them — a load balancer's /readyz, Prometheus's /metrics — when
// the leader does not answer or a node stops: two real `switchyard serve`
// processes over one PostgreSQL schema.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// heldInstance is a browser instance whose actions run until released.
type heldInstance struct {
	srv     *httptest.Server
	running chan struct{} // closed once an action runs
	release chan struct{} // closed to let every action end
	once    sync.Once
}

func newHeldInstance(t *testing.T) *heldInstance {
	h := &heldInstance{running: make(chan struct{}), release: make(chan struct{})}
	var started sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("GET /tabs", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"tabs":[]}`)) })
	mux.HandleFunc("POST /tab", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"tabId":"tab-1"}`)) })
	mux.HandleFunc("POST /tabs/{id}/close", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	mux.HandleFunc("POST /tabs/{id}/action", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		started.Do(func() { close(h.running) })
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"success":true,"result":{"clicked":true}}`))
	})
	h.srv = httptest.NewServer(mux)
	t.Cleanup(func() { h.free(); h.srv.Close() })
	return h
}

// free lets every action end.
func (h *heldInstance) free() { h.once.Do(func() { close(h.release) }) }

// startPair starts two nodes over a new schema, logging at level, with
// extra appended to their configuration, and returns the leader and the
// follower once both agree which is which.
func startPair(t *testing.T, prefix, level, extra string) (dbURL, schema string, leader, follower *clusterNode) {
	t.Helper()
	return startPairWith(t, prefix, level, "", extra)
}

// startPairWith is startPair with more settings of the cluster key
// (clusterExtra, such as ", warmStandby: false").
func startPairWith(t *testing.T, prefix, level, clusterExtra, extra string) (dbURL, schema string, leader, follower *clusterNode) {
	t.Helper()
	dbURL = pgtest.URL(t) // skips without PostgreSQL
	schema = pgtest.Schema(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	nodes := make([]*clusterNode, 2)
	for i := range nodes {
		id := prefix + strconv.Itoa(i+1)
		config := filepath.Join(dir, id+".yaml")
		require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: postgres, url: %q, schema: %q}
cluster: {nodeId: %s, leaseTTL: 3s, renewEvery: 500ms%s}
localInstance: {enabled: false}
log: {level: %s}
`, dbURL, schema, id, clusterExtra, level)+extra), 0o644))
		nodes[i] = &clusterNode{id: id, config: config}
		nodes[i].start(t, bin)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			_ = n.cmd.Wait()
		}
	})
	ctx := context.Background()
	waitfor.Eventually(t, "the nodes agree on a leader", func() bool {
		id := leaderOf(ctx, nodes[0].url)
		if id == "" || leaderOf(ctx, nodes[1].url) != id {
			return false
		}
		leader, follower = nodes[0], nodes[1]
		if id == nodes[1].id {
			leader, follower = nodes[1], nodes[0]
		}
		return true
	})
	return dbURL, schema, leader, follower
}

// base is a node's base URL (its url is the GraphQL endpoint's).
func base(n *clusterNode) string { return strings.TrimSuffix(n.url, "/graphql") }

// getWithin fetches url with a client whose timeout is far above what a
// busy machine needs to answer from what it knows, and far below what a
// wait for the leader can take.
func getWithin(t *testing.T, url string) (int, string, error) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	res, err := hc.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close() //nolint:errcheck
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, string(body), err
}

// A follower's /metrics answers from what the follower knows: the
// leader's plugin figures come with the leader's heartbeat, not from a
// call to the leader, so a scrape while the leader takes no calls (its
// commands table locked) is answered at once, with the figures.
func TestAFollowersScrapeDoesNotWaitForTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two nodes")
	}
	inst := newFleetInstance(t, time.Millisecond)
	dbURL, schema, leader, follower := startPair(t, "m", "error", fmt.Sprintf(`
instances:
  - {id: fleet, url: %q, capacity: 4}
`, inst.srv.URL+"/m"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 3 {
		var out struct{ SubmitTask struct{ ID string } }
		require.NoError(t, client.New(leader.url).Do(ctx, `mutation { submitTask(input: {agentId: "a", action: {kind: "click", selector: "css:#go"}}) { id } }`, nil, &out))
	}
	// The leader's selection policy decided; the follower's own engine
	// decides nothing, so a count above zero on it is the leader's.
	calls := regexp.MustCompile(`(?m)^switchyard_plugin_calls_total\{plugin="priority",slot="selection"\} [1-9]`)
	waitfor.Eventually(t, "the follower's scrape shows the leader's plugin figures", func() bool {
		status, body, err := getWithin(t, base(follower)+"/metrics")
		return err == nil && status == http.StatusOK && calls.MatchString(body)
	})

	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background()) //nolint:errcheck
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, "commands"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	status, body, err := getWithin(t, base(follower)+"/metrics")
	require.NoError(t, err, "the scrape is answered without the leader")
	require.Equal(t, http.StatusOK, status)
	require.Regexp(t, calls, body, "the leader's plugin figures, as its heartbeat reported them")
	require.Contains(t, body, `switchyard_plugin_state{plugin="fair-share",state="active"} 1`)
}

// A node that is told to stop (SIGTERM) says not ready at once, while it
// finishes: here a leader drains the task it runs, and answers /readyz
// 503 all along, while it still serves the API; once the task ends it
// hands over and exits.
func TestAStoppingNodeIsNotReadyWhileItFinishes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two nodes")
	}
	inst := newHeldInstance(t)
	_, _, leader, follower := startPair(t, "s", "error", fmt.Sprintf(`
shutdownGrace: 5m
instances:
  - {id: held, url: %q, capacity: 4}
`, inst.srv.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lc := client.New(leader.url)
	var out struct{ SubmitTask struct{ ID string } }
	require.NoError(t, lc.Do(ctx, `mutation { submitTask(input: {agentId: "a", action: {kind: "click", selector: "css:#go"}}) { id } }`, nil, &out))
	<-inst.running
	status, body, err := getWithin(t, base(leader)+"/readyz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status, body)

	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGTERM))
	waitfor.Eventually(t, "the stopping leader is not ready", func() bool {
		status, body, err := getWithin(t, base(leader)+"/readyz")
		return err == nil && status == http.StatusServiceUnavailable && body == "not ready: stopping: the server is shutting down\n"
	})
	// It still answers, and its task still runs.
	var task struct{ Task struct{ State string } }
	require.NoError(t, lc.Do(ctx, `query($id: ID!) { task(id: $id) { state } }`, map[string]any{"id": out.SubmitTask.ID}, &task))
	require.Equal(t, "RUNNING", task.Task.State)

	inst.free()
	require.NoError(t, leader.cmd.Wait(), "a clean stop")
	waitfor.Eventually(t, "the follower leads", func() bool { return leaderOf(ctx, follower.url) == follower.id })
	var ended struct{ Task struct{ State string } }
	require.NoError(t, client.New(follower.url).Do(ctx, `query($id: ID!) { task(id: $id) { state } }`, map[string]any{"id": out.SubmitTask.ID}, &ended))
	require.Equal(t, "SUCCEEDED", ended.Task.State, "the task finished within the drain")
}

// A follower compiles the built-in policies while it follows, into the
// plugin host it keeps across its leaderships, so that when it takes over
// its policies load without compiling anything: compiling them dominated
// a new leader's start.
func TestAFollowerTakesOverWithItsPoliciesCompiledAlready(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two nodes")
	}
	_, _, leader, follower := startPair(t, "w", "info", "")
	ready := regexp.MustCompile(`policies ready: builtins=WebAssembly compiled=(\d+)`)
	waitfor.Eventually(t, "the follower has compiled the built-in policies", func() bool {
		return strings.Contains(follower.logs.String(), "built-in policies compiled for a takeover")
	})
	before := len(ready.FindAllString(follower.logs.String(), -1))
	require.NoError(t, leader.cmd.Process.Kill())
	_ = leader.cmd.Wait()
	var starts [][]string
	waitfor.Eventually(t, "the follower has started leading", func() bool {
		starts = ready.FindAllStringSubmatch(follower.logs.String(), -1)
		return len(starts) > before
	})
	require.Equal(t, "0", starts[len(starts)-1][1], "the takeover compiled no module")
	waitfor.Eventually(t, "the follower leads", func() bool { return leaderOf(context.Background(), follower.url) == follower.id })
}

// With cluster.warmStandby false a follower compiles nothing while it
// follows, and its takeover compiles the built-in policies.
func TestWithoutWarmStandbyATakeoverCompilesThePolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two nodes")
	}
	_, _, leader, follower := startPairWith(t, "c", "info", ", warmStandby: false", "")
	ready := regexp.MustCompile(`policies ready: builtins=WebAssembly compiled=(\d+)`)
	before := len(ready.FindAllString(follower.logs.String(), -1))
	require.NoError(t, leader.cmd.Process.Kill())
	_ = leader.cmd.Wait()
	var starts [][]string
	waitfor.Eventually(t, "the follower has started leading", func() bool {
		starts = ready.FindAllStringSubmatch(follower.logs.String(), -1)
		return len(starts) > before
	})
	require.Equal(t, "3", starts[len(starts)-1][1], "the takeover compiled the three built-ins")
	require.NotContains(t, follower.logs.String(), "built-in policies compiled for a takeover")
}
