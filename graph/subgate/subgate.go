// Package subgate shares the machine between subscription executions and
// everything else the server does.
//
// Every event a subscription delivers is a GraphQL execution of the
// subscriber's selection set. A thousand subscribers of a busy stream ask for
// more executions than the cores can run, and the Go scheduler shares the
// cores among runnable goroutines, not among jobs: left alone, the
// executions take nearly all of it and the engine, whose work they report,
// slows to a crawl. The gate bounds how many subscription events may be
// handed to the transport and not yet executed (one slot each), so the
// executions get at most that many cores and the engine keeps the rest.
// Subscribers that cannot be served as fast as events come fall behind, and
// their readers skip them ahead with a LAGGED event, as for any slow reader.
//
// A resolver hands each event over with Send, on an unbuffered channel, so
// that the slot is taken only once the transport is ready to execute it; the
// gate's extension frees the slot when the execution has produced its
// response (before the transport writes it). A client that is slow to take
// its next event (its transport is still writing the last one) does not hold
// a slot: after StallAfter the event waits without one.
package subgate

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// StallAfter is how long an event may wait for its transport while holding
// a slot, unless Gate.SetStallAfter says otherwise.
const StallAfter = time.Millisecond

// Gate is a number of slots for subscription executions. Use it as a gqlgen
// extension (handler.Server.Use) and hand events over with Send.
type Gate struct {
	slots      chan struct{}
	stalls     atomic.Uint64
	stallAfter atomic.Int64 // ns
}

// New returns a gate of n slots (at least 1).
func New(n int) *Gate {
	g := &Gate{slots: make(chan struct{}, max(n, 1))}
	g.stallAfter.Store(int64(StallAfter))
	return g
}

// SetStallAfter sets how long an event may wait for its transport while
// holding a slot.
func (g *Gate) SetStallAfter(d time.Duration) { g.stallAfter.Store(int64(d)) }

// Slots returns the number of slots.
func (g *Gate) Slots() int { return cap(g.slots) }

// Stalls returns how many events went to their transport without a slot
// because it was not ready to take them within StallAfter.
func (g *Gate) Stalls() uint64 { return g.stalls.Load() }

var (
	_ graphql.HandlerExtension     = (*Gate)(nil)
	_ graphql.OperationInterceptor = (*Gate)(nil)
	_ graphql.ResponseInterceptor  = (*Gate)(nil)
)

// ExtensionName implements graphql.HandlerExtension.
func (g *Gate) ExtensionName() string { return "SubscriptionGate" }

// Validate implements graphql.HandlerExtension.
func (g *Gate) Validate(graphql.ExecutableSchema) error { return nil }

// ticket is a subscription's account of the slots it holds: one flag per
// event handed over (or being handed over) and not yet executed, oldest
// first, true where the event holds a slot. The transport executes a
// subscription's events in the order they were handed over, so each
// response settles the oldest flag: a slot is freed by the execution of the
// very event that took it, never by an earlier one.
type ticket struct {
	gate    *Gate
	mu      sync.Mutex
	pending []bool // at most two: the event being executed, the next one
}

// push records an event about to be handed over, with a slot.
func (t *ticket) push() {
	t.mu.Lock()
	t.pending = append(t.pending, true)
	t.mu.Unlock()
}

// executed settles the oldest event: its execution is done.
func (t *ticket) executed() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		return
	}
	slotted := t.pending[0]
	t.pending = append(t.pending[:0], t.pending[1:]...)
	if slotted {
		<-t.gate.slots
	}
}

// unslotLast frees the slot of the event being handed over, which goes on
// waiting without it.
func (t *ticket) unslotLast() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.pending); n > 0 && t.pending[n-1] {
		t.pending[n-1] = false
		<-t.gate.slots
	}
}

// dropLast forgets the event being handed over: it never was.
func (t *ticket) dropLast() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.pending); n > 0 {
		if t.pending[n-1] {
			<-t.gate.slots
		}
		t.pending = t.pending[:n-1]
	}
}

// releaseAll frees every slot the subscription holds.
func (t *ticket) releaseAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, slotted := range t.pending {
		if slotted {
			<-t.gate.slots
		}
	}
	t.pending = t.pending[:0]
}

type ticketKey struct{}

// InterceptOperation gives each subscription its ticket, in the context that
// both its resolver and its responses see.
func (g *Gate) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if op := graphql.GetOperationContext(ctx).Operation; op == nil || op.Operation != ast.Subscription {
		return next(ctx)
	}
	return next(context.WithValue(ctx, ticketKey{}, &ticket{gate: g}))
}

// InterceptResponse frees the slot of the event whose execution produced
// the response (the end of the stream, a nil response, settles nothing).
func (g *Gate) InterceptResponse(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
	resp := next(ctx)
	if t, ok := ctx.Value(ticketKey{}).(*ticket); ok && resp != nil {
		t.executed()
	}
	return resp
}

// Send hands v to the transport of the subscription whose resolver context
// is ctx, through ch (which should be unbuffered: an event in a buffer would
// hold its slot however long the client takes). It waits for a slot first.
// Without a gate in ctx (a resolver called outside the server) it is a
// plain send. It reports false when ctx ended first.
func Send[T any](ctx context.Context, ch chan<- T, v T) bool {
	t, ok := ctx.Value(ticketKey{}).(*ticket)
	if !ok {
		return sendOrEnd(ctx, ch, v)
	}
	select {
	case t.gate.slots <- struct{}{}:
		t.push()
	case <-ctx.Done():
		return false
	}
	select {
	case ch <- v: // the transport was waiting for it: the common case
		return true
	default:
	}
	stall := time.NewTimer(time.Duration(t.gate.stallAfter.Load()))
	defer stall.Stop()
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		t.dropLast()
		return false
	case <-stall.C:
	}
	// The transport is busy with the last event (a slow client): wait for it
	// without the slot.
	t.unslotLast()
	t.gate.stalls.Add(1)
	if !sendOrEnd(ctx, ch, v) {
		t.dropLast()
		return false
	}
	return true
}

// sendOrEnd sends v on ch unless ctx ends first.
func sendOrEnd[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

// Done frees what the subscription of ctx still holds: call it when its
// resolver stops sending (an event it sent may never be executed).
func Done(ctx context.Context) {
	if t, ok := ctx.Value(ticketKey{}).(*ticket); ok {
		t.releaseAll()
	}
}
