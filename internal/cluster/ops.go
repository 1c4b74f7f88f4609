package cluster

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/savedinstances"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/schedule"
)

// The operations a node asks of the leader. Their arguments and answers are
// JSON: engine types as they are, errors as wireError.

type none struct{}

type (
	idArgs     struct{ ID string }
	cancelArgs struct{ ID, Reason string }
	whereArgs  struct {
		Filter engine.TaskFilter
		Reason string
	}
	stopArgs struct {
		Key string
		All bool
	}
	laneArgs struct {
		Name   string
		Update engine.LaneUpdate
	}
	agentArgs struct {
		ID     string
		Config engine.AgentConfig
	}
	planArgs struct {
		Limit int
		Now   time.Time
	}
	ingestArgs struct {
		Batch   *engine.BatchSpec
		BatchID string
		Items   []engine.BatchItem
	}
	// ingestAnswer is engine.BatchResult with its errors encoded.
	ingestAnswer struct {
		BatchID string
		Items   []ingestItem
	}
	ingestItem struct {
		Task     *engine.Task
		Err      *wireError
		Replayed bool // engine.ItemResult.Replayed
	}
	registerArgs struct{ Config executor.InstanceConfig }
	updateArgs   struct {
		ID     string
		Update executor.InstanceUpdate
	}
	instanceAnswer struct {
		Instance executor.Instance
		Found    bool
	}
	loadArgs struct {
		Name         string
		Wasm, Config []byte
	}
	configureArgs struct {
		Name   string
		Config []byte
	}
	enableArgs struct {
		ID    string
		Force bool
	}
	sizeArgs struct {
		Name string
		Size int
	}
	policyArgs struct {
		Slot       policy.Slot
		Lane, Name string
	}
	scheduleArgs struct {
		ID      string
		Spec    schedule.Spec
		Enabled bool
	}
	heartbeatArgs struct {
		ID   string
		Spec heartbeat.Spec
	}
)

// Engine operations.
var (
	opIngest = op[ingestArgs, ingestAnswer]{"engine.ingest", func(ctx context.Context, l *leader, a ingestArgs) (ingestAnswer, error) {
		res, err := l.eng.Ingest(ctx, engine.Inbound{Batch: a.Batch, BatchID: a.BatchID, Items: a.Items})
		if err != nil {
			return ingestAnswer{}, err
		}
		out := ingestAnswer{BatchID: res.BatchID, Items: make([]ingestItem, len(res.Items))}
		for i, it := range res.Items {
			out.Items[i].Task, out.Items[i].Replayed = it.Task, it.Replayed
			if it.Err != nil {
				out.Items[i].Err = encodeError(it.Err)
			}
		}
		return out, nil
	}}
	opCancel = op[cancelArgs, *engine.Task]{"engine.cancel", func(ctx context.Context, l *leader, a cancelArgs) (*engine.Task, error) {
		return l.eng.Cancel(ctx, a.ID, a.Reason)
	}}
	opCancelWhere = op[whereArgs, []string]{"engine.cancelWhere", func(ctx context.Context, l *leader, a whereArgs) ([]string, error) {
		return l.eng.CancelWhere(ctx, a.Filter, a.Reason)
	}}
	opStopSession = op[stopArgs, []string]{"engine.stopSession", func(ctx context.Context, l *leader, a stopArgs) ([]string, error) {
		return l.eng.StopSession(ctx, a.Key, a.All)
	}}
	opRetry = op[idArgs, *engine.Task]{"engine.retry", func(ctx context.Context, l *leader, a idArgs) (*engine.Task, error) {
		return l.eng.Retry(ctx, a.ID)
	}}
	opReset = op[idArgs, *engine.Task]{"engine.reset", func(ctx context.Context, l *leader, a idArgs) (*engine.Task, error) {
		return l.eng.Reset(ctx, a.ID)
	}}
	opUpdateLane = op[laneArgs, engine.LaneStatus]{"engine.updateLane", func(ctx context.Context, l *leader, a laneArgs) (engine.LaneStatus, error) {
		return l.eng.UpdateLane(ctx, a.Name, a.Update)
	}}
	opSetAgent = op[agentArgs, none]{"engine.setAgent", func(ctx context.Context, l *leader, a agentArgs) (none, error) {
		return none{}, l.eng.SetAgent(ctx, a.ID, a.Config)
	}}
	opDrain = op[none, none]{"engine.drain", func(ctx context.Context, l *leader, _ none) (none, error) {
		l.eng.Drain(ctx)
		return none{}, nil
	}}
	opDraining = op[none, bool]{"engine.draining", func(ctx context.Context, l *leader, _ none) (bool, error) {
		return l.eng.Draining(ctx), nil
	}}
	opPlan = op[planArgs, *engine.Plan]{"engine.plan", func(ctx context.Context, l *leader, a planArgs) (*engine.Plan, error) {
		return l.eng.PlanAt(ctx, a.Limit, a.Now)
	}}
	opLanes = op[none, []engine.LaneStatus]{"engine.lanes", func(ctx context.Context, l *leader, _ none) ([]engine.LaneStatus, error) {
		return l.eng.Lanes(ctx), nil
	}}
	opAgents = op[none, []engine.AgentStatus]{"engine.agents", func(ctx context.Context, l *leader, _ none) ([]engine.AgentStatus, error) {
		return l.eng.Agents(ctx), nil
	}}
	opStats = op[none, engine.Stats]{"engine.stats", func(ctx context.Context, l *leader, _ none) (engine.Stats, error) {
		return l.eng.Stats(ctx), nil
	}}
	opPolicies = op[none, []engine.PolicyAssignment]{"engine.policies", func(ctx context.Context, l *leader, _ none) ([]engine.PolicyAssignment, error) {
		return l.eng.Policies(ctx), nil
	}}
)

// Instance operations.
var (
	opRegister = op[registerArgs, executor.Instance]{"instances.register", func(ctx context.Context, l *leader, a registerArgs) (executor.Instance, error) {
		if l.reg == nil {
			return executor.Instance{}, errNoRegistry
		}
		in, err := l.reg.Register(ctx, a.Config)
		if err == nil {
			err = savedinstances.Save(ctx, l.eng, l.reg, in.ID)
		}
		return in, err
	}}
	opUpdateInstance = op[updateArgs, executor.Instance]{"instances.update", func(ctx context.Context, l *leader, a updateArgs) (executor.Instance, error) {
		if l.reg == nil {
			return executor.Instance{}, errNoRegistry
		}
		in, err := l.reg.Update(ctx, a.ID, a.Update)
		if err == nil {
			err = savedinstances.Save(ctx, l.eng, l.reg, in.ID)
		}
		return in, err
	}}
	opRemoveInstance = op[idArgs, none]{"instances.remove", func(ctx context.Context, l *leader, a idArgs) (none, error) {
		if l.reg == nil {
			return none{}, errNoRegistry
		}
		err := l.reg.Remove(ctx, a.ID)
		if err == nil {
			err = savedinstances.Save(ctx, l.eng, l.reg, a.ID)
		}
		return none{}, err
	}}
	opGetInstance = op[idArgs, instanceAnswer]{"instances.get", func(ctx context.Context, l *leader, a idArgs) (instanceAnswer, error) {
		if l.reg == nil {
			return instanceAnswer{}, nil
		}
		in, ok := l.reg.Get(ctx, a.ID)
		return instanceAnswer{Instance: in, Found: ok}, nil
	}}
	opListInstances = op[none, []executor.Instance]{"instances.list", func(ctx context.Context, l *leader, _ none) ([]executor.Instance, error) {
		if l.reg == nil {
			return nil, nil
		}
		return l.reg.List(ctx), nil
	}}
)

// Plugin operations.
var (
	opLoadPlugin = pluginOp("plugins.load", func(ctx context.Context, m *manager.Manager, a loadArgs) (manager.Info, error) {
		return m.Load(ctx, a.Name, a.Wasm, a.Config)
	})
	opRefusePluginSize = pluginOp("plugins.refuseSize", func(ctx context.Context, m *manager.Manager, a sizeArgs) (none, error) {
		return none{}, m.RefuseSize(ctx, a.Name, a.Size)
	})
	opUnloadPlugin = pluginOp("plugins.unload", func(ctx context.Context, m *manager.Manager, a idArgs) (none, error) {
		return none{}, m.Unload(ctx, a.ID)
	})
	opConfigurePlugin = pluginOp("plugins.configure", func(ctx context.Context, m *manager.Manager, a configureArgs) (manager.Info, error) {
		return m.Configure(ctx, a.Name, a.Config)
	})
	opSetPolicy = pluginOp("plugins.setPolicy", func(ctx context.Context, m *manager.Manager, a policyArgs) (none, error) {
		return none{}, m.SetPolicy(ctx, a.Slot, a.Lane, a.Name)
	})
	opClearLanePolicy = pluginOp("plugins.clearLanePolicy", func(ctx context.Context, m *manager.Manager, a policyArgs) (none, error) {
		return none{}, m.ClearLanePolicy(ctx, a.Slot, a.Lane)
	})
	opEnablePlugin = pluginOp("plugins.enable", func(ctx context.Context, m *manager.Manager, a enableArgs) (none, error) {
		return none{}, m.Enable(ctx, a.ID, a.Force)
	})
	opGetPlugin = pluginOp("plugins.get", func(ctx context.Context, m *manager.Manager, a idArgs) (manager.Info, error) {
		return m.Get(ctx, a.ID)
	})
	opListPlugins = pluginOp("plugins.list", func(ctx context.Context, m *manager.Manager, _ none) ([]manager.Info, error) {
		return m.List(ctx), nil
	})
)

// Schedule operations.
var (
	opCreateSchedule = scheduleOp("schedules.create", func(ctx context.Context, s *schedule.Scheduler, a scheduleArgs) (*schedule.Schedule, error) {
		return s.Create(ctx, a.Spec)
	})
	opUpdateSchedule = scheduleOp("schedules.update", func(ctx context.Context, s *schedule.Scheduler, a scheduleArgs) (*schedule.Schedule, error) {
		return s.Update(ctx, a.ID, a.Spec)
	})
	opEnableSchedule = scheduleOp("schedules.setEnabled", func(ctx context.Context, s *schedule.Scheduler, a scheduleArgs) (*schedule.Schedule, error) {
		return s.SetEnabled(ctx, a.ID, a.Enabled)
	})
	opTriggerSchedule = scheduleOp("schedules.trigger", func(ctx context.Context, s *schedule.Scheduler, a idArgs) (*schedule.Run, error) {
		return s.Trigger(ctx, a.ID)
	})
	opDeleteSchedule = scheduleOp("schedules.delete", func(ctx context.Context, s *schedule.Scheduler, a idArgs) (none, error) {
		return none{}, s.Delete(ctx, a.ID)
	})
	opGetSchedule = scheduleOp("schedules.get", func(ctx context.Context, s *schedule.Scheduler, a idArgs) (*schedule.Schedule, error) {
		return s.Get(ctx, a.ID)
	})
	opListSchedules = scheduleOp("schedules.list", func(ctx context.Context, s *schedule.Scheduler, _ none) ([]*schedule.Schedule, error) {
		return s.List(ctx), nil
	})
)

// Heartbeat check operations.
var (
	opCreateCheck = checkOp("heartbeats.create", func(ctx context.Context, c *heartbeat.Checker, a heartbeatArgs) (*heartbeat.Check, error) {
		return c.Create(ctx, a.Spec)
	})
	opUpdateCheck = checkOp("heartbeats.update", func(ctx context.Context, c *heartbeat.Checker, a heartbeatArgs) (*heartbeat.Check, error) {
		return c.Update(ctx, a.ID, a.Spec)
	})
	opProbeCheck = checkOp("heartbeats.probe", func(ctx context.Context, c *heartbeat.Checker, a idArgs) (*heartbeat.Check, error) {
		return c.Probe(ctx, a.ID)
	})
	opDeleteCheck = checkOp("heartbeats.delete", func(ctx context.Context, c *heartbeat.Checker, a idArgs) (none, error) {
		return none{}, c.Delete(ctx, a.ID)
	})
	opGetCheck = checkOp("heartbeats.get", func(ctx context.Context, c *heartbeat.Checker, a idArgs) (*heartbeat.Check, error) {
		return c.Get(ctx, a.ID)
	})
	opListChecks = checkOp("heartbeats.list", func(ctx context.Context, c *heartbeat.Checker, _ none) ([]*heartbeat.Check, error) {
		return c.List(ctx), nil
	})
)

// pluginOp, scheduleOp and checkOp make operations on a part the leader may
// run without: they fail with CodeUnavailable when it does.
func pluginOp[A, R any](kind string, apply func(context.Context, *manager.Manager, A) (R, error)) op[A, R] {
	return partOp(kind, func(l *leader) *manager.Manager { return l.plugins }, errNoPlugins, apply)
}

func scheduleOp[A, R any](kind string, apply func(context.Context, *schedule.Scheduler, A) (R, error)) op[A, R] {
	return partOp(kind, func(l *leader) *schedule.Scheduler { return l.schedules }, errNoSchedules, apply)
}

func checkOp[A, R any](kind string, apply func(context.Context, *heartbeat.Checker, A) (R, error)) op[A, R] {
	return partOp(kind, func(l *leader) *heartbeat.Checker { return l.checks }, errNoHeartbeats, apply)
}

// partOp is an operation on the part of the leader that part returns, which
// fails with absent when the leader runs none.
func partOp[P, A, R any](kind string, part func(*leader) *P, absent error, apply func(context.Context, *P, A) (R, error)) op[A, R] {
	return op[A, R]{kind, func(ctx context.Context, l *leader, a A) (R, error) {
		p := part(l)
		if p == nil {
			var zero R
			return zero, absent
		}
		return apply(ctx, p, a)
	}}
}

var (
	errNoHeartbeats = &engine.Error{Code: engine.CodeUnavailable, Message: "the leader runs no heartbeat checks"}
	errNoRegistry   = &engine.Error{Code: engine.CodeUnavailable, Message: "the leader manages no browser instances"}
	errNoPlugins    = &engine.Error{Code: engine.CodeUnavailable, Message: "the leader runs no plugin manager"}
	errNoSchedules  = &engine.Error{Code: engine.CodeUnavailable, Message: "the leader runs no schedules"}
)

// mutates reports whether an operation may change something.
func mutates(kind string) bool {
	switch kind {
	case opDraining.kind, opPlan.kind, opLanes.kind, opAgents.kind, opStats.kind, opPolicies.kind, opGetInstance.kind,
		opListInstances.kind, opGetPlugin.kind, opListPlugins.kind, opGetSchedule.kind, opListSchedules.kind, opLookupLease.kind,
		opGetCheck.kind, opListChecks.kind:
		return false
	}
	return true
}

// newHandlers returns the leader's command handlers, by kind.
func newHandlers() map[string]handler {
	hs := map[string]handler{}
	for _, h := range []interface{ handler() (string, handler) }{
		opIngest, opCancel, opCancelWhere, opStopSession, opRetry, opReset, opUpdateLane, opSetAgent, opDrain,
		opDraining, opPlan, opLanes, opAgents, opStats, opPolicies,
		opRegister, opUpdateInstance, opRemoveInstance, opGetInstance, opListInstances,
		opLoadPlugin, opRefusePluginSize, opUnloadPlugin, opConfigurePlugin, opSetPolicy, opClearLanePolicy, opEnablePlugin, opGetPlugin, opListPlugins,
		opCreateSchedule, opUpdateSchedule, opEnableSchedule, opTriggerSchedule, opDeleteSchedule, opGetSchedule, opListSchedules,
		opLease, opLookupLease, opRenewLease, opComplete, opFail, opRelease,
		opCreateCheck, opUpdateCheck, opProbeCheck, opDeleteCheck, opGetCheck, opListChecks,
	} {
		kind, fn := h.handler()
		hs[kind] = fn
	}
	return hs
}

// fixRaw turns the "null" a JSON round trip makes of a nil RawMessage back
// into nil.
func fixRaw(r json.RawMessage) json.RawMessage {
	if string(r) == "null" {
		return nil
	}
	return r
}

// fixTask undoes what a JSON round trip changes in a task.
func fixTask(t *engine.Task) *engine.Task {
	if t == nil {
		return nil
	}
	t.Result = fixRaw(t.Result)
	if t.Spec != nil && t.Spec.Action != nil {
		t.Spec.Action.Params = fixRaw(t.Spec.Action.Params)
	}
	return t
}
