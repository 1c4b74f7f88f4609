package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

func TestCommandsRoundTripThroughTheLeader(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	slow := func(o *postgres.Options) { o.PollInterval = time.Minute } // woken by notifications or not at all
	leader := openStore(t, schema, slow)
	fol := openStore(t, schema, slow)
	cmds, err := leader.TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Empty(t, cmds)

	okID, err := fol.SubmitCommand(bg, "node-b", "cancelTask", json.RawMessage(`{"id": "T1"}`))
	require.NoError(t, err)
	failID, err := fol.SubmitCommand(bg, "node-b", "updateLane", json.RawMessage(`{"lane":"nope"}`))
	require.NoError(t, err)
	_, err = fol.SubmitCommand(bg, "node-b", "x", json.RawMessage(`{not json`))
	require.Error(t, err)

	type answer struct {
		result json.RawMessage
		err    error
	}
	answers := make(chan answer, 2)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for _, id := range []uint64{okID, failID} {
		go func() {
			r, err := fol.AwaitCommand(ctx, id)
			answers <- answer{r, err}
		}()
	}

	var got []postgres.Command
	for len(got) < 2 {
		cs, err := leader.TakeCommands(ctx, 10)
		require.NoError(t, err)
		got = append(got, cs...)
		if len(got) < 2 {
			require.NoError(t, leader.WaitCommands(ctx))
		}
	}
	require.Equal(t, okID, got[0].ID)
	require.Equal(t, "cancelTask", got[0].Kind)
	require.Equal(t, "node-b", got[0].Node)
	require.JSONEq(t, `{"id":"T1"}`, string(got[0].Payload))
	require.Equal(t, failID, got[1].ID)

	require.NoError(t, leader.CompleteCommand(ctx, okID, json.RawMessage(`{"cancelled":true}`), nil))
	require.NoError(t, leader.CompleteCommand(ctx, failID, nil, errors.New(`unknown lane "nope"`)))
	require.NoError(t, leader.CompleteCommand(ctx, okID, json.RawMessage(`{"again":true}`), nil), "a second completion is ignored")
	for range 2 {
		a := <-answers
		if a.err == nil {
			require.JSONEq(t, `{"cancelled":true}`, string(a.result), "the first outcome stands")
			continue
		}
		var ce *postgres.CommandError
		require.ErrorAs(t, a.err, &ce)
		require.Equal(t, failID, ce.ID)
		require.Equal(t, `unknown lane "nope"`, ce.Message)
	}
	_, err = fol.AwaitCommand(ctx, 999_999)
	require.ErrorIs(t, err, engine.ErrNotFound)
	left, err := leader.TakeCommands(ctx, 10)
	require.NoError(t, err)
	require.Empty(t, left, "completed commands are not taken again")

	_, err = leader.Purge(ctx, time.Now().Add(time.Hour), 100)
	require.NoError(t, err)
	_, err = fol.AwaitCommand(ctx, okID)
	require.ErrorIs(t, err, engine.ErrNotFound, "retention purges completed commands")
}

func TestCommandsOfAFencedLeaderStayForTheNext(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	old := openStore(t, schema)
	leases := pgxIdent(schema) + ".leases"
	admin(t, "INSERT INTO "+leases+" (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 1, now(), now(), now() + interval '1 hour')")
	old.SetFence("a", 1)
	fol := openStore(t, schema)
	id, err := fol.SubmitCommand(bg, "b", "engine.ingest", json.RawMessage(`{"Items":[{"ID":"T1"}]}`))
	require.NoError(t, err)
	cmds, err := old.TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Len(t, cmds, 1)
	require.Equal(t, id, cmds[0].ID)

	admin(t, "UPDATE "+leases+" SET node = 'b', epoch = 2")
	require.ErrorIs(t, old.CompleteCommand(bg, id, json.RawMessage(`{}`), nil), postgres.ErrNotLeader,
		"a deposed leader cannot answer")
	mine, err := old.TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Empty(t, mine, "within an epoch a command is handed out once")
	old.SetFence("a", 3) // the same store under a later epoch
	mine, err = old.TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Equal(t, cmds, mine, "a new epoch takes again what the last one did not complete")

	next := openStore(t, schema)
	next.SetFence("b", 2)
	again, err := next.TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Equal(t, cmds, again, "the new leader takes what the old one could not complete")
	require.NoError(t, next.CompleteCommand(bg, id, json.RawMessage(`{"done":true}`), nil))
	res, err := fol.AwaitCommand(bg, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"done":true}`, string(res), "the submitter gets the new leader's answer")
	left, err := openStore(t, schema).TakeCommands(bg, 10)
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestNodesReportTheirHeartbeats(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	since := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "b", Address: "127.0.0.1:8081", Role: "follower", Since: since, Version: "v1"}))
	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "a", Address: "127.0.0.1:8080", Role: "leader", Since: since,
		Version: "v1", Health: json.RawMessage(`{"instances": 3}`)}))
	require.Error(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "c", Health: json.RawMessage(`{`)}))
	nodes, err := s.Nodes(bg)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	require.Equal(t, "a", nodes[0].ID)
	require.Equal(t, "leader", nodes[0].Role)
	require.Equal(t, since, nodes[0].Since)
	require.JSONEq(t, `{"instances":3}`, string(nodes[0].Health))
	require.WithinDuration(t, time.Now(), nodes[0].Heartbeat, time.Minute, "stamped by the database")
	first := nodes[1].Heartbeat

	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "b", Address: "127.0.0.1:8081", Role: "leader", Since: since.Add(time.Hour)}))
	nodes, err = s.Nodes(bg)
	require.NoError(t, err)
	require.Equal(t, "leader", nodes[1].Role)
	require.False(t, nodes[1].Heartbeat.Before(first))
}

// ForgetSilentNodes removes the nodes silent for longer than its argument,
// by the database's clock, and names them; a node that reports again is back.
func TestForgetSilentNodesRemovesOnlyTheSilentOnes(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: id, Role: "follower"}))
	}
	admin(t, "UPDATE "+pgxIdent(schema)+".nodes SET heartbeat_at = now() - interval '25 hours' WHERE id IN ('a', 'c')")
	admin(t, "UPDATE "+pgxIdent(schema)+".nodes SET heartbeat_at = now() - interval '23 hours' WHERE id = 'b'")
	ids, err := s.ForgetSilentNodes(bg, 24*time.Hour)
	require.NoError(t, err)
	slices.Sort(ids)
	require.Equal(t, []string{"a", "c"}, ids)
	ids, err = s.ForgetSilentNodes(bg, 24*time.Hour)
	require.NoError(t, err)
	require.Empty(t, ids, "nothing more to forget")
	nodes, err := s.Nodes(bg)
	require.NoError(t, err)
	require.Len(t, nodes, 1)
	require.Equal(t, "b", nodes[0].ID)

	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "a", Role: "follower"}))
	nodes, err = s.Nodes(bg)
	require.NoError(t, err)
	require.Len(t, nodes, 2, "a node that reports again is back")
}

// LeaseReport reads the lease with the last report of its node, and how
// old that report is by the database's clock.
func TestLeaseReportCarriesItsHoldersLastReport(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	r, err := s.LeaseReport(bg)
	require.NoError(t, err)
	require.Equal(t, postgres.LeaseReport{}, r, "no node ever took the lease")

	require.NoError(t, s.Heartbeat(bg, postgres.NodeInfo{ID: "a", Role: "leader", Health: json.RawMessage(`{"commits":"disk full"}`)}))
	admin(t, "INSERT INTO "+pgxIdent(schema)+".leases (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 3, now(), now(), now() + interval '1 hour')")
	r, err = s.LeaseReport(bg)
	require.NoError(t, err)
	require.True(t, r.Held)
	require.Equal(t, "a", r.Node)
	require.Equal(t, uint64(3), r.Epoch)
	require.True(t, r.Reported)
	require.JSONEq(t, `{"commits":"disk full"}`, string(r.Health))
	require.Less(t, r.Age, time.Hour)

	admin(t, "UPDATE "+pgxIdent(schema)+".nodes SET heartbeat_at = now() - interval '2 hours' WHERE id = 'a'")
	r, err = s.LeaseReport(bg)
	require.NoError(t, err)
	require.GreaterOrEqual(t, r.Age, 2*time.Hour, "aged by the database's clock")
	require.WithinDuration(t, r.RenewedAt.Add(-2*time.Hour), r.Heartbeat, time.Hour)

	admin(t, "UPDATE "+pgxIdent(schema)+".leases SET node = 'z', expires_at = now() - interval '1 second'")
	r, err = s.LeaseReport(bg)
	require.NoError(t, err)
	require.False(t, r.Held)
	require.Equal(t, "z", r.Node)
	require.False(t, r.Reported, "z never reported")
}
