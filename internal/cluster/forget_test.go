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
// (the leader removes it); one silent for less stays, shown unhealthy.
func TestTheLeaderForgetsNodesSilentForADay(t *testing.T) {
	f := newFleet(t, 1, 0)
	lead := f.leader(f.nodes)
	nodes := pgx.Identifier{f.schema, "nodes"}.Sanitize()
	old := (cluster.ForgetAfter + time.Hour).Milliseconds()
	exec(t, `INSERT INTO `+nodes+` (id, address, role, heartbeat_at, version, schema_version) VALUES
		('retired', '127.0.0.1:9100', 'follower', now() - `+strconv.FormatInt(old, 10)+` * interval '1 millisecond', 'test', 5),
		('down-an-hour', '127.0.0.1:9101', 'follower', now() - interval '1 hour', 'test', 5)`)

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
	got := ids()
	healthy, ok := got["down-an-hour"]
	require.True(t, ok, "a node silent for an hour stays: %v", got)
	require.False(t, healthy)
	require.True(t, got[lead.ID()], "the leader itself stays: %v", got)
}
