package postgres_test

// Test plumbing: the database URL (or a skip), a schema per test that is
// dropped when the test ends, and stores opened on it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/store/postgres"
)

const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	urlOnce   sync.Once
	urlFound  string
	urlReason string
)

// databaseURL returns the test database's URL, or skips the test with the
// reason none is reachable.
func databaseURL(t testing.TB) string {
	t.Helper()
	urlOnce.Do(func() {
		u := os.Getenv("SWITCHYARD_TEST_DATABASE_URL")
		from := "SWITCHYARD_TEST_DATABASE_URL"
		if u == "" {
			u, from = defaultTestURL, "the default URL"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			urlReason = "no PostgreSQL reachable at " + from + " (" + err.Error() + "); set SWITCHYARD_TEST_DATABASE_URL to run these tests"
			return
		}
		_ = c.Close(ctx)
		urlFound = u
	})
	if urlFound == "" {
		t.Skip(urlReason)
	}
	return urlFound
}

// newSchema returns a fresh schema name, dropped (with everything in it)
// when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	u := databaseURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "sy_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer c.Close(ctx) //nolint:errcheck
		if _, err := c.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openStore opens a store on schema, closed when the test ends.
func openStore(t testing.TB, schema string, opts ...func(*postgres.Options)) *postgres.Store {
	t.Helper()
	o := postgres.Options{URL: databaseURL(t), Schema: schema, MaxConns: 4, PollInterval: 500 * time.Millisecond}
	for _, f := range opts {
		f(&o)
	}
	s, err := postgres.Open(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// admin runs a statement on its own connection.
func admin(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer c.Close(ctx) //nolint:errcheck
	_, err = c.Exec(ctx, sql, args...)
	require.NoError(t, err)
}
