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
func (c *core) setState(t *task, to State, reason string) {
	c.setStateAt(t, to, reason, c.now())
}

// setStateAt is setState at a time the caller has read already: the hot
// paths read the clock once per operation, not once per transition.
func (c *core) setStateAt(t *task, to State, reason string, now time.Time) {
	from := t.state
	if !allowed(from, to) {
		panic("engine: illegal transition " + from.String() + " → " + to.String() + " for " + t.id)
	}
	c.leaveLocked(t, from)
	t.state = to
	t.reason = reason
	t.updatedAt = now.UnixNano()
	if from != 0 {
		c.counts[from]--
	}
	c.counts[to]++
	if pending(from) != pending(to) {
		d := 1
		if pending(from) {
			d = -1
		}
		c.queued += d
		t.lane.queued += d
		t.agent.queued += d
		if t.session != nil {
			t.session.queued += d
		}
	}
	c.enterLocked(t, to, now)
	c.emitTaskLocked(t, EventState, from, to, reason)
	if to.Terminal() && t.followers > 0 {
		c.cur.followedEnd = true // its follower waits for this event (Follow)
	}
	if to.Settled() {
		c.settledLocked(t) // after its event: a batch's end follows its last task's
	}
	if to == StateQueued {
		c.queuedPastDeadlineLocked(t, now) // after its event: EXPIRED follows QUEUED
	}
}

// leaveLocked undoes what being in state `from` implies.
func (c *core) leaveLocked(t *task, from State) {
	switch from {
	case StateQueued:
		if t.slotWait() {
			break // it never joined its queues
		}
		if t.sq != nil {
			c.unqueueLocked(t)
		}
		t.lane.fifo.remove(t, fifoLane)
		t.agent.fifo.remove(t, fifoAgent)
		if t.session != nil {
			t.session.fifo.remove(t, fifoSession)
		}
	case StateRetryWait:
		c.timers[timerRetry].remove(t)
	case StateWaiting:
		if t.timerIdx[timerRetry] >= 0 { // held by its lane's debounce
			c.releaseHeldLocked(t)
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
func (c *core) enterLocked(t *task, to State, now time.Time) {
	switch to {
	case StateQueued:
		t.queuedAt = now.UnixNano()
		if t.slotWait() {
			// Retried while its timed-out attempt still holds its slot:
			// it joins its queues when the slot is released.
			break
		}
		c.joinQueuesLocked(t)
	case StateRetryWait:
		c.timers[timerRetry].set(t, t.timerAt[timerRetry])
	}
	// Deadline timers watch every state in which a task waits.
	waits := to == StateQueued || to == StateWaiting || to == StateRetryWait || to == StateParked
	if waits && !t.spec.Deadline.IsZero() {
		c.timers[timerDeadline].set(t, t.spec.Deadline.UnixNano())
	} else if !waits {
		c.timers[timerDeadline].remove(t)
	}
	if to.Terminal() {
		t.endedAt = now.UnixNano()
	}
}

// joinQueuesLocked puts a QUEUED task into its queues.
func (c *core) joinQueuesLocked(t *task) {
	t.lane.fifo.pushBack(t, fifoLane)
	t.agent.fifo.pushBack(t, fifoAgent)
	if t.session != nil {
		t.session.fifo.pushBack(t, fifoSession)
	}
	if !t.unranked { // else admission ranks it first (rankLocked)
		c.enqueueLocked(t)
	}
}

// settledLocked is what reaching a terminal state or PARKED implies: the
// effect on its dependents is scheduled, and its batch counts it as ended.
func (c *core) settledLocked(t *task) {
	if t.out != nil && len(t.out.dependents) > 0 {
		c.cascade = append(c.cascade, t)
	}
	c.stats.ended[t.state]++
	if b := t.batch; b != nil && !t.batchOut {
		t.batchOut = true
		b.open--
		c.batchDoneLocked(b)
	}
}

// processCascadesLocked propagates settled states to dependents: a success
// counts down their unmet dependencies; any other end, PARKED included,
// cancels them, and their own dependents after them.
func (c *core) processCascadesLocked() {
	for len(c.cascade) > 0 {
		t := c.cascade[0]
		c.cascade = c.cascade[1:]
		deps := t.out.dependents
		t.out.dependents = nil
		for _, d := range deps {
			if d.state != StateWaiting {
				continue
			}
			if t.state == StateSucceeded {
				d.unmet--
				if d.unmet == 0 {
					c.setState(d, StateQueued, "dependencies met")
				} else {
					c.markQuiet(d)
				}
				continue
			}
			c.setState(d, StateCancelled, "dependency "+t.id+" "+lower(t.state.String()))
		}
	}
	if cap(c.cascade) > 1024 {
		c.cascade = nil
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
func (c *core) emitTaskLocked(t *task, typ EventType, from, to State, reason string) {
	c.seq++
	t.lastSeq = c.seq
	c.cur.events = append(c.cur.events, Event{
		Seq: c.seq, At: unixTime(t.updatedAt), Type: typ, TaskID: t.id,
		AgentID: t.spec.AgentID, Lane: t.spec.Lane, SessionKey: t.spec.Session(), BatchID: t.spec.BatchID,
		From: from, To: to, Attempt: len(t.attempts), Reason: reason, Webhook: t.spec.WebhookURL != "",
	})
	c.markDirty(t)
}

// emitReleaseLocked records that t's attempt gave back its slot
// (EventReleased) at now. A release changes no state, so t.updatedAt, which
// dates the task's other events, still says when its state last changed
// (a cancellation, a timeout): the release carries its own time instead.
func (c *core) emitReleaseLocked(t *task, now time.Time, reason string) {
	c.emitTaskAtLocked(t, EventReleased, now, reason)
}

// emitTaskAtLocked records an event about t that changes no state (From
// and To are its state), dated now rather than by t.updatedAt.
func (c *core) emitTaskAtLocked(t *task, typ EventType, now time.Time, reason string) {
	c.emitTaskLocked(t, typ, t.state, t.state, reason)
	c.cur.events[len(c.cur.events)-1].At = now
}

// emitSessionLocked records that something happened to the session kept
// under scope (TaskSpec.SessionScope) as a whole (EventSession): the event
// names its agent and the session's own name.
func (c *core) emitSessionLocked(scope, reason string) {
	c.seq++
	agent, name := SplitSessionScope(scope)
	c.cur.events = append(c.cur.events, Event{Seq: c.seq, At: c.now(), Type: EventSession, AgentID: agent, SessionKey: name, Reason: reason})
}

func (c *core) emitEngineLocked(reason string) {
	c.seq++
	c.cur.events = append(c.cur.events, Event{Seq: c.seq, At: c.now(), Type: EventEngine, Reason: reason})
}

// markQuiet records a change of t that no event records — the count of a
// waiting task's unmet dependencies, a webhook delivery — so
// that a reader that shows only committed changes (Engine.CommittedTask)
// knows the batch holds one. A task's rank, decided outside the lock during
// its admission, is marked dirty only: its submission's caller waits for it
// (commitWait), so it is committed before anyone learns the task's id.
func (c *core) markQuiet(t *task) {
	c.markDirty(t)
	c.cur.quiet = true
}

func (c *core) markDirty(t *task) {
	if !t.dirty {
		t.dirty = true
		c.cur.tasks = append(c.cur.tasks, t)
	}
}
