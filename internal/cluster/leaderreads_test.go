package cluster_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// fastCall is the bound of a call that should be answered at once: far
// below the call timeout (10 s, the default), which the calls waited for
// before, and generous for a busy machine.
const fastCall = 5 * time.Second

// A follower that knows that the leader cannot commit answers the reads
// it would pass to the leader at once, with an UNAVAILABLE, retryable
// error that names the leader and its reason, instead of waiting for an
// answer the leader cannot write (here its answers to commands are refused
// too, as on a full disk) until "no leader answered". The reads that have
// no error of their own fall back to the node's state, and say why to a
// caller that asks (the API, which answers the error).
func TestAFollowerAnswersReadsAtOnceWhileTheLeaderCannotCommit(t *testing.T) {
	f := newFleet(t, 2, 5*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	_, err := follower.API().Plan(context.Background(), 10)
	require.NoError(t, err, "the leader answers reads") // (a read not kept for a moment as stats are)
	undo := failCommits(t, f, lead, follower)

	check := func(what string, err error) {
		t.Helper()
		require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "%s: want UNAVAILABLE, got %v", what, err)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		require.True(t, ee.Retryable, what)
		require.Contains(t, err.Error(), "the leader ("+lead.ID()+") cannot commit; try again later", what)
		require.Contains(t, storeerr.Public(err), "the database refused the write (disk full)", what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fastCall)
	defer cancel()
	_, err = follower.API().Plan(ctx, 10)
	check("plan", err)
	_, err = follower.Plugins().Get(ctx, "fair")
	check("a plugin", err)
	for what, read := range map[string]func(context.Context){
		"stats":     func(ctx context.Context) { follower.API().Stats(ctx) },
		"lanes":     func(ctx context.Context) { follower.API().Lanes(ctx) },
		"agents":    func(ctx context.Context) { follower.API().Agents(ctx) },
		"policies":  func(ctx context.Context) { follower.API().Policies(ctx) },
		"instances": func(ctx context.Context) { follower.Instances().List(ctx) },
		"plugins":   func(ctx context.Context) { follower.Plugins().List(ctx) },
	} {
		rctx, failed := cluster.CatchLeaderReads(ctx)
		read(rctx)
		check(what, failed())
	}
	require.NoError(t, ctx.Err(), "answered before the call timeout")

	undo()
	waitfor.Eventually(t, "the follower is ready again", func() bool { return follower.Ready() == nil })
	rctx, failed := cluster.CatchLeaderReads(context.Background())
	follower.API().Stats(rctx)
	require.NoError(t, failed(), "the leader answers reads again")
}

// A follower without a leader — the leader stopped, and the one node left
// cannot start leading and waits an hour to try again — answers the reads
// it would pass to the leader at once, saying that no node leads, instead
// of waiting for "no leader answered".
func TestAFollowerWithoutALeaderAnswersReadsAtOnce(t *testing.T) {
	f := newFleet(t, 1, 5*time.Millisecond)
	first := f.leader(f.nodes)
	follower := f.add(func(o *cluster.Options) {
		o.Lead = func(context.Context, *engine.Engine, func() error) (*cluster.Leadership, error) {
			return nil, errors.New("this node cannot lead")
		}
		o.TakeoverBackoff = func(int) time.Duration { return time.Hour }
	})
	waitfor.Eventually(t, "both nodes are ready", func() bool { return first.Ready() == nil && follower.Ready() == nil })
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	first.Stop(sctx)
	scancel()
	waitfor.Eventually(t, "the follower has seen that no node leads", func() bool {
		err := follower.Ready()
		return err != nil && strings.Contains(err.Error(), "no node has led the cluster")
	})

	ctx, cancel := context.WithTimeout(context.Background(), fastCall)
	defer cancel()
	_, err := follower.API().Plan(ctx, 10)
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Retryable)
	require.Contains(t, err.Error(), "no node leads the cluster (for ")
	rctx, failed := cluster.CatchLeaderReads(ctx)
	follower.API().Lanes(rctx)
	require.ErrorContains(t, failed(), "no node leads the cluster")
	require.NoError(t, ctx.Err(), "answered before the call timeout")
}
