package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/storeerr"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// exec runs SQL on the test database as an administrator would.
func exec(t *testing.T, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	defer conn.Close(ctx) //nolint:errcheck
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

// count returns the number of rows of one of the fleet's tables.
func (f *fleet) count(table string) int {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgtest.URL(f.t))
	require.NoError(f.t, err)
	defer conn.Close(ctx) //nolint:errcheck
	var n int
	require.NoError(f.t, conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{f.schema, table}.Sanitize()).Scan(&n))
	return n
}

// others returns the nodes of f other than n.
func (f *fleet) others(n *testNode) []*testNode {
	var out []*testNode
	for _, x := range f.nodes {
		if x != n {
			out = append(out, x)
		}
	}
	return out
}

// A leader whose commits fail while the rest of the database works (here
// every write to the events table is refused as PostgreSQL refuses a write
// to a full disk: SQLSTATE 53100; a tablespace on a full disk does that)
// tells its followers in its heartbeat. Within about a heartbeat each
// follower is not ready, with the leader's reason in general terms; a
// change passed through it that waits for the leader's answer stops
// waiting, and the next ones are refused at once — UNAVAILABLE, retryable,
// with that reason, never sent to the leader — rather than after the call
// timeout. All of it ends by itself when the leader commits again.
//
// The commit timeout and the call timeout are ten minutes: the leader's
// own answer (UNAVAILABLE once its commit timeout is out) and the
// follower's "no leader answered" come far too late for the call, which
// gives up after a minute; only the follower's knowledge can end it.
func TestFollowersLearnThatTheLeaderCannotCommit(t *testing.T) {
	f, lead, follower := readyPairWithCommitTimeout(t, 10*time.Minute)

	events := pgx.Identifier{f.schema, "events"}.Sanitize()
	refuse := pgx.Identifier{f.schema, "refuse_writes"}.Sanitize()
	exec(t, `CREATE FUNCTION `+refuse+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		RAISE EXCEPTION 'could not extend file "base/16384/2619": No space left on device' USING ERRCODE = 'disk_full', HINT = 'Check free disk space.';
	END $$`)
	exec(t, `CREATE TRIGGER disk_full BEFORE INSERT OR UPDATE ON `+events+` FOR EACH STATEMENT EXECUTE FUNCTION `+refuse+`()`)

	// A submission through the follower, made before anyone knows: its
	// commit is the leader's first that fails.
	ctx := context.Background()
	type outcome struct{ err error }
	inFlight := make(chan outcome, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := follower.API().Submit(cctx, enginetest.Spec("agent").Action("click").Obj())
		inFlight <- outcome{err}
	}()

	var notReady error
	waitfor.Eventually(t, "the follower is not ready, with the leader's reason", func() bool {
		notReady = follower.Ready()
		return notReady != nil
	})
	require.Contains(t, notReady.Error(), "the leader ("+lead.ID()+") cannot commit")
	require.Contains(t, notReady.Error(), "commits have been failing")
	require.Contains(t, notReady.Error(), "the database refused the write (disk full)")
	for _, secret := range []string{"No space left", "base/16384", f.schema, "127.0.0.1"} {
		require.NotContains(t, notReady.Error(), secret, "the reason is told in general terms")
	}
	require.Error(t, lead.Engine().CommitError(), "the leader knows")

	got := <-inFlight
	require.Truef(t, engine.IsCode(got.err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", got.err)
	var ee *engine.Error
	require.ErrorAs(t, got.err, &ee)
	require.True(t, ee.Retryable)
	require.Contains(t, got.err.Error(), "the leader ("+lead.ID()+") cannot commit")
	require.Contains(t, got.err.Error(), "the database refused the write (disk full)")

	// The next change is refused without being sent to the leader.
	commands := f.count("commands")
	_, err := follower.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Retryable)
	require.Contains(t, err.Error(), "cannot commit; try again later")
	require.Contains(t, err.Error(), "the database refused the write (disk full)")
	_, err = follower.API().Cancel(ctx, "no-such-task", "")
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "a cancel too: want UNAVAILABLE, got %v", err)
	require.Equal(t, commands, f.count("commands"), "no command was written")

	exec(t, `DROP TRIGGER disk_full ON `+events)
	waitfor.Eventually(t, "the follower is ready again", func() bool { return follower.Ready() == nil })
	waitfor.Eventually(t, "the leader commits again", func() bool { return lead.Engine().CommitError() == nil })
	submitAndSeeEnd(t, follower, follower, lead)
}

// A leader that keeps its lease but whose heartbeats fail (here they wait
// on a lock held on its row until they time out; a leader whose other
// writes fail the same way does as much) cannot report its health. The
// followers see that it renews its lease without reporting, and are not
// ready, as they would be without a leader; the leader is not ready
// either, as a follower whose heartbeats fail is not. All are ready again
// once the leader reports.
func TestALeaderThatCannotReportMakesNoNodeReady(t *testing.T) {
	f := newFleet(t, 3, 5*time.Millisecond)
	lead := f.leader(f.nodes)
	followers := f.others(lead)
	waitfor.Eventually(t, "every node is ready", func() bool {
		for _, n := range f.nodes {
			if n.Ready() != nil {
				return false
			}
		}
		return true
	})

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{f.schema, "nodes"}.Sanitize()+" WHERE id = $1 FOR UPDATE", lead.ID())
	require.NoError(t, err)

	for _, n := range followers {
		waitfor.Eventually(t, n.ID()+" is not ready while the leader is silent", func() bool {
			err := n.Ready()
			return err != nil && strings.Contains(err.Error(), "the leader ("+lead.ID()+") renews its lease but has not reported its health for")
		})
	}
	waitfor.Eventually(t, "the leader is not ready", func() bool {
		err := lead.Ready()
		return err != nil && strings.Contains(err.Error(), "the store cannot be reached")
	})
	ok, _ := lead.Leading()
	require.True(t, ok, "it still leads")

	require.NoError(t, tx.Rollback(ctx))
	waitfor.Eventually(t, "every node is ready again", func() bool {
		for _, n := range f.nodes {
			if n.Ready() != nil {
				return false
			}
		}
		return true
	})
	submitAndSeeEnd(t, followers[0], f.nodes...)
}

// When the whole database turns read-only (default_transaction_read_only
// for the database, its sessions ended: as after a failover to a replica
// that was not promoted, or a disk that the server remounted read-only)
// the leader's commits fail and so does every node's heartbeat, the
// leader's report included: no node is ready, the leader among them, each
// saying that the store refuses its heartbeats (not that it cannot be
// reached), and a call through any node is refused at once, since the
// command cannot even be written. All recover on their own when the
// database takes writes again.
//
// The test makes the test database read-only for a while, so it runs only
// when SWITCHYARD_TEST_READONLY=1 says that the database
// (SWITCHYARD_TEST_DATABASE_URL) is a private one: for example
//
//	pg_createcluster 15 ro --port 5434 -- --auth=trust && pg_ctlcluster 15 ro start
//	psql -h 127.0.0.1 -p 5434 -U postgres -c 'CREATE DATABASE test'
//	SWITCHYARD_TEST_READONLY=1 SWITCHYARD_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5434/test?sslmode=disable \
//		go test ./internal/cluster -run ReadOnly
func TestADatabaseTurnedReadOnlyMakesNoNodeReady(t *testing.T) {
	if os.Getenv("SWITCHYARD_TEST_READONLY") != "1" {
		t.Skip("makes the whole test database read-only: set SWITCHYARD_TEST_READONLY=1 with a private SWITCHYARD_TEST_DATABASE_URL")
	}
	f := newFleet(t, 2, 5*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.others(lead)[0]
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })

	var db string
	conn, err := pgx.Connect(context.Background(), pgtest.URL(t))
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT current_database()").Scan(&db))
	_ = conn.Close(context.Background())
	endSessions := `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
	writable := func() {
		exec(t, `BEGIN READ WRITE; ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` RESET default_transaction_read_only; COMMIT`)
		exec(t, endSessions)
	}
	t.Cleanup(writable) // before the schema is dropped
	exec(t, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET default_transaction_read_only = on`)
	exec(t, endSessions)

	for _, n := range f.nodes {
		waitfor.Eventually(t, n.ID()+" is not ready", func() bool {
			err := n.Ready()
			return err != nil && strings.Contains(err.Error(), "the store refuses this node's heartbeats") &&
				strings.Contains(storeerr.Public(err), "the database refused the write (read-only)")
		})
	}
	for _, n := range f.nodes {
		_, err := n.API().Submit(context.Background(), enginetest.Spec("agent").Action("click").Obj())
		require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "through %s: want UNAVAILABLE, got %v", n.ID(), err)
	}

	writable()
	waitfor.Eventually(t, "every node is ready again", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	next := f.leader(f.nodes)
	submitAndSeeEnd(t, f.others(next)[0], f.nodes...)
}

// A leader whose commit waits on a lock someone else holds on tasks (an
// operator's LOCK TABLE, a migration) keeps leading: its lease renewals do
// not wait behind the stuck commit. Once the commit has been in progress
// for longer than the commit timeout its followers are not ready, saying
// that the leader cannot commit; the change sent through a follower is
// answered, after the commit timeout, that it was not confirmed durable in
// time, and it stays pending: when the lock goes, the same leader commits
// it, and the followers are ready again. (Before, the commit held the
// lease row: the leader lost its lease and no node could take it until the
// lock went, while the followers said nothing of the leader's commits.)
func TestALeaderWhoseCommitWaitsOnALockKeepsItsLeaseAndSaysSo(t *testing.T) {
	f, lead, follower := readyPairWithCommitTimeout(t, 2*time.Second)
	_, since := lead.Leading()

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{f.schema, "tasks"}.Sanitize()+" IN EXCLUSIVE MODE")
	require.NoError(t, err)

	submitted := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		_, err := follower.API().Submit(cctx, enginetest.Spec("agent").Action("click").Obj())
		submitted <- err
	}()
	var notReady error
	waitfor.Eventually(t, "the follower is not ready, saying the leader cannot commit", func() bool {
		notReady = follower.Ready()
		return notReady != nil && strings.Contains(notReady.Error(), "cannot commit")
	})
	require.Contains(t, notReady.Error(), "the leader ("+lead.ID()+") cannot commit")
	require.Contains(t, notReady.Error(), "a commit has been in progress for")
	leading, stillSince := lead.Leading()
	require.True(t, leading, "the leader keeps its lease while its commit waits")
	require.Equal(t, since, stillSince, "the same leadership")

	err = <-submitted
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	require.ErrorContains(t, err, "not confirmed durable in time; resubmit with the same idempotency key")
	require.Equal(t, 1, f.count("tasks"), "not committed while tasks are locked")

	require.NoError(t, tx.Commit(ctx))
	waitfor.Eventually(t, "the pending change is committed once the lock goes", func() bool { return f.count("tasks") == 2 })
	waitfor.Eventually(t, "the follower is ready again", func() bool { return follower.Ready() == nil })
	leading, stillSince = lead.Leading()
	require.True(t, leading)
	require.Equal(t, since, stillSince, "the same leadership throughout")
}

// readyPairWithCommitTimeout starts two nodes whose engines give a commit
// commitTimeout, and calls ten minutes, and returns them once both are
// ready and a task submitted through the follower has ended.
func readyPairWithCommitTimeout(t *testing.T, commitTimeout time.Duration) (f *fleet, lead, follower *testNode) {
	t.Helper()
	f = newFleet(t, 2, 5*time.Millisecond, func(o *cluster.Options) {
		store, exec := o.Store, &fleetExec{delay: 5 * time.Millisecond, runs: map[string]int{}}
		o.NewEngine = func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Config: engine.Config{CommitTimeout: commitTimeout}, Store: store, Executor: exec, Events: events})
		}
		o.CallTimeout = 10 * time.Minute
	})
	lead = f.leader(f.nodes)
	follower = f.others(lead)[0]
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	submitAndSeeEnd(t, follower, follower)
	return f, lead, follower
}
