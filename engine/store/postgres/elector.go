package postgres

// Leader election through one lease row. A node takes the lease when it is
// free or expired (by the database's clock), which increments its epoch, and
// renews it on an interval. It trusts its leadership only for a window
// measured on its own monotonic clock from the start of its last successful
// renewal: TTL minus a margin. The database extends the lease to at least
// TTL after it received that renewal, so a leader that cannot renew steps
// down (cancels its leadership context, fences the store, calls OnDeposed)
// before anyone else can take the lease. Fencing (commit.go) covers what the
// trust window cannot: a process paused past its window writes nothing once
// it resumes. A node that cannot start leading steps down (StepDown): it
// releases the lease at once and campaigns again after a backoff; only
// Resign, or the end of Run's context, takes it out of the election.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// DefaultLease is the name of the lease the dispatcher runs under.
const DefaultLease = "leader"

// opTimeout bounds one database operation of the store's own machinery
// (connecting a listener or an elector, a fence's bookkeeping).
const opTimeout = 10 * time.Second

// ElectorOptions configure an Elector. Node is required.
type ElectorOptions struct {
	// Node identifies this node in the lease (and in Nodes). Unique per
	// process: two processes with one id would take each other's lease.
	Node string
	// TTL is how long a lease lasts after each renewal, by the database's
	// clock (default 10 s). A dead leader is replaced within TTL plus
	// RenewEvery.
	TTL time.Duration
	// RenewEvery is the leader's renewal interval and a follower's
	// campaign interval (default 2 s).
	RenewEvery time.Duration
	// Margin is subtracted from TTL to make the local trust window (default
	// TTL/5): it must cover the drift between this node's clock and the
	// database's over one TTL and the time it takes to stop leading.
	Margin time.Duration
	// OnElected is called when this node takes the lease. ctx is cancelled
	// the moment the node stops leading (before OnDeposed runs): run the
	// leader's work under it.
	OnElected func(ctx context.Context, epoch uint64)
	// OnDeposed is called when this node stops leading: the lease was lost
	// or could not be renewed within the trust window, or it resigned or
	// stepped down.
	OnDeposed func(epoch uint64, reason error)
}

// Elector campaigns for the leader lease on behalf of one node. Callbacks
// run one at a time, in order, on a goroutine of their own, so that a slow
// callback never delays a renewal.
type Elector struct {
	s *Store
	o ElectorOptions

	epoch   atomic.Uint64 // the epoch held, 0 when not leading
	resign  chan struct{}
	resOnce sync.Once

	// A step down asked for and not yet done (StepDown), and the signal
	// that one was.
	stepMu  sync.Mutex
	stepReq *stepDown
	stepC   chan struct{}

	conn    *pgx.Conn // the elector's own connection (not the pool's: commits must not starve renewals)
	connPID atomic.Uint32

	// Leadership, owned by Run's goroutine.
	leadCancel context.CancelFunc
	trustUntil time.Time
	holdUntil  time.Time // no campaign before then: a step down's backoff
	calls      chan func()
}

// stepDown is a StepDown call.
type stepDown struct {
	epoch   uint64
	backoff time.Duration
}

// Errors that say why a node stopped leading.
var (
	ErrLeaseLost    = errors.New("the lease was taken or had expired when this node renewed it")
	ErrTrustExpired = errors.New("the lease could not be renewed within the trust window")
	ErrResigned     = errors.New("this node resigned")
	ErrSteppedDown  = errors.New("this node stepped down")
)

// NewElector returns an elector for the leader lease of this store's schema.
// It does nothing until Run.
func (s *Store) NewElector(o ElectorOptions) (*Elector, error) {
	if o.Node == "" || len(o.Node) > 255 || !utf8.ValidString(o.Node) || strings.ContainsRune(o.Node, 0) {
		return nil, fmt.Errorf("postgres elector: node id %q: want 1..255 bytes of UTF-8 without NUL", o.Node)
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.RenewEvery == 0 {
		o.RenewEvery = 2 * time.Second
	}
	if o.Margin == 0 {
		o.Margin = o.TTL / 5
	}
	if o.TTL <= 0 || o.RenewEvery <= 0 || o.Margin <= 0 || o.Margin >= o.TTL || o.RenewEvery >= o.TTL-o.Margin {
		return nil, fmt.Errorf("postgres elector: want 0 < renewEvery (%s) < ttl (%s) - margin (%s)", o.RenewEvery, o.TTL, o.Margin)
	}
	return &Elector{s: s, o: o, resign: make(chan struct{}), stepC: make(chan struct{}, 1), calls: make(chan func(), 64)}, nil
}

// Options returns the elector's options, defaults filled in.
func (e *Elector) Options() ElectorOptions { return e.o }

// Leading reports whether this node leads, and under which epoch.
func (e *Elector) Leading() (epoch uint64, ok bool) {
	ep := e.epoch.Load()
	return ep, ep != 0
}

// Resign steps down (when leading), releases the lease so that another node
// takes it at once, and makes Run return: the node leaves the election for
// good. It is for a process that stops; a node that stays up but cannot lead
// now steps down with StepDown instead. Resign does not wait for Run.
func (e *Elector) Resign() {
	e.resOnce.Do(func() { close(e.resign) })
}

// StepDown gives up the leadership of epoch and stays in the election: if
// this node still leads under epoch, its leadership ends as a lost one does
// (the leadership context is cancelled, the store refuses commits under
// epoch, OnDeposed follows with ErrSteppedDown) and the lease is released
// so that another node can take it at once (a best effort: if the database
// cannot be reached, the lease expires after TTL). Whether it still led or
// had lost epoch already, the elector then campaigns again, but not before
// backoff has passed, whoever releases the lease meanwhile. If it leads
// under a later epoch by then, the call does nothing.
//
// It is for a node that took the lease but could not start leading (from
// OnElected, say): giving the lease up at once lets another node lead, and
// the backoff keeps a node whose every takeover fails from taking the lease
// over and over. StepDown does not block and does not wait for Run; a
// second call before Run has acted on the first replaces it.
func (e *Elector) StepDown(epoch uint64, backoff time.Duration) {
	e.stepMu.Lock()
	e.stepReq = &stepDown{epoch: epoch, backoff: backoff}
	e.stepMu.Unlock()
	select {
	case e.stepC <- struct{}{}:
	default: // already signalled: Run takes the latest request
	}
}

// Run campaigns until ctx ends or Resign is called; then it steps down and
// releases the lease (a best effort: if the database cannot be reached, the
// lease expires after TTL), waits for the callbacks to finish and returns
// nil. A StepDown does not end it. Call it once.
func (e *Elector) Run(ctx context.Context) error {
	var cbWG sync.WaitGroup
	cbWG.Add(1)
	go func() {
		defer cbWG.Done()
		for f := range e.calls {
			f()
		}
	}()
	w := e.s.hub.subscribe(e.s.channels.lease)
	defer func() {
		e.s.hub.unsubscribe(w)
		if ep := e.epoch.Load(); ep != 0 {
			e.depose(ErrResigned)
			rctx, cancel := context.WithTimeout(context.Background(), e.o.RenewEvery)
			e.release(rctx, ep)
			cancel()
		}
		e.closeConn()
		close(e.calls)
		cbWG.Wait()
	}()
	var lastRenew time.Time
	for {
		if e.epoch.Load() == 0 {
			wait, released := time.Until(e.holdUntil), w.c
			if wait > 0 {
				// Backing off after a step down: a release by another
				// node does not end the wait.
				released = nil
			} else {
				start := time.Now()
				epoch, until, err := e.tryAcquire(ctx)
				if err == nil && epoch != 0 {
					e.elect(epoch, start)
					lastRenew = start
					continue
				}
				if err != nil {
					until = e.o.RenewEvery
				}
				wait = min(max(until, 10*time.Millisecond), e.o.RenewEvery)
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-released: // a leader resigned
				t.Stop()
			case <-e.stepC:
				t.Stop()
				e.stepDown()
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-e.resign:
				t.Stop()
				return nil
			}
			continue
		}
		next := time.NewTimer(time.Until(lastRenew.Add(e.o.RenewEvery)))
		trust := time.NewTimer(time.Until(e.trustUntil))
		select {
		case <-next.C:
		case <-trust.C:
			next.Stop()
			e.depose(ErrTrustExpired)
			continue
		case <-e.stepC:
			next.Stop()
			trust.Stop()
			e.stepDown()
			continue
		case <-ctx.Done():
			next.Stop()
			trust.Stop()
			return nil
		case <-e.resign:
			next.Stop()
			trust.Stop()
			return nil
		}
		trust.Stop()
		start := time.Now()
		rctx, cancel := context.WithDeadline(ctx, e.trustUntil)
		held, err := e.renew(rctx)
		cancel()
		switch {
		case held:
			e.trustUntil = start.Add(e.o.TTL - e.o.Margin)
			lastRenew = start
		case err == nil:
			e.depose(ErrLeaseLost)
		case !time.Now().Before(e.trustUntil):
			e.depose(fmt.Errorf("%w: %v", ErrTrustExpired, err))
		default:
			// Try again soon; the trust timer still runs.
			lastRenew = time.Now().Add(-e.o.RenewEvery + min(e.o.RenewEvery/4, 250*time.Millisecond))
		}
	}
}

// elect starts a leadership: the store is fenced to the epoch before
// OnElected runs.
func (e *Elector) elect(epoch uint64, start time.Time) {
	e.trustUntil = start.Add(e.o.TTL - e.o.Margin)
	ctx, cancel := context.WithCancel(context.Background())
	e.leadCancel = cancel
	e.epoch.Store(epoch)
	e.s.setFence(&fence{lease: DefaultLease, node: e.o.Node, epoch: epoch})
	e.calls <- func() {
		if e.o.OnElected != nil {
			e.o.OnElected(ctx, epoch)
		}
	}
}

// stepDown acts on the latest StepDown call (on Run's goroutine): it ends
// the leadership of the epoch asked for, if this node still holds it, and
// releases the lease, then holds off campaigning for the backoff.
func (e *Elector) stepDown() {
	e.stepMu.Lock()
	req := e.stepReq
	e.stepReq = nil
	e.stepMu.Unlock()
	if req == nil {
		return
	}
	ep := e.epoch.Load()
	if ep != 0 && ep != req.epoch {
		return // leading under a later epoch, taken since: keep it
	}
	if ep != 0 {
		e.depose(ErrSteppedDown)
		rctx, cancel := context.WithTimeout(context.Background(), e.o.RenewEvery)
		e.release(rctx, ep)
		cancel()
	}
	if until := time.Now().Add(req.backoff); until.After(e.holdUntil) {
		e.holdUntil = until
	}
}

// depose ends a leadership at once: the leadership context is cancelled and
// the store refuses commits under the epoch; OnDeposed follows.
func (e *Elector) depose(reason error) {
	epoch := e.epoch.Swap(0)
	if epoch == 0 {
		return
	}
	e.leadCancel()
	e.s.deposeFence(DefaultLease, e.o.Node, epoch)
	e.calls <- func() {
		if e.o.OnDeposed != nil {
			e.o.OnDeposed(epoch, reason)
		}
	}
}

const (
	acquireSQL = `INSERT INTO leases AS l (name, node, epoch, acquired_at, renewed_at, expires_at)
	VALUES ($1, $2, 1, now(), now(), now() + $3 * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE SET node = excluded.node, epoch = l.epoch + 1, acquired_at = now(),
		renewed_at = now(), expires_at = excluded.expires_at
	WHERE l.expires_at <= now()
	RETURNING epoch`
	holderSQL = `SELECT greatest(extract(epoch FROM expires_at - now()), 0) FROM leases WHERE name = $1`
	renewSQL  = `UPDATE leases SET renewed_at = now(), expires_at = now() + $4 * interval '1 microsecond'
	WHERE name = $1 AND node = $2 AND epoch = $3 AND expires_at > now()`
	releaseSQL = `UPDATE leases SET expires_at = now() WHERE name = $1 AND node = $2 AND epoch = $3`
)

// tryAcquire takes the lease if it is free or expired and returns its new
// epoch; otherwise 0 and how long the holder's lease has left.
func (e *Elector) tryAcquire(ctx context.Context) (epoch uint64, left time.Duration, err error) {
	c, err := e.db(ctx)
	if err != nil {
		return 0, 0, err
	}
	var ep int64
	err = c.QueryRow(ctx, acquireSQL, DefaultLease, e.o.Node, e.o.TTL.Microseconds()).Scan(&ep)
	if err == nil {
		return uint64(ep), 0, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		e.dropConn()
		return 0, 0, err
	}
	var secs float64
	if err := c.QueryRow(ctx, holderSQL, DefaultLease).Scan(&secs); err != nil {
		e.dropConn()
		return 0, 0, err
	}
	return 0, time.Duration(secs * float64(time.Second)), nil
}

// renew extends the lease; held is false without an error when the lease is
// no longer this node's epoch or had expired.
func (e *Elector) renew(ctx context.Context) (held bool, err error) {
	c, err := e.db(ctx)
	if err != nil {
		return false, err
	}
	tag, err := c.Exec(ctx, renewSQL, DefaultLease, e.o.Node, int64(e.epoch.Load()), e.o.TTL.Microseconds())
	if err != nil {
		e.dropConn()
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// release expires the lease now, if this node still holds epoch, and wakes
// the other electors.
func (e *Elector) release(ctx context.Context, epoch uint64) {
	c, err := e.db(ctx)
	if err != nil {
		return
	}
	pb := &pgx.Batch{}
	pb.Queue(releaseSQL, DefaultLease, e.o.Node, int64(epoch))
	pb.Queue("SELECT pg_notify($1, $2)", e.s.channels.lease, e.o.Node)
	if err := c.SendBatch(ctx, pb).Close(); err != nil {
		e.dropConn()
	}
}

// db returns the elector's connection, connecting when needed.
func (e *Elector) db(ctx context.Context) (*pgx.Conn, error) {
	if e.conn != nil && !e.conn.IsClosed() {
		return e.conn, nil
	}
	e.closeConn()
	cfg := e.s.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = "switchyard-elector"
	cctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	c, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, err
	}
	e.conn = c
	e.connPID.Store(c.PgConn().PID())
	return c, nil
}

// dropConn closes the connection after an error: the next call reconnects.
func (e *Elector) dropConn() { e.closeConn() }

func (e *Elector) closeConn() {
	if e.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.conn.Close(ctx)
		cancel()
		e.conn = nil
		e.connPID.Store(0)
	}
}

// Lease describes the leader lease as the database has it.
type Lease struct {
	Node       string    // the node that holds (or last held) it
	Epoch      uint64    // incremented at every takeover
	AcquiredAt time.Time // when Node took it: leader since
	RenewedAt  time.Time
	ExpiresAt  time.Time
	Held       bool // not expired, by the database's clock
}

// Lease returns the leader lease; a zero Lease when no node ever took it.
func (s *Store) Lease(ctx context.Context) (Lease, error) {
	var l Lease
	var epoch int64
	err := s.pool.QueryRow(ctx, `SELECT node, epoch, acquired_at, renewed_at, expires_at, expires_at > now() FROM leases WHERE name = $1`,
		DefaultLease).Scan(&l.Node, &epoch, &l.AcquiredAt, &l.RenewedAt, &l.ExpiresAt, &l.Held)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, nil
	}
	if err != nil {
		return Lease{}, s.describe("read the leader lease", err)
	}
	l.Epoch = uint64(epoch)
	return l, nil
}
