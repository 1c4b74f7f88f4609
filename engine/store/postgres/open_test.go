package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/store/postgres"
)

func TestOpenNamesAnUnreachableDatabaseWithoutItsPassword(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"postgres://switchyard:s3cr3t-pw@127.0.0.1:1/test?sslmode=disable&connect_timeout=2",
		"host=127.0.0.1 port=1 user=switchyard password=s3cr3t-pw dbname=test sslmode=disable connect_timeout=2",
	} {
		ctx, cancel := context.WithTimeout(bg, 10*time.Second)
		_, err := postgres.Open(ctx, postgres.Options{URL: url})
		cancel()
		require.Error(t, err)
		require.Contains(t, err.Error(), "127.0.0.1", "the error names the database")
		require.Contains(t, err.Error(), "unreachable")
		require.NotContains(t, err.Error(), "s3cr3t-pw", "but not its password")
	}
	_, err := postgres.Open(bg, postgres.Options{URL: "postgres://u:s3cr3t-pw@[::1"})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t-pw")
	_, err = postgres.Open(bg, postgres.Options{})
	require.ErrorContains(t, err, "no database URL")
}

func TestOpenRefusesASchemaThatHoldsOtherTables(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	admin(t, "CREATE SCHEMA "+pgxIdent(schema))
	admin(t, "CREATE TABLE "+pgxIdent(schema)+".users (id int)")
	_, err := postgres.Open(bg, postgres.Options{URL: databaseURL(t), Schema: schema})
	require.ErrorContains(t, err, "not Switchyard's (users)")
	require.ErrorContains(t, err, schema)
}

func TestOpenRefusesASchemaNewerThanTheBuild(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	require.NoError(t, openStore(t, schema).Close())
	admin(t, "INSERT INTO "+pgxIdent(schema)+".switchyard_migrations (version, name) VALUES (999, '0999_future.sql')")
	_, err := postgres.Open(bg, postgres.Options{URL: databaseURL(t), Schema: schema})
	require.ErrorContains(t, err, "newer than this build knows")
}

func TestNodesStartingTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const nodes = 4
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	stores := make([]*postgres.Store, nodes)
	for i := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(bg, postgres.Options{URL: databaseURL(t), Schema: schema, MaxConns: 2})
		}()
	}
	wg.Wait()
	for i := range nodes {
		require.NoError(t, errs[i], "node %d", i)
		require.NoError(t, stores[i].Close())
		require.NoError(t, stores[i].Close(), "Close twice is harmless")
	}
	c, err := pgx.Connect(bg, databaseURL(t))
	require.NoError(t, err)
	defer c.Close(bg) //nolint:errcheck
	var applied, distinct int
	require.NoError(t, c.QueryRow(bg, "SELECT count(*), count(DISTINCT version) FROM "+pgxIdent(schema)+".switchyard_migrations").Scan(&applied, &distinct))
	require.Equal(t, distinct, applied, "each migration applied once")
	require.Positive(t, applied)
}

func TestClosedStoreRefusesWork(t *testing.T) {
	t.Parallel()
	s := openStore(t, newSchema(t))
	require.NoError(t, s.Commit(bg, taskBatch(1, 1)))
	require.NoError(t, s.Close())
	require.Error(t, s.Commit(bg, taskBatch(2, 1)))
	_, err := s.Task(bg, "T00000001")
	require.Error(t, err)
}

func TestSchemasKeepClustersApart(t *testing.T) {
	t.Parallel()
	a, b := openStore(t, newSchema(t)), openStore(t, newSchema(t))
	require.NoError(t, a.Commit(bg, taskBatch(1, 3)))
	require.NoError(t, b.Commit(bg, taskBatch(1, 1)), "seqs are per schema")
	snap, err := b.Load(bg)
	require.NoError(t, err)
	require.Len(t, snap.Tasks, 1)
}

// A schema at version 3 (the seq check and the fence in plpgsql) is brought
// to the plain checks of version 4 at Open, keeping its rows; the checks
// then refuse what they refused before.
func TestOpenMigratesASchemaToThePlainChecks(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	require.NoError(t, s.Commit(bg, taskBatch(1, 3)))
	require.NoError(t, s.Close())
	// Back to version 3, as a build before the plain checks left it.
	q := pgxIdent(schema)
	admin(t, "DROP FUNCTION "+q+".sy_seq_refused(bigint, bigint, bigint)")
	admin(t, "DROP FUNCTION "+q+".sy_fence_refused(text, text, bigint)")
	admin(t, "ALTER TABLE "+q+".tasks DROP COLUMN first_at, DROP COLUMN first_to, DROP COLUMN first_reason, DROP COLUMN first_webhook")
	admin(t, "ALTER TABLE "+q+".nodes DROP COLUMN schema_version")
	admin(t, "DELETE FROM "+q+".switchyard_migrations WHERE version >= 4")

	s = openStore(t, schema)
	require.NoError(t, s.Commit(bg, taskBatch(4, 2)), "the migrated schema takes commits")
	err := s.Commit(bg, taskBatch(5, 1, "T-again"))
	require.ErrorContains(t, err, "event seq 5 does not follow the last committed seq 5")
	snap, err := s.Load(bg)
	require.NoError(t, err)
	require.Len(t, snap.Tasks, 5, "the refused commit wrote nothing")

	s.SetFence("node-a", 7) // no such lease: refused
	err = s.Commit(bg, taskBatch(6, 1))
	require.ErrorIs(t, err, postgres.ErrNotLeader)
	require.ErrorContains(t, err, "node node-a does not hold epoch 7")
}
