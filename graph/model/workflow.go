package model

// Views of the components around the engine: policy plugins, schedules and
// webhook deliveries.

import (
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/schedule"
)

// WebhookDelivery is one attempt to deliver a webhook.
type WebhookDelivery struct{ D engine.WebhookDelivery }

// ID is the delivery's id.
func (w *WebhookDelivery) ID() string { return w.D.ID }

// Attempt is the attempt's number.
func (w *WebhookDelivery) Attempt() int { return w.D.Attempt }

// URL is where it went.
func (w *WebhookDelivery) URL() string { return w.D.URL }

// At is when it started.
func (w *WebhookDelivery) At() time.Time { return w.D.At }

// DurationMs is how long it took.
func (w *WebhookDelivery) DurationMs() float64 {
	return float64(w.D.Duration) / float64(time.Millisecond)
}

// HTTPStatus is the receiver's answer.
func (w *WebhookDelivery) HTTPStatus() *int {
	if w.D.HTTPStatus == 0 {
		return nil
	}
	s := w.D.HTTPStatus
	return &s
}

// Error is what went wrong.
func (w *WebhookDelivery) Error() *string { return optString(w.D.Error) }

// Delivered reports a 2xx answer.
func (w *WebhookDelivery) Delivered() bool { return w.D.Delivered }

// Final reports the last attempt.
func (w *WebhookDelivery) Final() bool { return w.D.Final }

// WebhookDeliveries wraps delivery records.
func WebhookDeliveries(ds []engine.WebhookDelivery) []*WebhookDelivery {
	out := make([]*WebhookDelivery, len(ds))
	for i := range ds {
		out[i] = &WebhookDelivery{D: ds[i]}
	}
	return out
}

// WebhookDeliveries are the task's webhook delivery attempts.
func (t *Task) WebhookDeliveries() []*WebhookDelivery { return WebhookDeliveries(t.T.Webhooks) }

// EndedAt is when the batch's last task ended.
func (b *Batch) EndedAt() *time.Time { return optTime(b.B.Info.EndedAt) }

// WebhookDeliveries are the batch's webhook delivery attempts.
func (b *Batch) WebhookDeliveries() []*WebhookDelivery { return WebhookDeliveries(b.B.Info.Webhooks) }

// Plugin is a policy a slot can use.
type Plugin struct{ I manager.Info }

// Name is its name.
func (p *Plugin) Name() string { return p.I.Name }

// Slot is the slot it fills.
func (p *Plugin) Slot() policy.Slot { return p.I.Slot }

// Builtin reports whether it ships with Switchyard.
func (p *Plugin) Builtin() bool { return p.I.Builtin }

// Native reports native Go.
func (p *Plugin) Native() bool { return p.I.Native }

// Sha256 is its module's hash.
func (p *Plugin) Sha256() *string { return optString(p.I.Hash) }

// Size is its module's size.
func (p *Plugin) Size() int { return p.I.Size }

// Replaced says what a loadPlugin replaced (null otherwise).
func (p *Plugin) Replaced() *string { return optString(p.I.Replaced) }

// Config is its configuration.
func (p *Plugin) Config() json.RawMessage {
	if len(p.I.Config) == 0 {
		return nil
	}
	return p.I.Config
}

// State is its breaker's state.
func (p *Plugin) State() PluginState {
	switch p.I.Stats.State {
	case host.StateProbation:
		return PluginStateProbation
	case host.StateQuarantined:
		return PluginStateQuarantined
	case host.StateDisabled:
		return PluginStateDisabled
	}
	return PluginStateActive
}

// DisabledReason says why it is quarantined or disabled.
func (p *Plugin) DisabledReason() *string { return optString(p.I.Stats.Reason) }

// QuarantinedUntil is when a quarantine ends.
func (p *Plugin) QuarantinedUntil() *time.Time {
	if p.I.Stats.State != host.StateQuarantined {
		return nil
	}
	return optTime(p.I.Stats.Until)
}

// LoadedAt is when it was loaded.
func (p *Plugin) LoadedAt() *time.Time { return optTime(p.I.LoadedAt) }

// ActiveIn lists where it is in use.
func (p *Plugin) ActiveIn() []string {
	if p.I.ActiveIn == nil {
		return []string{}
	}
	return p.I.ActiveIn
}

// Calls is the decisions asked of it.
func (p *Plugin) Calls() uint64 { return p.I.Stats.Calls }

// Faults is the decisions it failed to make.
func (p *Plugin) Faults() uint64 { return p.I.Stats.FaultTotal() }

// Fallbacks is the decisions its fallback answered.
func (p *Plugin) Fallbacks() uint64 { return p.I.Stats.Fallbacks }

// Holds is the fairness decisions that held.
func (p *Plugin) Holds() uint64 { return p.I.Stats.Holds }

// fallbackCauses names the host's fallback causes in the schema, in the
// host's (and the enum's) order.
var fallbackCauses = map[host.FallbackCause]PluginFallbackCause{
	host.FallbackFault:      PluginFallbackCauseFault,
	host.FallbackBreaker:    PluginFallbackCauseBreaker,
	host.FallbackClosed:     PluginFallbackCauseClosed,
	host.FallbackRebuilding: PluginFallbackCauseRebuilding,
	host.FallbackTooLarge:   PluginFallbackCauseTooLarge,
}

// FallbacksByCause is its fallbacks by cause, in the causes' order, those
// with none left out.
func (p *Plugin) FallbacksByCause() []*PluginFallbackCount {
	out := make([]*PluginFallbackCount, 0, len(p.I.Stats.FallbacksBy))
	for _, c := range host.FallbackCauses {
		if n := p.I.Stats.FallbacksBy[c]; n > 0 {
			out = append(out, &PluginFallbackCount{Cause: fallbackCauses[c], Count: int64(n)})
		}
	}
	return out
}

// DeadlineGraces is the calls the watchdog let run on past their deadline
// because the process was starved or the call was not running.
func (p *Plugin) DeadlineGraces() uint64 { return p.I.Stats.DeadlineGraces }

// P50Us is its median decision latency; nil while no decision has been
// timed (no calls yet; native policies, which are not timed).
func (p *Plugin) P50Us() *float64 { return p.latencyUs(p.I.Stats.LatencyP50) }

// P99Us is its 99th-percentile decision latency; nil exactly when P50Us is.
func (p *Plugin) P99Us() *float64 { return p.latencyUs(p.I.Stats.LatencyP99) }

// latencyUs is d in microseconds, or nil when the latency figures cover no
// decision: a zero there would read as a measured, instant decision.
func (p *Plugin) latencyUs(d time.Duration) *float64 {
	if p.I.Stats.Observed == 0 {
		return nil
	}
	us := float64(d) / float64(time.Microsecond)
	return &us
}

// PluginEvent is a change of a plugin.
type PluginEvent struct{ E manager.Event }

// Seq orders the events.
func (e *PluginEvent) Seq() uint64 { return e.E.Seq }

// Kind is what happened.
func (e *PluginEvent) Kind() manager.EventKind { return e.E.Kind }

// Plugin is the plugin concerned.
func (e *PluginEvent) Plugin() *string { return optString(e.E.Plugin) }

// Slot is the slot concerned.
func (e *PluginEvent) Slot() *policy.Slot {
	if e.E.Slot == 0 {
		return nil
	}
	s := e.E.Slot
	return &s
}

// Lane is the lane concerned.
func (e *PluginEvent) Lane() *string { return optString(e.E.Lane) }

// Reason gives details.
func (e *PluginEvent) Reason() *string { return optString(e.E.Reason) }

// At is when.
func (e *PluginEvent) At() time.Time { return e.E.At }

// QuarantinedUntil is when a quarantine announced by the event ends.
func (e *PluginEvent) QuarantinedUntil() *time.Time {
	if e.E.Until.IsZero() {
		return nil
	}
	t := e.E.Until
	return &t
}

// Lagged is the events missed before this one.
func (e *PluginEvent) Lagged() int { return int(e.E.Lagged) }

// Schedule is a schedule and its state.
type Schedule struct{ S *schedule.Schedule }

// ID is its id.
func (s *Schedule) ID() string { return s.S.ID }

// Name is its name.
func (s *Schedule) Name() string { return s.S.Spec.Name }

// Kind is how its times are defined.
func (s *Schedule) Kind() schedule.Kind { return s.S.Spec.Kind }

// At is the time of an AT schedule.
func (s *Schedule) At() *time.Time { return optTime(s.S.Spec.At) }

// EveryMs is the interval of an EVERY schedule.
func (s *Schedule) EveryMs() *int64 { return optMillis(s.S.Spec.Every) }

// Cron is the expression of a CRON schedule.
func (s *Schedule) Cron() *string { return optString(s.S.Spec.Cron) }

// TimeZone is a CRON schedule's zone.
func (s *Schedule) TimeZone() *string { return optString(s.S.Spec.TimeZone) }

// Enabled reports whether it runs.
func (s *Schedule) Enabled() bool { return s.S.Spec.Enabled }

// MissedPolicy is its missed-run policy.
func (s *Schedule) MissedPolicy() schedule.MissedPolicy { return s.S.Spec.Missed }

// OverlapPolicy is its overlap policy.
func (s *Schedule) OverlapPolicy() schedule.OverlapPolicy { return s.S.Spec.Overlap }

// DeadlineAfterMs is each run's relative deadline.
func (s *Schedule) DeadlineAfterMs() *int64 { return optMillis(s.S.Spec.DeadlineAfter) }

// OffsetMs is its spread offset.
func (s *Schedule) OffsetMs() int64 { return s.S.Offset.Milliseconds() }

// DeleteAfterRun reports whether an at schedule deletes itself once it ran.
func (s *Schedule) DeleteAfterRun() bool { return s.S.Spec.DeleteAfterRun }

// HistoryLength is how many recent runs it keeps.
func (s *Schedule) HistoryLength() int {
	if n := s.S.Spec.HistoryLength; n > 0 {
		return n
	}
	return schedule.DefaultHistoryLength
}

// Template is what each run submits.
func (s *Schedule) Template() *ScheduleTemplate { return &ScheduleTemplate{T: &s.S.Spec.Template} }

// CreatedAt is when it was created.
func (s *Schedule) CreatedAt() time.Time { return s.S.CreatedAt }

// UpdatedAt is when it last changed.
func (s *Schedule) UpdatedAt() time.Time { return s.S.UpdatedAt }

// NextRunAt is when it runs next.
func (s *Schedule) NextRunAt() *time.Time { return optTime(s.S.NextRunAt) }

// LastRunAt is when it last ran.
func (s *Schedule) LastRunAt() *time.Time { return optTime(s.S.LastRunAt) }

// LastTaskID is its last run's task.
func (s *Schedule) LastTaskID() *string { return optString(s.S.LastTask) }

// Runs are its latest runs.
func (s *Schedule) Runs() []*ScheduleRun {
	out := make([]*ScheduleRun, len(s.S.Runs))
	for i := range s.S.Runs {
		out[i] = &ScheduleRun{R: s.S.Runs[i]}
	}
	return out
}

// ScheduleTemplate is a schedule's task template.
type ScheduleTemplate struct{ T *engine.TaskSpec }

// AgentID is the agent.
func (t *ScheduleTemplate) AgentID() string { return t.T.AgentID }

// Lane is the lane.
func (t *ScheduleTemplate) Lane() string { return t.T.Lane }

// SessionKey is the session key.
func (t *ScheduleTemplate) SessionKey() *string { return optString(t.T.SessionKey) }

// Priority is the priority.
func (t *ScheduleTemplate) Priority() engine.Priority { return t.T.Priority }

// Action is the action.
func (t *ScheduleTemplate) Action() *Action {
	if t.T.Action == nil {
		return nil
	}
	return &Action{A: t.T.Action}
}

// Instruction is the instruction.
func (t *ScheduleTemplate) Instruction() *string { return optString(t.T.Instruction) }

// TabID is the tab.
func (t *ScheduleTemplate) TabID() *string { return optString(t.T.TabID) }

// InstanceID is the instance.
func (t *ScheduleTemplate) InstanceID() *string { return optString(t.T.InstanceID) }

// TimeoutMs is the per-attempt timeout.
func (t *ScheduleTemplate) TimeoutMs() *int {
	if t.T.Timeout == 0 {
		return nil
	}
	ms := int(t.T.Timeout.Milliseconds())
	return &ms
}

// WebhookURL is the webhook.
func (t *ScheduleTemplate) WebhookURL() *string { return optString(t.T.WebhookURL) }

// Labels are the labels.
func (t *ScheduleTemplate) Labels() []*Label { return Labels(t.T.Labels) }

// ScheduleRun is one time a schedule fell due.
type ScheduleRun struct{ R schedule.Run }

// Due is when it was due.
func (r *ScheduleRun) Due() time.Time { return r.R.Due }

// FiredAt is when it was handled.
func (r *ScheduleRun) FiredAt() time.Time { return r.R.FiredAt }

// TaskID is the task it created.
func (r *ScheduleRun) TaskID() *string { return optString(r.R.TaskID) }

// Outcome says what happened.
func (r *ScheduleRun) Outcome() string { return r.R.Outcome }

func optMillis(d time.Duration) *int64 {
	if d == 0 {
		return nil
	}
	ms := d.Milliseconds()
	return &ms
}
