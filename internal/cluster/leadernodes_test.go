package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// refuseWrites makes the writes (ops: "INSERT OR UPDATE", "UPDATE") to
// the fleet's table refused as PostgreSQL refuses a write to a full disk
// (SQLSTATE 53100), and returns what undoes it.
func (f *fleet) refuseWrites(table, ops string) (undo func()) {
	f.t.Helper()
	tbl := pgx.Identifier{f.schema, table}.Sanitize()
	fn := pgx.Identifier{f.schema, "refuse_" + table}.Sanitize()
	exec(f.t, `CREATE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		RAISE EXCEPTION 'could not extend file "base/16384/2619": No space left on device' USING ERRCODE = 'disk_full';
	END $$`)
	exec(f.t, `CREATE TRIGGER disk_full BEFORE `+ops+` ON `+tbl+` FOR EACH STATEMENT EXECUTE FUNCTION `+fn+`()`)
	return func() { exec(f.t, `DROP TRIGGER IF EXISTS disk_full ON `+tbl) }
}

// failCommits makes the leader's commits fail (its writes of events, and
// of its answers to the followers' commands, are refused as on a full
// disk; the followers can still write their commands), has it try one,
// and waits until follower knows. It returns what undoes it.
func failCommits(t *testing.T, f *fleet, lead, follower *testNode) (undo func()) {
	undoEvents, undoAnswers := f.refuseWrites("events", "INSERT OR UPDATE"), f.refuseWrites("commands", "UPDATE")
	go func() { // a commit that fails: the leader's first
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = lead.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	}()
	waitfor.Eventually(t, "the follower knows that the leader cannot commit", func() bool {
		err := follower.Ready()
		return err != nil && strings.Contains(err.Error(), "the leader ("+lead.ID()+") cannot commit")
	})
	return func() { undoEvents(); undoAnswers() }
}

// The nodes query shows the leader's commit failure — why, in general
// terms, and since when — on the leader's row, through the leader and
// through a follower alike, and no more once it commits again.
func TestNodesShowTheLeadersCommitFailure(t *testing.T) {
	f := newFleet(t, 2, 5*time.Millisecond)
	lead := f.leader(f.nodes)
	follower := f.follower(lead)
	waitfor.Eventually(t, "both nodes are ready", func() bool { return lead.Ready() == nil && follower.Ready() == nil })
	ctx := context.Background()
	for _, via := range f.nodes {
		ns, err := via.Nodes(ctx)
		require.NoError(t, err)
		for _, n := range ns {
			require.Empty(t, n.CommitFailure, "%s through %s", n.ID, via.ID())
		}
	}
	before := time.Now()
	undo := failCommits(t, f, lead, follower)
	for _, via := range f.nodes {
		ns, err := via.Nodes(ctx)
		require.NoError(t, err)
		require.Len(t, ns, 2)
		for _, n := range ns {
			if n.ID != lead.ID() {
				require.Emptyf(t, n.CommitFailure, "%s through %s", n.ID, via.ID())
				require.Zero(t, n.CommitFailingSince)
				continue
			}
			require.True(t, n.Leader)
			require.Containsf(t, n.CommitFailure, "commits have been failing for", "through %s", via.ID())
			require.Contains(t, n.CommitFailure, "the database refused the write (disk full)")
			require.NotContains(t, n.CommitFailure, "No space left", "in general terms")
			require.False(t, n.CommitFailingSince.Before(before.Add(-time.Second)), "since %s, the failure began after %s", n.CommitFailingSince, before)
			require.False(t, n.CommitFailingSince.After(time.Now()), "since %s", n.CommitFailingSince)
		}
	}
	undo()
	for _, via := range f.nodes {
		waitfor.Eventually(t, "no commit failure shows through "+via.ID(), func() bool {
			ns, err := via.Nodes(ctx)
			if err != nil {
				return false
			}
			for _, n := range ns {
				if n.CommitFailure != "" {
					return false
				}
			}
			return true
		})
	}
}
