package cluster_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A node not heard from for cluster.ForgetAfter leaves the nodes query
// (a node forgets such nodes when it starts to lead); one silent for less
// stays, shown unhealthy. The leader forgets once a minute, not at each of
// its heartbeats.
func TestTheLeaderForgetsNodesSilentForADay(t *testing.T) {
	f := newFleet(t, 1, 0)
	first := f.leader(f.nodes)
	// The first leader forgets when it starts to lead, which can come after
	// it is seen leading: once it has, it does not again for a minute, and
	// the nodes below are the next leader's to forget.
	waitfor.Eventually(t, "the first leader forgets when it starts to lead", func() bool {
		return cluster.Forgettings(first.Node) > 0
	})
	nodes := pgx.Identifier{f.schema, "nodes"}.Sanitize()
	old := strconv.FormatInt((cluster.ForgetAfter + time.Hour).Milliseconds(), 10)
	exec(t, `INSERT INTO `+nodes+` (id, address, role, heartbeat_at, version, schema_version) VALUES
		('retired', '127.0.0.1:9100', 'follower', now() - `+old+` * interval '1 millisecond', 'test', 5),
		('down-an-hour', '127.0.0.1:9101', 'follower', now() - interval '1 hour', 'test', 5)`)

	// The next leader forgets at once.
	f.add()
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	first.Stop(sctx)
	scancel()
	lead := f.leader(f.nodes[1:])

	ids := func() map[string]bool {
		ns, err := lead.Nodes(context.Background())
		require.NoError(t, err)
		out := map[string]bool{}
		for _, n := range ns {
			out[n.ID] = n.Healthy
		}
		return out
	}
	waitfor.Eventually(t, "the leader forgets the node silent for longer than a day", func() bool {
		_, ok := ids()["retired"]
		return !ok
	})
	require.Positive(t, cluster.Forgettings(lead.Node), "the next leader forgot it")
	got := ids()
	healthy, ok := got["down-an-hour"]
	require.True(t, ok, "a node silent for an hour stays: %v", got)
	require.False(t, healthy)
	require.True(t, got[lead.ID()], "the leader itself stays: %v", got)

	// A node that passes its day now stays through the leader's next
	// heartbeats: the DELETE is not part of them.
	exec(t, `INSERT INTO `+nodes+` (id, address, role, heartbeat_at, version, schema_version) VALUES
		('retired-later', '127.0.0.1:9102', 'follower', now() - `+old+` * interval '1 millisecond', 'test', 5)`)
	beat := func() time.Time {
		ns, err := lead.Nodes(context.Background())
		require.NoError(t, err)
		for _, n := range ns {
			if n.ID == lead.ID() {
				return n.Heartbeat
			}
		}
		t.Fatalf("no row for the leader %s", lead.ID())
		return time.Time{}
	}
	for range 3 {
		last := beat()
		waitfor.Eventually(t, "the leader's next heartbeat", func() bool { return beat().After(last) })
	}
	_, ok = ids()["retired-later"]
	require.True(t, ok, "the leader forgot at a heartbeat, less than a minute after it last forgot")
}
