// Package pgtest gives tests a PostgreSQL database to run against: its URL
// (or a skip with the reason there is none) and a schema of their own,
// dropped when the test ends.
//
// The database is $SWITCHYARD_TEST_DATABASE_URL, or the local one of the
// development machines and CI (postgres://postgres@127.0.0.1:5432/test).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the database tried when SWITCHYARD_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	once   sync.Once
	found  string
	reason string
)

// URL returns the test database's URL, or skips the test with the reason
// none is reachable.
func URL(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		u := os.Getenv("SWITCHYARD_TEST_DATABASE_URL")
		from := "SWITCHYARD_TEST_DATABASE_URL"
		if u == "" {
			u, from = DefaultURL, "the default URL"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, u)
		if err != nil {
			reason = "no PostgreSQL reachable at " + from + " (" + err.Error() + "); set SWITCHYARD_TEST_DATABASE_URL to run these tests"
			return
		}
		_ = c.Close(ctx)
		found = u
	})
	if found == "" {
		t.Skip(reason)
	}
	return found
}

// Schema returns a fresh schema name, dropped (with everything in it) when
// the test ends.
func Schema(t testing.TB) string {
	t.Helper()
	u := URL(t)
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

// Cutter is a dialer whose connections can all be cut at once, and new ones
// refused: a network partition between a node and the database. Use
// Configure as a store's ConfigurePool.
type Cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// Configure routes a pool's connections (and those made from its connection
// config) through c.
func (c *Cutter) Configure(cfg *pgxpool.Config) { cfg.ConnConfig.DialFunc = c.dial }

func (c *Cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("partitioned from the database (test)")
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// Partition closes every connection and refuses new ones.
func (c *Cutter) Partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// Heal lets connections be made again.
func (c *Cutter) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = false
}
