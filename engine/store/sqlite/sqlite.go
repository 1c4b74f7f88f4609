package sqlite

// Opening and closing the store: the connections, their settings, the
// migrations and the background checkpointer.

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ncruces/go-sqlite3"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/internal/sqlcodec"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// DefaultPath is the database file used when Options.Path is empty.
const DefaultPath = "./switchyard.db"

// applicationID marks a SQLite file as a Switchyard database ("SWYD").
const applicationID = 0x53575944

// Sync says when a commit reaches the disk.
type Sync string

// Sync modes.
const (
	// SyncFull makes every commit wait for the write-ahead log to be flushed
	// to the disk (fsync): an accepted task survives a crash of the process,
	// of the operating system or of the machine. The default.
	SyncFull Sync = "full"
	// SyncNormal leaves the flush to checkpoints: a commit survives a crash
	// of the process (kill -9), but the last commits before a power loss or
	// an operating system crash may be lost. Faster on slow disks.
	SyncNormal Sync = "normal"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Path is the database file (default DefaultPath). It is created, with
	// its directory, when missing.
	Path string
	// Sync is the durability of a commit (default SyncFull).
	Sync Sync
	// BusyTimeout bounds how long a connection waits for a lock held by
	// another process before failing (default 5 s).
	BusyTimeout time.Duration
	// Readers is the number of connections that serve reads concurrently
	// with commits (default 4).
	Readers int
	// CacheMiB sizes the connections' page caches, in MiB (default 64):
	// readers get a quarter of it each, the writer as much, up to
	// writerCacheMiB.
	CacheMiB int
	// CheckpointPages is the size of the write-ahead log, in pages, past
	// which a background checkpoint copies it into the database (default
	// 8000, 32 MiB: hot index pages are rewritten many times in the log but
	// copied once; SQLite's own default, 1000, cost measurably more CPU).
	CheckpointPages int
	// Owner says who holds the database, for a process that is refused it
	// (e.g. "switchyard serve, listening on 127.0.0.1:8080"): it is written
	// into the lock file with the process id (see lock.go, and SetOwner).
	Owner string
	// PreallocateWAL has Open write the write-ahead log's file out, with
	// zeros, to the size the log reaches before a checkpoint restarts it
	// (CheckpointPages pages and an eighth more; 35 MiB by default), unless
	// it is that large already, and flush it. A commit's flush of a log
	// that grows must also commit the file's new size and blocks to the
	// file system's journal; rewriting blocks that are already the file's
	// is a flush of the data alone, faster and with a shorter tail. SQLite
	// rewrites its log from the start after each checkpoint, so without
	// this only the first cycle after an Open appends; with it none does.
	// SQLite reads the zeros as the end of the log, as it reads frames of
	// an earlier cycle. It costs the writing of that size at each Open and
	// the disk space while the store is open (Close still truncates the
	// log). Only with SyncFull: with SyncNormal commits do not flush.
	PreallocateWAL bool
	// SkipCheck opens the file without checking its bookkeeping. Open
	// otherwise repairs what is certain (see Check) and refuses a file with
	// other problems; tools that check and repair on their own set it.
	SkipCheck bool
}

func (o *Options) fill() error {
	if o.Path == "" {
		o.Path = DefaultPath
	}
	switch o.Sync {
	case "":
		o.Sync = SyncFull
	case SyncFull, SyncNormal:
	default:
		return fmt.Errorf("sync: %q is neither %q nor %q", o.Sync, SyncFull, SyncNormal)
	}
	if o.BusyTimeout == 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if o.Readers == 0 {
		o.Readers = 4
	}
	if o.CacheMiB == 0 {
		o.CacheMiB = 64
	}
	if o.CheckpointPages == 0 {
		o.CheckpointPages = 8000
	}
	if o.BusyTimeout < 0 || o.Readers < 0 || o.CacheMiB < 0 || o.CheckpointPages < 0 {
		return errors.New("busyTimeout, readers, cacheMiB and checkpointPages must not be negative")
	}
	return nil
}

// Store is the SQLite store. Commits and purges go through one writer
// connection, one at a time; reads go through a pool of reader connections
// and never wait for a commit (WAL mode).
type Store struct {
	opts Options
	lock *ownerLock // this process's ownership of the file, held until Close

	repaired []Finding // what Open repaired

	wmu sync.Mutex // the writer, and what only commits change
	w   *writer

	readers chan *reader
	all     []*reader

	ckpt     *sqlite3.Conn
	ckptKick chan struct{}
	// walFrames is the log's length in frames after the last commit (the
	// writer's WAL hook), for the checkpointer to see commits that landed
	// while it ran.
	walFrames atomic.Int64
	done      chan struct{}
	wg        sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ engine.Store = (*Store)(nil)

// Open opens (creating it when needed) the database at opts.Path, applies
// the pending schema migrations and returns the store. A file that is not a
// Switchyard database, a corrupt one, or one that cannot be written is an
// error here, never an empty store. So is a database that another Store has
// open, in this process or another (an error wrapping ErrInUse that names
// the holder): one process owns a file at a time.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.fill(); err != nil {
		return nil, fmt.Errorf("sqlite store: %w", err)
	}
	if dir := filepath.Dir(opts.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite store: create the directory of %s: %w", opts.Path, err)
		}
	}
	lock, err := lockOwner(opts.Path, opts.Owner)
	if errors.Is(err, ErrInUse) {
		return nil, fmt.Errorf("sqlite store: database %s is %w", opts.Path, err)
	} else if err != nil {
		return nil, fmt.Errorf("sqlite store: database %s: %w", opts.Path, err)
	}
	s := &Store{opts: opts, lock: lock, readers: make(chan *reader, opts.Readers), ckptKick: make(chan struct{}, 1), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			_ = s.closeConns()
			s.lock.release()
		}
	}()
	wc, err := s.openConn(ctx, min(opts.CacheMiB, writerCacheMiB), opts.Sync == SyncFull)
	if err != nil {
		return nil, err
	}
	s.w = &writer{c: wc}
	if err := s.setupWriter(); err != nil {
		return nil, err
	}
	if err := migrate(wc); err != nil {
		return nil, s.describe(fmt.Errorf("migrate: %w", err))
	}
	if err := s.w.prepare(); err != nil {
		return nil, s.describe(err)
	}
	if err := s.w.loadCounters(); err != nil {
		return nil, s.describe(err)
	}
	for range opts.Readers {
		c, err := s.openConn(ctx, max(opts.CacheMiB/4, 1), false)
		if err != nil {
			return nil, err
		}
		r := &reader{c: c, stmts: map[string]*sqlite3.Stmt{}}
		s.all = append(s.all, r)
		s.readers <- r
	}
	if s.ckpt, err = s.openConn(ctx, 1, false); err != nil {
		return nil, err
	}
	wc.WALHook(func(_ *sqlite3.Conn, _ string, pages int) error {
		s.walFrames.Store(int64(pages))
		if pages >= opts.CheckpointPages {
			select {
			case s.ckptKick <- struct{}{}:
			default:
			}
		}
		return nil
	})
	s.wg.Add(1)
	go s.checkpointer()
	if !opts.SkipCheck {
		if err := s.checkAtOpen(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	if opts.PreallocateWAL && opts.Sync == SyncFull {
		if err := s.preallocateWAL(); err != nil {
			_ = s.Close()
			return nil, s.describe(err)
		}
	}
	ok = true
	return s, nil
}

// uriPath escapes what a file name in an SQLite URI may not hold as is.
var uriPath = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// writerCacheMiB bounds the writer's page cache. SQLite's commit
// truncates the page cache to the file's size, and a B-tree balance that
// renumbers pages moves one through the number of the page that holds the
// pending byte (the first byte past 1 GiB), far beyond the end of a
// smaller file: the truncation then scans the cache's whole hash
// table, whose size follows the pages cached. Most commits balance some
// index, so a commit cost time in proportion to the writer's cache: with
// 64 MiB of a database larger than that cached, 16k buckets, about 0.1 ms
// a commit, a tenth of the process's CPU with 64 callers submitting one
// task each (doc/adr/0005-durable-write-path.md, finding 31). What a
// commit writes is the right edges of the tables and indexes and the
// tasks of the last few commits: 8 MiB (2,048 pages) holds them.
const writerCacheMiB = 8

// openConn opens one connection with the settings every connection shares;
// with gather, its log's writes are gathered until the commit's flush
// (walvfs.go: the writer's, with SyncFull).
func (s *Store) openConn(ctx context.Context, cacheMiB int, gather bool) (*sqlite3.Conn, error) {
	name := s.opts.Path
	if gather && !strings.HasPrefix(name, "file:") {
		registerGatherVFS()
		name = "file:" + uriPath.Replace(name) + "?vfs=" + gatherVFS
	}
	c, err := sqlite3.OpenContext(ctx, name)
	if err != nil {
		return nil, s.describe(fmt.Errorf("open: %w", err))
	}
	pragmas := "PRAGMA busy_timeout = " + strconv.FormatInt(s.opts.BusyTimeout.Milliseconds(), 10) + ";" +
		"PRAGMA cache_size = -" + strconv.Itoa(cacheMiB*1024) + ";" +
		"PRAGMA temp_store = MEMORY;"
	if err := c.Exec(pragmas); err != nil {
		_ = c.Close()
		return nil, s.describe(fmt.Errorf("configure connection: %w", err))
	}
	return c, nil
}

// setupWriter puts the database in WAL mode and checks that it can be
// written, so that a read-only file fails at open rather than at the first
// commit.
func (s *Store) setupWriter() error {
	c := s.w.c
	// The first statement that reads the file: garbage fails here.
	st, _, err := c.Prepare("PRAGMA journal_mode = WAL")
	if err != nil {
		return s.describe(fmt.Errorf("enable WAL: %w", err))
	}
	mode := ""
	if st.Step() {
		mode = st.ColumnText(0)
	}
	err = errors.Join(st.Err(), st.Close())
	if err != nil {
		return s.describe(fmt.Errorf("enable WAL: %w", err))
	}
	if !strings.EqualFold(mode, "wal") {
		return s.describe(fmt.Errorf("enable WAL: the database stays in %q journal mode", mode))
	}
	if ro, _ := c.ReadOnly("main"); ro {
		return s.describe(errors.New("the database file is read-only"))
	}
	if err := c.Exec("PRAGMA synchronous = " + strings.ToUpper(string(s.opts.Sync))); err != nil {
		return s.describe(fmt.Errorf("set synchronous: %w", err))
	}
	// A write transaction needs the WAL and shared-memory files: this fails
	// on an unwritable directory or file.
	if err := c.Exec("BEGIN IMMEDIATE; COMMIT;"); err != nil {
		_ = c.Exec("ROLLBACK")
		return s.describe(fmt.Errorf("take the write lock: %w", err))
	}
	return nil
}

// The write-ahead log's layout (https://sqlite.org/fileformat2.html#walformat):
// a header, then one frame per page, a header and the page.
const (
	walHeaderSize      = 32
	walFrameHeaderSize = 24
)

// preallocateWAL writes the log's file out with zeros to the size the log
// reaches before a checkpoint restarts it (Options.PreallocateWAL). Only
// what lies past the file's end is written, so nothing SQLite wrote is
// touched: frames not yet checkpointed stay, and a log left by a crash has
// already been recovered by the writer. The zeros fail every frame's check,
// so recovery after a later crash stops at them as it stops at the first
// frame of an earlier cycle. Under wmu: only the writer writes to the log.
func (s *Store) preallocateWAL() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	pageSize, err := queryInt(s.w.c, "PRAGMA page_size")
	if err != nil {
		return fmt.Errorf("preallocate the log: read the page size: %w", err)
	}
	pages := int64(s.opts.CheckpointPages)
	// The log grows on while a checkpoint runs, before the next commit
	// restarts it: an eighth more covers what a light load adds meanwhile.
	target := walHeaderSize + (pages+pages/8)*(pageSize+walFrameHeaderSize)
	path := s.w.c.Filename("main").WAL()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no log to grow: SQLite creates it at the first write
	}
	if err != nil {
		return fmt.Errorf("preallocate the log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("preallocate the log: %w", err)
	}
	if fi.Size() >= target {
		return nil
	}
	zeros := make([]byte, 1<<20)
	for off := fi.Size(); off < target; {
		n := min(int64(len(zeros)), target-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("preallocate the log: %w", err)
		}
		off += n
	}
	// The zeros, the new size and the blocks on disk now, so that a commit's
	// flush finds nothing but its own pages to write.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("preallocate the log: %w", err)
	}
	return nil
}

// describe turns a driver error into one that names the file and, where it
// can, says what is wrong with it.
func (s *Store) describe(err error) error {
	var what string
	switch {
	case errors.Is(err, sqlite3.NOTADB):
		what = "is not a SQLite database (or is encrypted or corrupt)"
	case errors.Is(err, sqlite3.CORRUPT):
		what = "is corrupt"
	case errors.Is(err, sqlite3.READONLY), errors.Is(err, sqlite3.PERM), errors.Is(err, fs.ErrPermission):
		what = "cannot be written"
	case errors.Is(err, sqlite3.CANTOPEN):
		what = "cannot be opened"
	case errors.Is(err, sqlite3.BUSY), errors.Is(err, sqlite3.LOCKED):
		what = "is locked by another process"
	}
	// Marked: clients are told what failed, not the file's path.
	if what != "" {
		return storeerr.Mark(fmt.Errorf("sqlite store: database %s %s: %w", s.opts.Path, what, err))
	}
	return storeerr.Mark(fmt.Errorf("sqlite store: database %s: %w", s.opts.Path, err))
}

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration = sqlcodec.Migration

func migrations() ([]migration, error) { return sqlcodec.Migrations(migrationFS, "migrations") }

// migrate applies the migrations the database lacks, in one transaction.
func migrate(c *sqlite3.Conn) (err error) {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if err := c.Exec("BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = c.Exec("ROLLBACK")
		}
	}()
	appID, err := queryInt(c, "PRAGMA application_id")
	if err != nil {
		return err
	}
	tables, err := queryInt(c, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name != 'schema_migrations'")
	if err != nil {
		return err
	}
	if appID != applicationID && (appID != 0 || tables > 0) {
		return fmt.Errorf("the file holds another application's database (application_id %#x, %d tables)", appID, tables)
	}
	if err := c.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return err
	}
	current, err := queryInt(c, "SELECT coalesce(max(version), 0) FROM schema_migrations")
	if err != nil {
		return err
	}
	if current > int64(len(ms)) {
		return fmt.Errorf("the database's schema version %d is newer than this build knows (%d): use a newer switchyard", current, len(ms))
	}
	for _, m := range ms[current:] {
		if err := c.Exec(m.SQL); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
		st, _, err := c.Prepare("INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)")
		if err != nil {
			return err
		}
		_ = st.BindInt(1, m.Version)
		_ = st.BindText(2, m.Name)
		_ = st.BindInt64(3, time.Now().UnixNano())
		if err := errors.Join(st.Exec(), st.Close()); err != nil {
			return err
		}
	}
	if err := c.Exec("PRAGMA application_id = " + strconv.Itoa(applicationID)); err != nil {
		return err
	}
	return c.Exec("COMMIT")
}

func queryInt(c *sqlite3.Conn, q string) (int64, error) {
	st, _, err := c.Prepare(q)
	if err != nil {
		return 0, err
	}
	var v int64
	if st.Step() {
		v = st.ColumnInt64(0)
	}
	return v, errors.Join(st.Err(), st.Close())
}

// checkpointer copies the write-ahead log into the database in the
// background, so that commits do not pay for it. PASSIVE checkpoints never
// block the writer or readers.
func (s *Store) checkpointer() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ckptKick:
		case <-s.done:
			return
		}
		s.checkpoint()
	}
}

// checkpoint copies the log into the database so that the next commit
// restarts it from its start. SQLite restarts the log only in a write
// transaction that begins with every frame copied; a commit that lands
// while the checkpoint runs (most do, under a steady trickle of commits)
// leaves frames behind, and every commit after it, the log still past
// CheckpointPages, would kick another checkpoint — each one a flush of the
// database that the commits' own flushes queue behind — until one finished
// between two commits (doc/adr/0005-durable-write-path.md, finding 16). So the bulk is copied
// beside the commits, and what landed meanwhile, a few commits' pages, is
// copied holding the writer's lock, which the next commit then finds with
// nothing left behind. A reader on an older snapshot may still hold frames
// back; the next commit's kick tries again, as before.
func (s *Store) checkpoint() {
	if nLog, nCkpt, err := s.ckpt.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE); err == nil {
		s.finishCheckpoint(nLog, nCkpt)
	}
	// Kicks from commits that landed meanwhile are answered.
	select {
	case <-s.ckptKick:
	default:
	}
}

// finishCheckpoint follows a checkpoint that copied nCkpt of the nLog frames
// the log held when it began: if commits have added frames since, and no
// reader held frames back, it copies those holding the writer's lock.
func (s *Store) finishCheckpoint(nLog, nCkpt int) {
	if nCkpt < nLog || s.walFrames.Load() <= int64(nCkpt) {
		return
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _, _ = s.ckpt.WALCheckpoint("main", sqlite3.CHECKPOINT_PASSIVE)
}

// Durable implements engine.Store: a committed batch is on disk.
func (s *Store) Durable() bool { return true }

// Path returns the database file.
func (s *Store) Path() string { return s.opts.Path }

// SetOwner rewrites who holds the database in its lock file (Options.Owner),
// e.g. once the server knows the address it listens on.
func (s *Store) SetOwner(owner string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.lock == nil || s.lock.f == nil {
		return errClosed
	}
	if err := s.lock.setOwner(owner); err != nil {
		return fmt.Errorf("sqlite store: write the lock file of %s: %w", s.opts.Path, err)
	}
	return nil
}

// Close implements engine.Store: it waits for a commit or purge in progress,
// checkpoints the log into the database and closes every connection. Calls
// after the first return its result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.wg.Wait()
		s.wmu.Lock()
		defer s.wmu.Unlock()
		var errs []error
		// Take every reader back, waiting for reads in progress.
		for range s.all {
			<-s.readers
		}
		if s.w != nil && s.w.c != nil {
			if _, _, err := s.w.c.WALCheckpoint("main", sqlite3.CHECKPOINT_TRUNCATE); err != nil {
				errs = append(errs, fmt.Errorf("final checkpoint: %w", err))
			}
		}
		errs = append(errs, s.closeConns())
		s.lock.release() // after the last connection: the next owner finds the file quiet
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("sqlite store: close %s: %w", s.opts.Path, err)
		}
	})
	return s.closeErr
}

func (s *Store) closeConns() error {
	var errs []error
	for _, r := range s.all {
		errs = append(errs, r.close())
	}
	s.all = nil
	if s.ckpt != nil {
		errs = append(errs, s.ckpt.Close())
		s.ckpt = nil
	}
	if s.w != nil {
		errs = append(errs, s.w.close())
		s.w = nil
	}
	return errors.Join(errs...)
}

// reader is a connection that serves reads, with its prepared statements.
type reader struct {
	c     *sqlite3.Conn
	stmts map[string]*sqlite3.Stmt
}

// maxCachedStmts bounds a reader's statement cache (listings build their SQL
// from the filter, so there are a few dozen shapes at most in practice).
const maxCachedStmts = 128

func (r *reader) stmt(q string) (*sqlite3.Stmt, error) {
	if st := r.stmts[q]; st != nil {
		return st, nil
	}
	if len(r.stmts) >= maxCachedStmts {
		for k, st := range r.stmts {
			_ = st.Close()
			delete(r.stmts, k)
		}
	}
	st, _, err := r.c.Prepare(q)
	if err != nil {
		return nil, err
	}
	r.stmts[q] = st
	return st, nil
}

func (r *reader) close() error {
	var errs []error
	for _, st := range r.stmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, r.c.Close())...)
}

var errClosed = errors.New("sqlite store: closed")

// read runs f on a reader connection, interrupted when ctx ends.
func (s *Store) read(ctx context.Context, f func(r *reader) error) error {
	var r *reader
	select {
	case r = <-s.readers:
	case <-s.done:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { s.readers <- r }()
	select {
	case <-s.done:
		return errClosed
	default:
	}
	old := r.c.SetInterrupt(ctx)
	defer r.c.SetInterrupt(old)
	return f(r)
}
