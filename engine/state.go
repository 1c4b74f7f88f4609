package engine

import "time"

// State transitions. Every change of a task's state goes through setState,
// which keeps the queue structures, counters, timers and dependency links
// consistent with the state, and records the change as an event.

// transitions lists the allowed moves; anything else is a bug in the engine
// and panics in setState (the model test would catch it).
var transitions = map[State][]State{
	0:              {StateQueued, StateWaiting, StateRejected, StateCancelled},
	StateWaiting:   {StateQueued, StateCancelled, StateExpired},
	StateQueued:    {StateAssigned, StateCancelled, StateExpired},
	StateAssigned:  {StateRunning, StateSucceeded, StateFailed, StateRetryWait, StateParked, StateCancelled, StateQueued},
	StateRunning:   {StateSucceeded, StateFailed, StateRetryWait, StateParked, StateCancelled, StateQueued},
	StateRetryWait: {StateQueued, StateCancelled, StateFailed},
	StateParked:    {StateQueued, StateCancelled, StateFailed},
}

func allowed(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// setState moves t to `to`, recording reason, at the clock's time.
func (e *Engine) setState(t *task, to State, reason string) {
	e.setStateAt(t, to, reason, e.now())
}

// setStateAt is setState at a time the caller has read already: the hot
// paths read the clock once per operation, not once per transition.
func (e *Engine) setStateAt(t *task, to State, reason string, now time.Time) {
	from := t.state
	if !allowed(from, to) {
		panic("engine: illegal transition " + from.String() + " → " + to.String() + " for " + t.id)
	}
	e.leaveLocked(t, from)
	t.state = to
	t.reason = reason
	t.updatedAt = now.UnixNano()
	if from != 0 {
		e.counts[from]--
	}
	e.counts[to]++
	if pending(from) != pending(to) {
		d := 1
		if pending(from) {
			d = -1
		}
		e.queued += d
		t.lane.queued += d
		t.agent.queued += d
		if t.session != nil {
			t.session.queued += d
		}
	}
	e.enterLocked(t, to, now)
	e.emitTaskLocked(t, EventState, from, to, reason)
	if to.Settled() {
		e.settledLocked(t) // after its event: a batch's end follows its last task's
	}
}

// leaveLocked undoes what being in state `from` implies.
func (e *Engine) leaveLocked(t *task, from State) {
	switch from {
	case StateQueued:
		if t.sq != nil {
			e.unqueueLocked(t)
		}
		t.lane.fifo.remove(t, fifoLane)
		t.agent.fifo.remove(t, fifoAgent)
		if t.session != nil {
			t.session.fifo.remove(t, fifoSession)
		}
	case StateRetryWait:
		e.timers[timerRetry].remove(t)
	case StateWaiting:
		if t.timerIdx[timerRetry] >= 0 { // held by its lane's debounce
			e.releaseHeldLocked(t)
		}
	case StateParked:
		// Reset (or ended): its batch waits for it again, unless the batch
		// has ended meanwhile (its end was announced; it stays ended).
		if b := t.batch; b != nil && t.batchOut && !b.ended {
			b.open++
			t.batchOut = false
		}
	}
}

// enterLocked does what being in state `to` implies.
func (e *Engine) enterLocked(t *task, to State, now time.Time) {
	switch to {
	case StateQueued:
		t.queuedAt = now.UnixNano()
		t.lane.fifo.pushBack(t, fifoLane)
		t.agent.fifo.pushBack(t, fifoAgent)
		if t.session != nil {
			t.session.fifo.pushBack(t, fifoSession)
		}
		if !t.unranked { // else admission ranks it first (rankLocked)
			e.enqueueLocked(t)
		}
	case StateRetryWait:
		e.timers[timerRetry].set(t, t.timerAt[timerRetry])
	}
	// Deadline timers watch every state in which a task waits.
	waits := to == StateQueued || to == StateWaiting || to == StateRetryWait || to == StateParked
	if waits && !t.spec.Deadline.IsZero() {
		e.timers[timerDeadline].set(t, t.spec.Deadline.UnixNano())
	} else if !waits {
		e.timers[timerDeadline].remove(t)
	}
	if to.Terminal() {
		t.endedAt = now.UnixNano()
	}
}

// settledLocked is what reaching a terminal state or PARKED implies: the
// effect on its dependents is scheduled, and its batch counts it as ended.
func (e *Engine) settledLocked(t *task) {
	if t.out != nil && len(t.out.dependents) > 0 {
		e.cascade = append(e.cascade, t)
	}
	e.stats.ended[t.state]++
	if b := t.batch; b != nil && !t.batchOut {
		t.batchOut = true
		b.open--
		e.batchDoneLocked(b)
	}
}

// processCascadesLocked propagates settled states to dependents: a success
// counts down their unmet dependencies; any other end, PARKED included,
// cancels them, and their own dependents after them.
func (e *Engine) processCascadesLocked() {
	for len(e.cascade) > 0 {
		t := e.cascade[0]
		e.cascade = e.cascade[1:]
		deps := t.out.dependents
		t.out.dependents = nil
		for _, d := range deps {
			if d.state != StateWaiting {
				continue
			}
			if t.state == StateSucceeded {
				d.unmet--
				if d.unmet == 0 {
					e.setState(d, StateQueued, "dependencies met")
				} else {
					e.markDirty(d)
				}
				continue
			}
			e.setState(d, StateCancelled, "dependency "+t.id+" "+lower(t.state.String()))
		}
	}
	if cap(e.cascade) > 1024 {
		e.cascade = nil
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// emitTaskLocked records an event about t.
func (e *Engine) emitTaskLocked(t *task, typ EventType, from, to State, reason string) {
	e.seq++
	t.lastSeq = e.seq
	e.cur.events = append(e.cur.events, Event{
		Seq: e.seq, At: unixTime(t.updatedAt), Type: typ, TaskID: t.id,
		AgentID: t.spec.AgentID, Lane: t.spec.Lane, SessionKey: t.spec.Session(), BatchID: t.spec.BatchID,
		From: from, To: to, Attempt: len(t.attempts), Reason: reason, Webhook: t.spec.WebhookURL != "",
	})
	e.markDirty(t)
}

// emitSessionLocked records that something happened to a session as a
// whole (EventSession).
func (e *Engine) emitSessionLocked(key, reason string) {
	e.seq++
	e.cur.events = append(e.cur.events, Event{Seq: e.seq, At: e.now(), Type: EventSession, SessionKey: key, Reason: reason})
}

func (e *Engine) emitEngineLocked(reason string) {
	e.seq++
	e.cur.events = append(e.cur.events, Event{Seq: e.seq, At: e.now(), Type: EventEngine, Reason: reason})
}

func (e *Engine) markDirty(t *task) {
	if !t.dirty {
		t.dirty = true
		e.cur.tasks = append(e.cur.tasks, t)
	}
}
