package cluster

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/plugins/manager"
)

// The leader's instance, plugin and heartbeat events reach the subscribers of every
// node through the store's broadcasts: the leader sends each event, every
// node (the leader too) hands it to its subscribers. These are live
// notifications, best effort like the registry's own: a node cut off from
// the database misses some, and the instances and plugins queries remain
// the authority on state.

// relayed is one broadcast event.
type relayed struct {
	Instance *executor.InstanceEvent `json:",omitempty"`
	Plugin   *manager.Event          `json:",omitempty"`
	Check    *heartbeat.Event        `json:",omitempty"`
}

// relay fans the broadcast events out to the node's subscribers.
type relay struct {
	instances *fanout[executor.InstanceEvent]
	plugins   *fanout[manager.Event]
	checks    *fanout[heartbeat.Event]
}

func newRelay() *relay {
	return &relay{
		instances: newFanout(func(e *executor.InstanceEvent, lagged uint64) { e.Lagged += lagged }),
		plugins:   newFanout(func(e *manager.Event, lagged uint64) { e.Lagged += lagged }),
		checks:    newFanout(func(e *heartbeat.Event, lagged uint64) { e.Lagged += lagged }),
	}
}

// receive hands the broadcasts to the subscribers until ctx ends.
func (n *Node) receive(ctx context.Context) {
	casts, stop := n.store.Broadcasts(256)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-casts:
			var r relayed
			if err := json.Unmarshal(b, &r); err != nil {
				n.log.Warn("an unreadable broadcast", "error", err)
				continue
			}
			if r.Instance != nil {
				n.relay.instances.publish(*r.Instance)
			}
			if r.Plugin != nil {
				n.relay.plugins.publish(*r.Plugin)
			}
			if r.Check != nil {
				n.relay.checks.publish(*r.Check)
			}
		}
	}
}

// broadcast sends the leader's instance, plugin and heartbeat events to every node
// until ctx ends.
func (n *Node) broadcast(ctx context.Context, l *leader) {
	var insts <-chan executor.InstanceEvent
	var plugs <-chan manager.Event
	if l.reg != nil {
		ch, stop := l.reg.Subscribe(256)
		defer stop()
		insts = ch
	}
	if l.plugins != nil {
		ch, stop := l.plugins.Subscribe(256)
		defer stop()
		plugs = ch
	}
	var checks <-chan heartbeat.Event
	if l.checks != nil {
		ch, stop := l.checks.Subscribe(256)
		defer stop()
		checks = ch
	}
	send := func(r relayed) {
		b, err := json.Marshal(r)
		if err == nil {
			err = n.store.Broadcast(ctx, b)
		}
		if err != nil && ctx.Err() == nil {
			n.log.Warn("broadcasting an event", "error", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-insts:
			if !ok {
				insts = nil
				continue
			}
			send(relayed{Instance: &ev})
		case ev, ok := <-plugs:
			if !ok {
				plugs = nil
				continue
			}
			send(relayed{Plugin: &ev})
		case ev, ok := <-checks:
			if !ok {
				checks = nil
				continue
			}
			send(relayed{Check: &ev})
		}
	}
}

// fanout hands values to subscribers without ever blocking: a subscriber
// whose buffer is full misses values, and the next one it gets says how
// many (through lag).
type fanout[T any] struct {
	lag  func(v *T, missed uint64)
	mu   sync.Mutex
	subs map[*sub[T]]struct{}
}

type sub[T any] struct {
	c      chan T
	missed uint64
}

func newFanout[T any](lag func(*T, uint64)) *fanout[T] {
	return &fanout[T]{lag: lag, subs: map[*sub[T]]struct{}{}}
}

func (f *fanout[T]) subscribe(buffer int) (<-chan T, func()) {
	s := &sub[T]{c: make(chan T, max(buffer, 1))}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return s.c, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs, s)
			f.mu.Unlock()
			close(s.c)
		})
	}
}

func (f *fanout[T]) publish(v T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		w := v
		if s.missed > 0 {
			f.lag(&w, s.missed)
		}
		select {
		case s.c <- w:
			s.missed = 0
		default:
			s.missed++
		}
	}
}
