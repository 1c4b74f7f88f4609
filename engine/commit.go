package engine

import (
	"context"
	"errors"
	"time"
)

// The commit pipeline. Changes made under the engine lock accumulate in a
// pending batch; the committer swaps it out, snapshots the changed tasks,
// writes everything through the store in one transaction and only then
// publishes the events to subscribers. Submitters wait for the batch that
// holds their task when the store is durable ("accepted means durable"), and
// because many submissions share a batch, durability costs one transaction
// per batch rather than per task (group commit).

// commitNow writes what is pending, retrying until the store accepts it or
// the engine is shut down.
func (e *Engine) commitNow() {
	e.commitMu.Lock()
	defer e.commitMu.Unlock()
	for {
		e.mu.Lock()
		b := e.cur
		if b.empty() {
			e.mu.Unlock()
			return
		}
		e.cur = &pendingBatch{done: make(chan struct{}), events: e.spare.events, tasks: e.spare.tasks}
		out := &Batch{Events: b.events, Batches: b.batches, Lanes: b.lanes, Settings: b.settings, Tasks: e.spare.snaps[:0]}
		if n := min(len(b.tasks), maxSpareSnaps); n > len(e.spare.snapVals) {
			e.spare.snapVals = make([]Task, min(n+n/4, maxSpareSnaps))
		}
		var ended []*task
		for i, t := range b.tasks {
			t.dirty = false
			if i < len(e.spare.snapVals) {
				snap := &e.spare.snapVals[i]
				t.snapshotTo(snap)
				out.Tasks = append(out.Tasks, snap)
			} else {
				out.Tasks = append(out.Tasks, t.snapshot())
			}
			if t.state.Terminal() {
				ended = append(ended, t)
			}
		}
		out.Tasks = append(out.Tasks, b.snaps...)
		e.mu.Unlock()

		for attempt := 0; ; attempt++ {
			if e.abandoned.Load() {
				e.failBatch(b, ErrFenced)
				return
			}
			err := e.store.Commit(context.Background(), out)
			if err == nil {
				break
			}
			if errors.Is(err, ErrFenced) {
				// Another node leads: nothing this engine decides may be
				// written any more. Stop, and let the caller know.
				e.fenced.Store(true)
				e.log.Error("the store fenced this node off: another node leads; abandoning", "error", err)
				e.failBatch(b, err)
				go e.Abandon("leadership lost")
				return
			}
			e.stats.commitErrors.Add(1)
			e.log.Error("commit failed; retrying", "error", err, "events", len(out.Events), "tasks", len(out.Tasks), "attempt", attempt+1)
			if e.baseCtx.Err() != nil && attempt >= 3 {
				e.failBatch(b, err)
				return
			}
			time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, 2*time.Second))
		}
		if n := len(out.Events); n > 0 {
			e.committed.Store(out.Events[n-1].Seq)
			e.events.append(out.Events)
		}
		close(b.done)
		if len(b.runs) > 0 && e.baseCtx.Err() == nil && !e.abandoned.Load() {
			// The attempts are on disk: they may start.
			select {
			case e.startCh <- b.runs:
			case <-e.baseCtx.Done(): // recovery counts them as interrupted
			}
		}
		// Neither the store nor the log keeps the batch's slices: reuse them.
		clear(out.Events)
		clear(b.tasks)
		clear(out.Tasks)
		clear(e.spare.snapVals[:min(len(b.tasks), len(e.spare.snapVals))])
		e.spare.events, e.spare.tasks, e.spare.snaps = out.Events[:0], b.tasks[:0], out.Tasks[:0]

		if len(ended) > 0 {
			e.mu.Lock()
			for _, t := range ended {
				e.forgetLocked(t)
			}
			e.mu.Unlock()
		}
	}
}

// failBatch ends a batch the store did not take: its waiters learn err and
// its attempts never start. The spare slices are dropped, not reused: the
// pending batch took them when this one was swapped out, and the next swap
// must not hand them out again.
func (e *Engine) failBatch(b *pendingBatch, err error) {
	b.err = err
	close(b.done)
	e.spare.events, e.spare.tasks = nil, nil
}

// spareBuffers are the slices of the last committed batch, handed to the next
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
// for it from now on.
func (e *Engine) forgetLocked(t *task) {
	if t.dirty || t.holding || !t.state.Terminal() || e.tasks[t.id] != t {
		return
	}
	delete(e.tasks, t.id)
	if k := t.spec.IdempotencyKey; k != "" {
		if ik := t.spec.AgentID + "\x00" + k; e.idem[ik] == t {
			delete(e.idem, ik)
		}
	}
	e.counts[t.state]--
	t.agent.live--
	if s := t.session; s != nil {
		s.live--
		if s.live == 0 && len(s.lim.waiters) == 0 && s.lim.inflight == 0 {
			delete(e.sessions, s.key)
		}
	}
	if b := t.batch; b != nil {
		b.live--
		if b.live == 0 {
			delete(e.batches, b.id)
		}
	}
	if t.out != nil {
		t.out.dependents = nil
	}
}

// Sync waits until everything changed before the call is committed (and so
// visible to store queries and subscribers).
func (e *Engine) Sync(ctx context.Context) error {
	e.mu.Lock()
	done := e.cur.done
	empty := e.cur.empty()
	e.mu.Unlock()
	if empty {
		// A batch may still be in the store's hands: wait for the committer.
		e.commitMu.Lock()
		//lint:ignore SA2001 an empty critical section waits for the commit in progress
		e.commitMu.Unlock()
		return nil
	}
	if e.sync {
		e.commitNow()
	} else {
		select {
		case e.commitCh <- struct{}{}:
		default:
		}
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *pendingBatch) empty() bool {
	return len(b.events) == 0 && len(b.tasks) == 0 && len(b.snaps) == 0 && len(b.batches) == 0 && len(b.lanes) == 0 &&
		len(b.settings) == 0
}
