package postgres

// Opening and closing the store: the pool, its settings, the schema and the
// migrations, and errors that name the database without its password.

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// DefaultSchema is the schema used when Options.Schema is empty.
const DefaultSchema = "switchyard"

// Options configure a Store. URL is required; the rest has defaults.
type Options struct {
	// URL is the database, as a postgres:// URL or a key=value string
	// (libpq's forms, read by pgx).
	URL string
	// Schema holds the store's tables (default DefaultSchema). It is created
	// when missing; a schema that holds other tables is refused. Several
	// Switchyard clusters may share a database under different schemas.
	Schema string
	// MaxConns bounds the pool that serves commits and reads (default 8).
	// Each node also keeps one connection to listen for notifications and,
	// when it campaigns, one for its elector.
	MaxConns int32
	// PollInterval is the safety net of everything woken by LISTEN/NOTIFY
	// (Follow, WaitCommands, AwaitCommand): a waiter looks again
	// at least this often, since notifications sent while a listener
	// reconnects are lost (default 2 s).
	PollInterval time.Duration
	// ConfigurePool, when set, adjusts the pool's configuration before it
	// connects (TLS, a dialer, a tracer). Its ConnConfig is also the one
	// the listener and elector connections use.
	ConfigurePool func(*pgxpool.Config)
	// Logger receives what the store's background work cannot return as an
	// error (a follower's failed read, a listener's reconnection).
	Logger hclog.Logger
}

func (o *Options) fill() error {
	if o.URL == "" {
		return errors.New("no database URL")
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if len(o.Schema) > 63 || !utf8.ValidString(o.Schema) || strings.ContainsRune(o.Schema, 0) {
		return fmt.Errorf("schema %q: want at most 63 bytes of UTF-8 without NUL", o.Schema)
	}
	if o.MaxConns == 0 {
		o.MaxConns = 8
	}
	if o.PollInterval == 0 {
		o.PollInterval = 2 * time.Second
	}
	if o.MaxConns < 0 || o.PollInterval < 0 {
		return errors.New("maxConns and pollInterval must not be negative")
	}
	return nil
}

// Store is the PostgreSQL store: engine.Store, plus what several nodes on one
// database need (leader election and fencing, event fan-out, commands from
// followers to the leader, broadcasts, node heartbeats).
type Store struct {
	opts     Options
	redacted string // the URL without its password, for errors
	pool     *pgxpool.Pool
	connCfg  *pgx.ConnConfig // for the listener's and electors' own connections
	channels channels

	wmu        sync.Mutex // commits and purges, one at a time; guards what follows
	maxTaskSeq uint64     // the highest seq of a stored task, or of one in a commit in flight: a task above it is new
	// committedMax is the highest seq of a task known committed: what
	// maxTaskSeq falls back to when a commit fails.
	committedMax uint64
	inflight     *asyncCommit // the last commit CommitAsync started, until its outcome is read
	fenceEpoch   uint64       // the epoch the taken commands belong to
	takenState

	fence         atomic.Pointer[fence]
	hub           *hub
	leaderWaiters leaderWaiters
	log           hclog.Logger

	// copyMin is the number of new rows (tasks, statuses, events) from
	// which a commit writes them with COPY (commitCopy) rather than in one
	// pgx.Batch (queueRows). Tests and benchmarks change it.
	copyMin int

	// noNotify turns off the notifications of commits (tests of the poll
	// fallback).
	noNotify atomic.Bool

	// firstInRow is whether new tasks' first events go in their rows
	// (migration 0005): set while no node of a build that reads first
	// events from the events table only has reported lately
	// (checkOlderReaders).
	firstInRow atomic.Bool

	done      chan struct{}
	closeOnce sync.Once
}

var _ engine.PipelinedStore = (*Store)(nil)

// Open connects to the database, creates the schema or applies the
// migrations it lacks (under an advisory lock, so that several nodes may
// start at once) and returns the store. An unreachable database, a schema
// that belongs to something else or one newer than this build is an error
// that names the database (without its password).
func Open(ctx context.Context, opts Options) (*Store, error) {
	s := &Store{opts: opts, redacted: redactURL(opts.URL), done: make(chan struct{}), copyMin: defaultCopyMin}
	s.log = opts.Logger
	if s.log == nil {
		s.log = hclog.NewNullLogger()
	}
	s.log = s.log.Named("postgres")
	if err := s.opts.fill(); err != nil {
		return nil, fmt.Errorf("postgres store: %s: %w", s.redacted, err)
	}
	s.channels = newChannels(s.opts.Schema)
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		// pgx's parse errors may quote the URL: say what is wrong without it.
		return nil, fmt.Errorf("postgres store: %s: the database URL does not parse", s.redacted)
	}
	cfg.MaxConns = s.opts.MaxConns
	cfg.MaxConnIdleTime = 5 * time.Minute
	rp := cfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{s.opts.Schema}.Sanitize()
	if rp["application_name"] == "" {
		rp["application_name"] = "switchyard"
	}
	if s.opts.ConfigurePool != nil {
		s.opts.ConfigurePool(cfg)
	}
	s.connCfg = cfg.ConnConfig.Copy()
	s.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.describe("connect", err)
	}
	ok := false
	defer func() {
		if !ok {
			s.pool.Close()
		}
	}()
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.checkOlderReaders(ctx); err != nil {
		return nil, err
	}
	if err := s.loadMaxTaskSeq(ctx); err != nil {
		return nil, err
	}
	s.forgetTakenLocked()
	s.hub = newHub(s)
	ok = true
	return s, nil
}

// Schema returns the store's schema.
func (s *Store) Schema() string { return s.opts.Schema }

// Pool returns the store's connection pool, for callers that keep their own
// tables next to the store's.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Durable implements engine.Store: a committed batch is in PostgreSQL.
func (s *Store) Durable() bool { return true }

// Close implements engine.Store: it stops the listener, waits for a commit
// in progress and closes the pool. Stop the store's electors (end their Run)
// first. Calls after the first do nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		if s.hub != nil {
			s.hub.close()
		}
		s.wmu.Lock()
		defer s.wmu.Unlock()
		s.pool.Close()
	})
	return nil
}

var errClosed = errors.New("postgres store: closed")

func (s *Store) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

func (s *Store) loadMaxTaskSeq(ctx context.Context) error {
	var maxSeq int64
	if err := s.pool.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM tasks").Scan(&maxSeq); err != nil {
		return s.describe("read the highest task seq", err)
	}
	s.maxTaskSeq = uint64(maxSeq)
	s.committedMax = s.maxTaskSeq
	return nil
}

// describe wraps an error with what was being done and the database it was
// done to, and says in words what the common failures mean.
func (s *Store) describe(what string, err error) error {
	if err == nil {
		return nil
	}
	hint := ""
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	switch {
	case errors.Is(err, errClosed):
		return err
	case errors.As(err, &connErr):
		hint = " (the database is unreachable or refused the connection)"
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		hint = " (a table is missing: was the schema dropped while the store was open?)"
	}
	// Marked: clients are told what failed, not the database's address.
	return storeerr.Mark(fmt.Errorf("postgres store: %s (schema %q): %s%s: %w", s.redacted, s.opts.Schema, what, hint, err))
}

// --- migrations ---------------------------------------------------------------

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration = sqlcodec.Migration

func migrations() ([]migration, error) { return sqlcodec.Migrations(migrationFS, "migrations") }

// migrationsTable records the applied migrations; its name marks a schema as
// Switchyard's.
const migrationsTable = "switchyard_migrations"

// migrate creates the schema or brings it up to date, in one transaction
// under an advisory lock keyed by the schema: nodes that start together
// apply each migration once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("postgres store: %w", err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.describe("connect", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	schema := pgx.Identifier{s.opts.Schema}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", advisoryKey("migrate", s.opts.Schema)); err != nil {
		return s.describe("take the migration lock", err)
	}
	var tables []string
	rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY c.relname`, s.opts.Schema)
	if err == nil {
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		return s.describe("inspect the schema", err)
	}
	current := 0
	switch {
	case slices.Contains(tables, migrationsTable):
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+schema+"."+migrationsTable).Scan(&current); err != nil {
			return s.describe("read the schema version", err)
		}
	case len(tables) > 0:
		shown := tables[:min(len(tables), 5)]
		return fmt.Errorf("postgres store: %s: schema %q holds tables that are not Switchyard's (%s): choose another schema",
			s.redacted, s.opts.Schema, strings.Join(shown, ", "))
	default:
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema); err != nil {
			return s.describe("create the schema", err)
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE "+schema+"."+migrationsTable+
			" (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return s.describe("create the migrations table", err)
		}
	}
	if current > len(ms) {
		return fmt.Errorf("postgres store: %s: schema %q is at version %d, newer than this build knows (%d): use a newer switchyard",
			s.redacted, s.opts.Schema, current, len(ms))
	}
	if current == len(ms) {
		return s.describe("commit the migrations", tx.Commit(ctx))
	}
	if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+schema); err != nil {
		return s.describe("set the search path", err)
	}
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return s.describe("apply migration "+m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+migrationsTable+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return s.describe("record migration "+m.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return s.describe("commit the migrations", err)
	}
	if current > 0 {
		// A schema that existed: nodes of the build before may still be
		// running against it (the README's Upgrading).
		s.log.Info("migrated the schema", "schema", s.opts.Schema, "from", current, "to", len(ms))
	}
	return nil
}

// advisoryKey is a 64-bit advisory lock key for a purpose within a schema.
func advisoryKey(purpose, schema string) int64 {
	h := sha256.Sum256([]byte("switchyard\x00" + purpose + "\x00" + schema))
	var k int64
	for _, b := range h[:8] {
		k = k<<8 | int64(b)
	}
	return k
}

// --- notification channels ----------------------------------------------------

// channels are the LISTEN/NOTIFY channel names of a schema: a short hash of
// the schema name keeps them within PostgreSQL's 63-byte identifiers and
// apart from other schemas' in the same database.
type channels struct {
	events, commands, done, lease, broadcast string
}

func newChannels(schema string) channels {
	h := sha256.Sum256([]byte(schema))
	p := "switchyard_" + hex.EncodeToString(h[:6]) + "_"
	return channels{events: p + "events", commands: p + "commands", done: p + "done", lease: p + "lease", broadcast: p + "broadcast"}
}

func (c channels) all() []string {
	return []string{c.events, c.commands, c.done, c.lease, c.broadcast}
}

// --- URLs -----------------------------------------------------------------------

var kvPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactURL returns a database URL (or key=value string) without its
// secrets, to be shown in errors and logs: every password — the user's,
// in the URL or as a parameter, and the client key's (sslpassword) —
// becomes xxxxx. Host, port, user, database and the other parameters stay:
// they say which database failed, and are no secret. The health endpoints,
// which need no token, show none of it.
func redactURL(raw string) string {
	if strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return "(a database URL that does not parse)"
		}
		q := u.Query()
		masked := false
		for k := range q {
			if strings.Contains(strings.ToLower(k), "password") {
				q.Set(k, "xxxxx")
				masked = true
			}
		}
		if masked {
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return kvPassword.ReplaceAllString(raw, "${1}xxxxx")
}
