// The hub: one goroutine waits on the engine's event log and wakes every
// subscriber through a channel it closes, so that a thousand subscribers
// waiting for the next event cost the engine one waiter, not a thousand
// (engine.EventLog.Wait takes the log's write lock on every call).

package eventstream

import (
	"context"
	"sync/atomic"

	"github.com/switchyard/switchyard/engine"
)

// Hub broadcasts "there are new events" to any number of readers.
type Hub struct {
	log  *engine.EventLog
	last atomic.Uint64                 // the newest seq the hub has announced
	ch   atomic.Pointer[chan struct{}] // closed when events after last arrive
	stop context.CancelFunc
	done chan struct{}
}

// NewHub starts a hub over the log. Call Close to stop it.
func NewHub(log *engine.EventLog) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Hub{log: log, stop: cancel, done: make(chan struct{})}
	ch := make(chan struct{})
	h.ch.Store(&ch)
	h.last.Store(log.Last())
	go h.run(ctx)
	return h
}

func (h *Hub) run(ctx context.Context) {
	defer close(h.done)
	for {
		seq := h.last.Load()
		if err := h.log.Wait(ctx, seq); err != nil {
			return
		}
		h.last.Store(h.log.Last())
		next := make(chan struct{})
		old := h.ch.Swap(&next)
		close(*old)
	}
}

// Last returns the newest seq announced.
func (h *Hub) Last() uint64 { return h.last.Load() }

// Wait blocks until an event after seq `after` has been announced or ctx
// ends.
func (h *Hub) Wait(ctx context.Context, after uint64) error {
	for {
		ch := *h.ch.Load()
		if h.last.Load() > after {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the hub; waiting readers are not woken (their contexts end
// them).
func (h *Hub) Close() {
	h.stop()
	<-h.done
}
