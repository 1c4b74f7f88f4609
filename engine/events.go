package engine

import (
	"context"
	"sync"
	"time"
)

// EventType says what an event records.
type EventType uint8

// Event types.
const (
	// EventState: a task changed state (From → To). A task's first event has
	// From == 0.
	EventState EventType = 1
	// EventReleased: a cancelled task's executor call returned, or its lease
	// ran out, and the slots it held were freed. The state does not change;
	// the event's At is when the slots were freed, not the task's UpdatedAt
	// (the cancellation's or the timeout's time).
	EventReleased EventType = 2
	// EventStale: a completion arrived for an attempt whose lease had been
	// reclaimed; it was ignored.
	EventStale EventType = 3
	// EventLane: a lane's configuration changed (TaskID is empty).
	EventLane EventType = 4
	// EventEngine: the engine itself changed mode (draining, policy swap).
	EventEngine EventType = 5
	// EventBatch: every task of a batch has ended (BatchID is set).
	EventBatch EventType = 6
	// EventSession: a session lost its tab, with the instance it was on or
	// closed by a task of another session (SessionKey is set, TaskID empty;
	// Reason says which tab and why). Its next task fails with SESSION_LOST.
	// Also: the executor closed a session's tab after its idle timeout
	// (Engine.ExpireSession); the binding is gone, nothing is lost.
	EventSession EventType = 7
	// EventHeld: a fairness policy held the task's (lane, agent) queue, the
	// task at its head (policy.Hold, ABI v2): nothing of the queue goes until
	// the policy is asked again. The state stays QUEUED; Reason names the
	// policy and the lane (Hold.Reason). Said once per hold: a task held
	// again by the same policy emits nothing more.
	EventHeld EventType = 8
	// EventHoldEnded: the hold an EventHeld announced ended while the task
	// is still QUEUED — the policy's next decision did not hold its queue,
	// or another fairness policy decides now. (A held task that leaves
	// QUEUED says so with its state event.)
	EventHoldEnded EventType = 9
	// EventLeaseResumed: a pull task's lease, under way when the previous
	// process stopped, was resumed at start (a durable store): the task stays
	// RUNNING (From and To) and its worker may still complete it with the
	// lease it holds. Reason is the task's new reason: the term the lease was
	// resumed for and how it had been made. Attempt is the attempt that goes
	// on; At is the start that resumed it (the task's UpdatedAt still dates
	// its last change of state).
	EventLeaseResumed EventType = 10
)

var eventTypeNames = [...]string{
	EventState: "STATE", EventReleased: "RELEASED", EventStale: "STALE",
	EventLane: "LANE", EventEngine: "ENGINE", EventBatch: "BATCH", EventSession: "SESSION",
	EventHeld: "HELD", EventHoldEnded: "HOLD_ENDED", EventLeaseResumed: "LEASE_RESUMED",
}

// String returns the type's upper-case name.
func (t EventType) String() string {
	if int(t) < len(eventTypeNames) && eventTypeNames[t] != "" {
		return eventTypeNames[t]
	}
	return "UNKNOWN"
}

// Event is one recorded change. Seq numbers are assigned by the engine, start
// at 1, increase by one per event and survive restarts with a durable store.
type Event struct {
	Seq        uint64
	At         time.Time
	Type       EventType
	TaskID     string
	AgentID    string
	Lane       string
	SessionKey string
	BatchID    string
	From, To   State
	Attempt    int
	Reason     string
	// Webhook is set on a task's events when the task has a webhook URL, and
	// on a batch's event when the batch has one.
	Webhook bool
}

// EventLog keeps the most recent events in a ring for subscribers. Appending
// never blocks on readers: a reader that falls behind the ring learns how
// many events it missed.
type EventLog struct {
	mu     sync.RWMutex
	ring   []Event // grows by doubling up to size
	size   int
	mask   uint64
	next   uint64        // seq of the next event to append
	first  uint64        // seq of the first event the log was given
	notify chan struct{} // closed and replaced on append, when someone waits
	waited bool
	// placed: an engine has taken the log up (adoptEventLogLocked), so its
	// position stands even while it holds no event — its readers wait
	// after next-1 — and every later engine catches it up from there.
	placed bool
}

func newEventLog(size int, next uint64) *EventLog {
	n := 1
	for n < size {
		n <<= 1
	}
	first := min(n, 1024)
	return &EventLog{ring: make([]Event, first), size: n, mask: uint64(first - 1), next: next, first: next, notify: make(chan struct{})}
}

// grow doubles the ring (up to its size) when it is full, keeping every event.
func (l *EventLog) grow(extra int) {
	for len(l.ring) < l.size && l.next-l.first+uint64(extra) > uint64(len(l.ring)) {
		bigger := make([]Event, 2*len(l.ring))
		m := uint64(len(bigger) - 1)
		for s := l.oldestLocked(); s < l.next; s++ {
			bigger[s&m] = l.ring[s&l.mask]
		}
		l.ring, l.mask = bigger, m
	}
}

// append adds events whose seqs continue the log. Called by the engine.
func (l *EventLog) append(evs []Event) {
	if len(evs) == 0 {
		return
	}
	l.mu.Lock()
	l.grow(len(evs))
	for i := range evs {
		l.ring[evs[i].Seq&l.mask] = evs[i]
	}
	l.next = evs[len(evs)-1].Seq + 1
	if l.waited {
		close(l.notify)
		l.notify = make(chan struct{})
		l.waited = false
	}
	l.mu.Unlock()
}

// restart empties the log and moves it on to continue at seq next (ahead of
// where it is), for a log that cannot be caught up (adoptEventLogLocked):
// its readers then learn from Read that they missed every event before
// next they had not read. Waiters are woken.
func (l *EventLog) restart(next uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if next <= l.next {
		return
	}
	l.next, l.first = next, next
	if l.waited {
		close(l.notify)
		l.notify = make(chan struct{})
		l.waited = false
	}
}

// Last returns the seq of the newest event, 0 if none.
func (l *EventLog) Last() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.next - 1
}

// Oldest returns the seq of the oldest event still in the ring.
func (l *EventLog) Oldest() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.oldestLocked()
}

func (l *EventLog) oldestLocked() uint64 {
	if n := uint64(len(l.ring)); l.next-l.first > n {
		return l.next - n
	}
	return l.first
}

// Read appends to dst the events after seq `after`, at most max of them, and
// returns the extended slice. missed counts the events after `after` that
// have already left the ring (a reader too slow, or resuming too far back):
// the returned events then start at the oldest one still held.
func (l *EventLog) Read(after uint64, max int, dst []Event) (evs []Event, missed uint64) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	from := after + 1
	if oldest := l.oldestLocked(); from < oldest {
		missed = oldest - from
		from = oldest
	}
	for s := from; s < l.next && max > 0; s++ {
		dst = append(dst, l.ring[s&l.mask])
		max--
	}
	return dst, missed
}

// Wait blocks until an event after seq `after` exists or ctx ends.
func (l *EventLog) Wait(ctx context.Context, after uint64) error {
	for {
		l.mu.Lock()
		if l.next > after+1 {
			l.mu.Unlock()
			return nil
		}
		ch := l.notify
		l.waited = true
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
