// Task and its parts, read from an engine snapshot.

package model

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

// Task is a task snapshot as the GraphQL Task type.
type Task struct{ T *engine.Task }

// NewTask wraps a snapshot (nil stays nil).
func NewTask(t *engine.Task) *Task {
	if t == nil {
		return nil
	}
	return &Task{T: t}
}

// ID is the task's id.
func (t *Task) ID() string { return t.T.ID }

// Seq is its submission order.
func (t *Task) Seq() uint64 { return t.T.Seq }

// AgentID is its agent.
func (t *Task) AgentID() string { return t.T.Spec.AgentID }

// Lane is its lane.
func (t *Task) Lane() string { return t.T.Spec.Lane }

// SessionKey is the session key it was submitted with.
func (t *Task) SessionKey() *string { return optString(t.T.Spec.SessionKey) }

// Session is the key that serialises it.
func (t *Task) Session() *string { return optString(t.T.Spec.Session()) }

// Priority is its priority.
func (t *Task) Priority() engine.Priority { return t.T.Spec.Priority }

// Action is its browser interaction, if any.
func (t *Task) Action() *Action {
	if t.T.Spec.Action == nil {
		return nil
	}
	return &Action{A: t.T.Spec.Action}
}

// Instruction is its instruction, if any.
func (t *Task) Instruction() *string { return optString(t.T.Spec.Instruction) }

// TabID is the tab it names.
func (t *Task) TabID() *string { return optString(t.T.Spec.TabID) }

// InstanceID is the instance it names.
func (t *Task) InstanceID() *string { return optString(t.T.Spec.InstanceID) }

// DependsOn lists its dependencies.
func (t *Task) DependsOn() []string {
	if t.T.Spec.DependsOn == nil {
		return []string{}
	}
	return t.T.Spec.DependsOn
}

// BatchID is its batch.
func (t *Task) BatchID() *string { return optString(t.T.Spec.BatchID) }

// ParentID is its parent.
func (t *Task) ParentID() *string { return optString(t.T.Spec.ParentID) }

// Depth is its spawn depth.
func (t *Task) Depth() int { return t.T.Depth }

// Rank is its order within its queue.
func (t *Task) Rank() int64 { return t.T.Rank }

// Deadline is its deadline.
func (t *Task) Deadline() *time.Time { return optTime(t.T.Spec.Deadline) }

// TimeoutMs is its own per-attempt timeout.
func (t *Task) TimeoutMs() *int {
	if t.T.Spec.Timeout == 0 {
		return nil
	}
	ms := int(t.T.Spec.Timeout / time.Millisecond)
	return &ms
}

// RetryPolicy is its own retry policy.
func (t *Task) RetryPolicy() *RetryPolicy {
	if t.T.Spec.Retry == nil {
		return nil
	}
	return &RetryPolicy{P: *t.T.Spec.Retry}
}

// WebhookURL is its webhook.
func (t *Task) WebhookURL() *string { return optString(t.T.Spec.WebhookURL) }

// IdempotencyKey is its idempotency key.
func (t *Task) IdempotencyKey() *string { return optString(t.T.Spec.IdempotencyKey) }

// Labels are its labels, sorted by key.
func (t *Task) Labels() []*Label { return Labels(t.T.Spec.Labels) }

// QueueMode is how it joined its session's queue.
func (t *Task) QueueMode() engine.QueueMode { return t.T.Spec.QueueMode }

// SessionReplay says whether its session is replayed when its tab is lost.
func (t *Task) SessionReplay() bool { return t.T.Spec.SessionReplay }

// Exhausted is the task's own choice for a spent retry budget, nil when it
// follows its lane.
func (t *Task) Exhausted() *engine.Exhausted {
	if t.T.Spec.Exhausted == "" {
		return nil
	}
	x := t.T.Spec.Exhausted
	return &x
}

// State is where it stands.
func (t *Task) State() engine.State { return t.T.State }

// Reason is why it entered its state.
func (t *Task) Reason() *string { return optString(t.T.Reason) }

// Attempts are its attempts.
func (t *Task) Attempts() []*Attempt {
	out := make([]*Attempt, len(t.T.Attempts))
	for i := range t.T.Attempts {
		out[i] = &Attempt{A: &t.T.Attempts[i]}
	}
	return out
}

// AttemptCount is the number of attempts made.
func (t *Task) AttemptCount() int { return len(t.T.Attempts) }

// Result is its result.
func (t *Task) Result() json.RawMessage { return t.T.Result }

// Error is what went wrong.
func (t *Task) Error() *string { return optString(t.T.Error) }

// ErrorClass is the class of its last failure.
func (t *Task) ErrorClass() policy.ErrorClass { return t.T.Class }

// RetryOf is the task it re-runs.
func (t *Task) RetryOf() *string { return optString(t.T.RetryOf) }

// SubmittedAt is its admission time.
func (t *Task) SubmittedAt() time.Time { return t.T.Spec.SubmittedAt }

// CreatedAt is when it was recorded.
func (t *Task) CreatedAt() time.Time { return t.T.CreatedAt }

// UpdatedAt is when it last changed.
func (t *Task) UpdatedAt() time.Time { return t.T.UpdatedAt }

// QueuedAt is when it last entered QUEUED.
func (t *Task) QueuedAt() *time.Time { return optTime(t.T.QueuedAt) }

// NextRunAt is when a task in RETRY_WAIT queues again, or a task its
// lane's debounce holds WAITING queues unless superseded; null in any other
// state (the engine keeps the last retry's time after it, e.g. when PARKED).
func (t *Task) NextRunAt() *time.Time {
	switch {
	case t.T.State == engine.StateRetryWait:
	case t.T.State == engine.StateWaiting && t.T.Unmet == 0 && !t.T.NextRunAt.IsZero():
	default:
		return nil
	}
	return optTime(t.T.NextRunAt)
}

// EndedAt is when it ended.
func (t *Task) EndedAt() *time.Time { return optTime(t.T.EndedAt) }

// LastSeq is the seq of its latest event.
func (t *Task) LastSeq() uint64 { return t.T.LastSeq }

// UnmetDependencies counts the dependencies it still waits for.
func (t *Task) UnmetDependencies() int { return t.T.Unmet }

// ResetAt counts the attempts made before the last reset.
func (t *Task) ResetAt() int { return t.T.ResetAt }

// Position is its place in its queue, when QUEUED.
func (t *Task) Position() *int {
	if t.T.State != engine.StateQueued || t.T.Position < 0 {
		return nil
	}
	p := t.T.Position
	return &p
}

// Action is a task's browser interaction.
type Action struct{ A *engine.Action }

// Kind is what to do.
func (a *Action) Kind() string { return a.A.Kind }

// Ref is the element reference.
func (a *Action) Ref() *string { return optString(a.A.Ref) }

// Selector is the selector.
func (a *Action) Selector() *string { return optString(a.A.Selector) }

// Params are the kind-specific parameters.
func (a *Action) Params() json.RawMessage { return a.A.Params }

// RetryPolicy is a retry policy.
type RetryPolicy struct{ P engine.RetryPolicy }

// MaxAttempts is the attempt budget.
func (r *RetryPolicy) MaxAttempts() int { return r.P.MaxAttempts }

// BackoffMs is the first delay.
func (r *RetryPolicy) BackoffMs() int { return int(r.P.Backoff / time.Millisecond) }

// Multiplier is the growth per retry.
func (r *RetryPolicy) Multiplier() float64 {
	if r.P.Multiplier == 0 {
		return 1
	}
	return r.P.Multiplier
}

// MaxBackoffMs is the cap on the delay.
func (r *RetryPolicy) MaxBackoffMs() int { return int(r.P.MaxBackoff / time.Millisecond) }

// Jitter reports whether delays are spread.
func (r *RetryPolicy) Jitter() bool { return r.P.Jitter }

// Attempt is one execution of a task.
type Attempt struct{ A *engine.Attempt }

// N is its number.
func (a *Attempt) N() int { return a.A.N }

// InstanceID is where it ran.
func (a *Attempt) InstanceID() *string { return optString(a.A.InstanceID) }

// TabID is the tab it ran in.
func (a *Attempt) TabID() *string { return optString(a.A.TabID) }

// AssignedAt is its dispatch time.
func (a *Attempt) AssignedAt() time.Time { return a.A.AssignedAt }

// StartedAt is when it reached an instance (a pull lane's: when it was leased).
func (a *Attempt) StartedAt() *time.Time { return optTime(a.A.StartedAt) }

// EndedAt is when it ended.
func (a *Attempt) EndedAt() *time.Time { return optTime(a.A.EndedAt) }

// ErrorClass is how its failure was classified.
func (a *Attempt) ErrorClass() policy.ErrorClass { return a.A.Class }

// HTTPStatus is the instance's status code.
func (a *Attempt) HTTPStatus() *int {
	if a.A.HTTPStatus == 0 {
		return nil
	}
	s := a.A.HTTPStatus
	return &s
}

// Error is what went wrong.
func (a *Attempt) Error() *string { return optString(a.A.Error) }

// ErrorCode is its failure's machine-readable code, the one its retry
// policy was given.
func (a *Attempt) ErrorCode() *string { return optString(a.A.Code) }

// TabTimeMs is the time spent on its tab before the action, in milliseconds.
func (a *Attempt) TabTimeMs() *float64 { return optMs(a.A.TabTime) }

// ActionTimeMs is the time the action took, in milliseconds.
func (a *Attempt) ActionTimeMs() *float64 { return optMs(a.A.ActionTime) }

// InstanceFault reports whether it ended because of its instance.
func (a *Attempt) InstanceFault() bool { return a.A.InstanceFault }

// EndedBy is who ended it, nil while it runs or when not recorded.
func (a *Attempt) EndedBy() *AttemptEnder {
	var e AttemptEnder
	switch a.A.EndedBy {
	case engine.EndedByWorker:
		e = AttemptEnderWorker
	case engine.EndedByExecutor:
		e = AttemptEnderExecutor
	case engine.EndedByEngine:
		e = AttemptEnderEngine
	default:
		return nil
	}
	return &e
}

// optMs is d in milliseconds, or nil when it was not measured (0).
func optMs(d time.Duration) *float64 {
	if d <= 0 {
		return nil
	}
	ms := float64(d) / float64(time.Millisecond)
	return &ms
}

// Labels turns a label map into a list sorted by key.
func Labels(m map[string]string) []*Label {
	out := make([]*Label, 0, len(m))
	for k, v := range m {
		out = append(out, &Label{Key: k, Value: v})
	}
	slices.SortFunc(out, func(a, b *Label) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// TaskConnection is a page of tasks. TotalCount is resolved on demand from
// Filter.
type TaskConnection struct {
	Edges    []*TaskEdge
	PageInfo *PageInfo
	Filter   engine.TaskFilter
}

// Nodes are the page's tasks.
func (c *TaskConnection) Nodes() []*Task {
	out := make([]*Task, len(c.Edges))
	for i, e := range c.Edges {
		out[i] = e.Node
	}
	return out
}

// Batch is a batch's status.
type Batch struct{ B *engine.BatchStatus }

// ID is the batch's id.
func (b *Batch) ID() string { return b.B.Info.ID }

// Parallelism is its cap on tasks running at once.
func (b *Batch) Parallelism() *int {
	if b.B.Info.Parallelism == 0 {
		return nil
	}
	p := b.B.Info.Parallelism
	return &p
}

// WebhookURL is its webhook.
func (b *Batch) WebhookURL() *string { return optString(b.B.Info.WebhookURL) }

// CreatedAt is when it was submitted.
func (b *Batch) CreatedAt() time.Time { return b.B.Info.CreatedAt }

// Total is its number of tasks.
func (b *Batch) Total() int { return b.B.Total }

// Done reports whether every task has ended.
func (b *Batch) Done() bool { return b.B.Done }

// Counts are its tasks by state.
func (b *Batch) Counts() []*StateCount { return StateCounts(b.B.Counts) }

// StateCounts turns counts by state into a list in state order.
func StateCounts[N int | uint64](m map[engine.State]N) []*StateCount {
	out := make([]*StateCount, 0, len(m))
	for s := engine.StateQueued; s <= engine.StateExpired; s++ {
		if n, ok := m[s]; ok && n > 0 {
			out = append(out, &StateCount{State: s, Count: int64(n)})
		}
	}
	return out
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
