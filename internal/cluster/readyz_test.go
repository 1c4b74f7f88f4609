package cluster_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// probe asks /readyz of url as a load balancer does, with a timeout far
// above what a busy machine needs to answer from what it knows, and far
// below the nodes' call timeout: an answer that waits for the leader does
// not come in time.
func probe(t *testing.T, url string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 30 * time.Second}
	res, err := hc.Get(url + "/readyz")
	require.NoError(t, err, "/readyz answers without waiting for the leader")
	defer res.Body.Close() //nolint:errcheck
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, string(body)
}

// serveReadiness serves node n's API with its readiness, as serve does.
func serveReadiness(t *testing.T, n *testNode) string {
	srv, err := server.New(server.Options{Engine: n.API(), Registry: n.Instances(), Plugins: n.Plugins(),
		Schedules: n.Schedules(), Pull: n.Pull(), Heartbeats: n.Heartbeats(), Cluster: n.Node, Ready: n.Ready})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// /readyz is a load balancer's probe, which gives up after a few seconds:
// every node answers it from what it knows, never by waiting for the
// leader's answer. Here the node that took the lease is still starting to
// lead (its Lead, which loads the policies, does not return), so the
// leader answers no call: the node itself and its follower answer /readyz
// at once, ready, as a failover of the usual length leaves them. What
// ready means is kept: once the leader drains, every node answers 503
// (the follower within about a heartbeat, from the leader's report).
func TestReadyzAnswersAtOnceWhileTheLeaderDoesNotAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	release := make(chan struct{})
	var once sync.Once
	slowStart := func(o *cluster.Options) {
		lead := o.Lead
		o.Lead = func(ctx context.Context, e *engine.Engine, start func() error) (*cluster.Leadership, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return lead(ctx, e, start)
		}
		o.CallTimeout = time.Hour // a call to the leader waits for it: longer than the probe
	}
	f := newFleet(t, 0, 5*time.Millisecond)
	f.add(slowStart)
	f.add(slowStart)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the nodes stop
	waitfor.Eventually(t, "a node holds the lease, and is still starting to lead", func() bool {
		_, _, ok, err := f.nodes[0].Leader(ctx)
		return err == nil && ok
	})
	for _, n := range f.nodes {
		leading, _ := n.Leading()
		require.False(t, leading, "no node leads yet: its Lead has not returned")
	}
	waitfor.Eventually(t, "both nodes have seen the lease held", func() bool {
		return f.nodes[0].Ready() == nil && f.nodes[1].Ready() == nil
	})
	urls := []string{serveReadiness(t, f.nodes[0]), serveReadiness(t, f.nodes[1])}
	for _, u := range urls {
		status, body := probe(t, u)
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, "ready\n", body)
	}

	once.Do(func() { close(release) })
	lead := f.leader(f.nodes)
	lead.API().Drain(ctx)
	for _, u := range urls {
		waitfor.Eventually(t, "the node is not ready while the leader drains", func() bool {
			status, body := probe(t, u)
			return status == http.StatusServiceUnavailable && body == "not ready: draining: new work is refused\n"
		})
	}
}

// A node that begins to stop is not ready from that moment, leader or
// follower, so that a load balancer sends it nothing new while it
// finishes: here the follower's stop waits for the batch of events it is
// replicating, and the leader's for the task it runs (its drain), and
// both answer /readyz 503 meanwhile, saying why.
func TestANodeIsNotReadyFromTheMomentItBeginsToStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFleet(t, 2, time.Hour) // every task runs until its node stops
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	leadURL, followerURL := serveReadiness(t, lead), serveReadiness(t, follower)
	for _, u := range []string{leadURL, followerURL} {
		waitfor.Eventually(t, "the node is ready", func() bool { status, _ := probe(t, u); return status == http.StatusOK })
	}

	replicating, release := make(chan struct{}), make(chan struct{})
	var once, released sync.Once
	t.Cleanup(func() { released.Do(func() { close(release) }) })
	cluster.SetReplicate(follower.Node, func(e *engine.Engine, evs []engine.Event) error {
		once.Do(func() { close(replicating) })
		<-release
		return e.Replicate(evs)
	})
	task, err := lead.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.NoError(t, err)
	<-replicating
	waitfor.Eventually(t, "the task runs on the leader", func() bool { return f.exec.count(task.ID) == 1 })

	stopped := make(chan struct{})
	go func() { defer close(stopped); follower.Stop(ctx) }()
	waitfor.Eventually(t, "the stopping follower is not ready", func() bool {
		status, body := probe(t, followerURL)
		return status == http.StatusServiceUnavailable && body == "not ready: stopping: this node is shutting down\n"
	})
	select {
	case <-stopped:
		t.Fatal("the follower stopped while it still replicated a batch")
	default:
	}
	released.Do(func() { close(release) })
	<-stopped

	// The leader drains: its running task gets until the stop's context
	// ends, and the node is not ready all along.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stopped = make(chan struct{})
	go func() { defer close(stopped); lead.Stop(sctx) }()
	waitfor.Eventually(t, "the stopping leader is not ready", func() bool {
		status, body := probe(t, leadURL)
		return status == http.StatusServiceUnavailable && body == "not ready: stopping: this node is shutting down\n"
	})
	select {
	case <-stopped:
		t.Fatal("the leader stopped while its task still ran")
	default:
	}
	scancel()
	<-stopped
}

// A stopping leader drains while it still leads: its next heartbeat tells
// the followers, which answer /readyz 503, and new work through any node
// is refused at once with DRAINING, not left waiting for a leader that no
// longer applies what it is sent; its running task finishes before it
// resigns.
func TestAStoppingLeaderDrainsThroughEveryNodeBeforeItResigns(t *testing.T) {
	// Calls wait for the leader for an hour: a call left waiting would hang
	// the test, not end in a timeout that reads as an answer.
	f := newFleet(t, 2, time.Hour, func(o *cluster.Options) { o.CallTimeout = time.Hour })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	followerURL := serveReadiness(t, follower)
	waitfor.Eventually(t, "the follower is ready", func() bool { status, _ := probe(t, followerURL); return status == http.StatusOK })
	task, err := lead.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.NoError(t, err)
	waitfor.Eventually(t, "the task runs on the leader", func() bool { return f.exec.count(task.ID) == 1 })

	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stopped := make(chan struct{})
	go func() { defer close(stopped); lead.Stop(sctx) }()
	waitfor.Eventually(t, "the follower says the leader drains", func() bool {
		status, body := probe(t, followerURL)
		return status == http.StatusServiceUnavailable && strings.Contains(body, "draining")
	})
	for _, n := range []*testNode{follower, lead} {
		_, err := n.API().Submit(ctx, enginetest.Spec("late").Action("click").Obj())
		var ee *engine.Error
		require.ErrorAs(t, err, &ee, "new work through %s", n.ID())
		require.Equal(t, engine.CodeDraining, ee.Code, "%s: %v", n.ID(), err)
	}
	select {
	case <-stopped:
		t.Fatal("the leader stopped while its task still ran")
	default:
	}
	scancel() // the grace ends: the task is cancelled, the leader resigns
	<-stopped
	require.Equal(t, follower, f.leader([]*testNode{follower}), "the follower takes over")
}
