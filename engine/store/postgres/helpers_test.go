package postgres_test

// Test plumbing: the database URL (or a skip), a schema per test that is
// dropped when the test ends, and stores opened on it.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
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

// taskBatch returns a batch of n new QUEUED tasks with one event each, the
// first with seq first; ids are prefix + seq unless ids are given.
func taskBatch(first uint64, n int, ids ...string) *engine.Batch {
	b := &engine.Batch{}
	now := time.Now().UTC()
	for i := range n {
		seq := first + uint64(i)
		id := fmt.Sprintf("T%08d", seq)
		if i < len(ids) {
			id = ids[i]
		}
		t := &engine.Task{ID: id, Seq: seq, State: engine.StateQueued, Reason: "submitted", CreatedAt: now, UpdatedAt: now,
			QueuedAt: now, LastSeq: seq, Position: -1,
			Spec: &engine.TaskSpec{AgentID: "agent", Lane: "main", Action: &engine.Action{Kind: "click"}, SubmittedAt: now}}
		b.Tasks = append(b.Tasks, t)
		b.Events = append(b.Events, engine.Event{Seq: seq, At: now, Type: engine.EventState, TaskID: id, AgentID: "agent",
			Lane: "main", To: engine.StateQueued, Reason: "submitted"})
	}
	return b
}

// eventually polls cond every 10 ms until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, timeout, 10*time.Millisecond, msgAndArgs...)
}

// cutter is a dialer whose connections can all be cut at once, and new ones
// refused: a network partition between a node and the database.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
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

// partition closes every connection and refuses new ones.
func (c *cutter) partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = false
}

// withCutter routes a store's connections through c.
func withCutter(c *cutter) func(*postgres.Options) {
	return func(o *postgres.Options) {
		o.ConfigurePool = func(cfg *pgxpool.Config) { cfg.ConnConfig.DialFunc = c.dial }
	}
}

func pgxIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
