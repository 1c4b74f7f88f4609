package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// A change passed through a follower carries its request's id to the
// leader: the leader's log line of the full error it held back from its
// answer names the request, and the follower answers the error with the
// same id in extensions.requestId, as for an error of its own. Here the
// leader answers before its follower knows that its commits fail (the
// heartbeats are an hour apart).
func TestARequestIDCrossesTheCluster(t *testing.T) {
	logs := map[string]*syncBuffer{}
	f := newFleet(t, 2, 5*time.Millisecond, func(o *cluster.Options) {
		out := &syncBuffer{}
		logs[o.Node] = out
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Info})
		o.Heartbeat = time.Hour
		store, exec := o.Store, &fleetExec{delay: 5 * time.Millisecond, runs: map[string]int{}}
		o.NewEngine = func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Config: engine.Config{CommitTimeout: time.Second}, Store: store, Executor: exec, Events: events})
		}
	})
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	submitAndSeeEnd(t, follower, follower)
	undo := f.refuseWrites("events", "INSERT OR UPDATE")
	defer undo()

	const id = "req-crosses-the-cluster-7"
	ctx, cancel := context.WithTimeout(requestid.WithID(context.Background(), id), time.Minute)
	defer cancel()
	_, err := follower.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.True(t, storeerr.IsStore(err), "an error whose detail the leader held back: %v", err)
	require.Contains(t, storeerr.Public(err), "the database refused the write (disk full)")
	require.NotContains(t, storeerr.Public(err), "No space left")

	followerLog := &syncBuffer{}
	gerr := resolvers.NewErrorPresenter(hclog.New(&hclog.LoggerOptions{Output: followerLog}))(ctx, err)
	require.Equal(t, id, gerr.Extensions["requestId"], "the follower's answer names the request")
	require.Equal(t, "UNAVAILABLE", gerr.Extensions["code"])
	require.Contains(t, gerr.Message, "the database refused the write (disk full)")
	require.NotContains(t, gerr.Message, "No space left")
	require.Contains(t, followerLog.String(), "request_id="+id)
	require.Contains(t, followerLog.String(), "the leader "+lead.ID()+" logged the full error")

	var line string
	for _, l := range strings.Split(logs[lead.ID()].String(), "\n") {
		if strings.Contains(l, `answered="a follower's command engine.ingest"`) {
			line = l
		}
	}
	require.NotEmpty(t, line, "the leader logged the full error:\n%s", logs[lead.ID()])
	require.Contains(t, line, "request_id="+id)
	require.Contains(t, line, "No space left on device", "the full error")
}
