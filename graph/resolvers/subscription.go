// Subscriptions. Each task-event subscription owns an eventstream.Reader (a
// position in the engine's event log) and one goroutine that reads at the
// pace of the client: it hands events to the transport through the
// subscription gate (graph/subgate), never waiting on the engine. A client
// that falls behind is skipped ahead with a LAGGED event; the engine and the
// other subscribers never notice it, and however many subscribers there
// are, their executions leave the engine its share of the cores.

package resolvers

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/eventstream"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/graph/subgate"
)

// reader validates a resume point and opens a reader of the event log.
func (r *Resolver) reader(ctx context.Context, match func(*engine.Event) bool, after *int64) (*eventstream.Reader, error) {
	opts := eventstream.Options{Match: match, MaxLag: r.opts.Limits.MaxSubscriberLag, Hub: r.hub}
	if after != nil {
		if *after < 0 {
			return nil, invalid("after", "must not be negative, got %d", *after)
		}
		// A seq read from a query may not be committed yet: wait until it is.
		if err := r.eng.Sync(ctx); err != nil {
			return nil, err
		}
		if head := r.eng.Events().Last(); uint64(*after) > head {
			return nil, invalid("after", "seq %d is past the latest event (%d): the server may have restarted with a memory store", *after, head)
		}
		a := uint64(*after)
		opts.After = &a
	}
	return eventstream.NewReader(r.eng, opts), nil
}

// streamFailed reports a failure that ends a subscription, over the
// transports that can carry one (WebSocket), and in the log.
func (r *Resolver) streamFailed(ctx context.Context, kind string, err error) {
	if ctx.Err() != nil {
		return
	}
	r.log.Warn("subscription ended by an error", "subscription", kind, "error", err)
	transport.AddSubscriptionError(ctx, &gqlerror.Error{Message: err.Error(), Extensions: Extensions(asEngineError(err))})
}

func taskEvent(it *eventstream.Item) *model.TaskEvent {
	if it.Lagged > 0 {
		return &model.TaskEvent{E: engine.Event{Seq: it.Event.Seq, At: it.Event.At, Type: model.EventLagged, Reason: it.Reason}, Lag: it.Lagged}
	}
	return &model.TaskEvent{E: it.Event}
}

// taskEventMatcher reads a task event subscription's filter and narrows it
// to the events the caller may see.
func taskEventMatcher(ctx context.Context, filter *model.TaskEventFilter) (func(*engine.Event) bool, error) {
	match, verr := eventMatcher("filter", filter)
	if verr != nil {
		return nil, verr
	}
	return scopeMatcher(ctx, filter, match)
}

func (s *subscriptionResolver) TaskEvents(ctx context.Context, filter *model.TaskEventFilter, after *int64) (<-chan *model.TaskEvent, error) {
	match, err := taskEventMatcher(ctx, filter)
	if err != nil {
		return nil, err
	}
	rd, err := (*Resolver)(s).reader(ctx, match, after)
	if err != nil {
		return nil, err
	}
	const kind = "taskEvents"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.TaskEvent) // unbuffered: see subgate.Send
	go func() {
		defer ended()
		defer close(ch)
		defer subgate.Done(ctx)
		for {
			items, err := rd.Next(ctx, eventstream.DefaultBatch)
			if err != nil {
				(*Resolver)(s).streamFailed(ctx, kind, err)
				return
			}
			for i := range items {
				if items[i].Lagged > 0 {
					s.opts.Observer.Lagged(kind, items[i].Lagged)
				}
				if !subgate.Send(ctx, ch, taskEvent(&items[i])) {
					return
				}
			}
		}
	}()
	return ch, nil
}

func (s *subscriptionResolver) TaskEventFeed(ctx context.Context, filter *model.TaskEventFilter, after *int64, maxItems *int, maxDelayMs *int) (<-chan *model.TaskEventFeed, error) {
	match, err := taskEventMatcher(ctx, filter)
	if err != nil {
		return nil, err
	}
	n := 1000
	if maxItems != nil {
		if *maxItems < 1 || *maxItems > 5000 {
			return nil, invalid("max", "must be within 1..5000, got %d", *maxItems)
		}
		n = *maxItems
	}
	delay := 20 * time.Millisecond
	if maxDelayMs != nil {
		if *maxDelayMs < 0 || *maxDelayMs > 1000 {
			return nil, invalid("maxDelayMs", "must be within 0..1000, got %d", *maxDelayMs)
		}
		delay = time.Duration(*maxDelayMs) * time.Millisecond
	}
	rd, err := (*Resolver)(s).reader(ctx, match, after)
	if err != nil {
		return nil, err
	}
	const kind = "taskEventFeed"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.TaskEventFeed) // unbuffered: see subgate.Send
	go func() {
		defer ended()
		defer close(ch)
		defer subgate.Done(ctx)
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
		var parts [][]byte
		for {
			items, err := rd.Next(ctx, n)
			if err != nil {
				(*Resolver)(s).streamFailed(ctx, kind, err)
				return
			}
			// Gather the events' encodings (shared, immutable), then copy
			// them into one message.
			parts = parts[:0]
			size := 2
			add := func(items []eventstream.Item) {
				for i := range items {
					var b []byte
					if it := &items[i]; it.Lagged > 0 {
						s.opts.Observer.Lagged(kind, it.Lagged)
						b = eventstream.AppendLagged(nil, it)
					} else {
						b = s.encoded.Get(&it.Event)
					}
					parts = append(parts, b)
					size += len(b) + 1
				}
			}
			add(items)
			if delay > 0 && len(parts) < n {
				// Let more gather for about the delay, then take what came
				// (one wake-up per message, however busy the stream). The
				// delay varies by ±50% so that subscribers woken by the same
				// commit do their work at different times, not in one burst
				// that would make the engine and the API wait.
				timer.Reset(delay/2 + rand.N(delay))
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
				more, err := rd.Poll(ctx, n-len(parts))
				if err != nil {
					(*Resolver)(s).streamFailed(ctx, kind, err)
					return
				}
				add(more)
			}
			buf := make([]byte, 0, size)
			buf = append(buf, '[')
			for i, p := range parts {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, p...)
			}
			buf = append(buf, ']')
			count := len(parts)
			if !subgate.Send(ctx, ch, &model.TaskEventFeed{Events: buf, Count: count, LastSeq: int64(rd.Position())}) {
				return
			}
		}
	}()
	return ch, nil
}

func (s *subscriptionResolver) Task(ctx context.Context, id string) (<-chan *model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	// Followed before the first read, so that an end that read waits for is
	// written at once (engine.Engine.Follow).
	unfollow := s.eng.Follow(id)
	// Every message shows the task as committed: with a durable store the
	// engine's memory runs ahead of the store, and a state read from it
	// before its commit (RUNNING, SUCCEEDED) could be rolled back by a
	// crash. A read of a change still on its way waits for its commit.
	first, err := (*Resolver)(s).ownedTaskBy(ctx, id, s.eng.CommittedTask)
	if err != nil {
		unfollow()
		return nil, err
	}
	// Follow the task's events from its snapshot on: nothing after it is
	// missed, nothing before it is repeated.
	after := first.LastSeq
	rd := eventstream.NewReader(s.eng, eventstream.Options{
		After: &after, MaxLag: s.opts.Limits.MaxSubscriberLag, Hub: s.hub,
		Match: func(e *engine.Event) bool { return e.TaskID == id },
	})
	const kind = "task"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.Task) // unbuffered: see subgate.Send
	go func() {
		defer ended()
		defer close(ch)
		defer subgate.Done(ctx)
		defer unfollow()
		t := first
		for {
			if !subgate.Send(ctx, ch, model.NewTask(t)) {
				return
			}
			if t.State.Terminal() {
				return
			}
			// Wait for the next change (or a LAGGED notice: either way,
			// read the task again). A read that waited for its commit may
			// show changes whose events come after it: those are not news.
			for news := false; !news; {
				items, err := rd.Next(ctx, eventstream.DefaultBatch)
				if err != nil {
					(*Resolver)(s).streamFailed(ctx, kind, err)
					return
				}
				for i := range items {
					news = news || items[i].Lagged > 0 || items[i].Event.Seq > t.LastSeq
				}
			}
			if t, err = s.eng.CommittedTask(ctx, id); err != nil {
				(*Resolver)(s).streamFailed(ctx, kind, err)
				return
			}
		}
	}()
	return ch, nil
}

func (s *subscriptionResolver) Stats(ctx context.Context, intervalMs *int) (<-chan *model.Stats, error) {
	ms := 1000
	if intervalMs != nil {
		ms = *intervalMs
	}
	if ms < 100 || ms > 60_000 {
		return nil, invalid("intervalMs", "must be within 100..60000, got %d", ms)
	}
	const kind = "stats"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.Stats, 1)
	go func() {
		defer ended()
		defer close(ch)
		tick := time.NewTicker(time.Duration(ms) * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case ch <- (*Resolver)(s).stats(ctx):
			case <-ctx.Done():
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (s *subscriptionResolver) InstanceEvents(ctx context.Context) (<-chan *model.InstanceEvent, error) {
	reg, err := (*Resolver)(s).registry()
	if err != nil {
		return nil, err
	}
	events, stop := reg.Subscribe(s.opts.SubscriptionBuffer)
	return forward(ctx, s.opts.Observer, "instanceEvents", events, stop, func(ev executor.InstanceEvent) (*model.InstanceEvent, uint64, bool) {
		return &model.InstanceEvent{E: ev}, ev.Lagged, true
	}), nil
}

// forward relays a hub's events to a new subscription until the hub closes
// its channel or the client goes away, then unsubscribes (stop). conv makes
// the GraphQL value of an event, says how many events the hub dropped for
// this subscriber before it (Event.Lagged), which the observer counts, and
// whether the subscriber wants it (send).
func forward[E, M any](ctx context.Context, obs Observer, kind string, events <-chan E, stop func(), conv func(E) (m M, lagged uint64, send bool)) <-chan M {
	ended := obs.SubscriptionStarted(kind)
	ch := make(chan M)
	go func() {
		defer ended()
		defer close(ch)
		defer stop()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				m, lagged, send := conv(ev)
				if lagged > 0 {
					obs.Lagged(kind, lagged)
				}
				if !send {
					continue
				}
				select {
				case ch <- m:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
