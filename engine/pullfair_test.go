package engine_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/policy/fairshare"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// A pull lane's leases follow the fairness policy as pushed dispatch does:
// the same candidates (the lane's queue heads, with their names), the same
// hold, the same checks of the answer.

// favour is a fairness policy that serves the named agents' heads first,
// then the others, each in head order (one pick per head); it records the
// lanes of the candidates it was shown.
type favour struct {
	mu     sync.Mutex
	agents []string
	inline bool
	calls  int
	lanes  []string
}

func (f *favour) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	order := make([]int, 0, len(cands))
	for i := range cands {
		order = append(order, i)
		if l := ctx.Names.LaneName(i); !slices.Contains(f.lanes, l) {
			f.lanes = append(f.lanes, l)
		}
	}
	named := func(i int) bool { return slices.Contains(f.agents, ctx.Names.AgentID(i)) }
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case named(a) && !named(b):
			return -1
		case named(b) && !named(a):
			return 1
		}
		return 0
	})
	n := 0
	for _, i := range order {
		if n == len(picks) {
			break
		}
		picks[n] = uint32(i)
		n++
	}
	return n
}

func (f *favour) Stateless() bool { return true }
func (f *favour) Inline() bool    { return f.inline }

// pullFairConfig: "jobs", a pull lane of ten slots, and "main".
func pullFairConfig() *engine.Config {
	jobs := engine.NewLane("jobs")
	jobs.Pull, jobs.MaxInFlight = true, 10
	return &engine.Config{AgingThreshold: -1, Lanes: []engine.LaneConfig{engine.NewLane("main"), jobs}}
}

func runIDs(runs []*engine.Run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.TaskID())
	}
	return out
}

func TestAPullLaneLeasesInItsFairnessPolicysOrder(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{true, false} {
		h := enginetest.New(t, pullFairConfig())
		ctx := context.Background()
		f := &favour{agents: []string{"bob"}, inline: inline}
		require.NoError(t, h.SetFairness("favour", f))
		job := func(agent string) string {
			return h.Submit(enginetest.Spec(agent).Lane("jobs").Action("crawl").Obj()).ID
		}
		a1, a2 := job("alice"), job("alice")
		b1, b2 := job("bob"), job("bob")
		c1 := job("carol")

		runs, err := h.Pull(ctx, "jobs", 1, time.Minute, "w1")
		require.NoError(t, err)
		require.Equal(t, []string{b1}, runIDs(runs), "the favoured agent's task first, though alice's head is older (inline %v)", inline)
		require.Equal(t, []string{"jobs"}, f.lanes, "the policy sees the pull lane's heads only")

		runs, err = h.Pull(ctx, "jobs", 3, time.Minute, "w1")
		require.NoError(t, err)
		require.Equal(t, []string{b2, a1, c1}, runIDs(runs), "then bob's next, then the others' heads in the policy's order")
		runs, err = h.Pull(ctx, "jobs", 5, time.Minute, "w1")
		require.NoError(t, err)
		require.Equal(t, []string{a2}, runIDs(runs))
		require.Zero(t, h.Stats(ctx).PolicyInvalid)
	}
}

// With the native policy the lane's order is the native fair share: the
// oldest head among agents with nothing leased.
func TestAPullLaneUnderTheNativePolicyLeasesInFairShareOrder(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullFairConfig())
	ctx := context.Background()
	job := func(agent string) string {
		return h.Submit(enginetest.Spec(agent).Lane("jobs").Action("crawl").Obj()).ID
	}
	a1, a2, b1 := job("alice"), job("alice"), job("bob")
	runs, err := h.Pull(ctx, "jobs", 3, time.Minute, "w1")
	require.NoError(t, err)
	require.Equal(t, []string{a1, b1, a2}, runIDs(runs))
}

// A hold on a pull lane leases nothing (no error), says so on the tasks,
// in the plan and the event log, and to a worker that would wait
// (PullHold); a push round that does not hold leaves it standing, and the
// next pull asks the policy again.
func TestAFairnessHoldOnAPullLaneLeasesNothing(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{true, false} {
		h := enginetest.New(t, pullFairConfig())
		ctx := context.Background()
		f := &holder{hold: true, hintMs: 500, inline: inline}
		require.NoError(t, h.SetFairness("ratecap", f))
		a := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj())

		calls := f.calls
		runs, err := h.Pull(ctx, "jobs", 4, time.Minute, "w1")
		require.NoError(t, err, "everything held is no error (inline %v)", inline)
		require.Empty(t, runs, "held: not the native order either")
		require.Equal(t, calls+1, f.calls, "a policy that may hold is asked about a single candidate")
		require.Equal(t, []string{"jobs"}, f.lanes)
		require.Zero(t, h.Stats(ctx).PolicyInvalid, "a hold is an answer, not a fault")

		at := h.Clock.Now()
		got, ok := h.HoldOf(a.ID)
		require.True(t, ok)
		want := engine.Hold{Policy: "ratecap", Lane: "jobs", Since: at, ReaskAt: at.Add(500 * time.Millisecond), Pull: true}
		require.Equal(t, want, got)
		require.Equal(t, "held by fairness plugin ratecap on pull lane jobs (asks again at the next lease, or a waiting lease after 500ms)",
			got.Reason(), "the hint as the policy gave it, not a time that passes with no timer to ask")
		ph, ok := h.PullHold("jobs")
		require.True(t, ok)
		require.Equal(t, want, ph)
		_, ok = h.PullHold("main")
		require.False(t, ok, "not a pull lane")
		require.Equal(t, []string{"HELD " + a.ID}, holdEvents(h))
		plan, err := h.Plan(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, []engine.PlanSkip{{Lane: "jobs", AgentID: "alice", Reason: want.Reason(), Tasks: 1}}, plan.Skipped,
			"the plan words the hold as Task.hold does, saying pull lane once")

		// Pushed dispatch decides over other queues: its decisions leave the
		// pull lane's hold as it stands.
		f.set(false)
		m := h.Submit(enginetest.Spec("bob").Obj())
		require.Equal(t, ids(m), h.Exec.Started())
		_, ok = h.HoldOf(a.ID)
		require.True(t, ok, "no pull has decided since")

		runs, err = h.Pull(ctx, "jobs", 4, time.Minute, "w1")
		require.NoError(t, err)
		require.Equal(t, []string{a.ID}, runIDs(runs), "the next pull asks again")
		_, ok = h.HoldOf(a.ID)
		require.False(t, ok)
		_, ok = h.PullHold("jobs")
		require.False(t, ok, "the latest pull did not hold")
	}
}

// pickThenHold picks one head per decision for its first n decisions, then
// holds (no hint).
type pickThenHold struct {
	mu sync.Mutex
	n  int
}

func (p *pickThenHold) Pick(_ policy.PickContext, _ []policy.Candidate, picks []uint32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return policy.Hold(0)
	}
	p.n--
	picks[0] = 0
	return 1
}

func (p *pickThenHold) MayHold() bool { return true }

// A hold ends the pull: what was leased before it stays leased, nothing
// more is.
func TestAPullKeepsWhatItLeasedBeforeTheHold(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullFairConfig())
	ctx := context.Background()
	require.NoError(t, h.SetFairness("once", &pickThenHold{n: 1}))
	first := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj())
	second := h.Submit(enginetest.Spec("bob").Lane("jobs").Action("crawl").Obj())
	runs, err := h.Pull(ctx, "jobs", 5, time.Minute, "w1")
	require.NoError(t, err)
	require.Equal(t, []string{first.ID}, runIDs(runs))
	require.Equal(t, engine.StateRunning, h.State(first.ID))
	got, ok := h.HoldOf(second.ID)
	require.True(t, ok)
	require.True(t, got.ReaskAt.IsZero())
	require.Equal(t, "held by fairness plugin once on pull lane jobs (asks again at the next lease, or a waiting lease when something changes)", got.Reason())
}

// answering answers n to every decision, and writes out-of-range picks.
type answering struct{ n int }

func (a answering) Pick(_ policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	for i := range picks {
		picks[i] = uint32(len(cands) + 7)
	}
	return a.n
}

// An invalid answer is counted and replaced by the native fallback's, and
// an answer of none leases in the native order: a pull never waits on a
// policy that does not decide.
func TestAPullLaneFallsBackToTheNativeOrderWhenThePolicyDoesNotDecide(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		n       int
		invalid bool
	}{{"invalid picks", 2, true}, {"an error", -3, true}, {"none", 0, false}} {
		h := enginetest.New(t, pullFairConfig())
		ctx := context.Background()
		require.NoError(t, h.SetFairness("broken", answering{n: tc.n}))
		a1 := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj()).ID
		a2 := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj()).ID
		b1 := h.Submit(enginetest.Spec("bob").Lane("jobs").Action("crawl").Obj()).ID
		runs, err := h.Pull(ctx, "jobs", 3, time.Minute, "w1")
		require.NoError(t, err, tc.name)
		require.Equal(t, []string{a1, b1, a2}, runIDs(runs), "%s: the native fair share decides", tc.name)
		require.Equal(t, tc.invalid, h.Stats(ctx).PolicyInvalid > 0, "%s: a refused answer is counted, none is an answer", tc.name)
	}
}

// gatedFirst is fair share whose first decision waits for its gate; the
// others, made meanwhile or after, answer at once.
type gatedFirst struct {
	g     *gate
	first atomic.Bool
	mu    sync.Mutex
	fs    fairshare.Fairness
}

func (f *gatedFirst) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	if f.first.CompareAndSwap(false, true) {
		f.g.hold()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fs.Pick(ctx, cands, picks)
}

// A pull whose policy decides outside the lock holds up only that pull:
// submissions, and pushed dispatch with its own decisions, go on.
func TestAPullsDecisionOutsideTheLockHoldsUpOnlyThatPull(t *testing.T) {
	t.Parallel()
	x := &laneExecutor{started: make(chan string, 64)}
	jobs := engine.NewLane("jobs")
	jobs.Pull = true
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "a", MaxInFlight: 10}, jobs}}
	e, err := engine.New(engine.Options{Config: cfg, Store: durableMemory{memory.New(memory.Options{})}, Executor: x})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	g := newGate(t)
	require.NoError(t, e.SetFairness("held", &gatedFirst{g: g}))
	ctx := context.Background()
	first, err := e.Submit(ctx, engine.TaskSpec{Lane: "jobs", AgentID: "alice", Action: &engine.Action{Kind: "crawl"}})
	require.NoError(t, err)
	_, err = e.Submit(ctx, engine.TaskSpec{Lane: "jobs", AgentID: "carol", Action: &engine.Action{Kind: "crawl"}})
	require.NoError(t, err)

	type pulled struct {
		runs []*engine.Run
		err  error
	}
	done := make(chan pulled, 1)
	go func() {
		runs, err := e.Pull(ctx, "jobs", 1, time.Minute, "w1")
		done <- pulled{runs, err}
	}()
	waitFor(t, g.entered, "the pull's fairness decision")

	// The decision is running: pushed work is submitted, decided and
	// dispatched meanwhile (two heads, so the policy is asked there too).
	b1 := waitFor(t, submitAsync(e, spec("a", "bob")), "a submission")
	b2 := waitFor(t, submitAsync(e, spec("a", "dave")), "a submission")
	require.NotNil(t, b1)
	require.NotNil(t, b2)
	startedTask(t, x, b1.ID)
	g.open()
	p := waitFor(t, done, "the pull")
	require.NoError(t, p.err)
	require.Equal(t, []string{first.ID}, runIDs(p.runs), "the policy's pick is leased once it answers")
	got, err := e.Task(ctx, first.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateRunning, got.State)
}
