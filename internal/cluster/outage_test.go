package cluster_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// count is how many times s occurs in the log.
func (s *syncBuffer) count(sub string) int { return strings.Count(s.String(), sub) }

// logTo gives every node of a fleet a logger writing to out.
func logTo(out *syncBuffer) func(*cluster.Options) {
	return func(o *cluster.Options) {
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: o.Node, Output: out, Level: hclog.Info})
	}
}

// A follower cut off from the database says so on /readyz (Node.Ready),
// however long it lasts, and is ready again once it reaches the database.
func TestAFollowerCutOffFromTheStoreIsNotReady(t *testing.T) {
	f := newFleet(t, 2, 50*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })

	follower.cut.Partition()
	beats := regexp.MustCompile(`\((\d+) heartbeats failed`)
	waitfor.Eventually(t, "the follower is not ready through several heartbeats", func() bool {
		err := follower.Ready()
		if err == nil {
			return false
		}
		m := beats.FindStringSubmatch(err.Error())
		require.NotNil(t, m, "%v", err)
		n, _ := strconv.Atoi(m[1])
		return n >= 3
	})
	require.Contains(t, follower.Ready().Error(), "the store cannot be reached")
	require.NoError(t, lead.Ready(), "the leader reaches the store")

	follower.cut.Heal()
	waitfor.Eventually(t, "the follower is ready again", func() bool { return follower.Ready() == nil })
}

// While the database is away, a follower's reads of the leader's state
// fail on every request, and its heartbeats at every interval: each run of
// failures is logged once, with one line when it ends, not a line per
// request or per attempt.
func TestAnOutageIsLoggedByItsChangesOfStateNotPerRequest(t *testing.T) {
	out := &syncBuffer{}
	f := newFleet(t, 2, 50*time.Millisecond, logTo(out))
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	ctx := context.Background()
	follower.cut.Partition()
	for range 5 { // five requests that read the lanes through the follower
		follower.API().Lanes(ctx)
	}
	require.Equal(t, 1, out.count("the leader did not answer for its lanes"), out.String())
	beats := regexp.MustCompile(`\((\d+) heartbeats failed`)
	waitfor.Eventually(t, "several heartbeats failed", func() bool {
		err := follower.Ready()
		if err == nil {
			return false
		}
		n, _ := strconv.Atoi(beats.FindStringSubmatch(err.Error())[1])
		return n >= 3
	})
	require.Equal(t, 1, out.count("heartbeat failed"), out.String())

	follower.cut.Heal()
	waitfor.Eventually(t, "the follower reads the leader's lanes again", func() bool {
		follower.API().Lanes(ctx)
		return out.count("the leader answers again") == 1
	})
	waitfor.Eventually(t, "the heartbeat's recovery is logged", func() bool { return out.count("heartbeat succeeds again") == 1 })
	follower.API().Lanes(ctx)
	require.Equal(t, 1, out.count("the leader did not answer for its lanes"), out.String())
	require.Equal(t, 1, out.count("the leader answers again"), out.String())
}

// A follower whose heartbeat gets no answer at all — the database holds it
// (here a lock on its row; a network that drops packets does the same) —
// is not ready either: a heartbeat that has waited longer than a healthy
// node's three heartbeats counts as failed, and the follower is ready again
// once the database answers.
func TestAFollowerWhoseHeartbeatGetsNoAnswerIsNotReady(t *testing.T) {
	f := newFleet(t, 2, 50*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx) //nolint:errcheck
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{f.schema, "nodes"}.Sanitize()+" WHERE id = $1 FOR UPDATE", follower.ID())
	require.NoError(t, err)
	waitfor.Eventually(t, "the follower whose heartbeat hangs is not ready", func() bool {
		err := follower.Ready()
		return err != nil && strings.Contains(err.Error(), "the store cannot be reached")
	})
	require.NoError(t, tx.Rollback(ctx))
	waitfor.Eventually(t, "the follower is ready again", func() bool { return follower.Ready() == nil })
}
