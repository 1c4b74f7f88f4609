package engine

import (
	"context"
	"errors"
	"math/bits"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Read-only views of the engine: tasks, lanes, agents, batches and counters.

// Task returns a task by id: from memory while it is live, else from the
// store. A missing task is a NOT_FOUND error.
func (e *Engine) Task(ctx context.Context, id string) (*Task, error) {
	var snap *Task
	e.view(func(c *core) {
		if t := c.tasks[id]; t != nil {
			snap = c.liveSnapshotLocked(t)
		}
	})
	if snap != nil {
		return snap, nil
	}
	return e.storedTask(ctx, id)
}

// liveSnapshotLocked is Task's copy of a task in memory, with its place in
// its queue.
func (c *core) liveSnapshotLocked(t *task) *Task {
	snap := t.snapshot()
	if t.state == StateQueued && t.sq != nil {
		snap.Position = c.positionLocked(t)
	}
	return snap
}

// storedTask is Task's read of a task no longer in memory.
func (e *Engine) storedTask(ctx context.Context, id string) (*Task, error) {
	st, err := e.store.Task(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound("no task %s", id)
	}
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "reading task " + id, Err: err, Retryable: true}
	}
	return st, nil
}

// positionLocked counts the tasks ahead of t in its (lane, agent) queue.
func (c *core) positionLocked(t *task) int {
	n := 0
	for _, sq := range t.sq.aq.subs {
		for _, o := range sq.tasks.Items() {
			if o != t && taskBefore(o, t) {
				n++
			}
		}
	}
	return n
}

// Positions returns, for the tasks among ids that are QUEUED, how many
// tasks are ahead of each in its (lane, agent) queue, as Task reports it:
// for lists, one pass over each queue involved, whatever the number of its
// tasks asked for (O(n log k) for k of a queue's n tasks).
func (e *Engine) Positions(ids []string) map[string]int {
	var out map[string]int
	e.view(func(c *core) { out = c.positionsLocked(ids) })
	return out
}

// positionsLocked is Positions on the core.
func (c *core) positionsLocked(ids []string) map[string]int {
	groups := map[*agentQueue][]*task{}
	seen := make(map[*task]bool, len(ids))
	for _, id := range ids {
		if t := c.tasks[id]; t != nil && t.state == StateQueued && t.sq != nil && !seen[t] {
			seen[t] = true
			groups[t.sq.aq] = append(groups[t.sq.aq], t)
		}
	}
	out := make(map[string]int, len(ids))
	for aq, ts := range groups {
		slices.SortFunc(ts, func(a, b *task) int {
			if taskBefore(a, b) {
				return -1
			}
			return 1
		})
		// A task ahead of ts[j] is ahead of every later one: count it at
		// the first, then sum.
		ahead := make([]int, len(ts)+1)
		for _, sq := range aq.subs {
			for _, o := range sq.tasks.Items() {
				j, _ := slices.BinarySearchFunc(ts, o, func(t, o *task) int {
					if taskBefore(o, t) {
						return 1
					}
					return -1
				})
				ahead[j]++
			}
		}
		n := 0
		for i, t := range ts {
			n += ahead[i]
			out[t.id] = n
		}
	}
	return out
}

// Tasks lists tasks from the store, after making sure it holds every change
// made before the call.
func (e *Engine) Tasks(ctx context.Context, q TaskQuery) ([]*Task, error) {
	if q.Limit <= 0 || q.Limit > 1000 {
		return nil, invalid("first", "must be within 1..1000, got %d", q.Limit)
	}
	if err := e.Sync(ctx); err != nil {
		return nil, err
	}
	ts, err := e.store.Tasks(ctx, q)
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "listing tasks", Err: err, Retryable: true}
	}
	return ts, nil
}

// CountTasks counts tasks by state in the store.
func (e *Engine) CountTasks(ctx context.Context, f TaskFilter) (map[State]int, error) {
	if err := e.Sync(ctx); err != nil {
		return nil, err
	}
	return e.store.CountTasks(ctx, f)
}

// LaneStatus is a lane's configuration and load.
type LaneStatus struct {
	Config    LaneConfig
	InFlight  int
	Pending   int // QUEUED + WAITING + RETRY_WAIT
	Selection string
	Retry     string
}

// Lanes returns every lane, in configuration order.
func (e *Engine) Lanes(_ context.Context) []LaneStatus {
	var out []LaneStatus
	e.view(func(c *core) { out = c.lanesLocked() })
	return out
}

// lanesLocked is Lanes on the core.
func (c *core) lanesLocked() []LaneStatus {
	out := make([]LaneStatus, 0, len(c.lanes))
	for _, l := range c.lanes {
		if !l.cfg.Removed {
			out = append(out, LaneStatus{Config: l.cfg, InFlight: l.inflight, Pending: l.queued, Selection: l.selection.name, Retry: l.retry.name})
		}
	}
	return out
}

// Lane returns one lane, or NOT_FOUND.
func (e *Engine) Lane(ctx context.Context, name string) (LaneStatus, error) {
	for _, l := range e.Lanes(ctx) {
		if l.Config.Name == name {
			return l, nil
		}
	}
	return LaneStatus{}, notFound("no lane %q", name)
}

// AgentStatus is an agent's load and recent share of dispatches.
type AgentStatus struct {
	ID                   string
	Weight               int
	MaxInFlight          int
	InFlight             int
	Pending              int
	Dispatched           uint64  // since the engine started
	DispatchedLastMinute uint64  // over the last 60 s
	Share                float64 // of all dispatches over the last 60 s
	Labels               map[string]string
}

// Agents returns the agents the engine knows, by id.
func (e *Engine) Agents(_ context.Context) []AgentStatus {
	var out []AgentStatus
	e.view(func(c *core) { out = c.agentsLocked() })
	return out
}

// agentsLocked is Agents on the core.
func (c *core) agentsLocked() []AgentStatus {
	now := c.now()
	out := make([]AgentStatus, 0, len(c.agents))
	var total uint64
	for _, a := range c.agents {
		s := AgentStatus{ID: a.id, Weight: a.weight, MaxInFlight: a.limit, InFlight: a.inflight, Pending: a.queued,
			Dispatched: a.dispatched, DispatchedLastMinute: a.window.total(now), Labels: a.labels.Map()}
		total += s.DispatchedLastMinute
		out = append(out, s)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].DispatchedLastMinute) / float64(total)
		}
	}
	slices.SortFunc(out, func(a, b AgentStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// BatchStatus is a batch and the states of its tasks.
type BatchStatus struct {
	Info   BatchInfo
	Counts map[State]int
	Total  int
	Done   bool // every task has ended
}

// Batch returns a batch's status.
func (e *Engine) Batch(ctx context.Context, id string) (*BatchStatus, error) {
	info, err := e.store.Batch(ctx, id)
	if errors.Is(err, ErrNotFound) {
		var b *batch
		e.view(func(c *core) { b = c.batches[id] })
		if b == nil {
			return nil, notFound("no batch %s", id)
		}
		if err := e.Sync(ctx); err != nil {
			return nil, err
		}
		info, err = e.store.Batch(ctx, id)
	}
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "reading batch " + id, Err: err, Retryable: true}
	}
	counts, err := e.CountTasks(ctx, TaskFilter{BatchID: id})
	if err != nil {
		return nil, err
	}
	bs := &BatchStatus{Info: *info, Counts: counts, Done: true}
	for s, n := range counts {
		bs.Total += n
		if !s.Settled() && n > 0 {
			bs.Done = false
		}
	}
	return bs, nil
}

// Stats are the engine's counters.
type Stats struct {
	At          time.Time
	ByState     map[State]int // live tasks by state (terminal ones only until committed)
	InFlight    int
	MaxInFlight int
	Pending     int // QUEUED + WAITING + RETRY_WAIT
	Submitted   uint64
	Dispatched  uint64
	Ended       map[State]uint64 // tasks that reached each terminal state (and PARKED) since start
	Rejected    uint64
	Dropped     uint64
	LeaseExpiry uint64
	Stale       uint64 // completions ignored because their lease was gone
	// PolicyInvalid counts policy answers the engine refused (and replaced
	// with the built-in policy's).
	PolicyInvalid   uint64
	CommitErrors    uint64 // failed commit attempts since start (each is retried)
	CommitFailing   bool   // commits are failing, or one has run longer than Config.CommitTimeout: not ready
	Purged          uint64 // terminal tasks purged after the retention period
	LastSeq         uint64
	Draining        bool
	DispatchLatency Histogram // QUEUED → ASSIGNED
}

// Stats returns the current counters.
func (e *Engine) Stats(_ context.Context) Stats {
	var s Stats
	e.view(func(c *core) {
		s = c.statsLocked()
		s.CommitErrors, s.Purged = e.stats.commitErrors.Load(), e.purged.Load()
		if _, err := e.commitHealth.failingFor(e.cfg.CommitTimeout); err != nil {
			s.CommitFailing = true
		}
	})
	return s
}

// statsLocked is the core's part of Stats: everything but the driver's
// commits and purges.
func (c *core) statsLocked() Stats {
	s := Stats{
		At: c.now(), ByState: map[State]int{}, InFlight: c.inflight, MaxInFlight: c.cfg.MaxInFlight, Pending: c.queued,
		Submitted: c.stats.submitted, Dispatched: c.stats.dispatched, Ended: map[State]uint64{},
		Rejected: c.stats.rejected, Dropped: c.stats.dropped, LeaseExpiry: c.stats.leaseExpired, Stale: c.stats.stale,
		PolicyInvalid: c.stats.policyInvalid, LastSeq: c.seq, Draining: c.draining, DispatchLatency: c.stats.latency,
	}
	for st, n := range c.counts {
		if n > 0 {
			s.ByState[State(st)] = n
		}
	}
	for st, n := range c.stats.ended {
		if n > 0 {
			s.Ended[State(st)] = n
		}
	}
	return s
}

// counters are the engine's running totals (guarded by the engine lock,
// except where atomic).
type counters struct {
	submitted, dispatched, stale, leaseExpired, dropped, rejected, policyInvalid uint64
	ended                                                                        [StateExpired + 1]uint64
	commitErrors                                                                 atomic.Uint64
	idleCommits                                                                  atomic.Uint64 // committer wake-ups that found nothing to write (tests: IdleCommits)
	rounds                                                                       uint64        // rounds of dispatch run (tests: Rounds)
	latency                                                                      Histogram
}

func (c *counters) observeDispatch(waitNs int64) {
	c.dispatched++
	c.latency.Observe(waitNs)
}

// Histogram counts durations in exponential buckets: bucket i holds the
// observations of at most 2^i microseconds (bucket 0: up to 1 µs), the last
// one everything longer.
type Histogram struct {
	Counts [HistogramBuckets]uint64
	SumNs  int64
}

// HistogramBuckets is the number of buckets of a Histogram: up to 2^26 µs
// (about 67 s) and one for everything longer.
const HistogramBuckets = 28

// Observe adds one duration, in nanoseconds.
func (h *Histogram) Observe(ns int64) {
	if ns < 0 {
		ns = 0
	}
	h.SumNs += ns
	us := uint64(ns+999) / 1000
	i := 0
	if us > 1 {
		i = min(bits.Len64(us-1), HistogramBuckets-1)
	}
	h.Counts[i]++
}

// UpperBound returns bucket i's upper bound (the last bucket's is +Inf,
// reported as the largest duration).
func (h *Histogram) UpperBound(i int) time.Duration {
	if i >= HistogramBuckets-1 {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(1<<i) * time.Microsecond
}

// Quantile estimates the q-quantile (0 < q ≤ 1) as the upper bound of the
// bucket that holds it.
func (h *Histogram) Quantile(q float64) time.Duration {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= rank {
			return h.UpperBound(i)
		}
	}
	return h.UpperBound(HistogramBuckets - 1)
}

// StoredEvents returns up to limit committed events with seq > after from the
// store: for subscribers resuming from further back than the in-memory log
// (Events) holds. Events purged with their tasks are gone.
func (e *Engine) StoredEvents(ctx context.Context, after uint64, limit int) ([]Event, error) {
	evs, err := e.store.Events(ctx, after, limit)
	if err != nil {
		return nil, &Error{Code: CodeUnavailable, Message: "reading stored events", Err: err, Retryable: true}
	}
	return evs, nil
}
