// Instance events, for the instanceEvents subscription: a bounded buffer per
// subscriber, so that a slow subscriber never blocks the registry; what it
// misses is counted and reported on the next event it gets.

package executor

import (
	"sync"
	"time"
)

// EventType says what happened to an instance.
type EventType string

// Event types.
const (
	EventRegistered EventType = "REGISTERED" // added, from config or at run time
	EventUpdated    EventType = "UPDATED"    // its config changed
	EventRemoved    EventType = "REMOVED"    // forgotten
	EventHealthy    EventType = "HEALTHY"    // it answers health checks (again)
	EventUnhealthy  EventType = "UNHEALTHY"  // it stopped answering; no new work goes there
)

// InstanceEvent is one change of an instance.
type InstanceEvent struct {
	Seq      uint64    // increases by one per event of the registry
	Type     EventType // what happened
	Instance Instance  // the instance after the change (before it, for REMOVED)
	At       time.Time
	Reason   string // why, for health changes: the failure, or "recovered"
	// Lagged is how many events this subscriber missed just before this one,
	// because its buffer was full.
	Lagged uint64
}

type subscriber struct {
	ch      chan InstanceEvent
	dropped uint64
}

// broadcaster fans events out to subscribers without ever blocking.
type broadcaster struct {
	mu   sync.Mutex
	seq  uint64
	subs map[*subscriber]struct{}
}

func (b *broadcaster) subscribe(buffer int) (<-chan InstanceEvent, func()) {
	if buffer < 1 {
		buffer = 64
	}
	s := &subscriber{ch: make(chan InstanceEvent, buffer)}
	b.mu.Lock()
	if b.subs == nil {
		b.subs = make(map[*subscriber]struct{})
	}
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.subs[s]; ok {
			delete(b.subs, s)
			close(s.ch)
		}
	}
}

func (b *broadcaster) publish(ev InstanceEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	ev.Seq = b.seq
	for s := range b.subs {
		ev.Lagged = s.dropped
		select {
		case s.ch <- ev:
			s.dropped = 0
		default:
			s.dropped++
		}
	}
}

func (b *broadcaster) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		close(s.ch)
		delete(b.subs, s)
	}
}
