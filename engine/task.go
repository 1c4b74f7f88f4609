package engine

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine/policy"
)

// State is where a task stands in its life. See the package documentation for
// the transitions.
type State uint8

// Task states. The order is stable: it is stored in databases.
const (
	StateQueued    State = 1  // ready, waiting for a slot
	StateWaiting   State = 2  // waiting for its dependencies
	StateAssigned  State = 3  // dispatched: holds a slot and a lease
	StateRunning   State = 4  // the executor has reached an instance
	StateRetryWait State = 5  // a failed attempt is backing off
	StateSucceeded State = 6  // terminal
	StateFailed    State = 7  // terminal
	StateParked    State = 8  // the retry budget is spent; waits for a reset (settled: see Settled)
	StateCancelled State = 9  // terminal
	StateRejected  State = 10 // terminal: refused at admission
	StateExpired   State = 11 // terminal: the deadline passed while queued
)

var stateNames = [...]string{
	StateQueued:    "QUEUED",
	StateWaiting:   "WAITING",
	StateAssigned:  "ASSIGNED",
	StateRunning:   "RUNNING",
	StateRetryWait: "RETRY_WAIT",
	StateSucceeded: "SUCCEEDED",
	StateFailed:    "FAILED",
	StateParked:    "PARKED",
	StateCancelled: "CANCELLED",
	StateRejected:  "REJECTED",
	StateExpired:   "EXPIRED",
}

// String returns the state's upper-case name, as in the GraphQL API.
func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return "UNKNOWN"
}

// ParseState returns the state named name (upper case).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name && n != "" {
			return State(i), true
		}
	}
	return 0, false
}

// Terminal reports whether s is final: a task in it never changes again.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateRejected, StateExpired:
		return true
	}
	return false
}

// Settled reports whether nothing waits on a task in s any longer: it is
// terminal, or PARKED. A settled task's dependents are cancelled (unless it
// succeeded), its batch counts it as ended, and its webhook is sent.
func (s State) Settled() bool { return s.Terminal() || s == StateParked }

// InFlight reports whether a task in s holds execution slots.
func (s State) InFlight() bool { return s == StateAssigned || s == StateRunning }

// Priority orders tasks within a queue under the built-in selection policy:
// lower runs first.
type Priority int8

// Named priority levels.
const (
	PriorityCritical Priority = 0
	PriorityHigh     Priority = 1
	PriorityNormal   Priority = 2
	PriorityLow      Priority = 3
)

// QueueMode says how a task joins its session's queue.
type QueueMode uint8

// Queue modes.
const (
	// QueueEnqueue waits its turn behind the session's earlier tasks.
	QueueEnqueue QueueMode = 0
	// QueueInterrupt cancels what the session is running and jumps ahead of
	// the session's queued tasks.
	QueueInterrupt QueueMode = 1
	// QueueInterruptDrain does what QueueInterrupt does and also cancels the
	// session's tasks waiting behind (queued, waiting for dependencies or
	// backing off): the new task is all the session has left to do, as with
	// GoClaw's interrupt.
	QueueInterruptDrain QueueMode = 2
)

// Interrupts reports whether the mode interrupts the session.
func (m QueueMode) Interrupts() bool { return m == QueueInterrupt || m == QueueInterruptDrain }

// Action is an interaction with a browser tab, forwarded to the instance that
// owns the tab.
type Action struct {
	Kind     string          // click, fill, navigate, text, screenshot, …
	Ref      string          // an element reference from a snapshot, or ""
	Selector string          // a selector ("css:#go"), or ""
	Params   json.RawMessage // kind-specific parameters, a JSON object or nil
}

// RetryPolicy overrides a lane's retry parameters for one task.
type RetryPolicy struct {
	MaxAttempts int           // the attempt budget, the first attempt included (≥ 1)
	Backoff     time.Duration // the delay before the first retry
	Multiplier  float64       // growth of the delay per retry (≥ 1)
	MaxBackoff  time.Duration // the cap on the delay
	Jitter      bool          // spread delays ("equal jitter")
}

// TaskSpec is what a client asks for. The engine never changes a spec after
// admission, so one spec value may be shared by every snapshot of its task.
type TaskSpec struct {
	AgentID        string            // the fairness unit (required)
	Lane           string            // execution pool; "" means "main"
	SessionKey     string            // tasks sharing it run one at a time; "" means the tab, if any
	Priority       Priority          // 0..3
	Action         *Action           // the work, unless Instruction is set
	Instruction    string            // free-text work for chat-style instances
	TabID          string            // the target tab, or ""
	InstanceID     string            // the target instance, or ""
	DependsOn      []string          // tasks that must succeed first
	BatchID        string            // set by SubmitBatch
	ParentID       string            // the task that spawned this one
	Deadline       time.Time         // zero means none
	Timeout        time.Duration     // per attempt; zero means the engine default
	Retry          *RetryPolicy      // nil means the lane's policy
	WebhookURL     string            // called on terminal states
	IdempotencyKey string            // scoped to AgentID
	Labels         map[string]string // free-form
	QueueMode      QueueMode
	Exhausted      Exhausted // what it becomes when its retries are spent; "" means the lane's
	// SessionMaxInFlight sets its session's ceiling (GoClaw's per-request
	// concurrency, e.g. 3 for a group chat); the latest task that sets it
	// wins; 0 leaves the session's ceiling as it is (default
	// Config.SessionMaxInFlight).
	SessionMaxInFlight int
	// SessionReplay opts its session into replay: when the session's tab is
	// lost, the executor opens a new one and replays the session's actions
	// from its first task before running this one, instead of failing it with
	// SESSION_LOST. Needs a SessionKey (a named tab is not the executor's to
	// rebuild). The executor keeps a session's log only while every task of
	// it, from the first, asked for replay.
	SessionReplay bool
	SubmittedAt   time.Time // set by the engine at admission
}

// Session returns the name of the session that serialises the task, as its
// client sees it: its SessionKey, or its tab when it has none, or "" (no
// serialisation). It is what tasks, events and the stores show; the engine
// and the executor keep the session under SessionScope.
func (s *TaskSpec) Session() string {
	if s.SessionKey != "" {
		return s.SessionKey
	}
	return s.TabID
}

// SessionScope returns the key under which the engine and the executor keep
// the task's session — its binding to a tab, its ceiling, its debounce, its
// interrupts, its replay log — or "" when it has none. A SessionKey belongs
// to the task's agent: two agents that use the same session name have two
// sessions, two tabs, and neither reaches the other's (ScopedSessionKey). A
// session that is only a named tab (no SessionKey) is that tab, whoever
// names it: tasks naming one tab run one at a time.
func (s *TaskSpec) SessionScope() string {
	switch {
	case s.SessionKey != "":
		return ScopedSessionKey(s.AgentID, s.SessionKey)
	case s.TabID != "":
		return "/" + s.TabID
	}
	return ""
}

// ScopedSessionKey is the key of an agent's session named key:
// "<agent>/<key>", the agent's id path-escaped (so that it holds no "/" and
// the first "/" ends it). SplitSessionScope undoes it.
func ScopedSessionKey(agentID, key string) string {
	return url.PathEscape(agentID) + "/" + key
}

// SplitSessionScope returns the agent and the session name of a key made by
// SessionScope: the agent is "" for a named tab's session, and for a key
// that is not scoped (a binding stored before sessions were scoped to their
// agent), which is returned whole as the name.
func SplitSessionScope(scope string) (agentID, name string) {
	a, name, ok := strings.Cut(scope, "/")
	if !ok {
		return "", scope
	}
	agentID, err := url.PathUnescape(a)
	if err != nil {
		return "", scope
	}
	return agentID, name
}

// SessionLabel names a session kept under scope for people, as in
// `session "cart" of agent "alice"`, or `session "tab-1"` for a named
// tab's.
func SessionLabel(scope string) string {
	agentID, name := SplitSessionScope(scope)
	if agentID == "" {
		return "session " + strconv.Quote(name)
	}
	return "session " + strconv.Quote(name) + " of agent " + strconv.Quote(agentID)
}

// Attempt records one execution of a task.
type Attempt struct {
	N          int               // from 1
	LeaseID    uint64            // the lease the attempt ran under
	InstanceID string            // where it ran, when known
	TabID      string            // the tab it ran in, when known
	AssignedAt time.Time         // dispatch (a pull lane's: the lease)
	StartedAt  time.Time         // reached an instance (zero if it never did); a pull lane's: the lease, = AssignedAt
	EndedAt    time.Time         // zero while it runs
	Class      policy.ErrorClass // ClassNone on success
	HTTPStatus int               // the instance's status code, 0 if none
	Error      string            // what went wrong
	// Code is the failed attempt's machine-readable error code, as its
	// lane's retry policy sees it (policy.Details.ErrorCode): the
	// executor's (Outcome.Code, an ErrorCoder in its error's chain), a pull
	// lane worker's failTask code, or one the engine makes (CodeTimeout,
	// CodeLeaseExpired, CodeRestart, CodeInstanceFault). Empty on success,
	// for a cancelled or handed-back attempt, and for a failure that had none.
	Code string
	// TabTime is what the executor spent finding the attempt's tab before
	// sending the action: resolving a named or session tab, taking a pooled
	// one or opening a new one. ActionTime is the action itself, from sending
	// it to the instance's answer. Both are the executor's own measures
	// (Outcome.TabTime, Outcome.ActionTime); 0 when it reported none.
	TabTime    time.Duration
	ActionTime time.Duration
	// InstanceFault marks an attempt that ended because of its instance, not
	// its task (ErrInstanceFault): the instance-fault budget forgave it. It
	// is not set on a fault after which the action may have run
	// (ErrMayHaveRun) of a task that allows a single attempt: that attempt
	// counts.
	InstanceFault bool
	// EndedBy says who ended the attempt: a pull lane's worker, a pushed
	// lane's executor, or the engine itself. EndedByUnknown while it runs,
	// and for an attempt ended before the stores kept it.
	EndedBy Ender
}

// Ender says who ended an attempt (Attempt.EndedBy). The failures the
// engine makes carry codes (CodeTimeout, CodeLeaseExpired, CodeRestart,
// CodeInstanceFault) that a worker's failTask or an executor may give too:
// the ender tells them apart, in the store as well, so that a pull lane's
// resent failTask is answered the same after a restart (package pull).
type Ender uint8

// Who ends attempts.
const (
	// EndedByUnknown: the attempt runs, or it ended in a build that did not
	// record who ended it.
	EndedByUnknown Ender = iota
	// EndedByWorker: a pull lane's worker, through completeTask, failTask
	// or releaseTask (an Outcome with ByWorker).
	EndedByWorker
	// EndedByExecutor: a pushed lane's executor, with the instance's
	// answer, an error (an instance fault included) or a handing back.
	EndedByExecutor
	// EndedByEngine: the engine itself, whatever the code: a timeout, an
	// expired lease, a cancellation, a restart or a leader's change (the
	// attempt interrupted), a shutdown.
	EndedByEngine
)

var enderNames = [...]string{EndedByUnknown: "", EndedByWorker: "worker", EndedByExecutor: "executor", EndedByEngine: "engine"}

// String is the ender's name as the stores keep it: "worker", "executor",
// "engine", or "" when not known.
func (e Ender) String() string {
	if int(e) < len(enderNames) {
		return enderNames[e]
	}
	return ""
}

// ParseEnder reads an ender's name (String); anything else is
// EndedByUnknown.
func ParseEnder(s string) Ender {
	for e, name := range enderNames {
		if name == s {
			return Ender(e)
		}
	}
	return EndedByUnknown
}

// WebhookDelivery records one attempt to deliver a webhook.
type WebhookDelivery struct {
	ID         string        // stable for every attempt of one delivery: receivers deduplicate on it
	Attempt    int           // from 1
	URL        string        // where it was sent (without credentials)
	At         time.Time     // when the attempt started
	Duration   time.Duration // how long it took
	HTTPStatus int           // the receiver's status, 0 when there was none
	Error      string        // what went wrong; "" when delivered
	Delivered  bool          // the receiver accepted it (2xx)
	Final      bool          // no further attempt will be made
}

// Task is a snapshot of a task: its spec and what has happened to it.
// Snapshots are copies; changing one changes nothing in the engine.
type Task struct {
	ID    string
	Spec  *TaskSpec // shared and read-only
	Seq   uint64    // submission order (the seq of its first event)
	Depth int       // spawn depth: the parent's depth + 1
	Rank  int64     // order within its queue, from the selection policy

	State     State
	Reason    string    // why it entered State
	Attempts  []Attempt // in order
	Result    json.RawMessage
	Error     string
	Class     policy.ErrorClass // of the last failure
	RetryOf   string            // the task this one re-runs (retryTask on a terminal task)
	CreatedAt time.Time
	UpdatedAt time.Time
	QueuedAt  time.Time         // when it last entered QUEUED
	NextRunAt time.Time         // RETRY_WAIT: when it queues again
	EndedAt   time.Time         // when it reached a terminal state
	LastSeq   uint64            // the seq of its latest event
	Unmet     int               // WAITING: dependencies not yet succeeded
	ResetAt   int               // attempts made before the last reset; the retry budget counts from here
	Webhooks  []WebhookDelivery // delivery attempts of the task's webhook
	Position  int               // QUEUED: tasks ahead of it in its (lane, agent) queue; -1 when not queued or not computed
}
