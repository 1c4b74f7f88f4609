// Lanes, counters, plans, policies and instances, read from the engine's and
// the registry's snapshots.

package model

import (
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
)

// Lane is a lane's configuration and load.
type Lane struct{ L engine.LaneStatus }

// Name is the lane's name.
func (l *Lane) Name() string { return l.L.Config.Name }

// Pull reports whether it is a pull lane.
func (l *Lane) Pull() bool { return l.L.Config.Pull }

// MaxInFlight is its concurrency ceiling.
func (l *Lane) MaxInFlight() int { return l.L.Config.MaxInFlight }

// MaxQueued is its queue cap.
func (l *Lane) MaxQueued() int { return l.L.Config.MaxQueued }

// DropPolicy is what a full queue does.
func (l *Lane) DropPolicy() engine.DropPolicy { return l.L.Config.DropPolicy }

// Paused reports whether it dispatches.
func (l *Lane) Paused() bool { return l.L.Config.Paused }

// MaxDepth is the deepest spawn depth it admits.
func (l *Lane) MaxDepth() int { return l.L.Config.MaxDepth }

// TimeoutMs is its default per-attempt timeout.
func (l *Lane) TimeoutMs() int { return int(l.L.Config.Timeout / time.Millisecond) }

// RetryPolicy is its retry parameters.
func (l *Lane) RetryPolicy() *RetryPolicy { return &RetryPolicy{P: l.L.Config.Retry} }

// InFlight counts its running tasks.
func (l *Lane) InFlight() int { return l.L.InFlight }

// Pending counts its waiting tasks.
func (l *Lane) Pending() int { return l.L.Pending }

// SelectionPolicy names its selection policy.
func (l *Lane) SelectionPolicy() string { return l.L.Selection }

// RetryPolicyName names its retry policy.
func (l *Lane) RetryPolicyName() string { return l.L.Retry }

// Exhausted is what the lane's tasks become when their retries are spent.
func (l *Lane) Exhausted() engine.Exhausted { return l.L.Config.Exhausted }

// SessionMaxQueued is the lane's cap on one session's queued tasks (0: the
// engine's).
func (l *Lane) SessionMaxQueued() int { return l.L.Config.SessionMaxQueued }

// DebounceMs is the debounce window of its sessions, in milliseconds.
func (l *Lane) DebounceMs() int { return int(l.L.Config.Debounce.Milliseconds()) }

// SessionDropPolicy is what a full session does, nil for the lane's policy.
func (l *Lane) SessionDropPolicy() *engine.DropPolicy {
	if l.L.Config.SessionDropPolicy == "" {
		return nil
	}
	p := l.L.Config.SessionDropPolicy
	return &p
}

// Stats are the engine's counters.
type Stats struct {
	S engine.Stats
	// Node is the node that answered; Leader the node that leads (nil
	// while none does) and LeaderSince since when.
	Node        string
	Leader      *string
	LeaderSince *time.Time
}

// At is when they were read.
func (s *Stats) At() time.Time { return s.S.At }

// ByState counts live tasks by state.
func (s *Stats) ByState() []*StateCount { return StateCounts(s.S.ByState) }

// InFlight counts running tasks.
func (s *Stats) InFlight() int { return s.S.InFlight }

// MaxInFlight is the global ceiling.
func (s *Stats) MaxInFlight() int { return s.S.MaxInFlight }

// Pending counts waiting tasks.
func (s *Stats) Pending() int { return s.S.Pending }

// Submitted counts submissions.
func (s *Stats) Submitted() uint64 { return s.S.Submitted }

// Dispatched counts dispatches.
func (s *Stats) Dispatched() uint64 { return s.S.Dispatched }

// Ended counts tasks by the terminal state they reached.
func (s *Stats) Ended() []*StateCount { return StateCounts(s.S.Ended) }

// Rejected counts refusals.
func (s *Stats) Rejected() uint64 { return s.S.Rejected }

// Dropped counts dropped tasks.
func (s *Stats) Dropped() uint64 { return s.S.Dropped }

// LeaseExpired counts expired leases.
func (s *Stats) LeaseExpired() uint64 { return s.S.LeaseExpiry }

// Stale counts ignored completions.
func (s *Stats) Stale() uint64 { return s.S.Stale }

// PolicyInvalid counts refused policy answers.
func (s *Stats) PolicyInvalid() uint64 { return s.S.PolicyInvalid }

// CommitErrors counts failed commits.
func (s *Stats) CommitErrors() uint64 { return s.S.CommitErrors }

// Purged counts purged tasks.
func (s *Stats) Purged() uint64 { return s.S.Purged }

// LastSeq is the latest event's seq.
func (s *Stats) LastSeq() uint64 { return s.S.LastSeq }

// Draining reports whether new work is refused.
func (s *Stats) Draining() bool { return s.S.Draining }

// DispatchLatency is the QUEUED → ASSIGNED wait.
func (s *Stats) DispatchLatency() *LatencyHistogram {
	return &LatencyHistogram{H: s.S.DispatchLatency}
}

// LatencyHistogram is a distribution of durations.
type LatencyHistogram struct{ H engine.Histogram }

// Count is the number of observations.
func (h *LatencyHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.H.Counts {
		n += c
	}
	return n
}

// MeanMs is their mean.
func (h *LatencyHistogram) MeanMs() float64 {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return float64(h.H.SumNs) / float64(n) / 1e6
}

// P50Ms is the median.
func (h *LatencyHistogram) P50Ms() float64 { return h.quantileMs(0.5) }

// P90Ms is the 90th percentile.
func (h *LatencyHistogram) P90Ms() float64 { return h.quantileMs(0.9) }

// P99Ms is the 99th percentile.
func (h *LatencyHistogram) P99Ms() float64 { return h.quantileMs(0.99) }

func (h *LatencyHistogram) quantileMs(q float64) float64 {
	return durationMs(h.H.Quantile(q))
}

// Buckets are the non-empty buckets.
func (h *LatencyHistogram) Buckets() []*LatencyBucket {
	var out []*LatencyBucket
	for i, c := range h.H.Counts {
		if c == 0 {
			continue
		}
		b := &LatencyBucket{Count: int64(c)}
		if i < engine.HistogramBuckets-1 {
			le := durationMs(h.H.UpperBound(i))
			b.LeMs = &le
		}
		out = append(out, b)
	}
	return out
}

func durationMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Plan is a dry run of the dispatcher.
type Plan struct{ P *engine.Plan }

// At is the instant it was computed for.
func (p *Plan) At() time.Time { return p.P.At }

// Fairness names the fairness policy.
func (p *Plan) Fairness() string { return p.P.Fairness }

// Steps are the planned dispatches.
func (p *Plan) Steps() []*PlanStep {
	out := make([]*PlanStep, len(p.P.Steps))
	for i := range p.P.Steps {
		out[i] = &PlanStep{S: &p.P.Steps[i]}
	}
	return out
}

// Skipped are the queues passed over.
func (p *Plan) Skipped() []*PlanSkip {
	out := make([]*PlanSkip, len(p.P.Skipped))
	for i := range p.P.Skipped {
		out[i] = &PlanSkip{S: &p.P.Skipped[i]}
	}
	return out
}

// InFlight counts running tasks.
func (p *Plan) InFlight() int { return p.P.InFlight }

// MaxInFlight is the global ceiling.
func (p *Plan) MaxInFlight() int { return p.P.MaxInFlight }

// Waiting counts tasks waiting for dependencies.
func (p *Plan) Waiting() int { return p.P.Waiting }

// RetryWait counts tasks backing off.
func (p *Plan) RetryWait() int { return p.P.RetryWait }

// Parked counts parked tasks.
func (p *Plan) Parked() int { return p.P.Parked }

// PlanStep is one planned dispatch.
type PlanStep struct{ S *engine.PlanStep }

// TaskID is the task.
func (s *PlanStep) TaskID() string { return s.S.TaskID }

// AgentID is its agent.
func (s *PlanStep) AgentID() string { return s.S.AgentID }

// Lane is its lane.
func (s *PlanStep) Lane() string { return s.S.Lane }

// SessionKey is its session.
func (s *PlanStep) SessionKey() *string { return optString(s.S.SessionKey) }

// InstanceID is where it would run.
func (s *PlanStep) InstanceID() *string { return optString(s.S.InstanceID) }

// Reason is why its queue went next.
func (s *PlanStep) Reason() string { return s.S.Reason }

// WaitedMs is how long it has been queued.
func (s *PlanStep) WaitedMs() float64 { return durationMs(s.S.Waited) }

// PlanSkip is a queue passed over.
type PlanSkip struct{ S *engine.PlanSkip }

// Lane is the lane.
func (s *PlanSkip) Lane() string { return s.S.Lane }

// AgentID is the agent.
func (s *PlanSkip) AgentID() string { return s.S.AgentID }

// SessionKey is the session.
func (s *PlanSkip) SessionKey() *string { return optString(s.S.SessionKey) }

// Reason is why.
func (s *PlanSkip) Reason() string { return s.S.Reason }

// Tasks counts the tasks held up.
func (s *PlanSkip) Tasks() int { return s.S.Tasks }

// PolicyAssignment is the policy filling a slot.
type PolicyAssignment struct{ P engine.PolicyAssignment }

// Slot is the slot.
func (p *PolicyAssignment) Slot() policy.Slot { return p.P.Slot }

// Lane is the lane, for a lane's own policy.
func (p *PolicyAssignment) Lane() *string { return optString(p.P.Lane) }

// Name is the policy's name.
func (p *PolicyAssignment) Name() string { return p.P.Name }

// Instance is a registered browser instance.
type Instance struct{ I executor.Instance }

// ID is its id.
func (i *Instance) ID() string { return i.I.ID }

// URL is its base URL.
func (i *Instance) URL() string { return i.I.URL }

// Kind is its flavour.
func (i *Instance) Kind() executor.Kind { return i.I.Kind }

// Dialect is the instance's chat dialect.
func (i *Instance) Dialect() executor.Dialect { return i.I.Dialect }

// Capacity is how many attempts it accepts at once.
func (i *Instance) Capacity() int { return i.I.Capacity }

// Labels are its labels.
func (i *Instance) Labels() []*Label { return Labels(i.I.Labels) }

// HasToken reports whether a token is configured.
func (i *Instance) HasToken() bool { return i.I.HasToken }

// Health is its health.
func (i *Instance) Health() executor.Health { return i.I.Health }

// LatencyMs is its last health check's latency.
func (i *Instance) LatencyMs() float64 { return durationMs(i.I.Latency) }

// LastCheck is when its last check ended.
func (i *Instance) LastCheck() *time.Time { return optTime(i.I.LastCheck) }

// LastError is its last check's error.
func (i *Instance) LastError() *string { return optString(i.I.LastError) }

// Failures counts consecutive failed checks.
func (i *Instance) Failures() int { return i.I.Failures }

// Tabs counts its open tabs.
func (i *Instance) Tabs() int { return i.I.Tabs }

// InFlight counts attempts running there.
func (i *Instance) InFlight() int { return i.I.InFlight }

// RegisteredAt is when it was registered.
func (i *Instance) RegisteredAt() time.Time { return i.I.RegisteredAt }

// InstanceEvent is a change of an instance.
type InstanceEvent struct{ E executor.InstanceEvent }

// Seq numbers the registry's events.
func (e *InstanceEvent) Seq() uint64 { return e.E.Seq }

// Kind is what happened.
func (e *InstanceEvent) Kind() executor.EventType { return e.E.Type }

// Instance is the instance after the change.
func (e *InstanceEvent) Instance() *Instance { return &Instance{I: e.E.Instance} }

// At is when it happened.
func (e *InstanceEvent) At() time.Time { return e.E.At }

// Reason is why.
func (e *InstanceEvent) Reason() *string { return optString(e.E.Reason) }

// Missed counts the events this subscriber missed before this one.
func (e *InstanceEvent) Missed() uint64 { return e.E.Lagged }

// TaskEvent is an engine event, or a LAGGED notice (Type EventLagged).
type TaskEvent struct {
	E   engine.Event
	Lag uint64 // for LAGGED: the events missed
}

// Seq is the event's seq.
func (e *TaskEvent) Seq() uint64 { return e.E.Seq }

// Kind is what it records.
func (e *TaskEvent) Kind() engine.EventType { return e.E.Type }

// At is when it happened.
func (e *TaskEvent) At() time.Time { return e.E.At }

// TaskID is the task it concerns.
func (e *TaskEvent) TaskID() *string { return optString(e.E.TaskID) }

// AgentID is the task's agent.
func (e *TaskEvent) AgentID() *string { return optString(e.E.AgentID) }

// Lane is the lane.
func (e *TaskEvent) Lane() *string { return optString(e.E.Lane) }

// SessionKey is the task's session.
func (e *TaskEvent) SessionKey() *string { return optString(e.E.SessionKey) }

// BatchID is the task's batch.
func (e *TaskEvent) BatchID() *string { return optString(e.E.BatchID) }

// From is the state left.
func (e *TaskEvent) From() *engine.State {
	if e.E.From == 0 {
		return nil
	}
	s := e.E.From
	return &s
}

// To is the state entered.
func (e *TaskEvent) To() *engine.State {
	if e.E.To == 0 {
		return nil
	}
	s := e.E.To
	return &s
}

// Attempt is the attempt it concerns.
func (e *TaskEvent) Attempt() *int {
	if e.E.Attempt == 0 {
		return nil
	}
	a := e.E.Attempt
	return &a
}

// Reason is why.
func (e *TaskEvent) Reason() *string { return optString(e.E.Reason) }

// Skipped is the number of events missed, for LAGGED.
func (e *TaskEvent) Skipped() *uint64 {
	if e.E.Type != EventLagged {
		return nil
	}
	n := e.Lag
	return &n
}

// ItemError is why a batch item was refused.
type ItemError struct{ E *engine.Error }

// Code is the error code.
func (e *ItemError) Code() engine.Code { return e.E.Code }

// Message says what went wrong.
func (e *ItemError) Message() string {
	if e.E.Err != nil {
		return e.E.Message + ": " + e.E.Err.Error()
	}
	return e.E.Message
}

// Field is the input path at fault.
func (e *ItemError) Field() *string { return optString(e.E.Field) }

// Retryable says whether the same request may succeed later.
func (e *ItemError) Retryable() bool { return e.E.Retryable }

// IDs are the tasks or items involved.
func (e *ItemError) IDs() []string {
	if e.E.IDs == nil {
		return []string{}
	}
	return e.E.IDs
}

// Counts describe the full queue, for QUEUE_FULL.
func (e *ItemError) Counts() *engine.QueueCounts { return e.E.Counts }

// TaskID is the task recorded for the refusal.
func (e *ItemError) TaskID() *string { return optString(e.E.TaskID) }
