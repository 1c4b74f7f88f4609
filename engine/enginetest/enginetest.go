// Package enginetest helps test code that uses the engine: a builder for task
// specs, a scripted executor that finishes attempts only when told, and a
// harness that wires a deterministic engine (fake clock, synchronous
// dispatch, memory store) for tests that read like scenarios.
package enginetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/internal/drive"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// SpecBuilder builds a TaskSpec fluently: Spec("agent-a").Lane("team").High().Obj().
type SpecBuilder struct{ s engine.TaskSpec }

// Spec starts a spec for agentID with a "click" action.
func Spec(agentID string) *SpecBuilder {
	return &SpecBuilder{s: engine.TaskSpec{AgentID: agentID, Priority: engine.PriorityNormal,
		Action: &engine.Action{Kind: "click", Selector: "css:#go"}}}
}

// Lane sets the lane.
func (b *SpecBuilder) Lane(l string) *SpecBuilder { b.s.Lane = l; return b }

// Session sets the session key.
func (b *SpecBuilder) Session(k string) *SpecBuilder { b.s.SessionKey = k; return b }

// Tab sets the tab.
func (b *SpecBuilder) Tab(id string) *SpecBuilder { b.s.TabID = id; return b }

// Instance sets the target instance.
func (b *SpecBuilder) Instance(id string) *SpecBuilder { b.s.InstanceID = id; return b }

// Priority sets the priority.
func (b *SpecBuilder) Priority(p engine.Priority) *SpecBuilder { b.s.Priority = p; return b }

// High sets priority HIGH.
func (b *SpecBuilder) High() *SpecBuilder { return b.Priority(engine.PriorityHigh) }

// Critical sets priority CRITICAL.
func (b *SpecBuilder) Critical() *SpecBuilder { return b.Priority(engine.PriorityCritical) }

// Low sets priority LOW.
func (b *SpecBuilder) Low() *SpecBuilder { return b.Priority(engine.PriorityLow) }

// Action sets the action kind (and clears any instruction).
func (b *SpecBuilder) Action(kind string) *SpecBuilder {
	b.s.Action = &engine.Action{Kind: kind}
	b.s.Instruction = ""
	return b
}

// Params sets the action's parameters from a JSON-encodable value.
func (b *SpecBuilder) Params(v any) *SpecBuilder {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	b.s.Action.Params = raw
	return b
}

// Instruction makes the task an instruction.
func (b *SpecBuilder) Instruction(text string) *SpecBuilder {
	b.s.Instruction = text
	b.s.Action = nil
	return b
}

// DependsOn sets the dependencies.
func (b *SpecBuilder) DependsOn(ids ...string) *SpecBuilder { b.s.DependsOn = ids; return b }

// Parent sets the parent task.
func (b *SpecBuilder) Parent(id string) *SpecBuilder { b.s.ParentID = id; return b }

// Deadline sets the deadline.
func (b *SpecBuilder) Deadline(t time.Time) *SpecBuilder { b.s.Deadline = t; return b }

// Timeout sets the per-attempt timeout.
func (b *SpecBuilder) Timeout(d time.Duration) *SpecBuilder { b.s.Timeout = d; return b }

// Retry sets the retry policy override.
func (b *SpecBuilder) Retry(p engine.RetryPolicy) *SpecBuilder { b.s.Retry = &p; return b }

// Idempotency sets the idempotency key.
func (b *SpecBuilder) Idempotency(k string) *SpecBuilder { b.s.IdempotencyKey = k; return b }

// Label adds a label.
func (b *SpecBuilder) Label(k, v string) *SpecBuilder {
	if b.s.Labels == nil {
		b.s.Labels = map[string]string{}
	}
	b.s.Labels[k] = v
	return b
}

// Interrupt sets the interrupt queue mode.
func (b *SpecBuilder) Interrupt() *SpecBuilder { b.s.QueueMode = engine.QueueInterrupt; return b }

// Obj returns the spec.
func (b *SpecBuilder) Obj() engine.TaskSpec { return b.s }

// Executor is a scripted executor: attempts stay in flight until the test
// finishes them. It records every attempt it was given, in order.
type Executor struct {
	mu      sync.Mutex
	running map[string]*engine.Run // by task id
	order   []string               // task ids, in the order attempts started
	starts  []StartRecord
	ctxs    map[string]context.Context
	max     int // the most attempts in flight at once
	// Auto, when set, finishes each attempt at once with its outcome.
	Auto func(run *engine.Run) engine.Outcome
}

// NewExecutor returns an executor with nothing in flight.
func NewExecutor() *Executor {
	return &Executor{running: map[string]*engine.Run{}, ctxs: map[string]context.Context{}}
}

// Start implements engine.Executor.
func (x *Executor) Start(ctx context.Context, run *engine.Run) {
	x.mu.Lock()
	x.running[run.TaskID()] = run
	x.ctxs[run.TaskID()] = ctx
	x.order = append(x.order, run.TaskID())
	x.starts = append(x.starts, StartRecord{TaskID: run.TaskID(), Attempt: run.Attempt(), InstanceID: run.InstanceID(), TabID: run.TabID()})
	x.max = max(x.max, len(x.running))
	auto := x.Auto
	x.mu.Unlock()
	if auto != nil {
		x.finish(run.TaskID(), auto(run))
	}
}

// Started returns the task ids whose attempts started, in order.
func (x *Executor) Started() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.order)
}

// StartRecord is one attempt the executor was given.
type StartRecord struct {
	TaskID     string
	Attempt    int
	InstanceID string
	TabID      string
}

// Starts returns every attempt the executor was given, in order.
func (x *Executor) Starts() []StartRecord {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.starts)
}

// Running returns the ids of the tasks in flight, sorted.
func (x *Executor) Running() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	ids := make([]string, 0, len(x.running))
	for id := range x.running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// MaxInFlight returns the most attempts that were in flight at once.
func (x *Executor) MaxInFlight() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.max
}

// Run returns the in-flight attempt of a task, or nil.
func (x *Executor) Run(taskID string) *engine.Run {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.running[taskID]
}

// Context returns the context the latest attempt of a task was started with.
func (x *Executor) Context(taskID string) context.Context {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.ctxs[taskID]
}

// Succeed finishes a task's attempt successfully with a JSON result.
func (x *Executor) Succeed(taskID string, result string) error {
	return x.finish(taskID, engine.Outcome{Result: json.RawMessage(result)})
}

// Fail finishes a task's attempt with err (classify it with engine.Transient
// or engine.Permanent).
func (x *Executor) Fail(taskID string, err error) error {
	return x.finish(taskID, engine.Outcome{Err: err})
}

// Finish finishes a task's attempt with o.
func (x *Executor) Finish(taskID string, o engine.Outcome) error { return x.finish(taskID, o) }

func (x *Executor) finish(taskID string, o engine.Outcome) error {
	x.mu.Lock()
	run := x.running[taskID]
	delete(x.running, taskID)
	x.mu.Unlock()
	if run == nil {
		return fmt.Errorf("enginetest: task %s has no attempt in flight", taskID)
	}
	run.Finish(o)
	return nil
}

// Synchronous returns opts for an engine driven in its callers' goroutines:
// it starts no goroutine, and every call dispatches and commits before it
// returns. With a fake clock and an executor that finishes attempts only
// when told (Executor), the engine is then fully deterministic. For tests
// only: a server never runs an engine this way, and simulations run the
// decision core alone (engine.Core).
func Synchronous(opts engine.Options) engine.Options {
	drive.Synchronous(&opts)
	return opts
}

// Harness is a deterministic engine for scenario tests.
type Harness struct {
	T     testing.TB
	Clock *clock.Fake
	Store *memory.Store
	Exec  *Executor
	*engine.Engine
}

// Epoch is the harness clock's start: a fixed, unremarkable instant.
var Epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// New starts a synchronous engine over a fake clock, a memory store and a
// scripted executor, configured by cfg (nil for the defaults).
func New(t testing.TB, cfg *engine.Config) *Harness {
	t.Helper()
	h := &Harness{T: t, Clock: clock.NewFake(Epoch), Store: memory.New(memory.Options{}), Exec: NewExecutor()}
	var c engine.Config
	if cfg != nil {
		c = *cfg
	}
	e, err := engine.New(Synchronous(engine.Options{Config: c, Store: h.Store, Executor: h.Exec, Clock: h.Clock, Seed: 1}))
	if err != nil {
		t.Fatalf("enginetest: new engine: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("enginetest: start engine: %v", err)
	}
	h.Engine = e
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	return h
}

// Submit submits a spec and fails the test on error.
func (h *Harness) Submit(s engine.TaskSpec) *engine.Task {
	h.T.Helper()
	t, err := h.Engine.Submit(context.Background(), s)
	if err != nil {
		h.T.Fatalf("submit: %v", err)
	}
	return t
}

// State returns a task's current state.
func (h *Harness) State(id string) engine.State {
	h.T.Helper()
	t, err := h.Engine.Task(context.Background(), id)
	if err != nil {
		h.T.Fatalf("task %s: %v", id, err)
	}
	return t.State
}

// Get returns a task.
func (h *Harness) Get(id string) *engine.Task {
	h.T.Helper()
	t, err := h.Engine.Task(context.Background(), id)
	if err != nil {
		h.T.Fatalf("task %s: %v", id, err)
	}
	return t
}
