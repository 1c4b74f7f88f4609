package postgres

// The nodes that share a schema, as they report themselves: each node
// upserts its row on an interval; the database stamps the heartbeat with its
// own clock, so that nodes never compare theirs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NodeInfo is what a node reports about itself.
type NodeInfo struct {
	ID      string
	Address string // where its API listens
	Role    string // "leader", "follower", … as the caller names them
	Since   time.Time
	Version string
	// Health is the node's own account of its health (JSON, or nil).
	Health json.RawMessage
	// Heartbeat is when the node last reported, by the database's clock
	// (set by the store; ignored by Heartbeat).
	Heartbeat time.Time
	// SchemaVersion is the schema version the node's build knows: 0 for a
	// build before version 5, which does not report it (set by the store;
	// ignored by Heartbeat, which reports this build's).
	SchemaVersion int
}

// Heartbeat records a node's report, stamped with the database's time.
func (s *Store) Heartbeat(ctx context.Context, n NodeInfo) error {
	if n.ID == "" {
		return fmt.Errorf("postgres store: heartbeat: no node id")
	}
	if n.Health != nil && !json.Valid(n.Health) {
		return fmt.Errorf("postgres store: heartbeat of %s: the health detail is not JSON", n.ID)
	}
	var since *time.Time
	if !n.Since.IsZero() {
		since = &n.Since
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes (id, address, role, since, heartbeat_at, version, health, schema_version)
		VALUES ($1, $2, $3, $4, now(), $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, role = excluded.role, since = excluded.since,
			heartbeat_at = now(), version = excluded.version, health = excluded.health, schema_version = excluded.schema_version`,
		n.ID, n.Address, n.Role, since, n.Version, []byte(n.Health), schemaVersion)
	if err != nil {
		return s.describe("heartbeat of "+n.ID, err)
	}
	return s.checkOlderReaders(ctx)
}

// firstEventsVersion is the schema version from which a task's first event
// may be in its row (migration 0005); schemaVersion is the one this build
// knows, which its nodes report with their heartbeats.
const (
	firstEventsVersion = 5
	schemaVersion      = firstEventsVersion
)

// olderReaderWindow is how long a build before firstEventsVersion, which
// reads first events from the events table only, may go unheard of before
// commits write first events in the tasks' rows. Such a build refuses to
// open the schema once it is migrated, so the nodes to wait for are those
// that ran when it was: firstInRowSQL waits until the migration is this old
// and none of them has reported for as long. A node of such a build quiet
// for longer (stopped, paused, cut off) and then back misses the first
// events written meanwhile; the README (Several nodes, Upgrading) says to upgrade every node.
const olderReaderWindow = 2 * time.Minute

// firstInRowSQL tells whether first events may go in the tasks' rows:
// created, when the schema was created at firstEventsVersion or later (its
// first and its firstEventsVersion migrations were applied in one
// transaction, at one now()); settled, when it was migrated to it more than
// the window ago; and older, the nodes of older builds that reported within
// the window.
const firstInRowSQL = `SELECT
	coalesce((SELECT applied_at FROM switchyard_migrations WHERE version = 1) =
		(SELECT applied_at FROM switchyard_migrations WHERE version = $1), false),
	coalesce((SELECT applied_at FROM switchyard_migrations WHERE version = $1) < now() - $2::bigint * interval '1 millisecond', false),
	coalesce((SELECT array_agg(id ORDER BY id) FROM nodes WHERE schema_version < $1
		AND heartbeat_at > now() - $2::bigint * interval '1 millisecond'), '{}')`

// checkOlderReaders sets firstInRow: a schema created at
// firstEventsVersion, or one migrated to it more than the window ago with
// no node of an older build heard of within the window (firstInRowSQL).
// Open and every heartbeat call it. A leader (a fenced store) logs when it
// starts writing first events in the rows of a migrated schema, and, as an
// error naming the nodes, when a node of an older build reports after that:
// that node has missed first events.
func (s *Store) checkOlderReaders(ctx context.Context) error {
	var (
		created, settled bool
		older            []string
	)
	if err := s.pool.QueryRow(ctx, firstInRowSQL, firstEventsVersion, olderReaderWindow.Milliseconds()).Scan(&created, &settled, &older); err != nil {
		return s.describe("look for nodes of older builds", err)
	}
	ok := created || settled && len(older) == 0
	was := s.firstInRow.Swap(ok)
	if s.fence.Load() == nil || created || was == ok {
		return nil
	}
	if ok {
		s.log.Info("no node of a build before schema version 5 has reported for two minutes: large commits now write "+
			"tasks' first events in their rows, which such builds do not read", "schema", s.opts.Schema)
	} else {
		s.log.Error("nodes of a build before schema version 5 reported after large commits began to write tasks' first events "+
			"in their rows, which they do not read: they have missed events; upgrade them", "nodes", older, "schema", s.opts.Schema)
	}
	return nil
}

// Nodes returns every node that reported, by id.
func (s *Store) Nodes(ctx context.Context) ([]NodeInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, address, role, since, heartbeat_at, version, health, schema_version FROM nodes ORDER BY id`)
	if err != nil {
		return nil, s.describe("list nodes", err)
	}
	var out []NodeInfo
	var n NodeInfo
	var since *time.Time
	var health []byte
	_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.Address, &n.Role, &since, &n.Heartbeat, &n.Version, &health, &n.SchemaVersion}, func() error {
		c := n
		if since != nil {
			c.Since = since.UTC()
		}
		c.Heartbeat = c.Heartbeat.UTC()
		if health != nil {
			c.Health = json.RawMessage(health)
		}
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, s.describe("list nodes", err)
	}
	return out, nil
}

// ForgetSilentNodes deletes the nodes that have not reported for longer
// than silence, by the database's clock, and returns their ids. A node
// that reports again is back (Heartbeat inserts its row).
func (s *Store) ForgetSilentNodes(ctx context.Context, silence time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `DELETE FROM nodes WHERE heartbeat_at < now() - $1::bigint * interval '1 millisecond' RETURNING id`,
		silence.Milliseconds())
	if err != nil {
		return nil, s.describe("forget silent nodes", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, s.describe("forget silent nodes", err)
	}
	return ids, nil
}

// LeaseReport is the leader lease with the last report of the node that
// holds it (or held it last): what the other nodes know of the leader's
// health besides the lease.
type LeaseReport struct {
	Lease
	// Reported tells whether the lease's node has a row in nodes. Health
	// and Heartbeat are its last report's, Age how long ago that was, by
	// the database's clock.
	Reported  bool
	Health    json.RawMessage
	Heartbeat time.Time
	Age       time.Duration
}

// LeaseReport returns the leader lease and its node's last report, in one
// read; a zero LeaseReport when no node ever took the lease.
func (s *Store) LeaseReport(ctx context.Context) (LeaseReport, error) {
	var (
		r      LeaseReport
		epoch  int64
		beat   *time.Time
		health []byte
		ageMs  *float64
	)
	err := s.pool.QueryRow(ctx, `SELECT l.node, l.epoch, l.acquired_at, l.renewed_at, l.expires_at, l.expires_at > now(),
			n.heartbeat_at, n.health, (extract(epoch FROM now() - n.heartbeat_at) * 1000)::float8
		FROM leases l LEFT JOIN nodes n ON n.id = l.node WHERE l.name = $1`, DefaultLease).
		Scan(&r.Node, &epoch, &r.AcquiredAt, &r.RenewedAt, &r.ExpiresAt, &r.Held, &beat, &health, &ageMs)
	if errors.Is(err, pgx.ErrNoRows) {
		return LeaseReport{}, nil
	}
	if err != nil {
		return LeaseReport{}, s.describe("read the leader lease", err)
	}
	r.Epoch = uint64(epoch)
	if beat != nil {
		r.Reported, r.Heartbeat = true, beat.UTC()
		if health != nil {
			r.Health = json.RawMessage(health)
		}
		if ageMs != nil {
			r.Age = time.Duration(*ageMs * float64(time.Millisecond))
		}
	}
	return r, nil
}
