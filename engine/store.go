package engine

import (
	"context"
	"errors"
	"time"
)

// ErrFenced is what a Store's Commit returns (wrapped) when it refuses a
// batch because this process has lost the right to write: a multi-node
// store's leader whose lease was taken over. Nothing of the batch was
// written, and retrying cannot succeed: the engine must stop writing.
var ErrFenced = errors.New("store: fenced: this node no longer holds the write lease")

// Store persists what the engine decides. The engine keeps its working state
// (queues, counters) in memory and writes every change through a Store in
// batches; at start it rebuilds its state from Load. Drivers live in
// engine/store/...; they all pass the conformance suite in
// engine/store/storetest.
//
// The engine calls Commit from one goroutine at a time, in seq order. The
// read methods may be called concurrently with Commit and with each other.
type Store interface {
	// Durable reports whether a committed batch survives the process. The
	// engine makes submitters wait for the commit only when it does.
	Durable() bool
	// Load returns the state to resume from: every task that is not terminal,
	// the live lane settings, the stored settings and the last event seq.
	Load(ctx context.Context) (*Snapshot, error)
	// Commit writes a batch atomically: all of it or none. A batch whose
	// events do not each have a seq above the previous one (and the first
	// above the last committed seq) fails and writes nothing. The store must
	// not keep the batch's slices nor its *Task values after Commit returns
	// (the engine reuses them); what a Task points to (its spec, attempts,
	// result and webhook deliveries) is immutable and may be kept.
	// An error wrapping ErrFenced is permanent: the store will refuse every
	// later batch too.
	Commit(ctx context.Context, b *Batch) error
	// Task returns one task, or an error wrapping ErrNotFound.
	Task(ctx context.Context, id string) (*Task, error)
	// Tasks returns the tasks that match q, in q.Order of seq, at most
	// q.Limit of them, starting after the cursor q.After.
	Tasks(ctx context.Context, q TaskQuery) ([]*Task, error)
	// CountTasks counts the tasks that match q's filter, by state.
	CountTasks(ctx context.Context, f TaskFilter) (map[State]int, error)
	// Batch returns a batch's description, or an error wrapping ErrNotFound.
	Batch(ctx context.Context, id string) (*BatchInfo, error)
	// FindIdempotent returns the task an agent submitted with an idempotency
	// key, or an error wrapping ErrNotFound.
	FindIdempotent(ctx context.Context, agentID, key string) (*Task, error)
	// Events returns up to limit events with seq > after, in seq order.
	Events(ctx context.Context, after uint64, limit int) ([]Event, error)
	// Purge deletes up to limit terminal tasks that ended before the cutoff,
	// with their events, and returns how many tasks it deleted. It also
	// deletes events of no task (lane and engine events) from before the
	// cutoff: a bounded number per call, so that repeated calls get them all.
	Purge(ctx context.Context, before time.Time, limit int) (int, error)
	// Close releases the store.
	Close() error
}

// PipelinedStore is a Store that can take the next batch while the one
// before it is still being committed, so that a durable commit stream is
// not one round trip (and one sync) after another. The engine uses it when
// the store implements it (and the engine is not synchronous).
type PipelinedStore interface {
	Store
	// CommitAsync starts writing b, as Commit would, and returns a channel
	// closed once the outcome is known and a function that returns it
	// (waiting if need be). The engine calls CommitAsync from one
	// goroutine in seq order, with at most one earlier batch still
	// outstanding, and calls each returned function once, in the same
	// order; b stays unchanged until then. A batch commits only if every
	// batch started before it did: when one fails, those started after it
	// fail too and write nothing (the engine retries them in order with
	// Commit).
	CommitAsync(ctx context.Context, b *Batch) (done <-chan struct{}, wait func() error)
}

// Snapshot is what a Store hands back at start.
type Snapshot struct {
	Tasks    []*Task     // non-terminal tasks, in seq order
	Batches  []BatchInfo // batches that have tasks among Tasks
	Lanes    []LaneConfig
	Settings map[string][]byte
	LastSeq  uint64
}

// Batch is one atomic write.
type Batch struct {
	Tasks    []*Task     // full snapshots: insert or replace by ID (a task's ID, Seq and Spec never change once committed, so a driver may write them once)
	Events   []Event     // in seq order
	Batches  []BatchInfo // new or changed batches: insert or replace by ID
	Lanes    []LaneConfig
	Settings []Setting
}

// BatchInfo is what a batch is, beyond its tasks.
type BatchInfo struct {
	ID          string
	Parallelism int // 0: no cap
	WebhookURL  string
	CreatedAt   time.Time
	EndedAt     time.Time         // when its last task ended; zero while any runs
	Webhooks    []WebhookDelivery // delivery attempts of the batch's webhook
}

// Setting is a named, opaque value the engine or the server persists (active
// policies, loaded plugins, …). A nil Value deletes it.
type Setting struct {
	Key   string
	Value []byte
}

// Empty reports whether the batch writes nothing.
func (b *Batch) Empty() bool {
	return len(b.Tasks) == 0 && len(b.Events) == 0 && len(b.Batches) == 0 && len(b.Lanes) == 0 && len(b.Settings) == 0
}

// TaskFilter selects tasks. Empty fields match everything; non-empty fields
// must all match.
type TaskFilter struct {
	IDs        []string
	States     []State
	AgentID    string
	Lane       string
	SessionKey string
	BatchID    string
	ParentID   string
	Labels     map[string]string // each label must be present with that value
}

// Matches reports whether t passes the filter.
func (f *TaskFilter) Matches(t *Task) bool { return f.MatchFields(t.ID, t.Spec, t.State) }

// MatchFields reports whether a task with this id, spec and state passes the
// filter: for stores that keep tasks in their own form.
func (f *TaskFilter) MatchFields(id string, s *TaskSpec, state State) bool {
	if f.AgentID != "" && s.AgentID != f.AgentID ||
		f.Lane != "" && s.Lane != f.Lane ||
		f.SessionKey != "" && s.Session() != f.SessionKey ||
		f.BatchID != "" && s.BatchID != f.BatchID ||
		f.ParentID != "" && s.ParentID != f.ParentID {
		return false
	}
	if len(f.States) > 0 && !containsState(f.States, state) {
		return false
	}
	if len(f.IDs) > 0 && !containsString(f.IDs, id) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := s.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func containsState(ss []State, s State) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Order is a listing direction by seq.
type Order uint8

// Orders.
const (
	NewestFirst Order = 0
	OldestFirst Order = 1
)

// TaskQuery is a page of a filtered listing, keyed by seq so that pages stay
// stable while tasks are added.
type TaskQuery struct {
	Filter TaskFilter
	Order  Order
	After  uint64 // a cursor: the seq of the last task of the previous page, 0 for the first page
	Limit  int
}
