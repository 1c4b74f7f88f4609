// Package policy defines the three scheduling decisions that Switchyard
// delegates to swappable policies: selection (the order of tasks within a
// queue), fairness (which queue heads go next) and retry (whether, and when, a
// failed attempt runs again).
//
// Everything here is plain numbers so that the same types describe a native Go
// policy and a WebAssembly plugin: the plugin ABI encodes these structs as
// fixed-width little-endian records, and the guest SDK decodes them back. The
// package has no dependencies and compiles for GOOS=wasip1, which is how the
// built-in policies ship both as native code and as plugins built from the
// same source.
package policy

// Slot names a decision point that a policy can fill.
type Slot uint8

// The policy slots.
const (
	SlotSelection Slot = 1
	SlotFairness  Slot = 2
	SlotRetry     Slot = 3
)

// String returns the slot's lower-case name as used in configuration and the API.
func (s Slot) String() string {
	switch s {
	case SlotSelection:
		return "selection"
	case SlotFairness:
		return "fairness"
	case SlotRetry:
		return "retry"
	}
	return "unknown"
}

// ParseSlot returns the slot named s.
func ParseSlot(s string) (Slot, bool) {
	switch s {
	case "selection":
		return SlotSelection, true
	case "fairness":
		return SlotFairness, true
	case "retry":
		return SlotRetry, true
	}
	return 0, false
}

// Task is what a selection policy knows of a task when it ranks it.
type Task struct {
	Seq         uint64 // submission order; unique and increasing
	CreatedAtMs int64  // submission time, Unix milliseconds
	DeadlineMs  int64  // Unix milliseconds; 0 when the task has no deadline
	Priority    int32  // 0 CRITICAL, 1 HIGH, 2 NORMAL, 3 LOW
	Agent       uint32 // the agent's index, stable for the life of the process
	Lane        uint16 // the lane's index, stable for the life of the process
	Attempts    uint16 // attempts made so far
	Depth       uint16 // spawn depth: 0 for a task without a parent
	Flags       uint32 // TaskHasTab, TaskInstruction, TaskInterrupt
}

// Task flags.
const (
	TaskHasTab      uint32 = 1 << 0 // the task names a tab
	TaskInstruction uint32 = 1 << 1 // the task is a free-text instruction, not an action
	TaskInterrupt   uint32 = 1 << 2 // the task was submitted in interrupt mode
)

// Selection ranks tasks within their (lane, agent) queue. Lower ranks run
// first; the engine breaks ties by submission order, so a policy that returns
// the same rank for every task gives FIFO order.
type Selection interface {
	// Rank writes one rank per task into ranks (len(ranks) == len(tasks)).
	// It is called once for a whole submitted batch.
	Rank(nowMs int64, tasks []Task, ranks []int64)
}

// Candidate is the head of one eligible (lane, agent) queue, offered to a
// fairness policy together with the counters that a fair choice needs.
type Candidate struct {
	HeadSeq        uint64 // submission order of the task at the head
	HeadRank       int64  // the head's rank from the selection policy
	HeadWaitMs     int64  // how long the head has been queued
	HeadDeadlineMs int64  // Unix milliseconds; 0 when none
	HeadPriority   int32  // the head's priority
	Agent          uint32 // the agent's index
	AgentInflight  uint32 // the agent's tasks in flight, across lanes
	AgentLimit     uint32 // the agent's concurrency ceiling
	AgentWeight    uint32 // the agent's configured weight (at least 1)
	Lane           uint16 // the lane's index
	LaneInflight   uint32 // the lane's tasks in flight
	LaneLimit      uint32 // the lane's concurrency ceiling
	QueueLen       uint32 // tasks ready in this queue, the head included
}

// PickContext carries the parameters of one fairness decision.
type PickContext struct {
	NowMs   int64  // the engine clock, Unix milliseconds
	AgingMs int64  // heads waiting at least this long deserve a boost; 0 disables aging
	Slots   uint32 // how many dispatches the engine can make right now
	Flags   uint32 // PickDryRun
	// Names tells who is behind each candidate (ABI v2); nil when the
	// caller has no names to give.
	Names Names
	// Details tells, besides the names, what each candidate's head task
	// carries (session, labels) and what is configured for its agent (ABI
	// v2, sdk.Details); nil when the caller has none to give.
	Details Details
}

// Names gives the names behind a decision's candidates, by candidate index:
// the agent's id (as submitted) and the lane's name. The engine passes them
// to every fairness policy; a plugin sees them from ABI version 2 on.
type Names interface {
	AgentID(cand int) string
	LaneName(cand int) string
}

// Key returns the stable 64-bit handle of an agent id or a lane name (FNV-1a):
// the same name gives the same key on every server and across restarts,
// unlike the Agent and Lane indices of the records.
func Key(name string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return h
}

// A fairness policy answers "hold" — dispatch nothing from these candidates
// now — by returning Hold(hintMs) from Pick instead of a count. That is
// distinct from returning 0, which leaves the decision to the engine's
// native order. hintMs > 0 asks the engine to ask again after that long
// (it asks again anyway when the candidates change: a submission, a task
// ending); 0 gives no hint. Hints are capped at MaxHoldHintMs.
func Hold(hintMs int64) int {
	return holdBase - int(min(max(hintMs, 0), MaxHoldHintMs))
}

// HoldHint reports whether n, a Pick's answer, is a hold, and its hint.
func HoldHint(n int) (hintMs int64, ok bool) {
	if n > holdBase || n < holdBase-MaxHoldHintMs {
		return 0, false
	}
	return int64(holdBase - n), true
}

// holdBase is Hold(0): answers from holdBase down to holdBase-MaxHoldHintMs
// are holds. The range fits an int32, the ABI's return type.
const holdBase = -(1 << 30)

// MaxHoldHintMs is the longest re-ask hint a hold may carry (about 12 days).
const MaxHoldHintMs = 1<<30 - 1

// Holder is implemented by a fairness policy that may answer Hold; the
// engine then asks it even when a decision has a single candidate.
type Holder interface {
	MayHold() bool
}

// PickDryRun marks a decision made for a plan (a read-only preview): a stateful
// policy should answer as usual but not commit any change to its own state.
const PickDryRun uint32 = 1 << 0

// Fairness chooses which queue heads are dispatched next.
type Fairness interface {
	// Pick writes candidate indices into picks, in dispatch order, and returns
	// how many it wrote (at most len(picks), which is at most ctx.Slots). An
	// index may repeat: each repeat takes the next task of that queue. The
	// engine checks every ceiling itself and skips picks that would break one.
	// Picking none is allowed: the engine then makes that decision in its
	// native order, so work never waits on a policy.
	Pick(ctx PickContext, cands []Candidate, picks []uint32) int
}

// StateReporter is implemented by a policy that can tell whether it keeps
// state between decisions. A stateless fairness policy is not asked when a
// decision has one candidate: its answer could not change what runs.
type StateReporter interface {
	Stateless() bool
}

// Inline is implemented by a policy whose every decision is short, bounded
// and never blocks: native Go code that reads only its input, as the
// built-ins are (the engine knows those by their types). The engine makes
// such a policy's decisions while it holds its lock. Any other policy — a
// WebAssembly plugin, say — decides outside the lock, on a snapshot the
// engine prepared, and its answer is applied only if it still fits
// (plugins/ABI.md, "Where each decision runs and what it can delay"): a
// slow decision then delays only the work that asked for it.
type Inline interface {
	Inline() bool
}

// IsInline reports whether p may decide under the engine's lock.
func IsInline(p any) bool {
	i, ok := p.(Inline)
	return ok && i.Inline()
}

// ErrorClass says whether a failed attempt is worth retrying.
type ErrorClass uint8

// Error classes.
const (
	ClassNone      ErrorClass = 0 // no error
	ClassTransient ErrorClass = 1 // network, 5xx, 429, timeout, instance gone: retry
	ClassPermanent ErrorClass = 2 // validation errors, unknown action: fail at once
	ClassCancelled ErrorClass = 3 // the attempt was cancelled
)

// String returns the class's lower-case name.
func (c ErrorClass) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	case ClassCancelled:
		return "cancelled"
	}
	return "unknown"
}

// Failure describes a failed attempt to a retry policy, together with the
// retry parameters in force for the task (its own override or its lane's).
type Failure struct {
	NowMs        int64      // the engine clock, Unix milliseconds
	TaskSeq      uint64     // the task's submission order: a stable seed for jitter
	CreatedAtMs  int64      // when the task was submitted
	DeadlineMs   int64      // 0 when the task has no deadline
	PrevDelayMs  int64      // the delay chosen before the previous attempt; 0 on the first failure
	BaseDelayMs  int64      // configured initial backoff
	MaxDelayMs   int64      // configured backoff cap
	Multiplier   uint32     // configured backoff growth, in thousandths (2000 = ×2)
	Attempt      uint16     // the attempt that failed, from 1
	MaxAttempts  uint16     // configured attempt budget, the first attempt included
	HTTPStatus   uint16     // the instance's HTTP status, 0 when there was none
	Class        ErrorClass // how the executor classified the failure
	Flags        uint8      // FailureJitter
	Priority     int32
	Agent        uint32
	Lane         uint16
	LaneInflight uint32 // lane load at the time of failure
}

// FailureJitter is set when the task's retry policy asks for jitter.
const FailureJitter uint8 = 1 << 0

// Action is what a retry policy decides for a failed attempt.
type Action uint8

// Retry actions.
const (
	ActionRetry Action = 1 // run again after Delay
	ActionPark  Action = 2 // stop and keep the task PARKED until an operator resets it
	ActionFail  Action = 3 // give up: the task ends FAILED
)

// String returns the action's lower-case name.
func (a Action) String() string {
	switch a {
	case ActionRetry:
		return "retry"
	case ActionPark:
		return "park"
	case ActionFail:
		return "fail"
	}
	return "unknown"
}

// Decision is a retry policy's answer.
type Decision struct {
	Action  Action
	DelayMs int64 // for ActionRetry: how long to wait, 0 for at once
}

// Retry decides what happens after a failed attempt.
type Retry interface {
	Decide(f Failure) Decision
}

// MaxRetryDelayMs bounds any retry delay a policy may ask for (one day); the
// engine treats a larger or negative delay as an invalid answer.
const MaxRetryDelayMs = 24 * 60 * 60 * 1000

// Valid reports whether d is a well-formed decision: a known action and, for a
// retry, a delay within [0, MaxRetryDelayMs]. The engine uses it to reject a
// plugin's invalid answer.
func Valid(d Decision) bool {
	switch d.Action {
	case ActionRetry:
		return d.DelayMs >= 0 && d.DelayMs <= MaxRetryDelayMs
	case ActionPark, ActionFail:
		return true
	}
	return false
}

// Policy is a policy of any slot, typed: exactly one field is set, the one
// of its slot. Code that keeps policies of every slot together (a registry
// of built-ins, a plugin manager) holds them as Policy rather than as any.
type Policy struct {
	Selection Selection
	Fairness  Fairness
	Retry     Retry
}

// Slot returns the slot of the policy p holds, 0 when it holds none or more
// than one.
func (p Policy) Slot() Slot {
	switch {
	case p.Selection != nil && p.Fairness == nil && p.Retry == nil:
		return SlotSelection
	case p.Fairness != nil && p.Selection == nil && p.Retry == nil:
		return SlotFairness
	case p.Retry != nil && p.Selection == nil && p.Fairness == nil:
		return SlotRetry
	}
	return 0
}
