package storeerr_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	_ "github.com/switchyard/switchyard/engine/store/postgres" // registers pgx's errors
	_ "github.com/switchyard/switchyard/engine/store/sqlite"   // registers SQLite's errors
	"github.com/switchyard/switchyard/internal/pgtest"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// A real connection refused by a closed port: the driver's error names the
// user, database, host and port; the public one says what is wrong.
func TestARefusedConnectionIsToldWithoutItsAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := pgx.Connect(ctx, "postgres://switchyard_user@127.0.0.1:1/orders_db?sslmode=disable&connect_timeout=5")
	require.Error(t, err)
	require.Contains(t, err.Error(), "switchyard_user", "the driver's error names the user")

	wrapped := &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "listing tasks",
		Err: storeerr.Mark(fmt.Errorf("postgres store: postgres://switchyard_user@127.0.0.1:1/orders_db (schema %q): list tasks: %w", "public", err))}
	pub := storeerr.Public(wrapped)
	require.Equal(t, "listing tasks: the database cannot be reached (connection refused)", pub)
	require.True(t, storeerr.IsStore(wrapped))

	// Unmarked, the driver's own error is still recognised.
	require.Equal(t, "reading: the database cannot be reached (connection refused)", storeerr.Public(fmt.Errorf("reading: %w", err)))
}

// A real PostgreSQL refusal is told by its SQLSTATE, without the statement
// or the table.
func TestARefusedWriteIsToldByItsSQLState(t *testing.T) {
	u := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	require.NoError(t, err)
	defer c.Close(ctx) //nolint:errcheck
	tx, err := c.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	_, err = tx.Exec(ctx, "SET TRANSACTION READ ONLY")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "CREATE TABLE secret_table_name (x int)")
	require.Error(t, err)
	require.Equal(t, "commit: the database refused the write (read-only)", storeerr.Public(fmt.Errorf("commit: %w", err)))

	require.NoError(t, tx.Rollback(ctx))
	_, err = c.Exec(ctx, "SELECT * FROM secret_table_name_missing")
	require.Error(t, err)
	pub := storeerr.Public(err)
	require.Equal(t, "the database reported an error (syntax error or access rule violation, SQLSTATE 42P01)", pub)
}

// SQLite's errors are wrapped with the file's path by the store: the
// public message keeps what is wrong, not where the file is.
func TestASQLiteErrorIsToldWithoutItsPath(t *testing.T) {
	err := storeerr.Mark(fmt.Errorf("sqlite store: database /srv/secret/switchyard.db is locked by another process: %w", sqlite3.BUSY))
	pub := storeerr.Public(&engine.Error{Code: engine.CodeUnavailable, Message: "recent changes were not committed", Err: err})
	require.Equal(t, "recent changes were not committed: the database is locked by another process", pub)
	require.Equal(t, "the database refused the write (disk full)", storeerr.Public(storeerr.Mark(fmt.Errorf("/srv/x.db: %w", sqlite3.FULL))))
}

// Errors that are not the store's keep their precise text.
func TestOtherErrorsKeepTheirText(t *testing.T) {
	for _, err := range []error{
		&engine.Error{Code: engine.CodeInvalidInput, Field: "lane", Message: `unknown lane "nowhere"`},
		&engine.Error{Code: engine.CodeUnavailable, Message: "no leader answered", Err: context.DeadlineExceeded},
		fmt.Errorf("load plugin /plugins/fair.wasm: %w", errors.New("bad magic")),
	} {
		require.Equal(t, err.Error(), storeerr.Public(err))
		require.False(t, storeerr.IsStore(err))
	}
	require.Equal(t, "", storeerr.Public(nil))
}

// The full error goes to the log, once for a run of one kind.
func TestWithheldErrorsAreLoggedOncePerKind(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	var l storeerr.Log
	refused := storeerr.Mark(fmt.Errorf("postgres store: postgres://u@db.internal:5432/prod: %w", sqlite3.BUSY))
	full := storeerr.Mark(fmt.Errorf("sqlite store: database /srv/a.db: %w", sqlite3.FULL))
	for range 5 {
		l.Withheld(log, "graphql", "", refused)
	}
	l.Withheld(log, "readyz", "", full)
	l.Withheld(log, "graphql", "", errors.New("not a store error"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2, buf.String())
	require.Contains(t, lines[0], "postgres://u@db.internal:5432/prod")
	require.Contains(t, lines[0], "answered=graphql")
	require.Contains(t, lines[1], "/srv/a.db")
}

// Each line names the request the error was held back from; at debug
// level, the requests a run's line stands for are logged too, each with
// its id.
func TestWithheldErrorsNameTheirRequests(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Debug})
	var l storeerr.Log
	refused := storeerr.Mark(fmt.Errorf("postgres store: postgres://u@db.internal:5432/prod: %w", sqlite3.BUSY))
	for i := range 3 {
		l.Withheld(log, "graphql", fmt.Sprintf("req-%d", i), refused)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3, buf.String())
	require.Contains(t, lines[0], "[WARN]")
	require.Contains(t, lines[0], "request_id=req-0")
	for i, line := range lines[1:] {
		require.Contains(t, line, "[DEBUG]")
		require.Contains(t, line, fmt.Sprintf("request_id=req-%d", i+1))
		require.Contains(t, line, "postgres://u@db.internal:5432/prod")
	}
}

// A store error another process told in general terms and logged in full
// is a store error here too, told in the same words, and says who logged it.
func TestARelayedStoreErrorKeepsItsPublicWords(t *testing.T) {
	r := storeerr.Relayed("the database refused the write (disk full)", "the leader a")
	require.True(t, storeerr.IsStore(r))
	require.Equal(t, "the database refused the write (disk full)", storeerr.Public(r))
	wrapped := &engine.Error{Code: engine.CodeUnavailable, Message: "the store cannot commit", Err: r}
	require.True(t, storeerr.IsStore(wrapped))
	require.Equal(t, "the store cannot commit: the database refused the write (disk full)", storeerr.Public(wrapped))
	require.Equal(t, "the store cannot commit: the database refused the write (disk full) (the leader a logged the full error)", wrapped.Error())
}
