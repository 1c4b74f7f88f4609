package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/backoff"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// A policy that is not inline decides outside the engine lock: while its
// decision is held up, the engine's other work goes on. Each test holds a
// decision of lane "a" until it releases it, and checks that lane "b" (with
// built-in policies) submits, dispatches and completes meanwhile. Nothing
// here depends on timing: the held decision is provably still running,
// since the test has not released it. (safety bounds only end a test that
// would otherwise hang.)

// gate holds every policy call until released, after saying it was entered.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

// newGate returns a gate that the test's end opens if the test did not.
func newGate(t *testing.T) *gate {
	g := &gate{entered: make(chan struct{}, 64), release: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) hold() {
	g.entered <- struct{}{}
	<-g.release
}

type heldSelection struct{ g *gate }

func (s heldSelection) Rank(_ int64, tasks []policy.Task, ranks []int64) {
	s.g.hold()
	for i := range tasks {
		ranks[i] = int64(tasks[i].Priority)
	}
}

type heldFairness struct {
	g    *gate
	held bool
	fs   fairshare.Fairness
}

func (f *heldFairness) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if !f.held { // the first decision only: the rest answer at once
		f.held = true
		f.g.hold()
	}
	return f.fs.Pick(ctx, cands, picks)
}

type heldRetry struct{ g *gate }

func (r heldRetry) Decide(f policy.Failure) policy.Decision {
	r.g.hold()
	return backoff.Retry{}.Decide(f)
}

// laneExecutor fails lane a's first attempts (transient) and succeeds the
// rest, and reports every start by task id.
type laneExecutor struct {
	started chan string
	failA   bool
}

func (x *laneExecutor) Start(_ context.Context, run *engine.Run) {
	x.started <- run.TaskID()
	if x.failA && run.Spec().Lane == "a" && run.Attempt() == 1 {
		go run.Finish(engine.Outcome{Err: errors.New("flaky"), Class: policy.ClassTransient})
		return
	}
	go run.Finish(engine.Outcome{})
}

// safety ends a test that would otherwise hang; it is not a measure.
const safety = 30 * time.Second

func twoLanes(t *testing.T, x engine.Executor) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "a", MaxInFlight: 10}, {Name: "b", MaxInFlight: 10}}}
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{}), Executor: x})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func spec(lane, agent string) engine.TaskSpec {
	return engine.TaskSpec{Lane: lane, AgentID: agent, Action: &engine.Action{Kind: "click"}}
}

func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(safety):
		t.Fatalf("%s never happened", what)
		panic("unreachable")
	}
}

// submitAsync submits in a goroutine and returns the channel of its answer.
func submitAsync(e *engine.Engine, s engine.TaskSpec) <-chan *engine.Task {
	done := make(chan *engine.Task, 1)
	go func() {
		task, err := e.Submit(context.Background(), s)
		if err != nil {
			task = nil
		}
		done <- task
	}()
	return done
}

// startedTask waits until the task with id starts, skipping other starts.
func startedTask(t *testing.T, x *laneExecutor, id string) {
	t.Helper()
	for waitFor(t, x.started, "the start of "+id) != id {
	}
}

func TestSelectionOutsideTheLockDelaysOnlyItsLane(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64)}
	e := twoLanes(t, x)
	g := newGate(t)
	require.NoError(t, e.SetSelection("a", "held", heldSelection{g}))

	aDone := submitAsync(e, spec("a", "alice"))
	waitFor(t, g.entered, "lane a's selection call")

	// Lane a's decision is running (it has not been released); lane b
	// admits, dispatches and completes.
	for range 3 {
		b := waitFor(t, submitAsync(e, spec("b", "bob")), "lane b's submission")
		require.NotNil(t, b)
		startedTask(t, x, b.ID)
	}
	st := e.Stats(context.Background())
	require.Equal(t, 1, st.Pending, "lane a's task is admitted and waits for its rank")
	select {
	case <-aDone:
		t.Fatal("lane a's submission answered before its rank was decided")
	default:
	}

	g.open()
	a := waitFor(t, aDone, "lane a's submission")
	require.NotNil(t, a)
	startedTask(t, x, a.ID)
}

func TestSelectionOutsideTheLockSkipsTasksCancelledMeanwhile(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64)}
	e := twoLanes(t, x)
	g := newGate(t)
	require.NoError(t, e.SetSelection("a", "held", heldSelection{g}))

	aDone := submitAsync(e, spec("a", "alice"))
	waitFor(t, g.entered, "lane a's selection call")
	ids, err := e.CancelWhere(context.Background(), engine.TaskFilter{Lane: "a"}, "changed my mind")
	require.NoError(t, err)
	require.Len(t, ids, 1, "the task is admitted (QUEUED) while it is ranked, and can be cancelled")
	g.open()
	a := waitFor(t, aDone, "lane a's submission")
	require.NotNil(t, a)
	got, err := e.Task(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateCancelled, got.State)

	// The queue it would have joined works as before.
	b := waitFor(t, submitAsync(e, spec("a", "alice")), "a later submission to lane a")
	require.NotNil(t, b)
	waitFor(t, g.entered, "its selection call")
	startedTask(t, x, b.ID)
	require.Equal(t, 0, e.Stats(context.Background()).Pending)
}

func TestRetryOutsideTheLockDelaysOnlyItsAttempt(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64), failA: true}
	e := twoLanes(t, x)
	g := newGate(t)
	require.NoError(t, e.SetRetry("a", "held", heldRetry{g}))

	a := waitFor(t, submitAsync(e, spec("a", "alice")), "lane a's submission")
	require.NotNil(t, a)
	startedTask(t, x, a.ID)
	waitFor(t, g.entered, "lane a's retry decision")

	for range 3 {
		b := waitFor(t, submitAsync(e, spec("b", "bob")), "lane b's submission")
		require.NotNil(t, b)
		startedTask(t, x, b.ID)
	}
	got, err := e.Task(context.Background(), a.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateAssigned, got.State, "the failed attempt ends once its retry is decided")

	g.open()
	startedTask(t, x, a.ID) // retried after the backoff the decision asked for
	got, err = e.Task(context.Background(), a.ID)
	require.NoError(t, err)
	require.Len(t, got.Attempts, 2)
}

func TestFairnessOutsideTheLockLetsSubmissionsIn(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64)}
	e := twoLanes(t, x)
	g := newGate(t)
	require.NoError(t, e.SetFairness("held", &heldFairness{g: g}))

	// Two candidates, so that the policy is asked; paused until both are in.
	paused, running := true, false
	_, err := e.UpdateLane(context.Background(), "a", engine.LaneUpdate{Paused: &paused})
	require.NoError(t, err)
	first := waitFor(t, submitAsync(e, spec("a", "alice")), "a submission")
	second := waitFor(t, submitAsync(e, spec("a", "carol")), "a submission")
	unpaused := make(chan struct{})
	go func() {
		_, _ = e.UpdateLane(context.Background(), "a", engine.LaneUpdate{Paused: &running}) // dispatches, and waits for the decision
		close(unpaused)
	}()
	waitFor(t, g.entered, "the fairness decision")

	// The decision is running: submissions and queries still answer.
	for range 3 {
		b := waitFor(t, submitAsync(e, spec("b", "bob")), "lane b's submission")
		require.NotNil(t, b)
	}
	require.Equal(t, 5, e.Stats(context.Background()).Pending)
	g.open()
	waitFor(t, unpaused, "the round")
	startedTask(t, x, first.ID)
	_ = second
}

// plainSelection is the built-in's ranking in a type the engine does not
// know as inline: it decides outside the lock.
type plainSelection struct{}

func (plainSelection) Rank(_ int64, tasks []policy.Task, ranks []int64) {
	for i := range tasks {
		ranks[i] = int64(tasks[i].Priority)
	}
}

// BenchmarkSubmitSelection is the cost of a submission (and its dispatch and
// completion) when the lane's selection decides under the lock (inline) and
// outside it, with the same ranking: the price of the lock handoff.
func BenchmarkSubmitSelection(b *testing.B) {
	for _, mode := range []string{"inline", "outside"} {
		b.Run(mode, func(b *testing.B) {
			cfg := engine.Config{MaxQueued: 1 << 24, MaxQueuedPerAgent: 1 << 24, AgentMaxInFlight: 64, MaxInFlight: 256,
				Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 256, MaxQueued: 1 << 24}}}
			e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEnded: 10_000}), Executor: engine.NoopExecutor{}})
			require.NoError(b, err)
			require.NoError(b, e.Start(context.Background()))
			defer func() { _ = e.Shutdown(context.Background()) }()
			if mode == "outside" {
				require.NoError(b, e.SetSelection("", "plain", plainSelection{}))
			}
			s := spec("main", "agent")
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := e.Submit(context.Background(), s); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// weighedRetry retries at once an agent of weight 2 or more and fails the
// others, reading the weight from the failed task's details (ABI v2); its
// first decision is held until released. It records the weights it saw.
type weighedRetry struct {
	g       *gate
	mu      sync.Mutex
	weights []uint32
}

func (r *weighedRetry) Decide(policy.Failure) policy.Decision {
	return policy.Decision{Action: policy.ActionFail}
}

func (r *weighedRetry) DecideDetailed(ctx policy.RetryContext, _ policy.Failure) policy.Decision {
	w := ctx.Details.Agent(0).Weight
	r.mu.Lock()
	r.weights = append(r.weights, w)
	first := len(r.weights) == 1
	r.mu.Unlock()
	if first {
		r.g.hold()
	}
	if w >= 2 {
		return policy.Decision{Action: policy.ActionRetry}
	}
	return policy.Decision{Action: policy.ActionFail}
}

// A retry decision made outside the lock on a task's details is applied
// only if those details still hold: here the agent's weight changes while
// the policy decides, so the decision made on the old weight (retry) is
// dropped and the policy decides again, under the lock, on the new one
// (fail).
func TestARetryDecidedOnDetailsThatChangedMeanwhileIsDecidedAgain(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64), failA: true}
	e := twoLanes(t, x)
	ctx := context.Background()
	g := newGate(t)
	r := &weighedRetry{g: g}
	require.NoError(t, e.SetRetry("a", "weighed", r))
	require.NoError(t, e.SetAgent(ctx, "alice", engine.AgentConfig{Weight: 2}))

	a := waitFor(t, submitAsync(e, spec("a", "alice")), "lane a's submission")
	require.NotNil(t, a)
	startedTask(t, x, a.ID)
	waitFor(t, g.entered, "the retry decision") // made on weight 2: retry

	require.NoError(t, e.SetAgent(ctx, "alice", engine.AgentConfig{Weight: 1}))
	g.open()
	waitfor.Eventually(t, "the failed attempt's end is applied", func() bool {
		got, err := e.Task(ctx, a.ID)
		return err == nil && got.State.Terminal()
	})
	got, err := e.Task(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, got.State, "decided again on weight 1: %s", got.Reason)
	require.Contains(t, got.Reason, "failed by retry policy weighed")
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Equal(t, []uint32{2, 1}, r.weights, "asked again with the details as they are now")
}

// detailSelection is a selection outside the lock that reads details (or
// says it does not) and records how it was asked.
type detailSelection struct {
	uses   bool
	agents chan string // the agent named in each detailed call; "" for a plain Rank
}

func (s detailSelection) UsesDetails() bool { return s.uses }

func (s detailSelection) Rank(nowMs int64, tasks []policy.Task, ranks []int64) {
	plainSelection{}.Rank(nowMs, tasks, ranks)
	s.agents <- ""
}

func (s detailSelection) RankDetailed(ctx policy.RankContext, tasks []policy.Task, ranks []int64) {
	plainSelection{}.Rank(ctx.NowMs, tasks, ranks)
	s.agents <- ctx.Details.AgentID(0)
}

// The engine copies a submission's details for a selection outside the
// lock only when the policy reads them (policy.UsesDetails): one that says
// it does not is asked without them.
func TestSelectionOutsideTheLockGetsDetailsOnlyIfItReadsThem(t *testing.T) {
	t.Parallel()
	for _, uses := range []bool{true, false} {
		x := &laneExecutor{started: make(chan string, 64)}
		e := twoLanes(t, x)
		s := detailSelection{uses: uses, agents: make(chan string, 1)}
		require.NoError(t, e.SetSelection("a", "detailed", s))
		task := waitFor(t, submitAsync(e, spec("a", "alice")), "the submission")
		require.NotNil(t, task)
		want := ""
		if uses {
			want = "alice"
		}
		require.Equal(t, want, waitFor(t, s.agents, "the rank"), "uses details: %v", uses)
	}
}

// answeringRetry answers every failure with act and counts its decisions;
// with a gate, its first decision is held until released.
type answeringRetry struct {
	g     *gate
	act   policy.Action
	mu    sync.Mutex
	calls int
}

func (r *answeringRetry) Decide(policy.Failure) policy.Decision {
	r.mu.Lock()
	r.calls++
	first := r.calls == 1
	r.mu.Unlock()
	if first && r.g != nil {
		r.g.hold()
	}
	return policy.Decision{Action: r.act}
}

func (r *answeringRetry) decisions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// A retry decision made outside the lock is applied only if the lane still
// has the policy that made it: here the lane's policy is replaced by
// another under the same name (a plugin reloaded under its name) while the
// first decides, so the first's answer (retry) is dropped and the new
// policy decides again, under the lock (fail).
func TestARetryDecidedByAPolicyReplacedMeanwhileIsDecidedAgain(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64), failA: true}
	e := twoLanes(t, x)
	ctx := context.Background()
	g := newGate(t)
	old := &answeringRetry{g: g, act: policy.ActionRetry}
	require.NoError(t, e.SetRetry("a", "reloaded", old))

	a := waitFor(t, submitAsync(e, spec("a", "alice")), "lane a's submission")
	require.NotNil(t, a)
	startedTask(t, x, a.ID)
	waitFor(t, g.entered, "the old policy's retry decision")

	reloaded := &answeringRetry{act: policy.ActionFail}
	require.NoError(t, e.SetRetry("a", "reloaded", reloaded))
	g.open()
	waitfor.Eventually(t, "the failed attempt's end is applied", func() bool {
		got, err := e.Task(ctx, a.ID)
		return err == nil && got.State.Terminal()
	})
	got, err := e.Task(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, got.State, "decided again by the new policy: %s", got.Reason)
	require.Contains(t, got.Reason, "failed by retry policy reloaded")
	require.Equal(t, 1, old.decisions())
	require.Equal(t, 1, reloaded.decisions(), "the new policy decided, under the lock")
}
