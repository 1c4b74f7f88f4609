package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Recovery: rebuilding the engine's working state from a store at start.
// Queued and waiting tasks return to their queues as they were; tasks that
// were in flight when the previous process stopped count one interrupted
// attempt and follow their retry policy (a worker's lease resumes, unless
// its task's deadline has come); backoffs and deadlines resume on the
// clock, and a deadline that passed during the downtime ends its task at
// once.

// restoreLanesLocked applies the lanes the store keeps over the configured
// ones: a stored lane replaces the configured one of its name, a lane
// removed at run time stays removed even when the configuration names it
// again. A stored maximum depth past MaxSpawnDepth (set before it was
// bounded) is lowered to it. A stored lane that is not valid fails the
// restore when strict, and is skipped otherwise (a standby, which only
// mirrors the leader).
func (e *Engine) restoreLanesLocked(lanes []LaneConfig, strict bool) error {
	for _, lc := range lanes {
		if lc.MaxDepth > MaxSpawnDepth {
			e.log.Warn("stored lane's maxDepth lowered to the largest allowed", "lane", lc.Name, "maxDepth", lc.MaxDepth, "now", MaxSpawnDepth)
			lc.MaxDepth = MaxSpawnDepth
		}
		if err := lc.validate(); err != nil {
			if strict {
				return fmt.Errorf("engine: stored lane %q: %w", lc.Name, err)
			}
			continue
		}
		l := e.laneByName[lc.Name]
		switch {
		case lc.Removed && l != nil: // removed at run time, configured again at start: stays removed
			l.cfg = lc
			delete(e.laneByName, lc.Name)
		case lc.Removed:
		case l != nil:
			l.cfg = lc
		default:
			e.addLane(lc)
		}
	}
	return nil
}

// recoverLocked rebuilds the tasks of snap, which Open adopted (its seq,
// settings and lanes), and decides what a stop left undecided.
func (e *Engine) recoverLocked(ctx context.Context, snap *Snapshot) error {
	for _, bi := range snap.Batches {
		// A batch whose end was recorded stays ended: one of its tasks may
		// still be PARKED (settled, not terminal), and its end, or a reset
		// and end, must not announce the batch's end a second time.
		b := &batch{id: bi.ID, parallelism: bi.Parallelism, createdAt: bi.CreatedAt, webhook: bi.WebhookURL, sealed: true,
			ended: !bi.EndedAt.IsZero()}
		b.lim.limit = bi.Parallelism
		e.batches[b.id] = b
	}
	now := e.now()
	tasks := slices.Clone(snap.Tasks)
	slices.SortFunc(tasks, func(a, b *Task) int { return cmp.Compare(a.Seq, b.Seq) })
	var live []*task
	for _, st := range tasks {
		if st.State.Terminal() {
			continue
		}
		t := e.restoreTaskLocked(st) // its lane exists: Open recreated a lane no longer configured
		live = append(live, t)
	}
	// Dependencies: count what is still unmet; a dependency that ended badly
	// while we were down cancels its dependents now.
	for _, t := range live {
		if t.state != StateWaiting {
			continue
		}
		t.unmet = 0
		failed := ""
		for _, d := range t.spec.DependsOn {
			if dt := e.tasks[d]; dt != nil && !dt.state.Settled() {
				t.unmet++
				o := dt.outcomeOf()
				o.dependents = append(o.dependents, t)
				continue
			}
			st, err := e.store.Task(ctx, d)
			switch {
			case err != nil:
				failed = "dependency " + d + " is gone"
			case st.State != StateSucceeded:
				failed = "dependency " + d + " " + lower(st.State.String())
			}
		}
		if failed != "" {
			e.cancelLocked(t, failed)
		} else if t.unmet == 0 {
			e.setState(t, StateQueued, "dependencies met")
		}
	}
	// Attempts that were under way died with the previous process (or
	// leader). When is not known: they end at the last moment the store
	// heard from it (at least), not now.
	why := e.interruption
	if why == "" {
		why = interruptedStopped
	}
	heard := time.Time{}
	for _, t := range live {
		if !t.state.InFlight() || e.resumePullLocked(t, now) {
			continue
		}
		if heard.IsZero() {
			heard = e.lastHeardLocked(ctx, snap, now)
		}
		if att := t.lastAttempt(); att != nil && att.EndedAt.IsZero() {
			end := heard
			for _, at := range []time.Time{time.Unix(0, t.updatedAt), att.AssignedAt, att.StartedAt} {
				if at.After(end) {
					end = at
				}
			}
			if end.After(now) {
				end = now
			}
			att.EndedAt = end
			att.EndedBy = EndedByEngine
			att.Class = classTransient
			att.Error = why
			att.Code = CodeRestart
		}
		// Reclassify as QUEUED-equivalent first: the task holds no slot.
		e.failAttemptLocked(t, classTransient, 0, CodeRestart, why, now, nil)
	}
	for _, t := range live {
		if t.state == StateRetryWait && t.timerAt[timerRetry] <= now.UnixNano() {
			if d := t.timerAt[timerDeadline]; d != 0 && d < t.timerAt[timerRetry] {
				continue // its deadline came first: it fails backing off (deadlinesDueLocked), as its timer would have failed it
			}
			e.setState(t, StateQueued, "backoff elapsed during downtime")
		}
	}
	// Deadlines that passed while the engine was down end the tasks that
	// still wait now, in the order their timers would have run, before a
	// round of dispatch or a pull can pick one of them.
	e.deadlinesDueLocked(now)
	for _, b := range e.batches {
		if b.live == 0 {
			delete(e.batches, b.id)
		}
	}
	e.log.Info("recovered", "tasks", len(live), "lastSeq", snap.LastSeq)
	return nil
}

// interruptedStopped is the error of an attempt that was under way when
// the server that ran it stopped.
const interruptedStopped = "interrupted: the server stopped while it ran"

// lastHeardLocked is the last moment the store heard from the engine that
// wrote snap: its last event's time (zero if unknown, or later than now).
func (e *Engine) lastHeardLocked(ctx context.Context, snap *Snapshot, now time.Time) time.Time {
	if snap.LastSeq == 0 {
		return time.Time{}
	}
	evs, err := e.store.Events(ctx, snap.LastSeq-1, 1)
	if err != nil || len(evs) == 0 || evs[0].At.After(now) {
		if err != nil {
			e.log.Warn("reading the last event before recovery", "error", err)
		}
		return time.Time{}
	}
	return evs[0].At
}

// restoreTaskLocked rebuilds a task from its snapshot without recording
// anything: its state is what the store says.
func (e *Engine) restoreTaskLocked(st *Task) *task {
	t := &task{
		id: st.ID, spec: st.Spec, seq: st.Seq, rank: st.Rank, depth: uint16(st.Depth),
		reason: st.Reason, attempts: slices.Clone(st.Attempts),
		createdAt: unixNano(st.CreatedAt), updatedAt: unixNano(st.UpdatedAt), timerAt: [timerKinds]int64{timerRetry: unixNano(st.NextRunAt)},
		lastSeq: st.LastSeq, front: st.Spec.QueueMode.Interrupts(),
		lane: e.laneByName[st.Spec.Lane], heapIdx: -1, timerIdx: noTimers,
	}
	if st.Result != nil || st.Error != "" || st.RetryOf != "" || st.ResetAt != 0 || len(st.Webhooks) > 0 {
		t.out = &outcome{result: st.Result, errMsg: st.Error, class: st.Class, retryOf: st.RetryOf, resetAt: int32(st.ResetAt),
			webhooks: slices.Clone(st.Webhooks)}
	}
	t.agent = e.agentLocked(st.Spec.AgentID)
	t.agent.live++
	if key := st.Spec.SessionScope(); key != "" {
		t.session = e.sessionLocked(key)
		t.session.live++
		e.sessionLimitLocked(t.session, st.Spec.SessionMaxInFlight)
	}
	if b := e.batches[st.Spec.BatchID]; b != nil {
		t.batch = b
		b.live++
		b.total++
		if !st.State.Settled() {
			b.open++
		} else {
			t.batchOut = true // a parked task settled before the restart
		}
	}
	if k := st.Spec.IdempotencyKey; k != "" {
		e.idem[st.Spec.AgentID+"\x00"+k] = t
	}
	e.tasks[t.id] = t
	state := st.State
	if state.InFlight() {
		// It holds nothing now; failAttemptLocked moves it on. Account it as
		// in flight without slots so that the move is a legal transition.
		t.state = state
		e.counts[state]++
		return t
	}
	// Enter the state quietly: the store already has its event.
	t.state = state
	e.counts[state]++
	if pending(state) {
		e.queued++
		t.lane.queued++
		t.agent.queued++
		if t.session != nil {
			t.session.queued++
		}
	}
	qa := st.QueuedAt // keeps the age of a queued task across the restart
	if qa.IsZero() {
		qa = st.CreatedAt
	}
	if state == StateParked {
		// It settled before the restart: only its deadline still runs.
		if !t.spec.Deadline.IsZero() {
			e.timers[timerDeadline].set(t, t.spec.Deadline.UnixNano())
		}
		return t
	}
	e.enterLocked(t, state, qa)
	return t
}
