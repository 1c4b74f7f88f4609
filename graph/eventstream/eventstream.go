// Package eventstream reads the engine's event log for one subscriber, at the
// subscriber's own pace.
//
// The engine appends committed events to a ring (engine.EventLog) and never
// waits for readers. Each subscription owns a Reader: a position in the log,
// nothing more. A subscriber that reads slowly holds no memory on the engine's
// side and slows nobody down; when it falls further behind the head than its
// budget (Options.MaxLag), or behind what the ring still holds, the Reader
// skips it ahead and yields one LAGGED item that says how many events were
// passed over.
//
// A Reader that resumes (Options.After) first replays what the subscriber
// missed: from the ring when it still holds those events, else from the
// store (engine.StoredEvents), in seq order and without gaps. When neither
// goes back far enough, the Reader says so with a LAGGED item, then carries
// on from the oldest event it can get.
//
//	store (StoredEvents) ──replay──┐
//	                               ├──▶ Reader ──Next──▶ subscription goroutine ──chan──▶ transport
//	engine.EventLog (ring) ─Read──┘     (position, filter, lag budget)
package eventstream

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard/switchyard/engine"
)

// Source is where a Reader reads: the engine.
type Source interface {
	// Events returns the log of recent committed events.
	Events() *engine.EventLog
	// StoredEvents returns up to limit committed events with seq > after.
	StoredEvents(ctx context.Context, after uint64, limit int) ([]engine.Event, error)
}

// Defaults for Options.
const (
	DefaultMaxLag = 1 << 14
	DefaultBatch  = 256
)

// Options configure a Reader.
type Options struct {
	// After, when set, resumes the stream after this seq: the subscriber gets
	// every later event, replayed from memory or the store. When nil the
	// stream starts with the next event committed.
	After *uint64
	// Match keeps the events the subscriber wants; nil keeps every event.
	// LAGGED items are always yielded.
	Match func(*engine.Event) bool
	// MaxLag is how far (in events) a live subscriber may fall behind the
	// head of the log before it is skipped ahead to the head. Default
	// DefaultMaxLag. Replaying a resumed stream is not subject to it.
	MaxLag int
	// Batch is how many events one read takes from the log. Default
	// DefaultBatch.
	Batch int
	// Hub, when set, is what the reader waits on for new events (shared by
	// every reader); else it waits on the log itself.
	Hub *Hub
}

// Item is what a Reader yields: an event, or a LAGGED notice.
type Item struct {
	// Event is the event. For a LAGGED notice, only Seq (the last event
	// skipped) and At are set.
	Event engine.Event
	// Lagged, when not zero, makes the item a LAGGED notice: the subscriber
	// missed this many events.
	Lagged uint64
	// Reason says why events were missed, for a LAGGED notice.
	Reason string
}

// Lag reasons.
const (
	ReasonSlow   = "the subscriber fell behind the event stream"
	ReasonPurged = "the events resumed from are older than the server keeps"
)

// Reader is one subscriber's position in the event log. It is not safe for
// concurrent use: one goroutine per subscription calls Next.
type Reader struct {
	src    Source
	log    *engine.EventLog
	opts   Options
	pos    uint64 // the seq of the last event consumed
	live   uint64 // events after this seq are live; before, the reader replays
	buf    []engine.Event
	out    []Item
	lagged uint64 // total events skipped, for metrics
}

// NewReader returns a reader positioned after opts.After, or at the head of
// the log.
func NewReader(src Source, opts Options) *Reader {
	if opts.MaxLag <= 0 {
		opts.MaxLag = DefaultMaxLag
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	log := src.Events()
	head := log.Last()
	// buf grows with what reads need (step keeps it): a batch's worth up
	// front would be tens of kilobytes for every subscription, most of which
	// — a task(id) subscription — read a few events in all, and the garbage
	// collector would run that much more often.
	r := &Reader{src: src, log: log, opts: opts, pos: head, live: head}
	if opts.After != nil {
		r.pos = *opts.After
	}
	return r
}

// Position returns the seq of the last event the reader consumed (yielded
// or filtered out).
func (r *Reader) Position() uint64 { return r.pos }

// Lagged returns how many events the reader has skipped in all.
func (r *Reader) Lagged() uint64 { return r.lagged }

// Next returns the next items, at most max of them (max ≥ 1), waiting until
// there is at least one or ctx ends. The returned slice is reused by the
// next call.
func (r *Reader) Next(ctx context.Context, max int) ([]Item, error) {
	if max < 1 {
		max = 1
	}
	for {
		items, err := r.poll(ctx, max)
		if err != nil || len(items) > 0 {
			return items, err
		}
		if err := r.wait(ctx); err != nil {
			return nil, err
		}
	}
}

// wait blocks until there are events after the reader's position.
func (r *Reader) wait(ctx context.Context) error {
	if r.opts.Hub != nil {
		return r.opts.Hub.Wait(ctx, r.pos)
	}
	return r.log.Wait(ctx, r.pos)
}

// Poll returns the items available now, at most max of them, without
// waiting: an empty slice when there are none.
func (r *Reader) Poll(ctx context.Context, max int) ([]Item, error) {
	if max < 1 {
		max = 1
	}
	return r.poll(ctx, max)
}

func (r *Reader) poll(ctx context.Context, max int) ([]Item, error) {
	r.out = r.out[:0]
	for len(r.out) < max {
		n, err := r.step(ctx, max-len(r.out))
		if err != nil {
			return r.out, err
		}
		if n == 0 {
			break
		}
	}
	return r.out, nil
}

// step reads one batch and returns how many events it consumed (kept or
// not); 0 means the reader is caught up.
func (r *Reader) step(ctx context.Context, room int) (int, error) {
	head := r.log.Last()
	if r.pos >= head {
		return 0, nil
	}
	if r.pos >= r.live && head-r.pos > uint64(r.opts.MaxLag) {
		// Live, and too far behind: skip to the head.
		r.skip(head, ReasonSlow)
		return 1, nil
	}
	if oldest := r.log.Oldest(); r.pos+1 < oldest {
		return r.replayStored(ctx, oldest, room)
	}
	evs, missed := r.log.Read(r.pos, min(room, r.opts.Batch), r.buf[:0])
	r.buf = evs[:0] // reused by the next read, at the size it grew to
	if missed > 0 {
		// The ring moved on between Oldest and Read.
		if r.pos < r.live {
			return 1, nil // replaying: the store may still have them
		}
		r.skip(r.pos+missed, ReasonSlow)
	}
	r.take(evs)
	return len(evs) + int(missed), nil
}

// replayStored reads events older than the ring from the store.
func (r *Reader) replayStored(ctx context.Context, oldest uint64, room int) (int, error) {
	evs, err := r.src.StoredEvents(ctx, r.pos, min(room, r.opts.Batch))
	if err != nil {
		return 0, fmt.Errorf("replay events after seq %d: %w", r.pos, err)
	}
	if len(evs) == 0 || evs[0].Seq >= oldest {
		// The store holds nothing the ring does not: skip to the ring.
		r.skip(oldest-1, ReasonPurged)
		return 1, nil
	}
	// Stored seqs have gaps where retention purged events, before the
	// page or inside it: each is said with a LAGGED notice.
	n := 0
	for n < len(evs) && evs[n].Seq < oldest {
		if s := evs[n].Seq; s > r.pos+1 {
			r.skip(s-1, ReasonPurged)
		}
		r.take(evs[n : n+1])
		n++
	}
	return n + 1, nil
}

// skip moves the reader to seq `to`, yielding a LAGGED notice.
func (r *Reader) skip(to uint64, reason string) {
	if to <= r.pos {
		return
	}
	n := to - r.pos
	r.lagged += n
	r.pos = to
	r.out = append(r.out, Item{Event: engine.Event{Seq: to, At: time.Now()}, Lagged: n, Reason: reason})
}

// take consumes events in seq order, keeping those that match.
func (r *Reader) take(evs []engine.Event) {
	for i := range evs {
		e := &evs[i]
		if e.Seq <= r.pos {
			continue
		}
		r.pos = e.Seq
		if r.opts.Match == nil || r.opts.Match(e) {
			r.out = append(r.out, Item{Event: *e})
		}
	}
}
