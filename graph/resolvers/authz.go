// Row-level authorization: an agent token sees and acts on its own agent's
// work only. Which role may run which operation is decided before any
// resolver runs (graph/auth's access table and gate); what is left here is
// what depends on the data: whose task this is, whose schedule, which tasks
// a listing or a subscription may show.
//
// The rules, for an identity bound to agent A:
//   - a task, batch or schedule of another agent, named by id, is
//     FORBIDDEN (reads and changes alike); a batch is A's when all of its
//     tasks are;
//   - listings, counts and subscriptions are narrowed to A's tasks; a
//     filter naming another agent is FORBIDDEN;
//   - nested fields show only A's tasks (children, a batch's tasks); a
//     dependency of another agent shows its id, not its state or result;
//   - a submission as another agent, depending on or spawned by another
//     agent's task, or interrupting a session where another agent has work,
//     is FORBIDDEN;
//   - agents and plan steps are narrowed to A's rows.
//
// A worker token reads no query; what it reads is the task it leased
// (leaseTasks, renewLease and the calls that end a lease answer with it)
// and, through that task's fields, only what the work needs: children in
// its own lanes (others are left out) and dependencies with their state
// and result when they are in its lanes or of the leased task's agent (the
// work's input); another agent's dependency outside its lanes shows its id
// only.
//
// Every check runs before the engine is asked to change anything, so a
// refused request changes nothing.

package resolvers

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
)

// forbidden returns a FORBIDDEN error.
func forbidden(format string, args ...any) *engine.Error {
	return &engine.Error{Code: model.CodeForbidden, Message: fmt.Sprintf(format, args...)}
}

// ownAgent returns the agent the caller is restricted to: "" when it may act
// on every agent's work. A context without an identity (the server always
// sets one) is refused: authorization fails closed.
func ownAgent(ctx context.Context) (string, error) {
	id := auth.FromContext(ctx)
	if id == nil {
		return "", &engine.Error{Code: model.CodeUnauthenticated, Message: auth.ErrUnauthenticated.Error()}
	}
	return id.Agent(), nil
}

// workerLanes returns the lanes of a worker token, and whether the caller
// is one.
func workerLanes(ctx context.Context) ([]string, bool) {
	id := auth.FromContext(ctx)
	if id == nil || id.Role != auth.RoleWorker {
		return nil, false
	}
	return id.Lanes, true
}

// notOwn is the refusal of another agent's task.
func notOwn(agent, id string) *engine.Error {
	return forbidden("task %s belongs to another agent; this token acts for agent %q only", id, agent)
}

// ownedTask reads a task the caller may see.
func (r *Resolver) ownedTask(ctx context.Context, id string) (*engine.Task, error) {
	return r.ownedTaskBy(ctx, id, r.eng.Task)
}

// ownedTaskBy is ownedTask with its read of the task: a follower's reads
// show only what is committed (Engine.CommittedTask).
func (r *Resolver) ownedTaskBy(ctx context.Context, id string, read func(context.Context, string) (*engine.Task, error)) (*engine.Task, error) {
	agent, err := ownAgent(ctx)
	if err != nil {
		return nil, err
	}
	t, err := read(ctx, id)
	if err != nil {
		return nil, err
	}
	if agent != "" && t.Spec.AgentID != agent {
		return nil, notOwn(agent, id)
	}
	if lanes, worker := workerLanes(ctx); worker && !slices.Contains(lanes, t.Spec.Lane) {
		return nil, forbidden("task %s is not in a lane this worker token works", id)
	}
	return t, nil
}

// checkOwnTask refuses a change to another agent's task, before the change.
func (r *Resolver) checkOwnTask(ctx context.Context, id string) error {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return err
	}
	t, err := r.eng.Task(ctx, id)
	if err != nil {
		return err
	}
	if t.Spec.AgentID != agent {
		return notOwn(agent, id)
	}
	return nil
}

// scopeFilter narrows a task filter to the caller's tasks; a filter that
// names another agent is FORBIDDEN.
func scopeFilter(ctx context.Context, path string, f *engine.TaskFilter) error {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return err
	}
	if f.AgentID != "" && f.AgentID != agent {
		return &engine.Error{Code: model.CodeForbidden, Field: path + ".agentId",
			Message: fmt.Sprintf("this token acts for agent %q only, not %q", agent, f.AgentID)}
	}
	f.AgentID = agent
	return nil
}

// scopeMatcher narrows an event predicate to the caller's tasks and
// sessions (a SESSION event names its session's agent); a filter that names
// another agent is FORBIDDEN. Events of no agent (lane and engine changes, a
// named tab's session) are not an agent's.
func scopeMatcher(ctx context.Context, filter *model.TaskEventFilter, match func(*engine.Event) bool) (func(*engine.Event) bool, error) {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return match, err
	}
	if filter != nil && filter.AgentID != nil && *filter.AgentID != agent {
		return nil, &engine.Error{Code: model.CodeForbidden, Field: "filter.agentId",
			Message: fmt.Sprintf("this token acts for agent %q only, not %q", agent, *filter.AgentID)}
	}
	return func(e *engine.Event) bool {
		return e.AgentID == agent && (match == nil || match(e))
	}, nil
}

// checkSubmission refuses, for an agent, a task spec that submits as
// another agent, depends on or is spawned by another agent's task, or
// interrupts a named tab where another agent has work. keys are the item keys
// of a batch (dependencies on them are the batch's own).
func (r *Resolver) checkSubmission(ctx context.Context, path string, s *engine.TaskSpec, keys map[string]int) error {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return err
	}
	if s.AgentID != agent {
		return &engine.Error{Code: model.CodeForbidden, Field: path + ".agentId",
			Message: fmt.Sprintf("this token submits as agent %q only, not %q", agent, s.AgentID)}
	}
	for i, d := range s.DependsOn {
		if _, ok := keys[d]; ok {
			continue
		}
		if err := r.checkRelated(ctx, path+".dependsOn."+strconv.Itoa(i), d, agent); err != nil {
			return err
		}
	}
	if s.ParentID != "" {
		if err := r.checkRelated(ctx, path+".parentId", s.ParentID, agent); err != nil {
			return err
		}
	}
	if s.QueueMode.Interrupts() && s.SessionKey == "" {
		// A session key is the agent's own (engine.TaskSpec.SessionScope):
		// its interrupt reaches no other agent's session of that name. A
		// named tab is one session, whoever names it.
		session := s.TabID
		others, err := r.othersInSession(ctx, session, agent)
		if err != nil {
			return err
		}
		if others {
			return &engine.Error{Code: model.CodeForbidden, Field: path + ".queueMode",
				Message: fmt.Sprintf("session %q has work of other agents: this token may not interrupt it", session)}
		}
	}
	return nil
}

// checkRelated refuses a reference to another agent's task. An unknown
// task is left to the engine (which refuses it with its own error).
func (r *Resolver) checkRelated(ctx context.Context, path, id, agent string) error {
	t, err := r.eng.Task(ctx, id)
	if engine.IsCode(err, engine.CodeNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if t.Spec.AgentID != agent {
		return &engine.Error{Code: model.CodeForbidden, Field: path,
			Message: fmt.Sprintf("task %s belongs to another agent; this token acts for agent %q only", id, agent)}
	}
	return nil
}

// liveStates are the states of tasks that have not ended.
var liveStates = []engine.State{engine.StateQueued, engine.StateWaiting, engine.StateAssigned, engine.StateRunning,
	engine.StateRetryWait, engine.StateParked}

// othersInSession reports whether a session has live tasks of agents other
// than agent.
func (r *Resolver) othersInSession(ctx context.Context, session, agent string) (bool, error) {
	all, err := r.eng.CountTasks(ctx, engine.TaskFilter{SessionKey: session, States: liveStates})
	if err != nil {
		return false, err
	}
	own, err := r.eng.CountTasks(ctx, engine.TaskFilter{SessionKey: session, AgentID: agent, States: liveStates})
	if err != nil {
		return false, err
	}
	return sum(all) != sum(own), nil
}

func sum(counts map[engine.State]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// checkOwnBatch refuses, for an agent, a batch with tasks of other agents.
func (r *Resolver) checkOwnBatch(ctx context.Context, b *engine.BatchStatus) error {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return err
	}
	own, err := r.eng.CountTasks(ctx, engine.TaskFilter{BatchID: b.Info.ID, AgentID: agent})
	if err != nil {
		return err
	}
	if sum(own) != b.Total {
		return forbidden("batch %s has tasks of other agents; this token acts for agent %q only", b.Info.ID, agent)
	}
	return nil
}

// checkScheduleAgent refuses, for an agent, a schedule that submits as
// another agent.
func checkScheduleAgent(ctx context.Context, id, templateAgent string) error {
	agent, err := ownAgent(ctx)
	if err != nil || agent == "" {
		return err
	}
	if templateAgent != agent {
		return forbidden("schedule %s submits as another agent; this token acts for agent %q only", id, agent)
	}
	return nil
}
