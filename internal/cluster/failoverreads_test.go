package cluster_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// electionUnderWay returns a node left alone without a leader, in an
// election under way: it took the lease when the leader stopped, could not
// start leading, gave the lease up and takes it again after a backoff (5 s),
// this time to lead. It has seen that no node leads: two of its heartbeats
// have passed since the lease was given up.
func electionUnderWay(t *testing.T, ctx context.Context) (f *fleet, next *testNode, takeovers *atomic.Int32) {
	f = newFleet(t, 1, 5*time.Millisecond)
	first := f.leader(f.nodes)
	log := &syncBuffer{}
	takeovers = &atomic.Int32{}
	next = f.add(logTo(log), func(o *cluster.Options) {
		lead := o.Lead
		o.Lead = func(ctx context.Context, e *engine.Engine, start func() error) (*cluster.Leadership, error) {
			if takeovers.Add(1) == 1 {
				return nil, errors.New("the first takeover fails")
			}
			return lead(ctx, e, start)
		}
		o.TakeoverBackoff = func(int) time.Duration { return 5 * time.Second }
		o.CallTimeout = time.Minute // a read is answered by the next leader, however slow the machine
	})
	waitfor.Eventually(t, "both nodes are ready", func() bool { return first.Ready() == nil && next.Ready() == nil })
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	first.Stop(sctx)
	scancel()
	waitfor.Eventually(t, "the node left stepped down", func() bool {
		return strings.Contains(log.String(), "could not start leading; stepping down")
	})
	waitfor.Eventually(t, "no node leads", func() bool {
		_, _, ok, err := next.Leader(ctx)
		return err == nil && !ok
	})
	beat := func() time.Time {
		ns, err := next.Nodes(ctx)
		require.NoError(t, err)
		for _, x := range ns {
			if x.ID == next.ID() {
				return x.Heartbeat
			}
		}
		return time.Time{}
	}
	last := beat()
	for range 2 {
		waitfor.Eventually(t, "a heartbeat of the node left", func() bool {
			b := beat()
			if b.After(last) {
				last = b
				return true
			}
			return false
		})
	}
	return f, next, takeovers
}

// A read through a follower while no node leads, in an election under way,
// is not refused: it waits for the next leader, as a change does, and is
// answered once one leads — here the node itself.
func TestAReadWaitsForTheElectionAndTheNodeThatTakesOverServesIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, next, takeovers := electionUnderWay(t, ctx)

	_, err := next.API().Plan(ctx, 10)
	require.NoError(t, err, "the read waited for the next leader")
	leading, _ := next.Leading()
	require.True(t, leading, "answered once the node led")
	require.Equal(t, int32(2), takeovers.Load())
	require.NoError(t, ctx.Err())
}

// A node that takes over serves the reads that wait on it itself, as it
// takes over, without the round trip through the commands table: here the
// read's command cannot be completed (its row is locked by another
// session until the read is answered).
func TestANodeThatTakesOverServesTheReadsWaitingOnIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, next, _ := electionUnderWay(t, ctx)

	answered := make(chan error, 1)
	go func() {
		_, err := next.API().Plan(ctx, 10)
		answered <- err
	}()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(context.Background()) //nolint:errcheck
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck
	commands := pgx.Identifier{f.schema, "commands"}.Sanitize()
	waitfor.Eventually(t, "the read's command is written, and locked", func() bool {
		var id int64
		err := tx.QueryRow(ctx, `SELECT id FROM `+commands+` WHERE kind = 'engine.plan' AND done_at IS NULL FOR UPDATE`).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return false
		}
		require.NoError(t, err)
		return true
	})
	if leading, _ := next.Leading(); leading {
		t.Skip("the node took over before the read's command was locked (a busy machine): nothing to show")
	}
	select {
	case err := <-answered:
		require.NoError(t, err, "the node that took over served the read")
	case <-ctx.Done():
		t.Fatal("the read was not answered")
	}
	leading, _ := next.Leading()
	require.True(t, leading)
}

// A call through a follower that the leader, alive and holding its lease,
// does not answer in time (here it is cut off from the database) says so,
// naming the leader: a change may still be applied, a read was not served
// and may be sent again. It says so in its own words, without Go's
// "context deadline exceeded".
func TestACallTheLeaderDoesNotAnswerNamesTheLeader(t *testing.T) {
	f := newFleet(t, 2, time.Millisecond, func(o *cluster.Options) {
		o.TTL = 10 * time.Minute // the leader keeps its lease while the test runs
	})
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	lead.cut.Partition() // it reads no more commands
	t.Cleanup(lead.cut.Heal)

	check := func(what string, err error) {
		t.Helper()
		require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "%s: want UNAVAILABLE, got %v", what, err)
		var ee *engine.Error
		require.ErrorAs(t, err, &ee)
		require.True(t, ee.Retryable, what)
		require.Contains(t, err.Error(), "the leader ("+lead.ID()+") did not answer within ", what)
		require.NotContains(t, err.Error(), "elected", what)
		require.NotContains(t, err.Error(), "context deadline exceeded", "%s: the Go error is the log's, not the client's", what)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := follower.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	cancel()
	check("a submission", err)
	require.Contains(t, err.Error(), "; the operation may still be applied")

	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = follower.API().Plan(ctx, 10)
	cancel()
	check("a read", err)
	require.Contains(t, err.Error(), "; the read was not served; try again")
	require.NotContains(t, err.Error(), "applied")
}
