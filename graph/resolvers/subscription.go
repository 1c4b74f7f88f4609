// Subscriptions. Each task-event subscription owns an eventstream.Reader (a
// position in the engine's event log) and one goroutine that reads at the
// pace of the client: it waits on a bounded channel to the transport, never
// on the engine. A client that falls behind is skipped ahead with a LAGGED
// event; the engine and the other subscribers never notice it.

package resolvers

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/eventstream"
	"github.com/switchyard/switchyard/graph/model"
)

// reader validates a resume point and opens a reader of the event log.
func (r *Resolver) reader(ctx context.Context, match func(*engine.Event) bool, after *int64) (*eventstream.Reader, error) {
	opts := eventstream.Options{Match: match, MaxLag: r.opts.Limits.MaxSubscriberLag}
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

func (s *subscriptionResolver) TaskEvents(ctx context.Context, filter *model.TaskEventFilter, after *int64) (<-chan *model.TaskEvent, error) {
	match, verr := eventMatcher("filter", filter)
	if verr != nil {
		return nil, verr
	}
	rd, err := (*Resolver)(s).reader(ctx, match, after)
	if err != nil {
		return nil, err
	}
	const kind = "taskEvents"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.TaskEvent, s.opts.SubscriptionBuffer)
	go func() {
		defer ended()
		defer close(ch)
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
				select {
				case ch <- taskEvent(&items[i]):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch, nil
}

func (s *subscriptionResolver) TaskEventBatches(ctx context.Context, filter *model.TaskEventFilter, after *int64, maxItems *int, maxDelayMs *int) (<-chan *model.TaskEventBatch, error) {
	match, verr := eventMatcher("filter", filter)
	if verr != nil {
		return nil, verr
	}
	n := pageSize(maxItems, 256)
	if maxItems != nil && (*maxItems < 1 || *maxItems > 1000) {
		return nil, invalid("max", "must be within 1..1000, got %d", *maxItems)
	}
	delay := time.Duration(deref(maxDelayMs)) * time.Millisecond
	if maxDelayMs != nil && (*maxDelayMs < 0 || *maxDelayMs > 1000) {
		return nil, invalid("maxDelayMs", "must be within 0..1000, got %d", *maxDelayMs)
	}
	rd, err := (*Resolver)(s).reader(ctx, match, after)
	if err != nil {
		return nil, err
	}
	const kind = "taskEventBatches"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.TaskEventBatch, max(s.opts.SubscriptionBuffer/16, 2))
	go func() {
		defer ended()
		defer close(ch)
		for {
			items, err := rd.Next(ctx, n)
			if err != nil {
				(*Resolver)(s).streamFailed(ctx, kind, err)
				return
			}
			b := &model.TaskEventBatch{Events: make([]*model.TaskEvent, 0, len(items))}
			b.Events = appendEvents(b.Events, items, s.opts.Observer, kind)
			if delay > 0 && len(b.Events) < n {
				// Let more gather, up to the delay or a full batch.
				wait, cancel := context.WithTimeout(ctx, delay)
				for len(b.Events) < n {
					if s.eng.Events().Wait(wait, rd.Position()) != nil {
						break
					}
					more, err := rd.Poll(ctx, n-len(b.Events))
					if err != nil {
						break
					}
					b.Events = appendEvents(b.Events, more, s.opts.Observer, kind)
				}
				cancel()
			}
			b.LastSeq = rd.Position()
			select {
			case ch <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func appendEvents(dst []*model.TaskEvent, items []eventstream.Item, obs Observer, kind string) []*model.TaskEvent {
	for i := range items {
		if items[i].Lagged > 0 {
			obs.Lagged(kind, items[i].Lagged)
		}
		dst = append(dst, taskEvent(&items[i]))
	}
	return dst
}

func (s *subscriptionResolver) Task(ctx context.Context, id string) (<-chan *model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	first, err := s.eng.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	// Follow the task's events from its snapshot on: nothing after it is
	// missed, nothing before it is repeated.
	after := first.LastSeq
	rd := eventstream.NewReader(s.eng, eventstream.Options{
		After: &after, MaxLag: s.opts.Limits.MaxSubscriberLag,
		Match: func(e *engine.Event) bool { return e.TaskID == id },
	})
	const kind = "task"
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.Task, 4)
	go func() {
		defer ended()
		defer close(ch)
		t := first
		for {
			select {
			case ch <- model.NewTask(t):
			case <-ctx.Done():
				return
			}
			if t.State.Terminal() {
				return
			}
			// Wait for the next change (or a LAGGED notice: either way,
			// read the task again).
			if _, err := rd.Next(ctx, eventstream.DefaultBatch); err != nil {
				(*Resolver)(s).streamFailed(ctx, kind, err)
				return
			}
			if t, err = s.eng.Task(ctx, id); err != nil {
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
			case ch <- &model.Stats{S: s.eng.Stats()}:
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
	const kind = "instanceEvents"
	events, stop := reg.Subscribe(s.opts.SubscriptionBuffer)
	ended := s.opts.Observer.SubscriptionStarted(kind)
	ch := make(chan *model.InstanceEvent)
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
				if ev.Lagged > 0 {
					s.opts.Observer.Lagged(kind, ev.Lagged)
				}
				select {
				case ch <- &model.InstanceEvent{E: ev}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}
