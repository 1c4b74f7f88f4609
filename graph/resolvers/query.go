// Queries: read-only views of the engine and the instance registry.

package resolvers

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/plugins/host"
)

func (q *queryResolver) Task(ctx context.Context, id string) (*model.Task, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	// Shown as committed: with a durable store the engine's memory runs
	// ahead of the store, and a state read from it before its commit
	// (RUNNING, SUCCEEDED) could be rolled back by a crash. A change still
	// on its way is waited for (engine.Engine.CommittedTask).
	t, err := (*Resolver)(q).ownedTaskBy(ctx, id, q.eng.CommittedTask)
	if err != nil {
		return nil, err
	}
	return model.NewTask(t), nil
}

func (q *queryResolver) Tasks(ctx context.Context, filter *model.TaskFilter, first *int, after *string, order *engine.Order) (*model.TaskConnection, error) {
	f, ferr := taskFilter("filter", filter)
	if ferr != nil {
		return nil, ferr
	}
	if err := scopeFilter(ctx, "filter", &f); err != nil {
		return nil, err
	}
	ord := engine.NewestFirst
	if order != nil {
		ord = *order
	}
	return (*Resolver)(q).page(ctx, f, ord, first, 50, after)
}

// page reads one page of a listing.
func (r *Resolver) page(ctx context.Context, f engine.TaskFilter, ord engine.Order, first *int, def int, after *string) (*model.TaskConnection, error) {
	n := def
	if first != nil {
		n = *first
	}
	switch {
	case n < 1:
		return nil, invalid("first", "must be at least 1, got %d", n)
	case n > MaxPageSize:
		return nil, limitError("first", "a page holds at most %d tasks, got %d", MaxPageSize, n)
	}
	var from uint64
	if after != nil && *after != "" {
		seq, err := decodeCursor(*after)
		if err != nil {
			return nil, err
		}
		from = seq
	}
	q := engine.TaskQuery{Filter: f, Order: ord, After: from, Limit: min(n+1, MaxPageSize)}
	ts, err := r.eng.Tasks(ctx, q)
	if err != nil {
		return nil, err
	}
	more := len(ts) > n
	if more {
		ts = ts[:n]
	} else if len(ts) == MaxPageSize {
		// A full page of the largest size: look one task further.
		q.After, q.Limit = ts[len(ts)-1].Seq, 1
		next, err := r.eng.Tasks(ctx, q)
		if err != nil {
			return nil, err
		}
		more = len(next) > 0
	}
	r.fillPositions(ctx, ts...)
	conn := &model.TaskConnection{Edges: make([]*model.TaskEdge, len(ts)), Filter: f,
		PageInfo: &model.PageInfo{HasNextPage: more, HasPreviousPage: from != 0}}
	for i, t := range ts {
		conn.Edges[i] = &model.TaskEdge{Cursor: encodeCursor(t.Seq), Node: model.NewTask(t)}
	}
	if len(ts) > 0 {
		conn.PageInfo.StartCursor = &conn.Edges[0].Cursor
		conn.PageInfo.EndCursor = &conn.Edges[len(ts)-1].Cursor
	}
	return conn, nil
}

const cursorPrefix = "seq:"

// encodeCursor makes the opaque cursor of a task: its seq, which orders every
// listing and never changes.
func encodeCursor(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatUint(seq, 10)))
}

func decodeCursor(c string) (uint64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if s, ok := strings.CutPrefix(string(raw), cursorPrefix); ok {
			if seq, perr := strconv.ParseUint(s, 10, 64); perr == nil {
				return seq, nil
			}
		}
	}
	return 0, invalid("after", "is not a cursor of this API")
}

func (q *queryResolver) Batch(ctx context.Context, id string) (*model.Batch, error) {
	if err := checkID("id", id, true); err != nil {
		return nil, err
	}
	b, err := q.eng.Batch(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := (*Resolver)(q).checkOwnBatch(ctx, b); err != nil {
		return nil, err
	}
	return &model.Batch{B: b}, nil
}

func (q *queryResolver) Lanes(ctx context.Context) ([]*model.Lane, error) {
	lanes, err := fromLeader(ctx, q.eng.Lanes)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Lane, len(lanes))
	for i := range lanes {
		out[i] = &model.Lane{L: lanes[i]}
	}
	return out, nil
}

func (q *queryResolver) Lane(ctx context.Context, name string) (*model.Lane, error) {
	ctx, failed := cluster.CatchLeaderReads(ctx)
	l, err := q.eng.Lane(ctx, name)
	if ferr := failed(); ferr != nil {
		return nil, ferr // not a NOT_FOUND: the leader did not answer
	}
	if err != nil {
		return nil, err
	}
	return &model.Lane{L: l}, nil
}

func (q *queryResolver) Agents(ctx context.Context) ([]*engine.AgentStatus, error) {
	own, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	agents, err := fromLeader(ctx, q.eng.Agents)
	if err != nil {
		return nil, err
	}
	out := make([]*engine.AgentStatus, 0, len(agents))
	for i := range agents {
		if own == "" || agents[i].ID == own {
			out = append(out, &agents[i])
		}
	}
	return out, nil
}

func (q *queryResolver) Stats(ctx context.Context) (*model.Stats, error) {
	return fromLeader(ctx, (*Resolver)(q).stats)
}

func (q *queryResolver) Plan(ctx context.Context, limit *int, now *time.Time) (*model.Plan, error) {
	own, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	n := 20
	if limit != nil {
		n = *limit
	}
	switch {
	case n < 1:
		return nil, invalid("limit", "must be at least 1, got %d", n)
	case n > 1000:
		return nil, limitError("limit", "a plan holds at most 1000 steps, got %d", n)
	}
	var at time.Time
	if now != nil {
		at = *now
	}
	p, err := q.eng.PlanAt(ctx, n, at)
	if err != nil {
		return nil, err
	}
	if own != "" {
		// An agent sees its own dispatches and queues only; the totals stay.
		p.Steps = slices.DeleteFunc(p.Steps, func(s engine.PlanStep) bool { return s.AgentID != own })
		p.Skipped = slices.DeleteFunc(p.Skipped, func(s engine.PlanSkip) bool { return s.AgentID != own })
	}
	return &model.Plan{P: p}, nil
}

func (q *queryResolver) Policies(ctx context.Context) ([]*model.PolicyAssignment, error) {
	ps, err := fromLeader(ctx, q.eng.Policies)
	if err != nil {
		return nil, err
	}
	out := make([]*model.PolicyAssignment, len(ps))
	for i := range ps {
		out[i] = &model.PolicyAssignment{P: ps[i]}
	}
	return out, nil
}

func (q *queryResolver) Instances(ctx context.Context) ([]*model.Instance, error) {
	if q.reg == nil {
		return []*model.Instance{}, nil
	}
	insts, err := fromLeader(ctx, q.reg.List)
	if err != nil {
		return nil, err
	}
	out := make([]*model.Instance, len(insts))
	for i := range insts {
		out[i] = &model.Instance{I: insts[i]}
	}
	return out, nil
}

func (q *queryResolver) Instance(ctx context.Context, id string) (*model.Instance, error) {
	if q.reg != nil {
		ctx, failed := cluster.CatchLeaderReads(ctx)
		in, ok := q.reg.Get(ctx, id)
		if err := failed(); err != nil {
			return nil, err // not a NOT_FOUND: the leader did not answer
		}
		if ok {
			return &model.Instance{I: in}, nil
		}
	}
	return nil, &engine.Error{Code: engine.CodeNotFound, Message: "no instance " + strconv.Quote(id)}
}

func (q *queryResolver) Nodes(ctx context.Context) ([]*model.Node, error) {
	if q.opts.Cluster == nil {
		return []*model.Node{{ID: standaloneID, Address: q.opts.Address, Role: model.NodeRoleLeader, Leader: true,
			Since: q.started, LastHeartbeat: time.Now(), Healthy: true, Version: q.opts.Version,
			LastSeq: int64(q.eng.Events().Last())}}, nil
	}
	ns, err := q.opts.Cluster.Nodes(ctx)
	if err != nil {
		return nil, &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "reading the nodes", Err: err}
	}
	out := make([]*model.Node, len(ns))
	for i, n := range ns {
		role := model.NodeRoleFollower
		if n.Role == cluster.RoleLeader {
			role = model.NodeRoleLeader
		}
		out[i] = &model.Node{ID: n.ID, Address: n.Address, Role: role, Leader: n.Leader, Since: n.Since,
			LastHeartbeat: n.Heartbeat, Healthy: n.Healthy, Version: n.Version, SchemaVersion: &n.SchemaVersion, LastSeq: int64(n.LastSeq)}
		if n.CommitFailure != "" {
			out[i].CommitFailure = &n.CommitFailure
			if !n.CommitFailingSince.IsZero() {
				out[i].CommitFailingSince = &n.CommitFailingSince
			}
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// stats returns the engine's counters and who answered, who leads.
func (r *Resolver) stats(ctx context.Context) *model.Stats {
	s := &model.Stats{S: r.eng.Stats(ctx), Node: standaloneID, Leader: ptr(standaloneID), LeaderSince: ptr(r.started)}
	if r.opts.Plugins != nil { // the plugin host refuses invalid answers before the engine sees them
		for _, p := range r.opts.Plugins.List(ctx) {
			s.S.PolicyInvalid += p.Stats.Faults[host.FaultInvalid]
		}
	}
	if c := r.opts.Cluster; c != nil {
		s.Node, s.Leader, s.LeaderSince = c.ID(), nil, nil
		if id, since, ok, err := c.Leader(ctx); err == nil && ok {
			s.Leader, s.LeaderSince = &id, &since
		}
	}
	return s
}

func (q *queryResolver) Server(ctx context.Context) (*model.ServerInfo, error) {
	l := q.opts.Limits
	return &model.ServerInfo{
		Version: q.opts.Version, StartedAt: q.started, Draining: q.eng.Draining(ctx),
		Limits: &model.Limits{
			MaxBatch: q.maxBat, MaxComplexity: l.MaxComplexity, MaxDepth: l.MaxDepth, MaxBodyBytes: l.MaxBodyBytes,
			MaxWebSocketPayloadBytes: l.MaxWebSocketPayloadBytes, MaxPageSize: MaxPageSize, MaxSubscriberLag: l.MaxSubscriberLag,
			MaxSubscriptionsPerConnection: l.MaxSubscriptionsPerConnection, MutationsPerSecond: max(l.MutationsPerSecond, 0),
			MutationBurst: l.MutationBurst,
		},
	}, nil
}

// Field resolvers.

func (t *taskResolver) Dependencies(ctx context.Context, obj *model.Task) ([]*model.Dependency, error) {
	own, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	lanes, worker := workerLanes(ctx)
	deps := obj.T.Spec.DependsOn
	out := make([]*model.Dependency, len(deps))
	for i, id := range deps {
		d := &model.Dependency{ID: id}
		dt, err := t.eng.Task(ctx, id)
		switch {
		case err == nil && own != "" && dt.Spec.AgentID != own:
			// Another agent's task: its id, which this task names, and no more.
		case err == nil && worker && dt.Spec.AgentID != obj.T.Spec.AgentID && !slices.Contains(lanes, dt.Spec.Lane):
			// A worker sees another agent's task outside its lanes no more
			// than an agent would.
		case err == nil:
			st := dt.State
			d.State, d.Result = &st, dt.Result
		case !engine.IsCode(err, engine.CodeNotFound):
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

func (t *taskResolver) Children(ctx context.Context, obj *model.Task, first *int) ([]*model.Task, error) {
	n := 100
	if first != nil {
		n = *first
	}
	if n < 1 || n > MaxPageSize {
		return nil, limitError("first", "must be within 1..%d, got %d", MaxPageSize, n)
	}
	f := engine.TaskFilter{ParentID: obj.T.ID}
	if err := scopeFilter(ctx, "children", &f); err != nil {
		return nil, err
	}
	var ts []*engine.Task
	if lanes, worker := workerLanes(ctx); worker {
		// A worker sees the children in its lanes only: each lane's
		// oldest, merged (ids sort by submission).
		for _, lane := range lanes {
			f.Lane = lane
			some, err := t.eng.Tasks(ctx, engine.TaskQuery{Filter: f, Order: engine.OldestFirst, Limit: n})
			if err != nil {
				return nil, err
			}
			ts = append(ts, some...)
		}
		slices.SortFunc(ts, func(a, b *engine.Task) int { return strings.Compare(a.ID, b.ID) })
		ts = ts[:min(len(ts), n)]
	} else {
		var err error
		if ts, err = t.eng.Tasks(ctx, engine.TaskQuery{Filter: f, Order: engine.OldestFirst, Limit: n}); err != nil {
			return nil, err
		}
	}
	out := make([]*model.Task, len(ts))
	for i, c := range ts {
		out[i] = model.NewTask(c)
	}
	return out, nil
}

func (b *batchResolver) Tasks(ctx context.Context, obj *model.Batch, first *int, after *string) (*model.TaskConnection, error) {
	f := engine.TaskFilter{BatchID: obj.B.Info.ID}
	if err := scopeFilter(ctx, "tasks", &f); err != nil {
		return nil, err
	}
	return (*Resolver)(b).page(ctx, f, engine.OldestFirst, first, 100, after)
}

func (c *connectionResolver) TotalCount(ctx context.Context, obj *model.TaskConnection) (int, error) {
	counts, err := c.eng.CountTasks(ctx, obj.Filter)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range counts {
		n += v
	}
	return n, nil
}

func (e *taskEventResolver) Task(ctx context.Context, obj *model.TaskEvent) (*model.Task, error) {
	if obj.E.TaskID == "" {
		return nil, nil
	}
	// The event is published once committed, and memory may have moved on
	// since: the task is shown as committed, at or after the event, never a
	// change a crash could roll back (engine.Engine.CommittedTask).
	t, err := (*Resolver)(e).ownedTaskBy(ctx, obj.E.TaskID, e.eng.CommittedTask)
	if errors.Is(err, &engine.Error{Code: engine.CodeNotFound}) {
		return nil, nil // purged since
	}
	if err != nil {
		return nil, err
	}
	return model.NewTask(t), nil
}
