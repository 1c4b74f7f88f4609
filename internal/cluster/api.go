package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/schedule"
)

// What the API of a node serves, whichever role the node has: the same
// methods as the engine, the instance registry, the plugin manager and the
// scheduler. Reads of tasks, batches and events come from the store (or the
// leader's memory, on the leader); everything else is the leader's answer.
// A call to the leader ends when the caller's context does, and after
// Options.CallTimeout when that context has no deadline; it is refused at
// once while the leader is known to fail its commits, and once no node
// has led for longer than a failover takes (command; a refused change is
// not applied later). Within a failover's usual time a call waits for the
// next leader; a read waiting when this node takes over is served by it. A read without an error of its own answers with
// this node's fallback then, and tells the error to a caller that asks
// (CatchLeaderReads). The reads and
// instance changes of Instances, Plugins, Schedules and Heartbeats (Get,
// List, Enable, Register, Update, Remove) end after Options.CallTimeout at
// the latest, whatever the caller's deadline.

// Engine is the engine as every node of the cluster serves it.
type Engine struct{ n *Node }

// Engine returns the node's view of the cluster's engine.
func (n *Node) API() *Engine { return &Engine{n} }

// Config returns the engine's configuration (the same on every node).
func (a *Engine) Config() engine.Config { return a.n.Engine().Config() }

// Events returns the node's event log: every committed event, whoever leads.
func (a *Engine) Events() *engine.EventLog { return a.n.events }

// Sync waits until what this node changed is visible to store reads.
func (a *Engine) Sync(ctx context.Context) error {
	if l := a.n.leader(); l != nil {
		return l.eng.Sync(ctx)
	}
	return nil // a follower's changes are committed when their call returns
}

// Task returns a task.
func (a *Engine) Task(ctx context.Context, id string) (*engine.Task, error) {
	return a.n.Engine().Task(ctx, id)
}

// CommittedTask returns a task as far as it is committed (see
// engine.Engine.CommittedTask): the leader's memory runs ahead of the store;
// a follower reads the store.
func (a *Engine) CommittedTask(ctx context.Context, id string) (*engine.Task, error) {
	return a.n.Engine().CommittedTask(ctx, id)
}

// Follow records that a client follows a task until it ends (see
// engine.Engine.Follow). The task lives in the leader's memory: on a
// follower it changes nothing.
func (a *Engine) Follow(id string) (unfollow func()) {
	return a.n.Engine().Follow(id)
}

// Positions returns the queue positions of QUEUED tasks (the leader's;
// none on a follower, whose engine queues nothing).
func (a *Engine) Positions(ids []string) map[string]int {
	return a.n.Engine().Positions(ids)
}

// HoldOf returns the fairness plugin's hold on a QUEUED task's queue (the
// leader's; none on a follower, whose engine queues nothing).
func (a *Engine) HoldOf(id string) (engine.Hold, bool) {
	return a.n.Engine().HoldOf(id)
}

// Tasks lists tasks.
func (a *Engine) Tasks(ctx context.Context, q engine.TaskQuery) ([]*engine.Task, error) {
	return a.n.Engine().Tasks(ctx, q)
}

// CountTasks counts tasks by state.
func (a *Engine) CountTasks(ctx context.Context, f engine.TaskFilter) (map[engine.State]int, error) {
	return a.n.Engine().CountTasks(ctx, f)
}

// Batch returns a batch's status.
func (a *Engine) Batch(ctx context.Context, id string) (*engine.BatchStatus, error) {
	return a.n.Engine().Batch(ctx, id)
}

// StoredEvents returns committed events from the store.
func (a *Engine) StoredEvents(ctx context.Context, after uint64, limit int) ([]engine.Event, error) {
	return a.n.Engine().StoredEvents(ctx, after, limit)
}

// Submit admits a task on the leader (see SubmitItem).
func (a *Engine) Submit(ctx context.Context, spec engine.TaskSpec) (*engine.Task, error) {
	r, err := a.SubmitItem(ctx, spec)
	return r.Task, err
}

// SubmitItem admits a task on the leader and returns its outcome, whether
// its idempotency key replayed a task recorded before included (see
// engine.Engine.SubmitItem). A follower chooses the task's id, so that the
// leader admits it once however often the command is applied: applied
// again, the command answers with that task, not as a replay.
func (a *Engine) SubmitItem(ctx context.Context, spec engine.TaskSpec) (engine.ItemResult, error) {
	if l := a.n.leader(); l != nil {
		return l.eng.SubmitItem(ctx, spec)
	}
	res, err := a.ingest(ctx, nil, []engine.BatchItem{{Spec: spec}})
	if err != nil {
		return engine.ItemResult{Err: err}, err
	}
	return res.Items[0], res.Items[0].Err
}

// SubmitBatch admits a batch on the leader.
func (a *Engine) SubmitBatch(ctx context.Context, b engine.BatchSpec) (*engine.BatchResult, error) {
	if l := a.n.leader(); l != nil {
		return l.eng.SubmitBatch(ctx, b)
	}
	return a.ingest(ctx, &b, b.Items)
}

func (a *Engine) ingest(ctx context.Context, b *engine.BatchSpec, items []engine.BatchItem) (*engine.BatchResult, error) {
	now := time.Now()
	args := ingestArgs{Items: make([]engine.BatchItem, len(items))}
	for i, it := range items {
		it.ID = a.n.ids.Next(now)
		it.Spec.SubmittedAt = now
		args.Items[i] = it
	}
	if b != nil {
		bs := *b
		bs.Items = nil
		bs.IDsOnly = false // the leader's answer carries the tasks, ids and all
		args.Batch, args.BatchID = &bs, a.n.ids.Next(now)
	}
	ans, err := opIngest.call(ctx, a.n, args)
	if err != nil {
		return nil, err
	}
	res := &engine.BatchResult{BatchID: ans.BatchID, Items: make([]engine.ItemResult, len(ans.Items))}
	for i, it := range ans.Items {
		res.Items[i].Task, res.Items[i].Replayed = fixTask(it.Task), it.Replayed
		if res.Items[i].Task != nil {
			res.Items[i].ID = res.Items[i].Task.ID
		}
		if it.Err != nil {
			res.Items[i].Err = it.Err.decode()
		}
	}
	if len(res.Items) != len(items) {
		return nil, &engine.Error{Code: engine.CodeUnavailable, Message: "the leader answered for a different number of items"}
	}
	return res, nil
}

// Cancel cancels a task.
func (a *Engine) Cancel(ctx context.Context, id, reason string) (*engine.Task, error) {
	t, err := opCancel.call(ctx, a.n, cancelArgs{id, reason})
	return fixTask(t), err
}

// CancelWhere cancels the live tasks that match f.
func (a *Engine) CancelWhere(ctx context.Context, f engine.TaskFilter, reason string) ([]string, error) {
	return opCancelWhere.call(ctx, a.n, whereArgs{f, reason})
}

// StopSession stops a session's tasks.
func (a *Engine) StopSession(ctx context.Context, key string, all bool) ([]string, error) {
	return opStopSession.call(ctx, a.n, stopArgs{key, all})
}

// Retry re-runs a task.
func (a *Engine) Retry(ctx context.Context, id string) (*engine.Task, error) {
	t, err := opRetry.call(ctx, a.n, idArgs{id})
	return fixTask(t), err
}

// Reset gives a parked task its retry budget back.
func (a *Engine) Reset(ctx context.Context, id string) (*engine.Task, error) {
	t, err := opReset.call(ctx, a.n, idArgs{id})
	return fixTask(t), err
}

// UpdateLane changes a lane's settings.
func (a *Engine) UpdateLane(ctx context.Context, name string, u engine.LaneUpdate) (engine.LaneStatus, error) {
	return opUpdateLane.call(ctx, a.n, laneArgs{name, u})
}

// SetAgent changes an agent's weight and ceiling.
func (a *Engine) SetAgent(ctx context.Context, id string, c engine.AgentConfig) error {
	_, err := opSetAgent.call(ctx, a.n, agentArgs{id, c})
	return err
}

// Drain makes the leader refuse new work.
func (a *Engine) Drain(ctx context.Context) {
	if _, err := opDrain.call(ctx, a.n, none{}); err != nil {
		a.n.log.Error("drain", "error", err)
	}
}

// Draining reports whether the leader refuses new work: its answer.
func (a *Engine) Draining(ctx context.Context) bool {
	d, err := opDraining.call(ctx, a.n, none{})
	return err == nil && d
}

// KnownDraining reports whether the leader refuses new work as this node
// knows it, without waiting for anyone (Node.Draining): what /readyz asks.
func (a *Engine) KnownDraining() bool { return a.n.Draining() }

// Plan is the leader's dry run.
func (a *Engine) Plan(ctx context.Context, limit int) (*engine.Plan, error) {
	return opPlan.call(ctx, a.n, planArgs{Limit: limit})
}

// PlanAt is Plan as of now (zero: the leader's clock).
func (a *Engine) PlanAt(ctx context.Context, limit int, now time.Time) (*engine.Plan, error) {
	return opPlan.call(ctx, a.n, planArgs{Limit: limit, Now: now})
}

// Lanes returns the leader's lanes; when no leader answers, this node's
// view of their settings, without load.
func (a *Engine) Lanes(ctx context.Context) []engine.LaneStatus {
	ls, err := read(ctx, a.n, &a.n.reads.lanes, opLanes)
	if err != nil {
		a.n.leaderReadFailed(ctx, "lanes", err)
		return a.n.Engine().Lanes(ctx)
	}
	return ls
}

// Lane returns one lane.
func (a *Engine) Lane(ctx context.Context, name string) (engine.LaneStatus, error) {
	for _, l := range a.Lanes(ctx) {
		if l.Config.Name == name {
			return l, nil
		}
	}
	return engine.LaneStatus{}, &engine.Error{Code: engine.CodeNotFound, Message: "no lane " + name}
}

// Agents returns the leader's agents (none when no leader answers).
func (a *Engine) Agents(ctx context.Context) []engine.AgentStatus {
	as, err := read(ctx, a.n, &a.n.reads.agents, opAgents)
	if err != nil {
		a.n.leaderReadFailed(ctx, "agents", err)
	}
	return as
}

// Stats returns the leader's counters; when no leader answers, this node's
// (which count nothing but the last seq).
func (a *Engine) Stats(ctx context.Context) engine.Stats {
	s, err := read(ctx, a.n, &a.n.reads.stats, opStats)
	if err != nil {
		a.n.leaderReadFailed(ctx, "stats", err)
		return a.n.Engine().Stats(ctx)
	}
	return s
}

// Policies returns the leader's policy assignments.
func (a *Engine) Policies(ctx context.Context) []engine.PolicyAssignment {
	ps, err := read(ctx, a.n, &a.n.reads.policies, opPolicies)
	if err != nil {
		a.n.leaderReadFailed(ctx, "policies", err)
		return a.n.Engine().Policies(ctx)
	}
	return ps
}

// readCache keeps the leader's answers to the reads that dashboards poll
// (stats, lanes, agents, policies) for a moment, so that many pollers on a
// follower cost the leader one command per read and period. On the leader
// they are read directly.
type readCache struct {
	stats    cached[engine.Stats]
	lanes    cached[[]engine.LaneStatus]
	agents   cached[[]engine.AgentStatus]
	policies cached[[]engine.PolicyAssignment]
}

// readCacheTTL is how long a follower reuses the leader's answer to a read.
const readCacheTTL = 250 * time.Millisecond

// read answers a polled read: on the leader directly, on a follower from
// the cache or the leader.
func read[T any](ctx context.Context, n *Node, c *cached[T], o op[none, T]) (T, error) {
	if l := n.leader(); l != nil {
		n.leaderAnswered()
		return o.apply(ctx, l, none{})
	}
	return c.get(func() (T, error) { return o.call(ctx, n, none{}) })
}

// leaderReadFailed logs that the leader did not answer a read of what,
// once per run of such failures (and a reminder while it lasts): every
// request that reads it fails alike while the database or the leader is
// away, and a line for each would bury the log. The caller's answer is
// this node's fallback; a caller that asked for the error
// (CatchLeaderReads) gets it too.
func (n *Node) leaderReadFailed(ctx context.Context, what string, err error) {
	if c, _ := ctx.Value(leaderReadsKey{}).(*caught); c != nil {
		c.mu.Lock()
		if c.err == nil {
			c.err = err
		}
		c.mu.Unlock()
	}
	n.leaderReads.Fail(n.log, hclog.Warn, "the leader did not answer for its "+what+"; the next failures are not logged until it answers again", "error", err)
}

// CatchLeaderReads returns ctx set to catch the error of the reads that a
// follower passes to the leader and that answer without an error of their
// own — Engine's Lanes, Lane, Agents, Stats and Policies, the List of
// Instances, Plugins, Schedules and Heartbeats, Instances' Get — and the
// function that returns the first such error after the reads made with
// ctx (nil: the leader answered them, or this node leads). Their answer is
// then this node's fallback (this node's lanes without their load, no
// instances…); an API that must not show a fallback as the cluster's state
// answers with the error instead: UNAVAILABLE and retryable, saying why
// (the leader cannot commit, no node leads, no leader answered in time).
func CatchLeaderReads(ctx context.Context) (context.Context, func() error) {
	c := &caught{}
	return context.WithValue(ctx, leaderReadsKey{}, c), func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	}
}

type leaderReadsKey struct{}

type caught struct {
	mu  sync.Mutex
	err error
}

// leaderAnswered ends a run of failed reads (leaderReadFailed), logging it
// once: the leader answered a command, or this node leads.
func (n *Node) leaderAnswered() {
	n.leaderReads.OK(n.log, "the leader answers again")
}

// invalidate forgets the cached reads, after a change made through this
// node: its own caller reads its write.
func (r *readCache) invalidate() {
	r.stats.forget()
	r.lanes.forget()
	r.agents.forget()
	r.policies.forget()
}

func (c *cached[T]) forget() {
	c.mu.Lock()
	c.at = time.Time{}
	c.mu.Unlock()
}

type cached[T any] struct {
	mu sync.Mutex
	at time.Time
	v  T
}

// get returns the value read less than readCacheTTL ago, or loads it;
// concurrent callers share one load.
func (c *cached[T]) get(load func() (T, error)) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < readCacheTTL {
		return c.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.v, c.at = v, time.Now()
	return v, nil
}

// Instances is the leader's instance registry as every node serves it.
type Instances struct{ n *Node }

// Instances returns the node's view of the leader's registry.
func (n *Node) Instances() *Instances { return &Instances{n} }

// bound bounds a call to the leader by the caller's context and by
// Options.CallTimeout, whichever ends first.
func (n *Node) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, n.opts.CallTimeout)
}

// Register adds an instance.
func (r *Instances) Register(ctx context.Context, cfg executor.InstanceConfig) (executor.Instance, error) {
	ctx, cancel := r.n.bound(ctx)
	defer cancel()
	return opRegister.call(ctx, r.n, registerArgs{cfg})
}

// Update changes an instance.
func (r *Instances) Update(ctx context.Context, id string, u executor.InstanceUpdate) (executor.Instance, error) {
	ctx, cancel := r.n.bound(ctx)
	defer cancel()
	return opUpdateInstance.call(ctx, r.n, updateArgs{id, u})
}

// Remove removes an instance.
func (r *Instances) Remove(ctx context.Context, id string) error {
	ctx, cancel := r.n.bound(ctx)
	defer cancel()
	_, err := opRemoveInstance.call(ctx, r.n, idArgs{id})
	return err
}

// Get returns an instance.
func (r *Instances) Get(ctx context.Context, id string) (executor.Instance, bool) {
	ctx, cancel := r.n.bound(ctx)
	defer cancel()
	a, err := opGetInstance.call(ctx, r.n, idArgs{id})
	if err != nil {
		r.n.leaderReadFailed(ctx, "instance "+id, err)
	}
	return a.Instance, err == nil && a.Found
}

// List returns every instance, sorted by id.
func (r *Instances) List(ctx context.Context) []executor.Instance {
	ctx, cancel := r.n.bound(ctx)
	defer cancel()
	ins, err := opListInstances.call(ctx, r.n, none{})
	if err != nil {
		r.n.leaderReadFailed(ctx, "instances", err)
	}
	return ins
}

// Subscribe streams the leader's instance events, whichever node leads.
func (r *Instances) Subscribe(buffer int) (<-chan executor.InstanceEvent, func()) {
	return r.n.relay.instances.subscribe(buffer)
}

// Plugins is the leader's plugin manager as every node serves it.
type Plugins struct{ n *Node }

// Plugins returns the node's view of the leader's plugin manager.
func (n *Node) Plugins() *Plugins { return &Plugins{n} }

// Load loads a plugin.
func (p *Plugins) Load(ctx context.Context, name string, wasm, config []byte) (manager.Info, error) {
	return opLoadPlugin.call(ctx, p.n, loadArgs{name, wasm, config})
}

// RefuseSize announces, on the leader, an upload refused for its size
// before it was decoded (manager.Manager.RefuseSize).
func (p *Plugins) RefuseSize(ctx context.Context, name string, n int) error {
	_, err := opRefusePluginSize.call(ctx, p.n, sizeArgs{name, n})
	return err
}

// Unload unloads a plugin.
func (p *Plugins) Unload(ctx context.Context, name string) error {
	_, err := opUnloadPlugin.call(ctx, p.n, idArgs{name})
	return err
}

// Configure reconfigures a plugin.
func (p *Plugins) Configure(ctx context.Context, name string, config []byte) (manager.Info, error) {
	return opConfigurePlugin.call(ctx, p.n, configureArgs{name, config})
}

// SetPolicy assigns a policy to a slot.
func (p *Plugins) SetPolicy(ctx context.Context, slot policy.Slot, lane, name string) error {
	_, err := opSetPolicy.call(ctx, p.n, policyArgs{slot, lane, name})
	return err
}

// ClearLanePolicy drops a choice of policy: a lane's own, or (lane "") the
// global one (manager.Manager.ClearLanePolicy).
func (p *Plugins) ClearLanePolicy(ctx context.Context, slot policy.Slot, lane string) error {
	_, err := opClearLanePolicy.call(ctx, p.n, policyArgs{Slot: slot, Lane: lane})
	return err
}

// Enable re-enables a plugin (manager.Manager.Enable).
func (p *Plugins) Enable(ctx context.Context, name string, force bool) error {
	ctx, cancel := p.n.bound(ctx)
	defer cancel()
	_, err := opEnablePlugin.call(ctx, p.n, enableArgs{ID: name, Force: force})
	return err
}

// Get returns a plugin.
func (p *Plugins) Get(ctx context.Context, name string) (manager.Info, error) {
	ctx, cancel := p.n.bound(ctx)
	defer cancel()
	return opGetPlugin.call(ctx, p.n, idArgs{name})
}

// List returns every policy available.
func (p *Plugins) List(ctx context.Context) []manager.Info {
	ctx, cancel := p.n.bound(ctx)
	defer cancel()
	is, err := opListPlugins.call(ctx, p.n, none{})
	if err != nil {
		p.n.leaderReadFailed(ctx, "plugins", err)
	}
	return is
}

// MaxWasmBytes is the largest module Load takes.
func (p *Plugins) MaxWasmBytes() int { return p.n.opts.MaxWasmBytes }

// Subscribe streams the leader's plugin events, whichever node leads.
func (p *Plugins) Subscribe(buffer int) (<-chan manager.Event, func()) {
	return p.n.relay.plugins.subscribe(buffer)
}

// Schedules is the leader's scheduler as every node serves it.
type Schedules struct{ n *Node }

// Schedules returns the node's view of the leader's scheduler.
func (n *Node) Schedules() *Schedules { return &Schedules{n} }

// Create adds a schedule.
func (s *Schedules) Create(ctx context.Context, spec schedule.Spec) (*schedule.Schedule, error) {
	return opCreateSchedule.call(ctx, s.n, scheduleArgs{Spec: spec})
}

// Update replaces a schedule's spec.
func (s *Schedules) Update(ctx context.Context, id string, spec schedule.Spec) (*schedule.Schedule, error) {
	return opUpdateSchedule.call(ctx, s.n, scheduleArgs{ID: id, Spec: spec})
}

// SetEnabled pauses or resumes a schedule.
func (s *Schedules) SetEnabled(ctx context.Context, id string, enabled bool) (*schedule.Schedule, error) {
	return opEnableSchedule.call(ctx, s.n, scheduleArgs{ID: id, Enabled: enabled})
}

// Trigger runs a schedule now.
func (s *Schedules) Trigger(ctx context.Context, id string) (*schedule.Run, error) {
	return opTriggerSchedule.call(ctx, s.n, idArgs{id})
}

// Delete removes a schedule.
func (s *Schedules) Delete(ctx context.Context, id string) error {
	_, err := opDeleteSchedule.call(ctx, s.n, idArgs{id})
	return err
}

// Get returns a schedule.
func (s *Schedules) Get(ctx context.Context, id string) (*schedule.Schedule, error) {
	ctx, cancel := s.n.bound(ctx)
	defer cancel()
	return opGetSchedule.call(ctx, s.n, idArgs{id})
}

// List returns every schedule.
func (s *Schedules) List(ctx context.Context) []*schedule.Schedule {
	ctx, cancel := s.n.bound(ctx)
	defer cancel()
	ss, err := opListSchedules.call(ctx, s.n, none{})
	if err != nil {
		s.n.leaderReadFailed(ctx, "schedules", err)
	}
	return ss
}

// Heartbeats is the leader's heartbeat checker as every node serves it.
type Heartbeats struct{ n *Node }

// Heartbeats returns the node's view of the leader's heartbeat checks.
func (n *Node) Heartbeats() *Heartbeats { return &Heartbeats{n} }

// Create adds a check.
func (h *Heartbeats) Create(ctx context.Context, spec heartbeat.Spec) (*heartbeat.Check, error) {
	return opCreateCheck.call(ctx, h.n, heartbeatArgs{Spec: spec})
}

// Update replaces a check's spec.
func (h *Heartbeats) Update(ctx context.Context, id string, spec heartbeat.Spec) (*heartbeat.Check, error) {
	return opUpdateCheck.call(ctx, h.n, heartbeatArgs{ID: id, Spec: spec})
}

// Delete removes a check.
func (h *Heartbeats) Delete(ctx context.Context, id string) error {
	_, err := opDeleteCheck.call(ctx, h.n, idArgs{id})
	return err
}

// Probe probes a check now.
func (h *Heartbeats) Probe(ctx context.Context, id string) (*heartbeat.Check, error) {
	return opProbeCheck.call(ctx, h.n, idArgs{id})
}

// Get returns a check.
func (h *Heartbeats) Get(ctx context.Context, id string) (*heartbeat.Check, error) {
	ctx, cancel := h.n.bound(ctx)
	defer cancel()
	return opGetCheck.call(ctx, h.n, idArgs{id})
}

// List returns every check.
func (h *Heartbeats) List(ctx context.Context) []*heartbeat.Check {
	ctx, cancel := h.n.bound(ctx)
	defer cancel()
	cs, err := opListChecks.call(ctx, h.n, none{})
	if err != nil {
		h.n.leaderReadFailed(ctx, "heartbeat checks", err)
	}
	return cs
}

// Subscribe streams the leader's heartbeat events, whichever node leads.
func (h *Heartbeats) Subscribe(buffer int) (<-chan heartbeat.Event, func()) {
	return h.n.relay.checks.subscribe(buffer)
}
