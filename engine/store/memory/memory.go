// Package memory is the ephemeral store: everything lives in the process and
// is gone when it stops. It is the fastest store and the reference the other
// drivers are checked against (engine/store/storetest runs the same suite on
// all of them).
package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

// Options bound what the store keeps.
type Options struct {
	// MaxEvents is how many of the latest events are kept for resuming
	// subscribers (default 65,536).
	MaxEvents int
	// MaxEnded is how many terminal tasks are kept at most; beyond it the
	// oldest are purged at once (default 100,000). Time-based retention is
	// the engine's job (Purge).
	MaxEnded int
}

// Store keeps tasks and events in memory.
type Store struct {
	mu       sync.RWMutex
	opts     Options
	tasks    map[string]*record
	bySeq    []*record // every task, in seq order
	idem     map[string]string
	batches  map[string]engine.BatchInfo
	events   eventRing // the latest MaxEvents
	lanes    map[string]engine.LaneConfig
	settings map[string][]byte
	lastSeq  uint64
	ended    int
}

var _ engine.Store = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = 1 << 16
	}
	if opts.MaxEnded <= 0 {
		opts.MaxEnded = 100_000
	}
	return &Store{
		opts: opts, tasks: map[string]*record{}, idem: map[string]string{}, events: eventRing{max: opts.MaxEvents},
		batches: map[string]engine.BatchInfo{}, lanes: map[string]engine.LaneConfig{}, settings: map[string][]byte{},
	}
}

// Durable implements engine.Store: nothing survives the process.
func (s *Store) Durable() bool { return false }

// Load implements engine.Store.
func (s *Store) Load(context.Context) (*engine.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap := &engine.Snapshot{LastSeq: s.lastSeq, Settings: map[string][]byte{}}
	seen := map[string]bool{}
	for _, t := range s.bySeq {
		if t.State.Terminal() {
			continue
		}
		snap.Tasks = append(snap.Tasks, t.task())
		if b := t.Spec.BatchID; b != "" && !seen[b] {
			seen[b] = true
			if bi, ok := s.batches[b]; ok {
				snap.Batches = append(snap.Batches, bi)
			}
		}
	}
	for _, l := range s.lanes {
		snap.Lanes = append(snap.Lanes, l)
	}
	slices.SortFunc(snap.Lanes, func(a, b engine.LaneConfig) int { return cmp.Compare(a.Name, b.Name) })
	for k, v := range s.settings {
		snap.Settings[k] = slices.Clone(v)
	}
	return snap, nil
}

// Commit implements engine.Store.
func (s *Store) Commit(_ context.Context, b *engine.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Check before writing anything: a failed batch writes nothing.
	prev := s.lastSeq
	for i := range b.Events {
		if seq := b.Events[i].Seq; seq <= prev {
			return fmt.Errorf("memory store: event seq %d does not follow %d", seq, prev)
		}
		prev = b.Events[i].Seq
	}
	for _, bi := range b.Batches {
		s.batches[bi.ID] = bi
	}
	for _, t := range b.Tasks {
		s.upsert(t)
	}
	if n := len(b.Events); n > 0 {
		for i := range b.Events {
			s.events.push(b.Events[i])
		}
		s.lastSeq = b.Events[n-1].Seq
	}
	for _, l := range b.Lanes {
		s.lanes[l.Name] = l
	}
	for _, st := range b.Settings {
		if st.Value == nil {
			delete(s.settings, st.Key)
		} else {
			s.settings[st.Key] = slices.Clone(st.Value)
		}
	}
	if s.ended > s.opts.MaxEnded {
		// Purge a tenth more than needed so that the scan is amortised.
		s.purge(time.Time{}, s.ended-s.opts.MaxEnded+s.opts.MaxEnded/10, true)
	}
	return nil
}

func (s *Store) upsert(snap *engine.Task) {
	t, ok := s.tasks[snap.ID]
	if ok {
		if t.State.Terminal() {
			s.ended--
		}
		t.set(snap) // in place: bySeq keeps pointing at it, no search through a million seqs
	} else {
		t = &record{}
		t.set(snap)
		i := len(s.bySeq)
		if i > 0 && s.bySeq[i-1].Seq > t.Seq {
			i = s.index(t.Seq)
		}
		s.bySeq = slices.Insert(s.bySeq, i, t)
		if k := t.Spec.IdempotencyKey; k != "" {
			s.idem[t.Spec.AgentID+"\x00"+k] = t.ID
		}
		s.tasks[t.ID] = t
	}
	if t.State.Terminal() {
		s.ended++
	}
}

// index returns the position of seq in bySeq (or where it would go).
func (s *Store) index(seq uint64) int {
	i, _ := slices.BinarySearchFunc(s.bySeq, seq, func(t *record, seq uint64) int {
		switch {
		case t.Seq < seq:
			return -1
		case t.Seq > seq:
			return 1
		}
		return 0
	})
	return i
}

// Task implements engine.Store.
func (s *Store) Task(_ context.Context, id string) (*engine.Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t, ok := s.tasks[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, engine.ErrNotFound)
	}
	return t.task(), nil
}

// Tasks implements engine.Store.
func (s *Store) Tasks(_ context.Context, q engine.TaskQuery) ([]*engine.Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*engine.Task
	if q.Order == engine.OldestFirst {
		i := 0
		if q.After > 0 {
			i = s.index(q.After + 1)
		}
		for ; i < len(s.bySeq) && len(out) < q.Limit; i++ {
			if t := s.bySeq[i]; t.matches(&q.Filter) {
				out = append(out, t.task())
			}
		}
		return out, nil
	}
	i := len(s.bySeq) - 1
	if q.After > 0 {
		i = s.index(q.After) - 1
	}
	for ; i >= 0 && len(out) < q.Limit; i-- {
		if t := s.bySeq[i]; t.matches(&q.Filter) {
			out = append(out, t.task())
		}
	}
	return out, nil
}

// CountTasks implements engine.Store.
func (s *Store) CountTasks(_ context.Context, f engine.TaskFilter) (map[engine.State]int, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[engine.State]int{}
	for _, t := range s.bySeq {
		if t.matches(&f) {
			out[t.State]++
		}
	}
	return out, nil
}

// Batch implements engine.Store.
func (s *Store) Batch(_ context.Context, id string) (*engine.BatchInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.batches[id]
	if !ok {
		return nil, fmt.Errorf("batch %s: %w", id, engine.ErrNotFound)
	}
	return &b, nil
}

// FindIdempotent implements engine.Store.
func (s *Store) FindIdempotent(_ context.Context, agentID, key string) (*engine.Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.idem[agentID+"\x00"+key]
	if !ok {
		return nil, fmt.Errorf("idempotency key %q of agent %s: %w", key, agentID, engine.ErrNotFound)
	}
	return s.tasks[id].task(), nil
}

// Events implements engine.Store.
func (s *Store) Events(_ context.Context, after uint64, limit int) ([]engine.Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.events.after(after, limit), nil
}

// Purge implements engine.Store.
func (s *Store) Purge(_ context.Context, before time.Time, limit int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, gone := s.purge(before, limit, false)
	// One pass over the ring for the purged tasks' events and the events of
	// no task from before the cutoff.
	if len(gone) > 0 || s.events.tasklessBefore(before) {
		s.events.drop(func(e *engine.Event) bool { return gone[e.TaskID] || e.TaskID == "" && e.At.Before(before) })
	}
	return n, nil
}

// purge removes up to limit terminal tasks that ended before the cutoff (or
// the oldest ones regardless of time, with any). It returns how many, and
// the ids of those whose events must go too (none with any: trimming to
// MaxEnded keeps the events).
func (s *Store) purge(before time.Time, limit int, any bool) (int, map[string]bool) {
	var gone map[string]bool // the purged tasks whose events go too: not when trimming to MaxEnded
	if !any {
		gone = map[string]bool{}
	}
	n := 0
	keep := s.bySeq[:0]
	for _, t := range s.bySeq {
		if n < limit && t.State.Terminal() && (any || t.endedAt() < ns(before)) {
			n++
			if gone != nil {
				gone[t.ID] = true
			}
			delete(s.tasks, t.ID)
			if k := t.Spec.IdempotencyKey; k != "" && s.idem[t.Spec.AgentID+"\x00"+k] == t.ID {
				delete(s.idem, t.Spec.AgentID+"\x00"+k)
			}
			s.ended--
			continue
		}
		keep = append(keep, t)
	}
	clear(s.bySeq[len(keep):])
	s.bySeq = keep
	return n, gone
}

// Close implements engine.Store.
func (s *Store) Close() error { return nil }

// record is a task as the store keeps it: times as Unix nanoseconds and
// what only tasks that ran have (attempts, result, error) behind a pointer,
// which makes a queued task's record less than half the size of an
// engine.Task and cheaper for the collector to scan.
type record struct {
	ID                             string
	Spec                           *engine.TaskSpec
	Seq, LastSeq                   uint64
	Rank                           int64
	CreatedAt, UpdatedAt, QueuedAt int64
	Reason                         string
	More                           *recordMore
	Depth, Unmet                   int32
	State                          engine.State
}

// recordMore holds what a queued task does not have yet, so that a record
// of one stays in a small size class (a million queued tasks are common).
type recordMore struct {
	NextRunAt, EndedAt int64
	Webhooks           []engine.WebhookDelivery
	Attempts           []engine.Attempt
	Result             json.RawMessage
	Error, RetryOf     string
	ResetAt            int
	Class              policy.ErrorClass
}

// set makes r the record of the snapshot t, in place (reusing its More):
// the write lock keeps readers out meanwhile.
func (r *record) set(t *engine.Task) {
	more := r.More
	*r = record{
		ID: t.ID, Spec: t.Spec, Seq: t.Seq, LastSeq: t.LastSeq, Rank: t.Rank,
		CreatedAt: ns(t.CreatedAt), UpdatedAt: ns(t.UpdatedAt), QueuedAt: ns(t.QueuedAt),
		Reason: t.Reason, Depth: int32(t.Depth), Unmet: int32(t.Unmet), State: t.State,
	}
	if len(t.Attempts) > 0 || t.Result != nil || t.Error != "" || t.RetryOf != "" || t.ResetAt != 0 || len(t.Webhooks) > 0 ||
		!t.NextRunAt.IsZero() || !t.EndedAt.IsZero() {
		if more == nil {
			more = &recordMore{}
		}
		*more = recordMore{NextRunAt: ns(t.NextRunAt), EndedAt: ns(t.EndedAt), Attempts: t.Attempts, Result: t.Result,
			Error: t.Error, RetryOf: t.RetryOf, ResetAt: t.ResetAt, Class: t.Class, Webhooks: t.Webhooks}
		r.More = more
	}
}

// task returns a fresh engine.Task for the record (callers own it).
func (r *record) task() *engine.Task {
	t := &engine.Task{
		ID: r.ID, Spec: r.Spec, Seq: r.Seq, LastSeq: r.LastSeq, Rank: r.Rank,
		CreatedAt: tm(r.CreatedAt), UpdatedAt: tm(r.UpdatedAt), QueuedAt: tm(r.QueuedAt),
		Reason: r.Reason, Depth: int(r.Depth), Unmet: int(r.Unmet), State: r.State, Position: -1,
	}
	if m := r.More; m != nil {
		t.NextRunAt, t.EndedAt = tm(m.NextRunAt), tm(m.EndedAt)
		t.Attempts, t.Result, t.Error, t.RetryOf, t.ResetAt, t.Class = slices.Clone(m.Attempts), m.Result, m.Error, m.RetryOf, m.ResetAt, m.Class
		t.Webhooks = slices.Clone(m.Webhooks)
	}
	return t
}

// endedAt is when the task ended, Unix ns (0 while it lives).
func (r *record) endedAt() int64 {
	if r.More == nil {
		return 0
	}
	return r.More.EndedAt
}

func (r *record) matches(f *engine.TaskFilter) bool {
	return f.MatchFields(r.ID, r.Spec, r.State)
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func tm(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// eventRing keeps the latest events in seq order in a circular buffer.
type eventRing struct {
	buf   []engine.Event // grows by doubling up to max
	max   int
	start int // index of the oldest event
	n     int
}

func (r *eventRing) at(i int) *engine.Event { return &r.buf[(r.start+i)%len(r.buf)] }

// tasklessBefore reports whether the ring holds an event of no task (a lane
// or engine event) from before the cutoff. Events are in time order, so it
// looks at the old ones only.
func (r *eventRing) tasklessBefore(before time.Time) bool {
	for i := 0; i < r.n && r.at(i).At.Before(before); i++ {
		if r.at(i).TaskID == "" {
			return true
		}
	}
	return false
}

func (r *eventRing) push(e engine.Event) {
	if r.n == len(r.buf) && len(r.buf) < r.max {
		bigger := make([]engine.Event, min(max(2*len(r.buf), 1024), r.max))
		for i := 0; i < r.n; i++ {
			bigger[i] = *r.at(i)
		}
		r.buf, r.start = bigger, 0
	}
	if r.n < len(r.buf) {
		*r.at(r.n) = e
		r.n++
		return
	}
	r.buf[r.start] = e
	r.start = (r.start + 1) % len(r.buf)
}

// after returns up to limit events with seq > after.
func (r *eventRing) after(after uint64, limit int) []engine.Event {
	lo, hi := 0, r.n
	for lo < hi {
		m := (lo + hi) / 2
		if r.at(m).Seq <= after {
			lo = m + 1
		} else {
			hi = m
		}
	}
	out := make([]engine.Event, 0, min(limit, r.n-lo))
	for i := lo; i < r.n && len(out) < limit; i++ {
		out = append(out, *r.at(i))
	}
	return out
}

// drop removes the events for which gone returns true, keeping the order.
func (r *eventRing) drop(gone func(*engine.Event) bool) {
	kept := make([]engine.Event, 0, r.n)
	for i := 0; i < r.n; i++ {
		if e := r.at(i); !gone(e) {
			kept = append(kept, *e)
		}
	}
	clear(r.buf)
	r.start, r.n = 0, copy(r.buf, kept)
	if len(r.buf) == 0 {
		r.n = 0
	}
}
