package resolvers

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/schedule"
)

// What the resolvers serve. On one node these are the engine, the instance
// registry, the plugin manager and the scheduler themselves; on a node of a
// cluster they are the cluster's views of the leader's (internal/cluster).

// Engine is the scheduling engine as the API uses it (*engine.Engine).
// Every method that may reach the leader of a cluster takes the caller's
// context: when it ends, so does the call's trip to the leader.
type Engine interface {
	Config() engine.Config
	Events() *engine.EventLog
	Sync(ctx context.Context) error
	Task(ctx context.Context, id string) (*engine.Task, error)
	// CommittedTask is Task for a follower: it shows only what is
	// committed, waiting for the commit of a change that is not yet
	// (engine.Engine.CommittedTask).
	CommittedTask(ctx context.Context, id string) (*engine.Task, error)
	// Follow says a client follows the task until it ends, so that its end
	// is committed without lingering (engine.Engine.Follow).
	Follow(id string) (unfollow func())
	Tasks(ctx context.Context, q engine.TaskQuery) ([]*engine.Task, error)
	CountTasks(ctx context.Context, f engine.TaskFilter) (map[engine.State]int, error)
	Batch(ctx context.Context, id string) (*engine.BatchStatus, error)
	StoredEvents(ctx context.Context, after uint64, limit int) ([]engine.Event, error)
	// SubmitItem admits one task and says, besides, whether its
	// idempotency key named a task recorded before for the same request
	// (engine.Engine.SubmitItem).
	SubmitItem(ctx context.Context, spec engine.TaskSpec) (engine.ItemResult, error)
	SubmitBatch(ctx context.Context, b engine.BatchSpec) (*engine.BatchResult, error)
	Cancel(ctx context.Context, id, reason string) (*engine.Task, error)
	CancelWhere(ctx context.Context, f engine.TaskFilter, reason string) ([]string, error)
	StopSession(ctx context.Context, key string, all bool) ([]string, error)
	Retry(ctx context.Context, id string) (*engine.Task, error)
	Reset(ctx context.Context, id string) (*engine.Task, error)
	UpdateLane(ctx context.Context, name string, u engine.LaneUpdate) (engine.LaneStatus, error)
	SetAgent(ctx context.Context, id string, c engine.AgentConfig) error
	Drain(ctx context.Context)
	Draining(ctx context.Context) bool
	Plan(ctx context.Context, limit int) (*engine.Plan, error)
	PlanAt(ctx context.Context, limit int, now time.Time) (*engine.Plan, error)
	Lanes(ctx context.Context) []engine.LaneStatus
	Lane(ctx context.Context, name string) (engine.LaneStatus, error)
	Agents(ctx context.Context) []engine.AgentStatus
	Stats(ctx context.Context) engine.Stats
	Policies(ctx context.Context) []engine.PolicyAssignment
}

// Registry is the browser instance registry (*executor.Registry).
type Registry interface {
	Register(ctx context.Context, cfg executor.InstanceConfig) (executor.Instance, error)
	Update(ctx context.Context, id string, u executor.InstanceUpdate) (executor.Instance, error)
	Remove(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (executor.Instance, bool)
	List(ctx context.Context) []executor.Instance
	Subscribe(buffer int) (<-chan executor.InstanceEvent, func())
}

// Plugins is the policy plugin manager (*manager.Manager).
type Plugins interface {
	Load(ctx context.Context, name string, wasm, config []byte) (manager.Info, error)
	Unload(ctx context.Context, name string) error
	Configure(ctx context.Context, name string, config []byte) (manager.Info, error)
	SetPolicy(ctx context.Context, slot policy.Slot, lane, name string) error
	ClearLanePolicy(ctx context.Context, slot policy.Slot, lane string) error
	Enable(ctx context.Context, name string, force bool) error
	Get(ctx context.Context, name string) (manager.Info, error)
	List(ctx context.Context) []manager.Info
	Subscribe(buffer int) (<-chan manager.Event, func())
	MaxWasmBytes() int
}

// Schedules is the scheduler of recurring tasks (*schedule.Scheduler).
type Schedules interface {
	Create(ctx context.Context, spec schedule.Spec) (*schedule.Schedule, error)
	Update(ctx context.Context, id string, spec schedule.Spec) (*schedule.Schedule, error)
	SetEnabled(ctx context.Context, id string, enabled bool) (*schedule.Schedule, error)
	Trigger(ctx context.Context, id string) (*schedule.Run, error)
	Delete(ctx context.Context, id string) error
	Get(ctx context.Context, id string) (*schedule.Schedule, error)
	List(ctx context.Context) []*schedule.Schedule
}

// Heartbeats runs the heartbeat checks (*heartbeat.Checker).
type Heartbeats interface {
	Create(ctx context.Context, spec heartbeat.Spec) (*heartbeat.Check, error)
	Update(ctx context.Context, id string, spec heartbeat.Spec) (*heartbeat.Check, error)
	Delete(ctx context.Context, id string) error
	Probe(ctx context.Context, id string) (*heartbeat.Check, error)
	Get(ctx context.Context, id string) (*heartbeat.Check, error)
	List(ctx context.Context) []*heartbeat.Check
	Subscribe(buffer int) (<-chan heartbeat.Event, func())
}

var (
	_ Heartbeats = (*heartbeat.Checker)(nil)
	_ Engine     = (*engine.Engine)(nil)
	_ Registry   = (*executor.Registry)(nil)
	_ Plugins    = (*manager.Manager)(nil)
	_ Schedules  = (*schedule.Scheduler)(nil)
)

// Cluster tells which node of a cluster leads (*cluster.Node); nil on a
// server on its own.
type Cluster interface {
	// ID is this node's id.
	ID() string
	// Nodes returns every node that reported, with the leader marked.
	Nodes(ctx context.Context) ([]cluster.NodeStatus, error)
	// Leader returns the node holding the leader lease and since when; ok
	// is false while none does.
	Leader(ctx context.Context) (node string, since time.Time, ok bool, err error)
}

// fromLeader runs read, which may ask the leader of a cluster, and
// returns the error that kept the leader from answering it: on a follower,
// the reads of the leader's state that have no error of their own (Engine's
// Lanes, Lane, Agents, Stats and Policies, the lists of instances, plugins,
// schedules and heartbeat checks, an instance) answer with the node's
// fallback then — its lanes without their load, no instances —, which the
// API does not show as the cluster's state: it answers the error,
// UNAVAILABLE and retryable (cluster.CatchLeaderReads). On one node, or
// the leader, it is read.
func fromLeader[T any](ctx context.Context, read func(context.Context) T) (T, error) {
	ctx, failed := cluster.CatchLeaderReads(ctx)
	v := read(ctx)
	if err := failed(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// standaloneID names a server on its own in nodes and stats.
const standaloneID = "local"
