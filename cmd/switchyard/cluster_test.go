package main

// The cluster test: three real `switchyard serve` processes over one
// PostgreSQL schema. Tasks are submitted through all three while
// subscriptions on all three watch; the leader is killed with SIGKILL, and
// later paused with SIGSTOP until another node has taken over; and then,
// through the API, every acknowledged task is there, ended once, in
// SUCCEEDED, having run no more often than its recorded attempts — and the
// paused leader, resumed, dispatched nothing more.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// fleetInstance is a browser instance that does nothing but count the
// actions it is asked to perform, by task; every node reaches it under its
// own path prefix (/<node>/…), so that it also knows which node sent each.
type fleetInstance struct {
	srv  *httptest.Server
	mu   sync.Mutex
	runs map[string]int       // by task id
	last map[string]time.Time // the latest action each node sent
	sent map[string]int       // actions by node
	tabs atomic.Int64
}

func newFleetInstance(t *testing.T, delay time.Duration) *fleetInstance {
	f := &fleetInstance{runs: map[string]int{}, last: map[string]time.Time{}, sent: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{node}/health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })
	mux.HandleFunc("GET /{node}/tabs", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"tabs":[]}`)) })
	mux.HandleFunc("POST /{node}/tab", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"tabId":"tab-%d"}`, f.tabs.Add(1))
	})
	mux.HandleFunc("POST /{node}/tabs/{id}/close", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	mux.HandleFunc("POST /{node}/tabs/{id}/action", func(w http.ResponseWriter, r *http.Request) {
		node := r.PathValue("node")
		f.mu.Lock()
		f.runs[r.Header.Get("X-Switchyard-Task")]++
		f.sent[node]++
		f.last[node] = time.Now()
		f.mu.Unlock()
		// Read to the end: only then does the server watch the connection,
		// and end the request's context when its client dies.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write([]byte(`{"success":true,"result":{"clicked":true}}`))
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fleetInstance) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id]
}

func (f *fleetInstance) byNode(node string) (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[node], f.last[node]
}

// clusterNode is one serve process of the test's cluster.
type clusterNode struct {
	id, config string
	cmd        *exec.Cmd
	url        string
	logs       *syncBuffer
}

func (n *clusterNode) start(t *testing.T, bin string) {
	n.cmd, n.url, n.logs = startProcessLogged(t, bin, n.config)
}

// leaderOf asks a node which node leads ("" while none does).
func leaderOf(ctx context.Context, url string) string {
	var out struct{ Stats struct{ Leader *string } }
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := client.New(url).Do(ctx, `{ stats { leader } }`, nil, &out); err != nil || out.Stats.Leader == nil {
		return ""
	}
	return *out.Stats.Leader
}

// feedWatcher counts the terminal events of each task that a node's
// taskEventFeed delivers, from seq 1 on.
type feedWatcher struct {
	mu     sync.Mutex
	ends   map[string]int
	gap    string
	latest int64
}

func watchFeed(t *testing.T, ctx context.Context, url string) *feedWatcher {
	w := &feedWatcher{ends: map[string]int{}}
	conn, err := client.New(url).Dial(ctx, client.DialOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	sub, err := conn.Subscribe(ctx, `subscription { taskEventFeed(after: 0, max: 1000, maxDelayMs: 20) { events lastSeq } }`, nil)
	require.NoError(t, err)
	go func() {
		for {
			m, err := sub.Next(ctx)
			if err != nil {
				return
			}
			var f struct {
				TaskEventFeed struct {
					Events  []map[string]any
					LastSeq int64
				}
			}
			if json.Unmarshal(m.Data, &f) != nil {
				continue
			}
			w.mu.Lock()
			for _, e := range f.TaskEventFeed.Events {
				if e["kind"] == "LAGGED" {
					w.gap = fmt.Sprint(e)
				}
				if to, _ := e["to"].(string); e["kind"] == "STATE" && terminal(to) {
					w.ends[e["taskId"].(string)]++
				}
			}
			w.latest = f.TaskEventFeed.LastSeq
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *feedWatcher) endsOf(id string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ends[id]
}

func TestThreeNodesShareTheWorkAndSurviveTheirLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three nodes")
	}
	dbURL := pgtest.URL(t) // skips without PostgreSQL
	schema := pgtest.Schema(t)
	bin := buildBinary(t)
	inst := newFleetInstance(t, 5*time.Millisecond)
	dir := t.TempDir()

	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		id := "n" + strconv.Itoa(i+1)
		config := filepath.Join(dir, id+".yaml")
		require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: postgres, url: %q, schema: %q}
cluster: {nodeId: %s, leaseTTL: 3s, renewEvery: 500ms}
localInstance: {enabled: false}
shutdownGrace: 1s
log: {level: error}
engine:
  lanes:
    - {name: main, maxInFlight: 16, retry: {maxAttempts: 20, backoff: 10ms, maxBackoff: 100ms}}
instances:
  - {id: fleet, url: %q, capacity: 16}
`, dbURL, schema, id, inst.srv.URL+"/"+id)), 0o644))
		nodes[i] = &clusterNode{id: id, config: config}
		nodes[i].start(t, bin)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = n.cmd.Process.Signal(syscall.SIGCONT)
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			_ = n.cmd.Wait()
		}
	})
	byID := func(id string) *clusterNode {
		for _, n := range nodes {
			if n.id == id {
				return n
			}
		}
		return nil
	}
	ctx := context.Background()
	// awaitLeader waits until every node of among names the same leader,
	// other than not, and returns it.
	awaitLeader := func(among []*clusterNode, not string) *clusterNode {
		t.Helper()
		var id string
		waitfor.Eventually(t, "the nodes agree on a leader", func() bool {
			id = leaderOf(ctx, among[0].url)
			if id == "" || id == not {
				return false
			}
			for _, n := range among[1:] {
				if leaderOf(ctx, n.url) != id {
					return false
				}
			}
			return true
		})
		return byID(id)
	}
	awaitLeader(nodes, "")

	watchers := make([]*feedWatcher, 3)
	for i, n := range nodes {
		watchers[i] = watchFeed(t, ctx, n.url)
	}

	// Load through all three nodes until stopped.
	var acked sync.Map
	var seq atomic.Int64
	load := func() (stop func()) {
		lctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for lctx.Err() == nil {
					n := nodes[(int(seq.Load())+w)%3]
					k := seq.Add(1)
					var out struct{ SubmitTask struct{ ID string } }
					rctx, rcancel := context.WithTimeout(lctx, 20*time.Second)
					err := client.New(n.url).Do(rctx, `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
						map[string]any{"in": map[string]any{"agentId": "agent-" + strconv.Itoa(int(k%5)),
							"action": map[string]any{"kind": "click", "selector": "css:#go"}, "idempotencyKey": "k" + strconv.FormatInt(k, 10)}}, &out)
					rcancel()
					if err == nil && out.SubmitTask.ID != "" {
						acked.Store(out.SubmitTask.ID, struct{}{})
					} else {
						time.Sleep(20 * time.Millisecond) // a node down, or no leader yet
					}
				}
			}()
		}
		return func() { cancel(); wg.Wait() }
	}

	// Live changes made through a follower take effect on the leader and
	// show through every node.
	lead := awaitLeader(nodes, "")
	var via, other *clusterNode
	for _, n := range nodes {
		switch {
		case n == lead:
		case via == nil:
			via = n
		default:
			other = n
		}
	}
	do := func(n *clusterNode, query string, out any) {
		t.Helper()
		require.NoError(t, client.New(n.url).Do(ctx, query, nil, out), "through %s: %s", n.id, query)
	}
	do(via, `mutation { updateLane(name: "main", input: {maxInFlight: 12}) { name } }`, nil)
	do(via, `mutation { registerInstance(input: {id: "spare", url: "`+inst.srv.URL+`/spare", capacity: 1}) { id } }`, nil)
	do(via, `mutation { setPolicy(input: {slot: SELECTION, lane: "main", name: "priority"}) { name } }`, nil)
	do(via, `mutation { createSchedule(input: {name: "nightly", kind: CRON, cron: "0 3 * * *",
		template: {agentId: "cron-agent", lane: "main", action: {kind: "navigate", params: {url: "https://example.com"}}}}) { id } }`, nil)
	for _, n := range []*clusterNode{lead, via, other} {
		var seen struct {
			Lane      struct{ MaxInFlight int }
			Instances []struct{ ID string }
			Policies  []struct {
				Slot, Name string
				Lane       *string
			}
			Schedules []struct{ Name string }
		}
		do(n, `{ lane(name: "main") { maxInFlight } instances { id } policies { slot lane name } schedules { name } }`, &seen)
		require.Equal(t, 12, seen.Lane.MaxInFlight, "lane through %s", n.id)
		require.True(t, slices.ContainsFunc(seen.Instances, func(i struct{ ID string }) bool { return i.ID == "spare" }), "instances through %s: %v", n.id, seen.Instances)
		require.True(t, slices.ContainsFunc(seen.Policies, func(p struct {
			Slot, Name string
			Lane       *string
		}) bool {
			return p.Slot == "SELECTION" && p.Lane != nil && *p.Lane == "main" && p.Name == "priority"
		}), "policies through %s: %v", n.id, seen.Policies)
		require.Len(t, seen.Schedules, 1, "schedules through %s", n.id)
	}
	do(via, `mutation { removeInstance(id: "spare") { id } }`, nil)

	// kill -9 the leader under load, three times; each time a follower takes
	// over, and the killed node comes back as a follower. What the README's
	// "Failover time" promises is checked by the database's clock, which
	// stamps the lease: the dead leader's lease runs out within leaseTTL
	// of its death, and a follower takes the lease after it has run out
	// and within renewEvery — with an allowance for a busy machine, where
	// a follower's look at the lease can come late. The failover as the
	// nodes' answers show it (the new leader's start included) is logged.
	db, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	type leaseRow struct {
		node              string
		epoch             int64
		acquired, expires time.Time
	}
	readLease := func() leaseRow {
		t.Helper()
		var l leaseRow
		require.NoError(t, db.QueryRow(ctx, `SELECT node, epoch, acquired_at, expires_at FROM `+pgx.Identifier{schema, "leases"}.Sanitize()+
			` WHERE name = 'leader'`).Scan(&l.node, &l.epoch, &l.acquired, &l.expires))
		return l
	}
	const leaseTTL, renewEvery, busy = 3 * time.Second, 500 * time.Millisecond, 5 * time.Second
	var failovers []time.Duration
	for range 3 {
		stop := load()
		time.Sleep(1500 * time.Millisecond) // the leader is under load when it is killed
		old := awaitLeader(nodes, "")
		var live []*clusterNode
		for _, n := range nodes {
			if n != old {
				live = append(live, n)
			}
		}
		killed := time.Now()
		require.NoError(t, old.cmd.Process.Kill())
		_ = old.cmd.Wait()
		dead := readLease()
		next := awaitLeader(live, old.id)
		failovers = append(failovers, time.Since(killed))
		taken := readLease()
		t.Logf("kill -9 of leader %s: %s leads after %s; its lease ran out %s after the kill, %s took it %s later (database clock)",
			old.id, next.id, failovers[len(failovers)-1].Round(time.Millisecond), dead.expires.Sub(killed).Round(time.Millisecond),
			taken.node, taken.acquired.Sub(dead.expires).Round(time.Millisecond))
		if dead.node == old.id { // else it had lost the lease already, just before the kill
			require.LessOrEqual(t, dead.expires.Sub(killed), leaseTTL, "the dead leader's lease runs out within leaseTTL")
			require.Greater(t, taken.epoch, dead.epoch, "a new term")
			require.False(t, taken.acquired.Before(dead.expires), "the lease is taken only once the dead leader's has run out")
			require.LessOrEqual(t, taken.acquired.Sub(dead.expires), renewEvery+busy, "a follower takes the lease within renewEvery (and a busy machine's allowance)")
		}
		time.Sleep(500 * time.Millisecond) // the load goes on through the new leader a while
		stop()
		old.start(t, bin)
		i := slices.Index(nodes, old)
		watchers[i] = watchFeed(t, ctx, old.url) // a new process: its feed replays from seq 1
	}
	slices.Sort(failovers)
	t.Logf("failover after kill -9 (leaseTTL 3s, renewEvery 500ms), as the nodes answer: median %s, max %s",
		failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond))

	// SIGSTOP the leader until another node leads, then SIGCONT it: it must
	// not dispatch anything more.
	stop := load()
	time.Sleep(time.Second) // the leader is under load when it is paused
	paused := awaitLeader(nodes, "")
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	var others []*clusterNode
	for _, n := range nodes {
		if n != paused {
			others = append(others, n)
		}
	}
	next := awaitLeader(others, paused.id)
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	resumed := time.Now()
	time.Sleep(3 * time.Second) // the resumed node finds its lease gone; the load goes on
	stop()
	sent, last := inst.byNode(paused.id)
	t.Logf("%s paused while leading; %s took over; %s sent %d actions in all, the last %s before it resumed",
		paused.id, next.id, paused.id, sent, resumed.Sub(last).Round(time.Millisecond))
	require.True(t, last.Before(resumed.Add(200*time.Millisecond)),
		"the paused leader sent an action %s after it resumed", last.Sub(resumed))
	nextSent, _ := inst.byNode(next.id)
	require.Positive(t, nextSent, "the new leader dispatched")
	require.NotEqual(t, paused.id, leaderOf(ctx, paused.url), "the resumed node follows")

	// Every acknowledged task ends once, in SUCCEEDED, on every node, and
	// ran no more often than its recorded attempts.
	var ids []string
	acked.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	require.Greater(t, len(ids), 100, "the load did real work")
	c := client.New(nodes[0].url)
	for _, id := range ids {
		requireSucceededAndRecorded(t, ctx, c, id, inst.count)
	}
	for i, w := range watchers {
		waitfor.Eventually(t, "node "+nodes[i].id+"'s subscribers see every task end", func() bool {
			for _, id := range ids {
				if w.endsOf(id) == 0 {
					return false
				}
			}
			return true
		})
		w.mu.Lock()
		require.Empty(t, w.gap, "node %s's feed has a gap", nodes[i].id)
		for _, id := range ids {
			require.Equal(t, 1, w.ends[id], "node %s: task %s has %d terminal events", nodes[i].id, id, w.ends[id])
		}
		w.mu.Unlock()
	}
	rerun := 0
	for _, id := range ids {
		if inst.count(id) > 1 {
			rerun++
		}
	}
	t.Logf("%d acknowledged tasks through 3 nodes, 3 kill -9s and a SIGSTOP: none lost, each ended once; %d ran again after a failover",
		len(ids), rerun)

	// The nodes query, through any node, shows three nodes and one leader,
	// each with the schema version its build knows.
	var out struct {
		Nodes []struct {
			ID            string
			Leader        bool
			Healthy       bool
			SchemaVersion *int
		}
	}
	waitfor.CheckFor(t, func() error {
		if err := client.New(nodes[2].url).Do(ctx, `{ nodes { id leader healthy schemaVersion } }`, nil, &out); err != nil {
			return err
		}
		leaders, healthy := 0, 0
		for _, n := range out.Nodes {
			if n.Leader {
				leaders++
			}
			if n.Healthy && strings.HasPrefix(n.ID, "n") {
				healthy++
			}
			if n.SchemaVersion == nil || *n.SchemaVersion < 5 {
				return fmt.Errorf("node %s reports schema version %v, want 5 or more", n.ID, n.SchemaVersion)
			}
		}
		if leaders != 1 || healthy != 3 {
			return fmt.Errorf("%d leaders and %d healthy nodes, want 1 and 3: %+v", leaders, healthy, out.Nodes)
		}
		return nil
	})
}
