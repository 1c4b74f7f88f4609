package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
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
// of waiting for "no leader answered"; and refuses changes at once too,
// writing no command (a leader elected later does not apply them).
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

	commands := f.count("commands")
	_, err = follower.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "a change too: want UNAVAILABLE, got %v", err)
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Retryable)
	require.Contains(t, err.Error(), "no node leads the cluster (for ")
	_, err = follower.API().Cancel(ctx, "no-such-task", "")
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.Equal(t, commands, f.count("commands"), "no command was written")
	require.NoError(t, ctx.Err(), "answered before the call timeout")
}

// Through the GraphQL API of a follower that knows that the leader cannot
// commit, over HTTP: the reads of the leader's state are answered at once
// with the error (not with the follower's idle lanes and empty registry),
// the reads from the database as usual, and nodes shows the leader's
// failure.
func TestAFollowersAPIAnswersTheLeadersFailure(t *testing.T) {
	f := newFleet(t, 2, 5*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	hs := serveAPI(t, follower, &syncBuffer{})
	submitAndSeeEnd(t, follower, follower)
	undo := failCommits(t, f, lead, follower)
	defer undo()

	ctx, cancel := context.WithTimeout(context.Background(), fastCall)
	defer cancel()
	for _, field := range []string{"stats { node }", "lanes { name }", "agents { id }", "policies { slot }", "instances { id }",
		"plugins { name }", "schedules { id }", "heartbeatChecks { id }", `lane(name: "default") { name }`, `instance(id: "i") { id }`} {
		var out struct {
			Data   map[string]any
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		postGraphQL(t, ctx, hs.URL, "{ "+field+" }", &out)
		require.Lenf(t, out.Errors, 1, "%s: %+v", field, out)
		require.Equal(t, "UNAVAILABLE", out.Errors[0].Extensions["code"], field)
		require.Equal(t, true, out.Errors[0].Extensions["retryable"], field)
		require.Contains(t, out.Errors[0].Message, "the leader ("+lead.ID()+") cannot commit; try again later", field)
		require.Contains(t, out.Errors[0].Message, "the database refused the write (disk full)", field)
	}
	var nodes struct {
		Data struct {
			Nodes []struct {
				ID                 string
				CommitFailure      *string
				CommitFailingSince *time.Time
			}
			Tasks struct{ Edges []any }
		}
		Errors []any
	}
	postGraphQL(t, ctx, hs.URL, "{ nodes { id commitFailure commitFailingSince } tasks(first: 5) { edges { cursor } } }", &nodes)
	require.Empty(t, nodes.Errors)
	require.Len(t, nodes.Data.Nodes, 2)
	for _, n := range nodes.Data.Nodes {
		if n.ID != lead.ID() {
			require.Nil(t, n.CommitFailure, n.ID)
			continue
		}
		require.NotNil(t, n.CommitFailure)
		require.Contains(t, *n.CommitFailure, "the database refused the write (disk full)")
		require.NotNil(t, n.CommitFailingSince)
	}
	require.NotEmpty(t, nodes.Data.Tasks.Edges, "tasks are read from the database")
	require.NoError(t, ctx.Err(), "answered before the call timeout")
}

// postGraphQL posts query to the API at url and decodes the answer into out.
func postGraphQL(t *testing.T, ctx context.Context, url, query string, out any) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"query": query})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close() //nolint:errcheck
	require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
}
