package postgres

// LISTEN/NOTIFY. One connection per store listens on the schema's channels
// (started by the first waiter) and wakes the waiters of a channel when a
// notification arrives. Notifications are only a hint: every waiter reads
// the tables after waking, and also wakes on its own after
// Options.PollInterval, because notifications sent while the listener is
// disconnected are lost. After each (re)connection every waiter is woken, so
// that what was missed is read at once rather than at the next poll.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/switchyard/switchyard/internal/failing"
)

// hub fans a listening connection's notifications out to waiters.
type hub struct {
	s *Store

	mu      sync.Mutex
	subs    map[string]map[*waiter]struct{}
	casts   map[*caster]struct{} // Broadcasts subscribers
	started bool
	pid     uint32 // the listening connection's backend, for tests
	// lost logs the listener's losses and reconnections once per change.
	lost failing.State

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// waiter is one subscription: a wake-up token (capacity one, so that a
// notification between two waits is not lost) per channel it watches.
type waiter struct {
	c chan struct{}
}

func newHub(s *Store) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &hub{s: s, subs: map[string]map[*waiter]struct{}{}, casts: map[*caster]struct{}{}, ctx: ctx, cancel: cancel}
}

func (w *waiter) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// subscribe returns a waiter woken by notifications on the channels (and by
// every reconnection of the listener). Call unsubscribe when done.
func (h *hub) subscribe(channels ...string) *waiter {
	w := &waiter{c: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range channels {
		if h.subs[ch] == nil {
			h.subs[ch] = map[*waiter]struct{}{}
		}
		h.subs[ch][w] = struct{}{}
	}
	h.startLocked()
	return w
}

// startLocked starts the listener, once.
func (h *hub) startLocked() {
	if !h.started && h.ctx.Err() == nil {
		h.started = true
		h.wg.Add(1)
		go h.run()
	}
}

func (h *hub) unsubscribe(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		delete(m, w)
	}
}

func (h *hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for w := range m {
			w.wake()
		}
	}
}

func (h *hub) wakeChannel(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[ch] {
		w.wake()
	}
}

// wait blocks until w is woken, the poll interval passes or ctx ends.
func (h *hub) wait(ctx context.Context, w *waiter) error {
	t := time.NewTimer(h.s.opts.PollInterval)
	defer t.Stop()
	select {
	case <-w.c:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.s.done:
		return errClosed
	}
}

func (h *hub) close() {
	h.cancel()
	h.wg.Wait()
}

// run keeps a listening connection until the store closes, reconnecting with
// a growing delay (up to the poll interval) after a failure.
func (h *hub) run() {
	defer h.wg.Done()
	const first = 50 * time.Millisecond
	delay := first
	for h.ctx.Err() == nil {
		listened, err := h.listen()
		if h.ctx.Err() != nil {
			return
		}
		if listened { // a connection that worked: the next failure starts over
			delay = first
		}
		// The waiters poll meanwhile; the next connection wakes them. While
		// the database stays away, one line says so, not one per attempt.
		h.lost.Fail(h.s.log, hclog.Warn, "listener: connection lost; reconnecting, the next failures are not logged until it connects",
			"error", err, "in", delay)
		select {
		case <-time.After(delay):
		case <-h.ctx.Done():
			return
		}
		delay = min(2*delay, h.s.opts.PollInterval)
	}
}

// listen connects, listens on every channel, wakes every waiter (something
// may have been missed before) and forwards notifications until an error;
// listened reports whether it got as far as listening.
func (h *hub) listen() (listened bool, _ error) {
	cfg := h.s.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = "switchyard-listen"
	ctx, cancel := context.WithTimeout(h.ctx, opTimeout)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	for _, ch := range h.s.channels.all() {
		if _, err := conn.Exec(h.ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return false, err
		}
	}
	h.lost.OK(h.s.log, "listener: listening again")
	h.mu.Lock()
	h.pid = conn.PgConn().PID()
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.pid = 0
		h.mu.Unlock()
	}()
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(h.ctx)
		if err != nil {
			return true, err
		}
		if n.Channel == h.s.channels.broadcast {
			h.cast([]byte(n.Payload))
			continue
		}
		h.wakeChannel(n.Channel)
	}
}

// caster is a Broadcasts subscription.
type caster struct{ c chan []byte }

// cast hands a broadcast to every subscriber that has room for it.
func (h *hub) cast(payload []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.casts {
		select {
		case c.c <- payload:
		default:
		}
	}
}

// listenerPID returns the backend pid of the listening connection, 0 when
// there is none (tests cut it with pg_terminate_backend).
func (h *hub) listenerPID() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pid
}

// MaxBroadcast is the largest payload Broadcast sends (PostgreSQL's NOTIFY
// limit is just under 8,000 bytes).
const MaxBroadcast = 7900

// Broadcast sends payload to the Broadcasts subscribers of every store on
// this schema, this one included. Delivery is best effort: a subscriber that
// is disconnected or full when it arrives misses it.
func (s *Store) Broadcast(ctx context.Context, payload []byte) error {
	if len(payload) > MaxBroadcast {
		return fmt.Errorf("postgres store: broadcast: %d bytes is more than %d", len(payload), MaxBroadcast)
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.channels.broadcast, string(payload)); err != nil {
		return s.describe("broadcast", err)
	}
	return nil
}

// Broadcasts returns the broadcasts that arrive from now on (buffer of them
// may wait to be read; more are dropped) and a function that ends the
// subscription.
func (s *Store) Broadcasts(buffer int) (<-chan []byte, func()) {
	c := &caster{c: make(chan []byte, max(buffer, 1))}
	s.hub.mu.Lock()
	s.hub.casts[c] = struct{}{}
	s.hub.startLocked()
	s.hub.mu.Unlock()
	var once sync.Once
	return c.c, func() {
		once.Do(func() {
			s.hub.mu.Lock()
			delete(s.hub.casts, c)
			s.hub.mu.Unlock()
		})
	}
}
