package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/postgres"
)

// takeInbox waits (through WaitInbox) until the inbox yields items.
func takeInbox(t *testing.T, s *postgres.Store, limit int) []postgres.Inbound {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	for {
		items, err := s.TakeInbox(ctx, limit)
		require.NoError(t, err)
		if len(items) > 0 {
			return items
		}
		require.NoError(t, s.WaitInbox(ctx), "woken before the timeout")
	}
}

func inbound(node string, ids ...string) postgres.Inbound {
	in := postgres.Inbound{Node: node, SubmittedAt: time.Date(2026, 3, 2, 9, 0, 0, 123456789, time.UTC)}
	for _, id := range ids {
		in.Items = append(in.Items, postgres.InboundItem{TaskID: id, Key: "k-" + id, Spec: engine.TaskSpec{
			AgentID: "agent-ü", Lane: "main", Priority: engine.PriorityHigh, Labels: map[string]string{"env": "prod"},
			Action: &engine.Action{Kind: "fill", Selector: "css:#q", Params: json.RawMessage(`{"text":  "spaced"}`)}}})
	}
	return in
}

func TestInboxItemsReachTheLeaderAndLeaveWithTheCommitThatAdmitsThem(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	// Poll intervals longer than the test: the leader is woken by the
	// follower's notification or not at all.
	leader := openStore(t, schema, func(o *postgres.Options) { o.PollInterval = time.Minute })
	fol := openStore(t, schema)
	none, err := leader.TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Empty(t, none)

	single := inbound("node-b", "T00000001")
	batch := inbound("node-b", "T00000002", "T00000003")
	batch.Batch, batch.Parallelism, batch.WebhookURL = true, 2, "https://example.test/hook"
	ids, err := fol.Enqueue(bg, []postgres.Inbound{single, batch})
	require.NoError(t, err)
	require.Len(t, ids, 2)
	require.Less(t, ids[0], ids[1])

	items := takeInbox(t, leader, 10)
	require.Len(t, items, 2, "both submissions, oldest first")
	single.ID, batch.ID = ids[0], ids[1]
	require.Equal(t, []postgres.Inbound{single, batch}, items, "specs come back whole, params byte for byte")
	more, err := leader.TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Empty(t, more, "taken items are not handed out twice")

	// The leader admits the single task: its item leaves with the commit.
	require.NoError(t, leader.Commit(bg, taskBatch(1, 1, "T00000001")))
	fresh := openStore(t, schema) // another leader would see only the batch
	rest, err := fresh.TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	require.Equal(t, ids[1], rest[0].ID)

	// A submission that makes no task is dropped explicitly.
	require.NoError(t, leader.DoneInbox(bg, ids[1]))
	rest, err = openStore(t, schema).TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Empty(t, rest)
}

func TestInboxItemsOfAFencedLeaderStayForTheNext(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	old := openStore(t, schema)
	leases := pgxIdent(schema) + ".leases"
	admin(t, "INSERT INTO "+leases+" (name, node, epoch, acquired_at, renewed_at, expires_at) VALUES ('leader', 'a', 1, now(), now(), now() + interval '1 hour')")
	old.SetFence("a", 1)
	_, err := openStore(t, schema).Enqueue(bg, []postgres.Inbound{inbound("b", "T00000001")})
	require.NoError(t, err)
	items := takeInbox(t, old, 10)
	require.Len(t, items, 1)

	admin(t, "UPDATE "+leases+" SET node = 'b', epoch = 2")
	require.ErrorIs(t, old.Commit(bg, taskBatch(1, 1, "T00000001")), postgres.ErrNotLeader)
	require.ErrorIs(t, old.DoneInbox(bg, items[0].ID), postgres.ErrNotLeader)
	mine, err := old.TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Empty(t, mine, "within an epoch an item is handed out once")
	old.SetFence("a", 3) // the same store under a later epoch
	mine, err = old.TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Equal(t, items, mine, "a new epoch takes again what the last one did not admit")

	next := openStore(t, schema)
	next.SetFence("b", 2)
	again := takeInbox(t, next, 10)
	require.Equal(t, items, again, "the new leader takes what the old one could not admit")
	require.NoError(t, next.Commit(bg, taskBatch(1, 1, "T00000001")))
	left, err := openStore(t, schema).TakeInbox(bg, 10)
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestEnqueueRefusesItemsWithoutATaskID(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	_, err := s.Enqueue(bg, []postgres.Inbound{inbound("b", "")})
	require.Error(t, err)
	_, err = s.Enqueue(bg, []postgres.Inbound{{Node: "b"}})
	require.Error(t, err)
}

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
	n, err := s.ForgetNodes(bg, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n)
}
