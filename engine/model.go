package engine

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// task is the engine's working record of a live task (not terminal, or
// terminal and not yet committed to the store). It is kept small — times as
// Unix nanoseconds, 32-bit indexes, the outcome behind a pointer — because a
// million of them may wait in the queues.
type task struct {
	id        string
	spec      *TaskSpec
	seq       uint64
	rank      int64
	lastSeq   uint64
	queuedAt  int64             // Unix ns; ordering key of the age heaps
	createdAt int64             // Unix ns
	updatedAt int64             // Unix ns
	endedAt   int64             // Unix ns
	timerAt   [timerKinds]int64 // Unix ns; kept after the timer fires: timerAt[timerRetry] is when a RETRY_WAIT task queues (again)

	lane    *lane
	agent   *agent
	session *session // nil when the task has no session
	batch   *batch   // nil when the task has no batch
	sq      *subQueue
	inst    *instance // the instance slot it holds
	run     *Run

	fifo     [fifoScopes]fifoLink // QUEUED: links in the drop-oldest lists
	attempts []Attempt
	reason   string
	out      *outcome

	// The fields from here on are sized to keep a task within 288 bytes,
	// an allocation size class: at 296 it took 320, and the engine's
	// throughput fell by about 6 %. depth is at most MaxSpawnDepth+1 and
	// unmet at most MaxDependsOn.
	heapIdx   int32 // index in its subQueue's heap, -1 when not queued
	timerIdx  [timerKinds]int32
	depth     uint16
	unmet     uint16 // WAITING: dependencies not yet succeeded
	followers int32  // clients following it until it ends (Follow)

	state    State
	front    bool // interrupt mode: ahead of its session's other tasks
	holding  bool // holds its slots (ASSIGNED, RUNNING, or its attempt cancelled or timed out and not yet returned)
	timedOut bool // the attempt's context was cancelled for its timeout
	dirty    bool // changed since the last commit snapshot
	// forgetLater: committed as it ended, kept in memory for its followers
	// (Follow); forgotten when the last one stops. Cleared whenever a
	// change of it is swapped out for a commit.
	forgetLater bool
	batchOut    bool // counted out of its batch's open tasks (settled, or parked once while the batch ended)
	unranked    bool // admitted, its rank not yet decided: QUEUED, it stays out of its queue until it is
}

// slotWait reports whether t's timed-out attempt still holds its slot: a
// QUEUED t then stays out of its queues until the slot is released.
func (t *task) slotWait() bool { return t.run != nil && t.run.ended }

// outcome is what a task has accumulated beyond waiting, and its rarer
// links: allocated with its first result, failure, reset, retry link or
// dependent, so that the many tasks that only wait carry none of it.
type outcome struct {
	webhooks  []WebhookDelivery
	result    json.RawMessage
	errMsg    string
	class     policy.ErrorClass
	retryOf   string
	prevDelay int64 // ms, the last retry delay
	resetAt   int32 // attempts made before the last reset: the budget counts from here

	dependents []*task // WAITING tasks that wait for this one
}

func (t *task) outcomeOf() *outcome {
	if t.out == nil {
		t.out = &outcome{}
	}
	return t.out
}

// snapshot returns a copy of t's state that the caller owns.
func (t *task) snapshot() *Task {
	s := new(Task)
	t.snapshotTo(s)
	return s
}

// snapshotTo overwrites s with a copy of t's state. The attempts and webhook
// deliveries are copied too; the spec and result are immutable and shared.
func (t *task) snapshotTo(s *Task) {
	*s = Task{
		ID: t.id, Spec: t.spec, Seq: t.seq, Depth: int(t.depth), Rank: t.rank,
		State: t.state, Reason: t.reason, Attempts: slices.Clone(t.attempts),
		CreatedAt: unixTime(t.createdAt), UpdatedAt: unixTime(t.updatedAt), QueuedAt: unixTime(t.queuedAt),
		NextRunAt: unixTime(t.timerAt[timerRetry]), EndedAt: unixTime(t.endedAt), LastSeq: t.lastSeq, Unmet: int(t.unmet),
		Position: -1,
	}
	if o := t.out; o != nil {
		s.Result, s.Error, s.Class, s.RetryOf, s.ResetAt = o.result, o.errMsg, o.class, o.retryOf, int(o.resetAt)
		s.Webhooks = slices.Clone(o.webhooks)
	}
}

// unixTime turns Unix nanoseconds into a UTC time; 0 is the zero time.
func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// unixNano is the inverse of unixTime.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (t *task) lastAttempt() *Attempt {
	if len(t.attempts) == 0 {
		return nil
	}
	return &t.attempts[len(t.attempts)-1]
}

// pending reports whether a task in s counts against queue caps.
func pending(s State) bool { return s == StateQueued || s == StateWaiting || s == StateRetryWait }

// Drop-oldest lists: every QUEUED task is linked, in the order it was queued,
// into one list per scope (the oldest of the whole engine is the oldest of
// the lanes' oldest).
const (
	fifoLane = iota
	fifoAgent
	fifoSession
	fifoScopes
)

type fifoLink struct{ prev, next *task }

type fifoList struct{ head, tail *task }

func (l *fifoList) pushBack(t *task, scope int) {
	t.fifo[scope] = fifoLink{prev: l.tail}
	if l.tail != nil {
		l.tail.fifo[scope].next = t
	} else {
		l.head = t
	}
	l.tail = t
}

func (l *fifoList) remove(t *task, scope int) {
	lk := &t.fifo[scope]
	if lk.prev != nil {
		lk.prev.fifo[scope].next = lk.next
	} else {
		l.head = lk.next
	}
	if lk.next != nil {
		lk.next.fifo[scope].prev = lk.prev
	} else {
		l.tail = lk.prev
	}
	*lk = fifoLink{}
}

type lane struct {
	cfg      LaneConfig
	idx      uint16
	inflight int
	queued   int // pending tasks (QUEUED + WAITING + RETRY_WAIT)
	fair     aqHeap
	age      aqHeap
	fifo     fifoList
	held     map[string]*task // by session: the task its debounce holds WAITING
	hold     holdState        // a pull lane's: the queues the fairness policy held at the latest Pull (hold.go)

	selection namedSelection
	retry     namedRetry
}

type agent struct {
	id       string
	idx      uint32
	weight   int
	limit    int
	labels   policy.Labels // AgentConfig.Labels, in the ABI's wire format
	inflight int
	queued   int
	parked   bool          // at its ceiling: its queues are out of the lane heaps
	queues   []*agentQueue // by lane idx; nil where it never had a task (an emptied one stays, empty)
	fifo     fifoList
	live     int // live tasks; the agent is forgotten at 0

	dispatched uint64 // total dispatches
	window     dispatchWindow
}

// dispatchWindow counts an agent's dispatches over the last minute in
// one-second buckets, for the "share of dispatches" figures.
type dispatchWindow struct {
	buckets [60]uint32
	second  int64 // Unix second of the newest bucket
}

func (w *dispatchWindow) add(now time.Time) {
	w.advance(now.Unix())
	w.buckets[w.second%60]++
}

func (w *dispatchWindow) advance(sec int64) {
	if sec <= w.second {
		return
	}
	if sec-w.second >= 60 {
		w.buckets = [60]uint32{}
	} else {
		for s := w.second + 1; s <= sec; s++ {
			w.buckets[s%60] = 0
		}
	}
	w.second = sec
}

func (w *dispatchWindow) total(now time.Time) uint64 {
	w.advance(now.Unix())
	var n uint64
	for _, b := range w.buckets {
		n += uint64(b)
	}
	return n
}

type session struct {
	key    string // TaskSpec.SessionScope: the agent's own, or a named tab's
	lim    limiter
	queued int
	fifo   fifoList
	live   int // live tasks; the session is forgotten at 0
}

type batch struct {
	id          string
	lim         limiter
	parallelism int
	live        int
	total       int
	createdAt   time.Time
	webhook     string
	open        int  // tasks that have not settled (ended or parked)
	sealed      bool // every task of the batch has been admitted
	ended       bool // the batch's end has been recorded
}

type instance struct {
	info    InstanceInfo
	lim     limiter
	removed bool // forgotten by the registry; kept while attempts still run on it
}

// binding is the instance and tab a session's tasks run in.
type binding struct {
	instance string
	tab      string
	// lost: the instance was removed, or a task of another session closed
	// the tab, and the session's page went with it. The session's next task
	// is dispatched to the lost tab, where the executor fails it with
	// SESSION_LOST (and the binding goes), or replays the session.
	lost bool
	why  string // how it was lost, when lost; "" when its instance was removed
}
