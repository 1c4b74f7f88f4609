package resolvers

// Resolvers for the components around the engine: policy plugins (through
// plugins/manager) and schedules (through the schedule package).

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/generated"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/schedule"
)

func (r *Resolver) plugins() error {
	if r.opts.Plugins == nil {
		return notAvailable("policy plugins are")
	}
	return nil
}

func (r *Resolver) schedules() error {
	if r.opts.Schedules == nil {
		return notAvailable("schedules are")
	}
	return nil
}

// ownedSchedule reads a schedule the caller may see and change: for an
// agent, one that submits as that agent.
func (r *Resolver) ownedSchedule(ctx context.Context, id string) (*schedule.Schedule, error) {
	if err := r.schedules(); err != nil {
		return nil, err
	}
	s, err := r.opts.Schedules.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkScheduleAgent(ctx, id, s.Spec.Template.AgentID); err != nil {
		return nil, err
	}
	return s, nil
}

func (q *queryResolver) Plugins(ctx context.Context) ([]*model.Plugin, error) {
	if err := (*Resolver)(q).plugins(); err != nil {
		return nil, err
	}
	infos, err := fromLeader(ctx, q.opts.Plugins.List)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Plugin, len(infos))
	for i := range infos {
		out[i] = &model.Plugin{I: infos[i]}
	}
	return out, nil
}

func (q *queryResolver) Plugin(ctx context.Context, name string) (*model.Plugin, error) {
	if err := (*Resolver)(q).plugins(); err != nil {
		return nil, err
	}
	info, err := q.opts.Plugins.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return &model.Plugin{I: info}, nil
}

func (m *mutationResolver) LoadPlugin(ctx context.Context, in model.LoadPluginInput) (*model.Plugin, error) {
	if err := (*Resolver)(m).plugins(); err != nil {
		return nil, err
	}
	if !validName(in.Name) {
		return nil, invalid("input.name", "%q is not a plugin name (letters, digits, '-' and '_', at most 64)", in.Name)
	}
	// The cap applies before decoding: an oversized upload costs no more
	// than the request body it came in. It is refused as a module over
	// the cap is (a REFUSED event, a WARN line) where the backend can.
	maxBytes := m.opts.Plugins.MaxWasmBytes()
	var info manager.Info
	var err error
	if n := base64.StdEncoding.DecodedLen(len(in.WasmBase64)); n > maxBytes+2 {
		if r, ok := m.opts.Plugins.(sizeRefuser); ok {
			err = r.RefuseSize(ctx, in.Name, n)
		}
		if !engine.IsCode(err, engine.CodeLimit) { // not announced (a leader out of reach, say): refused all the same
			return nil, limitError("input.wasmBase64", "the module is about %d bytes; the limit is %d (plugins.maxWasmBytes)", n, maxBytes)
		}
	} else {
		var wasm []byte
		wasm, err = base64.StdEncoding.DecodeString(in.WasmBase64)
		if err != nil {
			return nil, invalid("input.wasmBase64", "is not base64: %v", err)
		}
		info, err = m.opts.Plugins.Load(ctx, in.Name, wasm, in.Config)
	}
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Field == "wasm" {
		cp := *ee // the manager's "wasm" is the module this input carries in base64
		cp.Field = "wasmBase64"
		err = &cp
	}
	if err != nil {
		return nil, inField(err, "input")
	}
	m.log.Info("plugin loaded over the API", "plugin", in.Name, "slot", info.Slot, "bytes", info.Size, "sha256", info.Hash)
	return &model.Plugin{I: info}, nil
}

// sizeRefuser is a plugin backend that announces an upload LoadPlugin
// refused for its size before decoding it (manager.Manager.RefuseSize).
type sizeRefuser interface {
	RefuseSize(ctx context.Context, name string, n int) error
}

func (m *mutationResolver) UnloadPlugin(ctx context.Context, name string) (*model.Plugin, error) {
	if err := (*Resolver)(m).plugins(); err != nil {
		return nil, err
	}
	info, err := m.opts.Plugins.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := m.opts.Plugins.Unload(ctx, name); err != nil {
		return nil, err
	}
	m.log.Info("plugin unloaded over the API", "plugin", name)
	return &model.Plugin{I: info}, nil
}

func (m *mutationResolver) ConfigurePlugin(ctx context.Context, name string, config json.RawMessage) (*model.Plugin, error) {
	if err := (*Resolver)(m).plugins(); err != nil {
		return nil, err
	}
	info, err := m.opts.Plugins.Configure(ctx, name, config)
	if err != nil {
		return nil, err
	}
	return &model.Plugin{I: info}, nil
}

func (m *mutationResolver) EnablePlugin(ctx context.Context, name string, force *bool) (*model.Plugin, error) {
	if err := (*Resolver)(m).plugins(); err != nil {
		return nil, err
	}
	if err := m.opts.Plugins.Enable(ctx, name, force != nil && *force); err != nil {
		return nil, err
	}
	info, err := m.opts.Plugins.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return &model.Plugin{I: info}, nil
}

func (m *mutationResolver) SetPolicy(ctx context.Context, in model.SetPolicyInput) ([]*model.PolicyAssignment, error) {
	if err := (*Resolver)(m).plugins(); err != nil {
		return nil, err
	}
	lane := deref(in.Lane)
	var err error
	switch {
	case in.Name == nil:
		// No name: the lane follows the global policy again, or (no lane)
		// the slot has the server's default again; the choice is dropped.
		err = m.opts.Plugins.ClearLanePolicy(ctx, in.Slot, lane)
	default:
		err = m.opts.Plugins.SetPolicy(ctx, in.Slot, lane, *in.Name)
	}
	if err != nil {
		return nil, inField(err, "input")
	}
	m.log.Info("policy set over the API", "slot", in.Slot, "lane", lane, "policy", deref(in.Name))
	return (*queryResolver)(m).Policies(ctx)
}

func (s *subscriptionResolver) PluginEvents(ctx context.Context) (<-chan *model.PluginEvent, error) {
	if err := (*Resolver)(s).plugins(); err != nil {
		return nil, err
	}
	events, stop := s.opts.Plugins.Subscribe(s.opts.SubscriptionBuffer)
	return forward(ctx, s.opts.Observer, "pluginEvents", events, stop, func(ev manager.Event) (*model.PluginEvent, uint64, bool) {
		return &model.PluginEvent{E: ev}, ev.Lagged, true
	}), nil
}

func (q *queryResolver) Schedules(ctx context.Context) ([]*model.Schedule, error) {
	if err := (*Resolver)(q).schedules(); err != nil {
		return nil, err
	}
	own, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	list, err := fromLeader(ctx, q.opts.Schedules.List)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Schedule, 0, len(list))
	for _, s := range list {
		if own == "" || s.Spec.Template.AgentID == own {
			out = append(out, &model.Schedule{S: s})
		}
	}
	return out, nil
}

func (q *queryResolver) Schedule(ctx context.Context, id string) (*model.Schedule, error) {
	s, err := (*Resolver)(q).ownedSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return &model.Schedule{S: s}, nil
}

// scheduleSpec validates a schedule's input.
func scheduleSpec(path string, in *model.ScheduleInput, now time.Time) (schedule.Spec, error) {
	p := func(f string) string { return path + "." + f }
	sp := schedule.Spec{Name: in.Name, Kind: in.Kind, Cron: deref(in.Cron), TimeZone: deref(in.TimeZone), Enabled: in.Enabled == nil || *in.Enabled}
	if len(in.Name) == 0 || len(in.Name) > 128 {
		return sp, invalid(p("name"), "is required (at most 128 bytes)")
	}
	if in.At != nil {
		sp.At = *in.At
	}
	if in.EveryMs != nil {
		if *in.EveryMs < 1000 || *in.EveryMs > int64(366*24*time.Hour/time.Millisecond) {
			return sp, invalid(p("everyMs"), "must be within 1000 ms .. 366 days")
		}
		sp.Every = time.Duration(*in.EveryMs) * time.Millisecond
	}
	if in.DeadlineAfterMs != nil {
		if *in.DeadlineAfterMs < 0 || *in.DeadlineAfterMs > int64(30*24*time.Hour/time.Millisecond) {
			return sp, invalid(p("deadlineAfterMs"), "must be within 0 .. 30 days")
		}
		sp.DeadlineAfter = time.Duration(*in.DeadlineAfterMs) * time.Millisecond
	}
	if in.SpreadWindowMs != nil {
		if *in.SpreadWindowMs < -1 || *in.SpreadWindowMs > int64(24*time.Hour/time.Millisecond) {
			return sp, invalid(p("spreadWindowMs"), "must be -1 (off) or within 0 .. 1 day")
		}
		sp.SpreadWindow = time.Duration(*in.SpreadWindowMs) * time.Millisecond
		if *in.SpreadWindowMs == -1 {
			sp.SpreadWindow = -1
		}
	}
	if in.DeleteAfterRun != nil {
		sp.DeleteAfterRun = *in.DeleteAfterRun
	}
	if in.HistoryLength != nil {
		if *in.HistoryLength < 1 || *in.HistoryLength > schedule.MaxHistoryLength {
			return sp, invalid(p("historyLength"), "must be within 1 .. %d, got %d", schedule.MaxHistoryLength, *in.HistoryLength)
		}
		sp.HistoryLength = *in.HistoryLength
	}
	if in.MissedPolicy != nil {
		sp.Missed = *in.MissedPolicy
	}
	if in.OverlapPolicy != nil {
		sp.Overlap = *in.OverlapPolicy
	}
	if in.Template != nil && in.Template.Deadline != nil {
		return sp, invalid(p("template.deadline"), "a template cannot hold an absolute deadline: use deadlineAfterMs")
	}
	tmpl, err := taskSpec(p("template"), in.Template, now)
	if err != nil {
		return sp, err
	}
	if tmpl.Lane == "" {
		tmpl.Lane = "cron"
	}
	sp.Template = tmpl
	return sp, nil
}

// scheduleInput checks that schedules are served and reads a schedule's
// input, its template's action kind included.
func (r *Resolver) scheduleInput(ctx context.Context, in *model.ScheduleInput) (schedule.Spec, error) {
	if err := r.schedules(); err != nil {
		return schedule.Spec{}, err
	}
	sp, err := scheduleSpec("input", in, time.Now())
	if err != nil {
		return schedule.Spec{}, err
	}
	if err := r.checkTask(ctx, "input.template", &sp.Template); err != nil {
		return schedule.Spec{}, err
	}
	return sp, nil
}

func (m *mutationResolver) CreateSchedule(ctx context.Context, in model.ScheduleInput) (*model.Schedule, error) {
	sp, err := (*Resolver)(m).scheduleInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	if err := (*Resolver)(m).checkSubmission(ctx, "input.template", &sp.Template, nil); err != nil {
		return nil, err
	}
	s, err := m.opts.Schedules.Create(ctx, sp)
	if err != nil {
		return nil, inField(err, "input")
	}
	m.log.Info("schedule created over the API", "schedule", s.ID, "name", sp.Name, "kind", sp.Kind)
	return &model.Schedule{S: s}, nil
}

func (m *mutationResolver) UpdateSchedule(ctx context.Context, id string, in model.ScheduleInput) (*model.Schedule, error) {
	sp, err := (*Resolver)(m).scheduleInput(ctx, &in)
	if err != nil {
		return nil, err
	}
	if _, err := (*Resolver)(m).ownedSchedule(ctx, id); err != nil {
		return nil, err
	}
	if err := (*Resolver)(m).checkSubmission(ctx, "input.template", &sp.Template, nil); err != nil {
		return nil, err
	}
	s, err := m.opts.Schedules.Update(ctx, id, sp)
	if err != nil {
		return nil, inField(err, "input")
	}
	return &model.Schedule{S: s}, nil
}

func (m *mutationResolver) EnableSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	return m.setScheduleEnabled(ctx, id, true)
}

func (m *mutationResolver) DisableSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	return m.setScheduleEnabled(ctx, id, false)
}

func (m *mutationResolver) setScheduleEnabled(ctx context.Context, id string, on bool) (*model.Schedule, error) {
	if _, err := (*Resolver)(m).ownedSchedule(ctx, id); err != nil {
		return nil, err
	}
	s, err := m.opts.Schedules.SetEnabled(ctx, id, on)
	if err != nil {
		return nil, err
	}
	return &model.Schedule{S: s}, nil
}

func (m *mutationResolver) TriggerSchedule(ctx context.Context, id string) (*model.ScheduleRun, error) {
	if _, err := (*Resolver)(m).ownedSchedule(ctx, id); err != nil {
		return nil, err
	}
	run, err := m.opts.Schedules.Trigger(ctx, id)
	if err != nil {
		return nil, err
	}
	return &model.ScheduleRun{R: *run}, nil
}

func (m *mutationResolver) DeleteSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	s, err := (*Resolver)(m).ownedSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := m.opts.Schedules.Delete(ctx, id); err != nil {
		return nil, err
	}
	return &model.Schedule{S: s}, nil
}

// ScheduleRun returns the ScheduleRun field resolvers.
func (r *Resolver) ScheduleRun() generated.ScheduleRunResolver { return (*scheduleRunResolver)(r) }

type scheduleRunResolver Resolver

func (r *scheduleRunResolver) Task(ctx context.Context, run *model.ScheduleRun) (*model.Task, error) {
	if run.R.TaskID == "" {
		return nil, nil
	}
	t, err := (*Resolver)(r).ownedTask(ctx, run.R.TaskID)
	if engine.IsCode(err, engine.CodeNotFound) || engine.IsCode(err, model.CodeForbidden) {
		return nil, nil // purged, or (the schedule was changed) another agent's
	}
	if err != nil {
		return nil, err
	}
	return model.NewTask(t), nil
}
