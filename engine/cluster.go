package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
)

// Hooks for running several engines over one shared store, one of them the
// leader. The leader is an ordinary started engine whose store fences its
// commits: once another node has taken over, the store refuses them with an
// error wrapping ErrFenced, and the engine stops at once rather than act on a
// state it no longer owns. Followers run a standby engine: it does no
// scheduling, answers reads from the store, and carries the leader's
// committed events (Replicate) to its own subscribers. Submissions that a
// follower accepts reach the leader through the store, as commands, and are
// admitted with Ingest.

// StartStandby starts the engine as a follower: it loads lanes, settings and
// the last event seq from the store, but neither tasks nor dispatch. Use
// Replicate to carry the leader's events to subscribers.
func (e *Engine) StartStandby(ctx context.Context) error {
	snap, err := e.store.Load(ctx)
	if err != nil {
		return fmt.Errorf("engine: load store: %w", err)
	}
	e.view(func(*core) { err = e.standbyLocked(ctx, snap) })
	return err
}

// standbyLocked is StartStandby once the store is loaded.
func (e *Engine) standbyLocked(ctx context.Context, snap *Snapshot) error {
	if e.running || e.standby {
		return errors.New("engine: already started")
	}
	e.standby = true
	if err := e.adoptSnapshotLocked(ctx, snap); err != nil {
		return err
	}
	return e.restoreLanesLocked(snap.Lanes, false)
}

// adoptSnapshotLocked takes up snap's last seq, its event log and its
// settings: what an engine starting on a store (recoverLocked) and a standby
// one (standbyLocked) both do first.
func (e *Engine) adoptSnapshotLocked(ctx context.Context, snap *Snapshot) error {
	e.seq = snap.LastSeq
	if err := e.adoptEventLogLocked(ctx, snap.LastSeq); err != nil {
		return err
	}
	e.committed.Store(snap.LastSeq)
	e.restoreSettingsLocked(snap.Settings)
	return nil
}

// NewEventLog returns an empty event log holding up to size events (rounded
// up to a power of two), for Options.Events. The first engine given it
// starts it after the store's last seq, whatever that is; from then on it
// continues without gaps, through every engine given it after: each catches
// it up from the store, even when it still holds no event (a node that saw
// the store empty and followed nothing yet gets every event from the first)
// — unless the store has purged events it lacks: then it restarts after the
// store's last seq (adoptEventLogLocked).
func NewEventLog(size int) *EventLog { return newEventLog(size, 1) }

// adoptEventLogLocked makes e's log continue after lastSeq: a new log, or the
// one given in Options (caught up from the store if it lags behind).
//
// A log can only be caught up while the store still holds every event it
// lacks. Retention deletes ended tasks' events, so a log that lagged for
// longer (a node cut off from the database, or that stopped following) may
// lack events the store no longer has: the stored seqs it needs have gaps,
// at a page's start or inside it. Those events are gone for every node, and
// a log cannot hold a gap, so such a log restarts after lastSeq, the store's
// present position, empty. Its readers learn from it what they missed
// (EventLog.Read), and a subscriber replays what the store still holds and
// is told of what was purged, as one that resumes from further back than
// retention is (graph/eventstream).
func (e *Engine) adoptEventLogLocked(ctx context.Context, lastSeq uint64) error {
	if e.events == nil {
		e.events = newEventLog(e.cfg.EventBuffer, lastSeq+1)
		e.events.placed = true
		return nil
	}
	l := e.events
	l.mu.Lock()
	if !l.placed { // the first engine given the log: start after the store's last seq
		l.next, l.first, l.placed = lastSeq+1, lastSeq+1, true
	}
	next := l.next
	l.mu.Unlock()
	for next <= lastSeq {
		evs, err := e.store.Events(ctx, next-1, 4096)
		if err != nil {
			return fmt.Errorf("engine: catch the event log up: %w", err)
		}
		// Under a leader the store goes on past the snapshot: stop at it,
		// the caller follows from there.
		for len(evs) > 0 && evs[len(evs)-1].Seq > lastSeq {
			evs = evs[:len(evs)-1]
		}
		run := 0 // the events that continue the log without a gap
		for run < len(evs) && evs[run].Seq == next+uint64(run) {
			run++
		}
		if run == len(evs) && len(evs) > 0 {
			l.append(evs)
			next += uint64(run)
			continue
		}
		// The store lacks seq next+run (purged): events up to lastSeq are
		// committed, so a seq missing from them was deleted.
		missing := next + uint64(run)
		e.log.Warn("the event log lags behind events the store has purged; it restarts at the store's last seq",
			"log_last", next-1, "missing", missing, "store_last", lastSeq)
		l.restart(lastSeq + 1)
		next = lastSeq + 1
	}
	if next != lastSeq+1 {
		return fmt.Errorf("engine: the event log is at %d, ahead of the store's last seq %d", next-1, lastSeq)
	}
	return nil
}

// Standby reports whether the engine runs as a follower.
func (e *Engine) Standby() bool {
	var standby bool
	e.view(func(*core) { standby = e.standby })
	return standby
}

// Replicate appends events the leader committed to a standby engine's log, in
// seq order and without gaps after the last one it holds. Events it already
// holds are skipped.
func (e *Engine) Replicate(evs []Event) error {
	var err error
	e.view(func(*core) { err = e.replicateLocked(evs) })
	return err
}

// replicateLocked is Replicate under the lock.
func (e *Engine) replicateLocked(evs []Event) error {
	if !e.standby {
		return errors.New("engine: only a standby engine replicates")
	}
	last := e.events.Last()
	for len(evs) > 0 && evs[0].Seq <= last {
		evs = evs[1:]
	}
	if len(evs) == 0 {
		return nil
	}
	if evs[0].Seq != last+1 {
		return fmt.Errorf("engine: replicated events start at seq %d, after %d", evs[0].Seq, last)
	}
	e.seq = evs[len(evs)-1].Seq
	e.committed.Store(e.seq)
	e.events.append(evs)
	return nil
}

// Abandon stops a leader that has lost its lease: no more dispatch, no more
// commits; attempts under way are cancelled ("leadership lost") without their
// outcome being recorded — the next leader reclaims them. The engine is
// unusable afterwards; start a standby one.
func (e *Engine) Abandon(reason string) {
	var runs []*Run
	_, err := e.apply(false, func(c *core) error {
		if c.closed {
			return errUnchanged
		}
		c.closed = true
		e.abandoned.Store(true)
		if e.armed != nil {
			e.armed.Stop()
			e.armed = nil
		}
		if e.housekeeper != nil {
			e.housekeeper.Stop()
		}
		for _, t := range c.tasks {
			if t.run != nil {
				runs = append(runs, t.run)
			}
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].task.seq < runs[j].task.seq })
		return nil
	})
	if err != nil {
		return
	}
	e.log.Warn("abandoning the engine: this node is no longer the leader", "reason", reason, "attempts", len(runs))
	for _, r := range runs {
		r.cancel(context.Canceled, &CancelledError{Reason: reason})
	}
	e.stop()
	e.wg.Wait()
}

// Fenced reports whether the store refused a commit because another node
// leads now.
func (e *Engine) Fenced() bool { return e.fenced.Load() }
