// Package pull is the worker side of pull lanes: external workers lease a
// pull lane's tasks, renew their leases while they work, and complete, fail
// or release them (CW's leased entries). The engine chooses what a worker
// gets (Engine.Pull: the fairness policy's order among the lane's queue
// heads, under every ceiling; nothing while the policy holds) and keeps the
// attempt; this package gives each attempt a lease id for the worker to
// hold, ends the attempt when the lease runs out, and tells a worker why a
// lease it names is no longer its own.
//
// A lease id is "<task id>.<attempt>.<MAC>", the MAC an HMAC-SHA256 of the
// task, the attempt and the engine's lease under a key kept with the
// engine's settings: on a durable store the ids of the leases that survive
// a restart still verify after it, and nobody can make one up.
package pull

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
)

// CodeLeaseLost is the error code of a call that names a lease which is not,
// or no longer, held: LostError.
const CodeLeaseLost engine.Code = "LEASE_LOST"

// Limits of the worker calls.
const (
	MaxLeases    = 100              // tasks per leaseTasks call
	MinLeaseFor  = time.Second      // the shortest lease
	MaxLeaseFor  = 24 * time.Hour   // the longest lease (and renewal)
	MaxWait      = 60 * time.Second // the longest a leaseTasks call waits for work
	MaxErrorLen  = 16 << 10         // bytes of a failTask error
	MaxCodeLen   = 64               // bytes of a failTask error code
	MaxReasonLen = 1 << 10          // bytes of a releaseTask reason
	keySetting   = "pull.leaseKey"  // the engine setting that keeps the MAC key
	maxEnded     = 10_000           // ended leases remembered, to say how they ended
)

// End says how a lease stopped being held.
type End string

// The ways a lease ends.
const (
	EndUnknown   End = "UNKNOWN"   // no such lease (or ended too long ago to say)
	EndExpired   End = "EXPIRED"   // it ran out: the attempt counted as failed
	EndCompleted End = "COMPLETED" // its worker completed it
	EndFailed    End = "FAILED"    // its worker failed it
	EndReleased  End = "RELEASED"  // its worker handed the task back
	EndCancelled End = "CANCELLED" // the task was cancelled
	EndShutdown  End = "SHUTDOWN"  // the server stopped the attempt
)

// LostError answers a call that names a lease which is not held.
type LostError struct {
	LeaseID string
	TaskID  string // "" when the id does not name a task
	End     End
	Reason  string // what happened, for people
}

// Error says why, naming the task but never the lease id: an id is its
// worker's secret, and errors are logged.
func (e *LostError) Error() string {
	if e.TaskID == "" {
		return "the lease is not held: " + e.Reason
	}
	return fmt.Sprintf("the lease on task %s is not held: %s", e.TaskID, e.Reason)
}

// Engine is what the manager needs of the engine (*engine.Engine).
type Engine interface {
	Pull(ctx context.Context, lane string, max int, leaseFor time.Duration, worker string) ([]*engine.Run, error)
	PullHold(lane string) (engine.Hold, bool)
	Leased(lane string) []*engine.Run
	Events() *engine.EventLog
	Sync(ctx context.Context) error
	Setting(key string) ([]byte, bool)
	SaveSetting(ctx context.Context, key string, value []byte) error
	Task(ctx context.Context, id string) (*engine.Task, error)
}

var _ Engine = (*engine.Engine)(nil)

// Options configure a Manager.
type Options struct {
	Engine Engine      // required, started
	Clock  clock.Clock // the engine's clock (default the real one)
	Logger hclog.Logger
}

// Lease is a held lease as its worker sees it.
type Lease struct {
	ID        string // what the worker presents to renew or end it
	TaskID    string
	Lane      string
	Worker    string // who leased it ("" for a lease resumed after a restart)
	Attempt   int
	LeasedAt  time.Time // when the worker's call answered, the lease committed; zero for a resumed lease (the attempt's StartedAt is when the lease was made)
	ExpiresAt time.Time
}

type lease struct {
	Lease
	run       *engine.Run
	cancelled string // the reason, once the task was cancelled: the worker learns on its next call
	cleanup   clock.Timer
}

type ended struct {
	taskID string
	end    End
	reason string
}

// Manager keeps the leases of pull lanes' attempts.
type Manager struct {
	eng Engine
	clk clock.Clock
	log hclog.Logger
	key []byte

	stop      chan struct{} // closed by Close: waiting calls answer at once
	closeOnce sync.Once

	mu     sync.Mutex
	leases map[string]*lease // by task id: a task has one attempt at a time
	ended  map[string]ended  // by lease id
	order  []string          // ended lease ids, oldest first
}

// New returns a manager over a started engine. It loads (or makes and saves)
// the key lease ids are signed with and takes back the leases that
// survived a restart.
func New(ctx context.Context, opts Options) (*Manager, error) {
	if opts.Engine == nil {
		return nil, errors.New("pull: an engine is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	m := &Manager{eng: opts.Engine, clk: opts.Clock, log: opts.Logger.Named("pull"),
		leases: map[string]*lease{}, ended: map[string]ended{}, stop: make(chan struct{})}
	if k, ok := m.eng.Setting(keySetting); ok && len(k) == 32 {
		m.key = k
	} else {
		m.key = make([]byte, 32)
		if _, err := rand.Read(m.key); err != nil {
			return nil, fmt.Errorf("pull: lease key: %w", err)
		}
		if err := m.eng.SaveSetting(ctx, keySetting, m.key); err != nil {
			return nil, fmt.Errorf("pull: save the lease key: %w", err)
		}
	}
	resumed := m.eng.Leased("")
	for _, r := range resumed {
		dl, _ := r.Deadline()
		m.hold(r, Lease{Lane: r.Spec().Lane, Attempt: r.Attempt(), ExpiresAt: dl})
	}
	if len(resumed) > 0 {
		m.log.Info("leases resumed after a restart", "leases", len(resumed))
	}
	return m, nil
}

func (m *Manager) closed() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// sign makes the lease id of an attempt.
func (m *Manager) sign(r *engine.Run) string {
	return m.signAttempt(r.TaskID(), r.Attempt(), r.LeaseID())
}

// signAttempt makes the lease id of attempt n of task taskID, made under the
// engine's lease lease: also from the attempt as the task records it
// (engine.Attempt), after its run is over.
func (m *Manager) signAttempt(taskID string, n int, lease uint64) string {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(taskID))
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(n))
	binary.BigEndian.PutUint64(b[8:], lease)
	mac.Write(b[:])
	return taskID + "." + strconv.Itoa(n) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:18])
}

// hold registers a run's lease and follows its context.
func (m *Manager) hold(r *engine.Run, l Lease) *lease {
	l.ID, l.TaskID = m.sign(r), r.TaskID()
	h := &lease{Lease: l, run: r}
	m.mu.Lock()
	m.leases[l.TaskID] = h
	m.mu.Unlock()
	r.AfterFunc(func() { m.runEnded(h) })
	return h
}

// runEnded handles the end of a run's context: the lease ran out, the task
// was cancelled, the server is stopping, or the attempt is over.
func (m *Manager) runEnded(h *lease) {
	m.mu.Lock()
	if m.leases[h.TaskID] != h {
		m.mu.Unlock()
		return // ended by its worker
	}
	fin, _ := m.settleLocked(h)
	m.mu.Unlock()
	if fin != nil {
		h.run.Finish(*fin)
	}
}

// settleLocked brings a held lease up to date with its run's context, which
// may have ended before runEnded ran: a lease that ran out (or whose server
// stops) ends, and ended reports it; a cancelled task's lease is marked for
// its worker to learn of. fin, when set, ends the attempt (outside the lock).
func (m *Manager) settleLocked(h *lease) (fin *engine.Outcome, ended bool) {
	r := h.run
	var cancelled *engine.CancelledError
	err := r.Err()
	if err == nil {
		if dl, _ := r.Deadline(); m.clk.Now().Before(dl) {
			return nil, false
		}
		// Its term has passed though the engine's timer has not yet run
		// (it waits for the engine's lock): the lease ran out all the
		// same, and a worker's call now must not be taken.
		err = context.DeadlineExceeded
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		m.endLocked(h, EndExpired, "the lease expired at "+h.ExpiresAt.UTC().Format(time.RFC3339Nano)+": the attempt counted as failed")
		who := "its worker"
		if h.Worker != "" {
			who = h.Worker
		}
		return &engine.Outcome{Err: engine.Transientf("lease expired: %s did not complete or renew it", who), Code: engine.CodeLeaseExpired}, true
	case errors.As(r.Cause(), &cancelled):
		if h.cancelled == "" {
			// The worker learns on its next call; the lease (and the
			// task's slots, until the engine reclaims them) last until
			// then, or until its term.
			h.cancelled = cancelled.Reason
			h.cleanup = m.clk.AfterFunc(h.ExpiresAt.Sub(m.clk.Now()), func() { m.expireCancelled(h) })
		}
		return nil, false
	default:
		m.endLocked(h, EndShutdown, "the server stopped the attempt")
		return nil, true
	}
}

// liveLocked answers for a lease a worker's call names: nil when it is held,
// else why not (fin then ends the attempt, outside the lock).
func (m *Manager) liveLocked(h *lease) (fin *engine.Outcome, err error) {
	if m.leases[h.TaskID] != h {
		return nil, m.lostLocked(h)
	}
	if fin, ended := m.settleLocked(h); ended {
		return fin, m.lostLocked(h)
	}
	if h.cancelled != "" {
		reason := "the task was cancelled: " + h.cancelled
		m.endLocked(h, EndCancelled, reason)
		return &engine.Outcome{Err: errors.New("cancelled while leased")},
			&LostError{LeaseID: h.ID, TaskID: h.TaskID, End: EndCancelled, Reason: reason}
	}
	return nil, nil
}

// expireCancelled ends a cancelled task's lease whose worker never called
// back, at the lease's term (the engine reclaims the attempt itself).
func (m *Manager) expireCancelled(h *lease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.leases[h.TaskID] == h {
		m.endLocked(h, EndCancelled, "the task was cancelled: "+h.cancelled)
	}
}

// endLocked forgets a lease, remembering how it ended.
func (m *Manager) endLocked(h *lease, end End, reason string) {
	delete(m.leases, h.TaskID)
	if h.cleanup != nil {
		h.cleanup.Stop()
	}
	m.ended[h.ID] = ended{taskID: h.TaskID, end: end, reason: reason}
	m.order = append(m.order, h.ID)
	if len(m.order) > maxEnded {
		delete(m.ended, m.order[0])
		m.order = m.order[1:]
	}
}

// Lease gives worker up to max tasks of the pull lane named lane, each under
// a lease of leaseFor. When none is available it waits up to wait for one
// (0: it answers at once), and then answers with none. While it waits it
// looks again at every event, and when the fairness policy held the lane's
// heads with a re-ask hint, at the hint (Engine.PullHold).
func (m *Manager) Lease(ctx context.Context, lane string, max int, leaseFor, wait time.Duration, worker string) ([]Lease, error) {
	switch {
	case max < 1 || max > MaxLeases:
		return nil, invalid("max", "must be within 1..%d, got %d", MaxLeases, max)
	case leaseFor < MinLeaseFor || leaseFor > MaxLeaseFor:
		return nil, invalid("leaseForMs", "must be within %d..%d, got %d", MinLeaseFor.Milliseconds(), MaxLeaseFor.Milliseconds(), leaseFor.Milliseconds())
	case wait < 0 || wait > MaxWait:
		return nil, invalid("waitMs", "must be within 0..%d, got %d", MaxWait.Milliseconds(), wait.Milliseconds())
	}
	events := m.eng.Events()
	waitCtx := ctx
	if wait > 0 {
		var cancel context.CancelFunc
		waitCtx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	for {
		last := events.Last()
		runs, err := m.eng.Pull(ctx, lane, max, leaseFor, worker)
		if err != nil {
			return nil, err
		}
		if len(runs) > 0 || wait == 0 || m.closed() {
			now := m.clk.Now()
			out := make([]Lease, len(runs))
			for i, r := range runs {
				dl, _ := r.Deadline()
				out[i] = m.hold(r, Lease{Lane: lane, Worker: worker, Attempt: r.Attempt(), LeasedAt: now, ExpiresAt: dl}).Lease
			}
			return out, nil
		}
		// Whatever makes work available here (a submission, a slot freed,
		// a backoff ended) is an event: wait for the next one. A fairness
		// policy that held the lane's heads with a hint is asked again when
		// the hint elapses, event or not.
		wctx, cancel := context.WithCancel(waitCtx)
		var reasked atomic.Bool
		var reask clock.Timer
		if h, held := m.eng.PullHold(lane); held && !h.ReaskAt.IsZero() {
			reask = m.clk.AfterFunc(h.ReaskAt.Sub(m.clk.Now()), func() {
				reasked.Store(true)
				cancel()
			})
		}
		done := make(chan struct{})
		go func() {
			select {
			case <-m.stop:
				cancel()
			case <-done:
			}
		}()
		err = events.Wait(wctx, last)
		close(done)
		cancel()
		if reask != nil {
			reask.Stop()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if reasked.Load() && waitCtx.Err() == nil && !m.closed() {
				continue // the policy's hint elapsed: ask it again
			}
			return []Lease{}, nil // waited long enough: nothing
		}
	}
}

// Close answers the calls waiting for work (with none) and makes later
// calls answer at once: for a server that is stopping.
func (m *Manager) Close() { m.closeOnce.Do(func() { close(m.stop) }) }

// take finds the live lease named id, or says why there is none.
func (m *Manager) take(id string) (*lease, error) {
	taskID, rest, ok := strings.Cut(id, ".")
	if !ok || taskID == "" || !strings.Contains(rest, ".") || len(id) > 512 {
		return nil, invalid("leaseId", "not a lease id (task.attempt.signature, as leaseTasks returned it)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.leases[taskID]; h != nil && hmac.Equal([]byte(h.ID), []byte(id)) {
		return h, nil
	}
	if e, ok := m.ended[id]; ok {
		return nil, &LostError{LeaseID: id, TaskID: e.taskID, End: e.end, Reason: e.reason}
	}
	return nil, &LostError{LeaseID: id, End: EndUnknown, Reason: "no such lease: it was never issued, or ended long ago"}
}

// Lookup returns the live lease named id, for a caller to check what it may
// do with it. It never waits, so ctx only completes the signature the
// cluster's forwarding view shares.
func (m *Manager) Lookup(_ context.Context, id string) (Lease, error) {
	h, err := m.take(id)
	if err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	fin, err := m.liveLocked(h)
	l := h.Lease
	m.mu.Unlock()
	if fin != nil {
		h.run.Finish(*fin)
	}
	return l, err
}

// Renew extends the lease named id to leaseFor from now (no later than the
// task's deadline) and returns it.
func (m *Manager) Renew(_ context.Context, id string, leaseFor time.Duration) (Lease, error) {
	if leaseFor < MinLeaseFor || leaseFor > MaxLeaseFor {
		return Lease{}, invalid("leaseForMs", "must be within %d..%d, got %d", MinLeaseFor.Milliseconds(), MaxLeaseFor.Milliseconds(), leaseFor.Milliseconds())
	}
	h, err := m.take(id)
	if err != nil {
		return Lease{}, err
	}
	m.mu.Lock()
	fin, err := m.liveLocked(h)
	if err == nil {
		var until time.Time
		if until, err = h.run.Extend(m.clk.Now().Add(leaseFor)); err != nil {
			// It ran out a moment ago: runEnded is on its way.
			err = &LostError{LeaseID: h.ID, TaskID: h.TaskID, End: EndExpired, Reason: "the lease expired before it was renewed"}
		} else {
			h.ExpiresAt = until
		}
	}
	l := h.Lease
	m.mu.Unlock()
	if fin != nil {
		h.run.Finish(*fin)
	}
	if err != nil {
		return Lease{}, err
	}
	return l, nil
}

// lostLocked answers for a lease that ended between take and the lock.
func (m *Manager) lostLocked(h *lease) error {
	if e, ok := m.ended[h.ID]; ok {
		return &LostError{LeaseID: h.ID, TaskID: h.TaskID, End: e.end, Reason: e.reason}
	}
	return &LostError{LeaseID: h.ID, TaskID: h.TaskID, End: EndUnknown, Reason: "the lease ended"}
}

// Complete ends the lease named id with the task's result: the task
// succeeds. It returns once that is committed. Resent for a lease whose
// attempt is recorded as completed, it answers the same way when the
// result is the same (SameResult) and with CONFLICT otherwise (resent).
func (m *Manager) Complete(ctx context.Context, id string, result json.RawMessage) (string, error) {
	return m.end(ctx, id, EndCompleted, "completed", engine.Outcome{Result: result})
}

// Fail ends the lease named id with an error: a retryable one goes to the
// lane's retry policy, any other fails the task at once, without asking the
// policy. code, when not
// empty, is the failure's machine-readable code (ValidCode): the retry
// policy sees it as the attempt's error code (policy.Details.ErrorCode).
// Resent for a lease whose attempt is recorded as failed by its worker, it
// answers the same way when msg, code and retryable are the same, and with
// CONFLICT otherwise (resent).
func (m *Manager) Fail(ctx context.Context, id, msg, code string, retryable bool) (string, error) {
	switch {
	case strings.TrimSpace(msg) == "":
		return "", invalid("error", "say what went wrong")
	case len(msg) > MaxErrorLen:
		return "", invalid("error", "at most %d bytes, got %d", MaxErrorLen, len(msg))
	}
	if err := ValidCode(code); err != nil {
		return "", invalid("code", "%v", err)
	}
	err := engine.Permanent(errors.New(msg))
	if retryable {
		err = engine.Transient(errors.New(msg))
	}
	return m.end(ctx, id, EndFailed, "failed: "+msg, engine.Outcome{Err: err, Code: code, Final: !retryable})
}

// ValidCode checks a worker's error code: empty (none), or 1 to MaxCodeLen
// bytes of ASCII letters, digits and "_.-:" ("upstream_503",
// "rate_limited"), so that a retry policy can match it byte for byte.
func ValidCode(code string) error {
	if len(code) > MaxCodeLen {
		return fmt.Errorf("at most %d bytes, got %d", MaxCodeLen, len(code))
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.-:", c) >= 0) {
			return fmt.Errorf("only letters, digits and _ . - : (byte %d is %q)", i, c)
		}
	}
	return nil
}

// Release hands the task of the lease named id back: it queues again
// without spending an attempt.
func (m *Manager) Release(ctx context.Context, id, reason string) (string, error) {
	if len(reason) > MaxReasonLen {
		return "", invalid("reason", "at most %d bytes, got %d", MaxReasonLen, len(reason))
	}
	if reason == "" {
		reason = "handed back by its worker"
	}
	return m.end(ctx, id, EndReleased, "released: "+reason, engine.Outcome{Release: true, Err: errors.New(reason)})
}

func (m *Manager) end(ctx context.Context, id string, end End, reason string, o engine.Outcome) (string, error) {
	h, err := m.take(id)
	if err != nil {
		return m.resent(ctx, id, end, o, err)
	}
	m.mu.Lock()
	fin, err := m.liveLocked(h)
	if err == nil {
		m.endLocked(h, end, reason)
	}
	m.mu.Unlock()
	if fin != nil {
		h.run.Finish(*fin)
	}
	if err != nil {
		return m.resent(ctx, id, end, o, err)
	}
	o.ByWorker = true // the attempt records its worker as its ender: a resend reads that
	h.run.Finish(o)
	// Answer once the outcome is durable, as a submission is.
	if err := m.eng.Sync(ctx); err != nil {
		return h.TaskID, err
	}
	return h.TaskID, nil
}

// Of returns the live lease of a task, if it has one (its ID left empty:
// only its worker holds that).
func (m *Manager) Of(taskID string) (Lease, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.leases[taskID]
	if h == nil {
		return Lease{}, false
	}
	l := h.Lease
	l.ID = ""
	return l, true
}

func invalid(field, format string, args ...any) *engine.Error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}
