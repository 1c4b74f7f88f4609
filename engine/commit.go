package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The commit pipeline. Changes made under the engine lock accumulate in a
// pending batch; the committer swaps it out, snapshots the changed tasks,
// writes everything through the store in one transaction and only then
// publishes the events to subscribers. Submitters wait for the batch that
// holds their task when the store is durable ("accepted means durable"), and
// because many submissions share a batch, durability costs one transaction
// per batch rather than per task (group commit).

// commitNow writes what is pending, retrying until the store accepts it or
// the engine is shut down, and returns once it is committed (or failed).
//
// With a store that pipelines commits (PipelinedStore, asynchronous
// engines), the next batch is swapped out and handed to the store while the
// previous one is still being committed: its rows are built and sent while
// the previous transaction runs and syncs, and it commits right after it.
// At most two batches are in the store's hands; they are published,
// answered and their attempts started in seq order, by this goroutine. The
// next batch goes early only once it has grown as large as the one in
// flight: sending whatever is pending at once would only split the stream
// into more, smaller transactions (on a busy machine, measurably slower).
// It reports whether there was anything to write.
func (e *Engine) commitNow() (wrote bool) {
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	var prev *inflight
	for {
		if prev != nil {
			e.commitHealth.inProgress() // prev is still in the store's hands
		}
		if prev != nil && !e.grewTo(prev) {
			// Sent now, the pending batch would split the group commit
			// into smaller ones, each paying a transaction: it waits for
			// the one in flight instead.
			e.finishCommit(prev)
			prev = nil
		}
		cur := e.swapPending()
		if cur != nil && e.pipe != nil && !e.abandoned.Load() {
			e.commitHealth.inProgress()
			cur.done, cur.wait = e.pipe.CommitAsync(context.Background(), cur.out)
		}
		if prev != nil {
			e.finishCommit(prev)
		}
		if cur == nil {
			return wrote
		}
		wrote = true
		if cur.wait == nil {
			e.finishCommit(cur)
			cur = nil
		}
		prev = cur
	}
}

// inflight is a batch swapped out of the pending one: in the store's hands,
// or about to be.
type inflight struct {
	b     *pendingBatch
	out   *Batch
	spare *spareBuffers   // the buffers out's snapshots live in, recycled once committed
	ended []*task         // tasks the batch ends: forgotten once it is committed
	done  <-chan struct{} // closed once the store knows the outcome (CommitAsync)
	wait  func() error    // the outcome of PipelinedStore.CommitAsync; nil: not started yet
}

// grewTo waits, while prev is in flight, for the pending batch to grow as
// large (tasks and events) as prev, and reports whether it did before prev
// was done.
func (e *Engine) grewTo(prev *inflight) bool {
	size := len(prev.out.Tasks) + len(prev.out.Events)
	for {
		var n int
		e.view(func(c *core) { n = len(c.cur.tasks) + len(c.cur.events) })
		if n >= size {
			return true
		}
		select {
		case <-prev.done:
			return false
		case <-e.commitCh: // a change was recorded: look again
		case <-e.lazyCh:
		}
	}
}

// swapPending swaps the pending batch out and snapshots its tasks, or
// returns nil when nothing is pending (under commitMu).
func (e *Engine) swapPending() *inflight {
	var in *inflight
	e.view(func(*core) { in = e.swapPendingLocked() })
	return in
}

// swapPendingLocked is swapPending under the lock.
func (e *Engine) swapPendingLocked() *inflight {
	b := e.pending
	if b.empty() {
		return nil
	}
	// Two sets of buffers alternate: a batch's are reused by the batch after
	// next, which is swapped out only once this one is committed.
	sp := &e.spares[e.spareNext]
	e.spareNext ^= 1
	e.setPending(&pendingBatch{done: make(chan struct{}), changes: changes{events: sp.events, tasks: sp.tasks}})
	sp.events, sp.tasks = nil, nil
	out := &Batch{Events: b.events, Batches: b.batches, Lanes: b.lanes, Settings: b.settings, Tasks: sp.snaps[:0]}
	if n := min(len(b.tasks), maxSpareSnaps); n > len(sp.snapVals) {
		sp.snapVals = make([]Task, min(n+n/4, maxSpareSnaps))
	}
	in := &inflight{b: b, out: out, spare: sp}
	for i, t := range b.tasks {
		t.dirty, t.forgetLater = false, false
		if i < len(sp.snapVals) {
			snap := &sp.snapVals[i]
			t.snapshotTo(snap)
			out.Tasks = append(out.Tasks, snap)
		} else {
			out.Tasks = append(out.Tasks, t.snapshot())
		}
		if t.state.Terminal() {
			in.ended = append(in.ended, t)
		}
	}
	out.Tasks = append(out.Tasks, b.snaps...)
	if prev := e.committing; prev != nil && prev.quiet {
		// The batch ahead is still in the store's hands: a reader that
		// waits for this one waits for it too (Engine.CommittedTask).
		b.quiet = true
	}
	e.committing = b
	return in
}

// finishCommit waits for the outcome of a batch started asynchronously (or
// commits it now), retries it until the store takes it, then publishes its
// events, answers its waiters and hands its attempts to the starter (under
// commitMu, in seq order).
func (e *Engine) finishCommit(in *inflight) {
	b, out := in.b, in.out
	for attempt := 0; ; attempt++ {
		if e.abandoned.Load() {
			if attempt == 0 && in.wait != nil {
				// The store still expects its outcome to be taken (the
				// PipelinedStore contract); the store may be used again by
				// a later engine. Not waited for here: an abandoned engine
				// stops at once.
				go func() { _ = in.wait() }()
			}
			e.failBatch(b, ErrFenced)
			return
		}
		var err error
		if attempt == 0 && in.wait != nil {
			e.commitHealth.inProgress()
			err = in.wait()
		} else {
			e.commitHealth.attempting()
			err = e.store.Commit(context.Background(), out)
		}
		if err == nil {
			e.commitHealth.succeeded(e.log)
			break
		}
		if errors.Is(err, ErrFenced) {
			// Another node leads: nothing this engine decides may be
			// written any more. Stop, and let the caller know.
			e.fenced.Store(true)
			e.commitHealth.failed(err)
			e.log.Error("the store fenced this node off: another node leads; abandoning", "error", err)
			e.failBatch(b, err)
			go e.Abandon("leadership lost")
			return
		}
		e.stats.commitErrors.Add(1)
		e.commitHealth.failed(err)
		e.log.Error("commit failed; retrying", "error", err, "events", len(out.Events), "tasks", len(out.Tasks), "attempt", attempt+1)
		if e.baseCtx.Err() != nil && attempt >= 3 {
			e.failBatch(b, err)
			return
		}
		if attempt > 0 || in.wait == nil {
			time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, 2*time.Second))
		}
		// else: a pipelined batch fails when the one before it failed;
		// that one has just been retried, so retry this one at once.
	}
	if n := len(out.Events); n > 0 {
		e.committed.Store(out.Events[n-1].Seq)
		e.events.append(out.Events)
	}
	close(b.done)
	e.doneCommitting(b)
	if len(b.runs) > 0 && e.baseCtx.Err() == nil && !e.abandoned.Load() {
		// The attempts are on disk: they may start.
		select {
		case e.startCh <- b.runs:
		case <-e.baseCtx.Done(): // recovery counts them as interrupted
		}
	}
	// Neither the store nor the log keeps the batch's slices: reuse them.
	sp := in.spare
	clear(out.Events)
	clear(b.tasks)
	clear(out.Tasks)
	clear(sp.snapVals[:min(len(b.tasks), len(sp.snapVals))])
	sp.events, sp.tasks, sp.snaps = out.Events[:0], b.tasks[:0], out.Tasks[:0]

	if len(in.ended) > 0 {
		e.view(func(c *core) {
			for _, t := range in.ended {
				c.forgetLocked(t)
			}
		})
	}
}

// failBatch ends a batch the store did not take: its waiters learn err and
// its attempts never start. Its buffers are not reused.
func (e *Engine) failBatch(b *pendingBatch, err error) {
	b.err = err
	close(b.done)
	e.doneCommitting(b)
}

// doneCommitting notes that the store is done with b.
func (e *Engine) doneCommitting(b *pendingBatch) {
	e.view(func(*core) {
		if e.committing == b {
			e.committing = nil
		}
	})
}

// spareBuffers are the slices of a committed batch, handed to a later
// pending batch so that steady traffic allocates no new ones (guarded by
// commitMu).
type spareBuffers struct {
	events   []Event
	tasks    []*task
	snaps    []*Task
	snapVals []Task // the committed snapshots themselves: stores keep none of them (Store.Commit)
}

// maxSpareSnaps bounds the snapshots kept for reuse: a huge batch (a
// recovery, a big submission) allocates the rest rather than keeping them.
const maxSpareSnaps = 4096

// forgetLocked drops a committed terminal task from memory: the store answers
// for it from now on. A task that clients follow (Follow) stays until the
// last of them stops: each reads it once more as it learns of the end, and
// that read is then a copy under the lock, not a query of the store (on
// SQLite, about a tenth of a millisecond on the way to a follower).
func (c *core) forgetLocked(t *task) {
	if t.dirty || t.holding || !t.state.Terminal() || c.tasks[t.id] != t {
		return
	}
	if t.followers > 0 {
		t.forgetLater = true
		return
	}
	t.forgetLater = false
	delete(c.tasks, t.id)
	if k := t.spec.IdempotencyKey; k != "" {
		if ik := t.spec.AgentID + "\x00" + k; c.idem[ik] == t {
			delete(c.idem, ik)
		}
	}
	c.counts[t.state]--
	t.agent.live--
	if s := t.session; s != nil {
		s.live--
		if s.live == 0 && len(s.lim.waiters) == 0 && s.lim.inflight == 0 {
			delete(c.sessions, s.key)
		}
	}
	if b := t.batch; b != nil {
		b.live--
		if b.live == 0 {
			delete(c.batches, b.id)
		}
	}
	if t.out != nil {
		t.out.dependents = nil
	}
}

// Sync waits until everything changed before the call is committed (and so
// visible to store queries and subscribers).
// It waits Config.CommitTimeout at most: then, or when ctx ends first, it
// answers UNAVAILABLE.
func (e *Engine) Sync(ctx context.Context) error {
	var b *pendingBatch
	var pending bool
	e.view(func(*core) {
		b, pending = e.pending, !e.pending.empty()
		if !pending {
			// A batch may still be in the store's hands: wait for the committer.
			b = e.committing
		}
	})
	if b == nil {
		return nil
	}
	if pending && e.sync {
		e.commitNow()
	} else if pending {
		select {
		case e.commitCh <- struct{}{}:
		default:
		}
	}
	ended, err := e.waitCommitted(ctx, commitWait{latest: b})
	switch {
	case !ended:
		return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "recent changes were not confirmed committed"}
	case err != nil: // the store refused the batch (fenced, or shutting down)
		return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "recent changes were not committed"}
	}
	return nil
}

// waitCommitted waits until the batches of w are committed or failed
// (ended; err is then the first batch's error, nil once all are committed),
// ctx ends, or Config.CommitTimeout passes (err says why it gave up: ctx's
// error, or the timeout with the store's latest failure). w must hold a
// batch (commitWait.none is false).
func (e *Engine) waitCommitted(ctx context.Context, w commitWait) (ended bool, err error) {
	b := w.latest // batches end in seq order: the latest ends last
	select {
	case <-b.done:
		return true, w.err()
	default:
	}
	t := time.NewTimer(e.cfg.CommitTimeout)
	defer t.Stop()
	select {
	case <-b.done:
		return true, w.err()
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		if err := e.commitHealth.lastError(); err != nil {
			return false, fmt.Errorf("not committed within %s (engine.commitTimeout): the store is failing: %w", e.cfg.CommitTimeout, err)
		}
		return false, fmt.Errorf("not committed within %s (engine.commitTimeout)", e.cfg.CommitTimeout)
	}
}

// commitHealth tracks the store's commits, for readiness, metrics and the
// log: a run of failed attempts, and how long the current attempt has taken
// (a store that hangs is as unavailable as one that fails). Every submission
// asks it whether to refuse (refuseWhileFailing), so the healthy answer is
// read from two atomics without the lock; the lock orders the committer's
// bookkeeping and the failure's details.
type commitHealth struct {
	started atomic.Int64 // Unix ns when the current attempt began; 0 between attempts
	since   atomic.Int64 // Unix ns of the first failure of the current run; 0 while commits succeed

	mu       sync.Mutex
	failures int // failed attempts in the current run
	last     error

	// observe, when set (tests, through export_test.go), is told the
	// outcome of every commit attempt once it is recorded: nil for one that
	// succeeded. Tests wait on it instead of polling.
	observe atomic.Pointer[func(error)]
}

func (h *commitHealth) notify(err error) {
	if f := h.observe.Load(); f != nil {
		(*f)(err)
	}
}

func (h *commitHealth) attempting() {
	h.started.Store(time.Now().UnixNano())
}

// inProgress marks a commit in progress, unless one already is (from when
// that one began): a pipelined commit that waits behind another counts from
// when the store took the first of them.
func (h *commitHealth) inProgress() {
	h.started.CompareAndSwap(0, time.Now().UnixNano())
}

func (h *commitHealth) failed(err error) {
	defer h.notify(err) // after the unlock
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.since.Load() == 0 {
		since := h.started.Load()
		if since == 0 {
			since = time.Now().UnixNano()
		}
		h.since.Store(since)
	}
	h.started.Store(0)
	h.failures++
	h.last = err
}

func (h *commitHealth) succeeded(log hclog.Logger) {
	defer h.notify(nil)
	h.started.Store(0)
	if h.since.Load() == 0 {
		return
	}
	h.mu.Lock()
	since, failures := h.since.Load(), h.failures
	h.since.Store(0)
	h.failures, h.last = 0, nil
	h.mu.Unlock()
	log.Info("commits succeed again", "failedAttempts", failures, "after", time.Since(time.Unix(0, since)).Round(time.Millisecond))
}

func (h *commitHealth) lastError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// failingFor returns how long commits have been failing and why, or nil
// while they succeed. An attempt that has lasted longer than stuck counts
// as failing too.
func (h *commitHealth) failingFor(stuck time.Duration) (time.Duration, error) {
	since, started := h.since.Load(), h.started.Load()
	if since == 0 && started == 0 {
		return 0, nil // the common case: no commit failing, none in progress
	}
	now := time.Now().UnixNano()
	if since == 0 {
		d := time.Duration(now - started)
		if d <= stuck {
			return 0, nil
		}
		return d, fmt.Errorf("a commit has been in progress for %s", d.Round(time.Millisecond))
	}
	h.mu.Lock()
	failures, last := h.failures, h.last
	h.mu.Unlock()
	d := time.Duration(now - since)
	return d, fmt.Errorf("commits have been failing for %s (%d attempts): %w", d.Round(time.Millisecond), failures, last)
}

// CommitError returns nil while the store accepts commits, and otherwise an
// error that says since when and why they fail (the engine keeps retrying):
// for readiness checks.
func (e *Engine) CommitError() error {
	_, err := e.commitHealth.failingFor(e.cfg.CommitTimeout)
	return err
}

// refuseWhileFailing refuses new work with UNAVAILABLE while commits have
// been failing for longer than the commit timeout: it could not be
// confirmed in time anyway, and it would only pile up in memory.
func (e *Engine) refuseWhileFailing() error {
	d, err := e.commitHealth.failingFor(e.cfg.CommitTimeout)
	if err == nil || d < e.cfg.CommitTimeout {
		return nil
	}
	return &Error{Code: CodeUnavailable, Retryable: true, Err: err, Message: "the store cannot commit; try again later"}
}
