package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/graph/server"
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
	logs, lead, follower := unawareFleet(t)

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

	requireLeaderLogged(t, logs[lead.ID()], id)
}

// unawareFleet starts two nodes whose heartbeats are an hour apart, so that
// the followers never learn that the leader's commits fail, and makes them
// fail (the writes of events are refused, as on a full disk; commits time
// out after a second). Each node logs to its buffer, by id, at debug level:
// each full error is logged there, not only the first of a run.
func unawareFleet(t *testing.T) (logs map[string]*syncBuffer, lead, follower *testNode) {
	logs = map[string]*syncBuffer{}
	f := newFleet(t, 2, 5*time.Millisecond, func(o *cluster.Options) {
		out := &syncBuffer{}
		logs[o.Node] = out
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Debug})
		o.Heartbeat = time.Hour
		store, exec := o.Store, &fleetExec{delay: 5 * time.Millisecond, runs: map[string]int{}}
		o.NewEngine = func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Config: engine.Config{CommitTimeout: time.Second}, Store: store, Executor: exec, Events: events})
		}
	})
	lead = f.leader(f.nodes)
	follower = f.follower(lead)
	submitAndSeeEnd(t, follower, follower)
	t.Cleanup(f.refuseWrites("events", "INSERT OR UPDATE"))
	return logs, lead, follower
}

// requireLeaderLogged checks that the leader's log holds the full error of
// a follower's submission, under the request id id.
func requireLeaderLogged(t *testing.T, log *syncBuffer, id string) {
	t.Helper()
	var line string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, `answered="a follower's command engine.ingest"`) && strings.Contains(l, "request_id="+id) {
			line = l
		}
	}
	require.NotEmpty(t, line, "the leader logged the full error under request_id=%s:\n%s", id, log)
	require.Contains(t, line, "No space left on device", "the full error")
}

// serveAPI serves the GraphQL API of node n over HTTP, as serve does,
// logging to log.
func serveAPI(t *testing.T, n *testNode, log *syncBuffer) *httptest.Server {
	srv, err := server.New(server.Options{Engine: n.API(), Registry: n.Instances(), Plugins: n.Plugins(),
		Schedules: n.Schedules(), Pull: n.Pull(), Heartbeats: n.Heartbeats(), Cluster: n.Node,
		Logger: hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Info})})
	require.NoError(t, err)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs
}

// Over HTTP, as a client sees it: the id the client sends in X-Request-Id
// with a submission to a follower is the one the follower answers with (in
// the header and in the error's extensions.requestId) and the one the
// leader's log names; and an id the follower makes, for a client that
// sends none, is too.
func TestARequestIDCrossesTheClusterOverHTTP(t *testing.T) {
	logs, lead, follower := unawareFleet(t)
	followerLog := &syncBuffer{}
	hs := serveAPI(t, follower, followerLog)

	submit := func(id string) (header string, ext map[string]any) {
		t.Helper()
		body := `{"query":"mutation { submitTask(input: {agentId: \"agent\", action: {kind: \"click\", selector: \"css:#go\"}}) { id } }"}`
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL+"/graphql", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if id != "" {
			req.Header.Set(requestid.Header, id)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close() //nolint:errcheck
		var out struct {
			Errors []struct {
				Message    string
				Extensions map[string]any
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Len(t, out.Errors, 1, "the submission fails: the leader cannot commit")
		require.Equal(t, "UNAVAILABLE", out.Errors[0].Extensions["code"])
		require.Contains(t, out.Errors[0].Message, "the database refused the write (disk full)")
		require.NotContains(t, out.Errors[0].Message, "No space left")
		return resp.Header.Get(requestid.Header), out.Errors[0].Extensions
	}

	const given = "client-chose-this-id-42"
	header, ext := submit(given)
	require.Equal(t, given, header)
	require.Equal(t, given, ext["requestId"])
	requireLeaderLogged(t, logs[lead.ID()], given)

	header, ext = submit("")
	require.NotEmpty(t, header, "the follower made an id for the call it passed on")
	require.Equal(t, header, ext["requestId"])
	requireLeaderLogged(t, logs[lead.ID()], header)
	require.Contains(t, followerLog.String(), "request_id="+header)
}
