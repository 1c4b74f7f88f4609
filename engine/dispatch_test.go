package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

func ids(ts ...*engine.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestQueueOrderIsPriorityThenSubmissionOrder(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{AgentMaxInFlight: 1})
	paused(t, h, "main", true)
	low := h.Submit(enginetest.Spec("a").Low().Obj())
	n1 := h.Submit(enginetest.Spec("a").Obj())
	high := h.Submit(enginetest.Spec("a").High().Obj())
	n2 := h.Submit(enginetest.Spec("a").Obj())
	crit := h.Submit(enginetest.Spec("a").Critical().Obj())
	paused(t, h, "main", false)
	for _, want := range []*engine.Task{crit, high, n1, n2, low} {
		require.Equal(t, []string{want.ID}, h.Exec.Running())
		require.NoError(t, h.Exec.Succeed(want.ID, `{}`))
	}
	require.Equal(t, ids(crit, high, n1, n2, low), h.Exec.Started())
}

func TestTiesBetweenAgentsGoToTheOldestHead(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 1, AgingThreshold: -1})
	paused(t, h, "main", true)
	b1 := h.Submit(enginetest.Spec("b").Obj())
	a1 := h.Submit(enginetest.Spec("a").Obj())
	b2 := h.Submit(enginetest.Spec("b").Obj())
	a2 := h.Submit(enginetest.Spec("a").Obj())
	paused(t, h, "main", false)
	// With one slot nobody has anything in flight at decision time, so every
	// decision is a tie on share and weight, broken by the oldest head —
	// never by agent name or map order.
	var order []string
	for range 4 {
		run := h.Exec.Running()
		require.Len(t, run, 1)
		order = append(order, run[0])
		require.NoError(t, h.Exec.Succeed(run[0], `{}`))
	}
	require.Equal(t, ids(b1, a1, b2, a2), order)
}

func TestFairnessSpreadsSlotsAcrossAgents(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 4, AgingThreshold: -1})
	paused(t, h, "main", true)
	for range 10 {
		h.Submit(enginetest.Spec("busy").Obj())
	}
	q1 := h.Submit(enginetest.Spec("quiet").Obj())
	q2 := h.Submit(enginetest.Spec("quiet").Obj())
	paused(t, h, "main", false)
	// 4 slots: busy's head is oldest and goes first; then quiet has fewer in
	// flight and takes two of the remaining three (0 vs 1, then 1 vs 1 →
	// busy's older head, then 1 vs 2 → quiet).
	started := h.Exec.Started()
	require.Len(t, started, 4)
	require.Contains(t, started, q1.ID)
	require.Contains(t, started, q2.ID)
	require.Equal(t, q1.ID, started[1], "quiet goes second: it had nothing in flight")
}

func TestWeightsGiveProportionalShares(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 6, AgingThreshold: -1,
		Agents: map[string]engine.AgentConfig{"heavy": {Weight: 2}}})
	paused(t, h, "main", true)
	for range 10 {
		h.Submit(enginetest.Spec("light").Obj())
		h.Submit(enginetest.Spec("heavy").Obj())
	}
	paused(t, h, "main", false)
	count := map[string]int{}
	for _, id := range h.Exec.Running() {
		count[h.Get(id).Spec.AgentID]++
	}
	require.Equal(t, map[string]int{"heavy": 4, "light": 2}, count)
}

func TestAgingLetsAStarvedQueueJumpTheFairnessOrder(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 2, AgingThreshold: 10 * time.Second, AgentMaxInFlight: 5})
	// "old" has one task in flight and one waiting since the start; "fresh"
	// keeps submitting. Without aging, fresh (0 in flight) always wins.
	oldRunning := h.Submit(enginetest.Spec("old").Obj())
	freshRunning := h.Submit(enginetest.Spec("fresh").Obj())
	oldWaiting := h.Submit(enginetest.Spec("old").Obj())
	h.Clock.Advance(5 * time.Second)
	f2 := h.Submit(enginetest.Spec("fresh").Obj())
	require.NoError(t, h.Exec.Succeed(freshRunning.ID, `{}`))
	require.Equal(t, engine.StateAssigned, h.State(f2.ID), "fresh has fewer in flight: it wins before aging")
	h.Submit(enginetest.Spec("fresh").Obj())
	h.Clock.Advance(6 * time.Second) // oldWaiting has now waited 11 s
	require.NoError(t, h.Exec.Succeed(f2.ID, `{}`))
	require.Equal(t, engine.StateAssigned, h.State(oldWaiting.ID), "the aged head goes first")
	_ = oldRunning
}

func TestHardCeilingsAreNeverExceeded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  engine.Config
		spec func(i int) engine.TaskSpec
		want int
	}{
		{"global", engine.Config{MaxInFlight: 3}, func(i int) engine.TaskSpec { return enginetest.Spec(string(rune('a' + i))).Obj() }, 3},
		{"lane", engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 2}}}, func(i int) engine.TaskSpec { return enginetest.Spec(string(rune('a' + i))).Obj() }, 2},
		{"agent", engine.Config{}, func(int) engine.TaskSpec { return enginetest.Spec("a").Obj() }, 10},
		{"session", engine.Config{}, func(int) engine.TaskSpec { return enginetest.Spec("a").Session("s").Obj() }, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := enginetest.New(t, &c.cfg)
			for i := range 20 {
				h.Submit(c.spec(i))
			}
			require.Len(t, h.Exec.Running(), c.want)
			// Cancel one in flight: its slot stays taken until the executor returns.
			victim := h.Exec.Running()[0]
			_, err := h.Cancel(context.Background(), victim, "test")
			require.NoError(t, err)
			require.Len(t, h.Exec.Running(), c.want, "a cancelled attempt still holds its slot")
			require.Equal(t, c.want, h.Exec.MaxInFlight())
			require.NoError(t, h.Exec.Fail(victim, context.Canceled))
			require.Len(t, h.Exec.Running(), c.want, "the freed slot is reused at once")
			require.Equal(t, c.want, h.Exec.MaxInFlight())
			require.Equal(t, engine.StateCancelled, h.State(victim))
		})
	}
}

func TestAFreedSlotWakesEveryQueueItCouldUnblock(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 1, Healthy: true})
	a := h.Submit(enginetest.Spec("a").Session("s").Obj())
	// b waits for room on the instance, c for a's session: both are parked on
	// a ceiling that a's completion frees.
	b := h.Submit(enginetest.Spec("b").Obj())
	c := h.Submit(enginetest.Spec("c").Session("s").Obj())
	require.Equal(t, []string{a.ID}, h.Exec.Running())
	require.NoError(t, h.Exec.Succeed(a.ID, `{}`))
	require.Equal(t, []string{b.ID}, h.Exec.Running(), "agent b's queue was woken by agent a's completion")
	require.NoError(t, h.Exec.Succeed(b.ID, `{}`))
	require.Equal(t, []string{c.ID}, h.Exec.Running())
}

func TestSessionTasksRunOneAtATimeInOrderWhileOtherSessionsProceed(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	s1 := h.Submit(enginetest.Spec("a").Session("s").Obj())
	s2 := h.Submit(enginetest.Spec("a").Session("s").Obj())
	u1 := h.Submit(enginetest.Spec("a").Session("u").Obj())
	require.ElementsMatch(t, ids(s1, u1), h.Exec.Running(), "the session's second task waits, the other session runs")
	require.NoError(t, h.Exec.Succeed(s1.ID, `{}`))
	require.ElementsMatch(t, ids(s2, u1), h.Exec.Running())
}

func TestPauseHoldsDispatchAndResumeReleasesIt(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	paused(t, h, "main", true)
	task := h.Submit(enginetest.Spec("a").Obj())
	require.Empty(t, h.Exec.Running())
	other := h.Submit(enginetest.Spec("a").Lane("team").Obj())
	require.Equal(t, []string{other.ID}, h.Exec.Running(), "other lanes carry on")
	paused(t, h, "main", false)
	require.Equal(t, engine.StateAssigned, h.State(task.ID))
}

func TestLaneLimitChangesTakeEffectLive(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 1}}})
	for i := range 5 {
		h.Submit(enginetest.Spec(string(rune('a' + i))).Obj())
	}
	require.Len(t, h.Exec.Running(), 1)
	three := 3
	st, err := h.UpdateLane(context.Background(), "main", engine.LaneUpdate{MaxInFlight: &three})
	require.NoError(t, err)
	require.Equal(t, 3, st.Config.MaxInFlight)
	require.Len(t, h.Exec.Running(), 3, "raising the ceiling dispatches at once")
	one := 1
	_, err = h.UpdateLane(context.Background(), "main", engine.LaneUpdate{MaxInFlight: &one})
	require.NoError(t, err)
	run := h.Exec.Running()
	require.Len(t, run, 3, "lowering lets the tasks in flight finish")
	require.NoError(t, h.Exec.Succeed(run[0], `{}`))
	require.Len(t, h.Exec.Running(), 2, "and admits none until the lane is under the ceiling")
	bad := -1
	_, err = h.UpdateLane(context.Background(), "main", engine.LaneUpdate{MaxInFlight: &bad})
	require.Equal(t, engine.CodeInvalidInput, engineErr(t, err).Code)
}

func TestBatchParallelismIsACeiling(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	items := make([]engine.BatchItem, 6)
	for i := range items {
		items[i] = engine.BatchItem{Spec: enginetest.Spec("a").Obj()}
	}
	res, err := h.SubmitBatch(context.Background(), engine.BatchSpec{Items: items, Parallelism: 2})
	require.NoError(t, err)
	require.NotEmpty(t, res.BatchID)
	require.Len(t, h.Exec.Running(), 2)
	first := h.Exec.Running()[0]
	require.NoError(t, h.Exec.Succeed(first, `{}`))
	require.Len(t, h.Exec.Running(), 2)
	st, err := h.Batch(context.Background(), res.BatchID)
	require.NoError(t, err)
	require.Equal(t, 6, st.Total)
	require.Equal(t, 1, st.Counts[engine.StateSucceeded])
	require.False(t, st.Done)
}

func TestInstancesAreCeilingsAndUntargetedWorkGoesToTheLeastLoaded(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 1, Healthy: true})
	h.SetInstance(engine.InstanceInfo{ID: "i2", Capacity: 2, Healthy: true})
	var tasks []*engine.Task
	for i := range 4 {
		tasks = append(tasks, h.Submit(enginetest.Spec(string(rune('a'+i))).Obj()))
	}
	require.Len(t, h.Exec.Running(), 3, "capacity 1 + 2")
	load := h.InstanceLoad()
	require.Equal(t, map[string]int{"i1": 1, "i2": 2}, load)
	require.Equal(t, engine.StateQueued, h.State(tasks[3].ID))
	// An unhealthy instance gets nothing new.
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 1, Healthy: false})
	onI1 := ""
	for _, id := range h.Exec.Running() {
		if h.Exec.Run(id).InstanceID() == "i1" {
			onI1 = id
		}
	}
	require.NoError(t, h.Exec.Succeed(onI1, `{}`))
	require.Equal(t, engine.StateQueued, h.State(tasks[3].ID), "i1 is unhealthy, i2 is full")
	h.SetInstance(engine.InstanceInfo{ID: "i3", Capacity: 1, Healthy: true})
	require.Equal(t, engine.StateAssigned, h.State(tasks[3].ID), "a new instance wakes the waiting work")
	require.Equal(t, "i3", h.Exec.Run(tasks[3].ID).InstanceID())
}

func TestASessionStaysInTheTabItWasGiven(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 5, Healthy: true})
	h.SetInstance(engine.InstanceInfo{ID: "i2", Capacity: 5, Healthy: true})
	first := h.Submit(enginetest.Spec("a").Session("chat-1").Obj())
	run := h.Exec.Run(first.ID)
	require.Empty(t, run.TabID(), "no tab yet: the executor opens one")
	inst := run.InstanceID()
	run.Started(inst, "tab-9")
	require.Equal(t, engine.StateRunning, h.State(first.ID))
	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))
	second := h.Submit(enginetest.Spec("a").Session("chat-1").Obj())
	require.Equal(t, inst, h.Exec.Run(second.ID).InstanceID())
	require.Equal(t, "tab-9", h.Exec.Run(second.ID).TabID())
	// The instance going away unbinds the session.
	require.NoError(t, h.Exec.Fail(second.ID, engine.Transient(errors.Join(engine.ErrInstanceGone))))
	h.Clock.Advance(time.Second)
	require.Empty(t, h.Exec.Run(second.ID).TabID(), "the retry opens a fresh tab")
}

func TestInstructionsGoToChatInstancesAndActionsToBrowsers(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "browser", Capacity: 5, Healthy: true})
	h.SetInstance(engine.InstanceInfo{ID: "chat", Capacity: 5, Healthy: true, Chat: true})
	act := h.Submit(enginetest.Spec("a").Obj())
	ins := h.Submit(enginetest.Spec("a").Instruction("summarise the page").Obj())
	require.Equal(t, "browser", h.Exec.Run(act.ID).InstanceID())
	require.Equal(t, "chat", h.Exec.Run(ins.ID).InstanceID())
}

func TestAnAttemptCountsOnTheInstanceThatRunsIt(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 1, Healthy: true})
	h.SetInstance(engine.InstanceInfo{ID: "i2", Capacity: 1, Healthy: true})
	first := h.Submit(enginetest.Spec("a").Tab("tab-on-i2").Obj())
	run := h.Exec.Run(first.ID)
	require.Equal(t, "i1", run.InstanceID(), "the engine did not know where the tab lives")
	run.Started("i2", "tab-on-i2") // the executor found it on i2
	require.Equal(t, map[string]int{"i1": 0, "i2": 1}, h.InstanceLoad())
	second := h.Submit(enginetest.Spec("b").Obj())
	require.Equal(t, "i1", h.Exec.Run(second.ID).InstanceID(), "i1 has room again")
}

// countingFairness picks the first candidate and counts the decisions it
// was asked for.
type countingFairness struct {
	stateless bool
	calls     int
}

func (f *countingFairness) Stateless() bool { return f.stateless }

func (f *countingFairness) Pick(_ policy.PickContext, _ []policy.Candidate, picks []uint32) int {
	f.calls++
	picks[0] = 0
	return 1
}

func TestAStatelessFairnessPolicyIsNotAskedToChooseAmongOneCandidate(t *testing.T) {
	t.Parallel()
	for _, stateless := range []bool{true, false} {
		h := enginetest.New(t, &engine.Config{MaxInFlight: 10, AgingThreshold: -1})
		f := &countingFairness{stateless: stateless}
		require.NoError(t, h.SetFairness("counting", f))
		one := h.Submit(enginetest.Spec("a").Obj())
		require.Equal(t, []string{one.ID}, h.Exec.Running(), "the only candidate runs")
		if stateless {
			require.Zero(t, f.calls, "a decision with one outcome costs no call")
		} else {
			require.Equal(t, 1, f.calls, "a stateful policy sees every decision")
		}
		paused(t, h, "main", true)
		h.Submit(enginetest.Spec("b").Obj())
		h.Submit(enginetest.Spec("c").Obj())
		before := f.calls
		paused(t, h, "main", false)
		require.Greater(t, f.calls, before, "two candidates: the policy chooses")
		require.Len(t, h.Exec.Running(), 3)
	}
}

// gatedExecutor finishes every attempt at once, except the one numbered
// block, which waits for release.
type gatedExecutor struct {
	block   int64
	release chan struct{}
	started atomic.Int64
	done    atomic.Int64
}

func (x *gatedExecutor) Start(_ context.Context, run *engine.Run) {
	if x.started.Add(1) == x.block {
		<-x.release
	}
	run.Finish(engine.Outcome{})
	x.done.Add(1)
}

func TestAnAPICallDoesNotDispatchAWholeBacklogInItsOwnGoroutine(t *testing.T) {
	t.Parallel()
	const backlog = 10_000
	x := &gatedExecutor{block: backlog / 2, release: make(chan struct{})}
	e, err := engine.New(engine.Options{
		Config:   engine.Config{MaxQueued: backlog, MaxQueuedPerAgent: backlog},
		Store:    memory.New(memory.Options{}),
		Executor: x,
	})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	paused, running := true, false
	_, err = e.UpdateLane(context.Background(), "main", engine.LaneUpdate{Paused: &paused})
	require.NoError(t, err)
	batch := engine.BatchSpec{}
	for i := range backlog {
		batch.Items = append(batch.Items, engine.BatchItem{Spec: enginetest.Spec(fmt.Sprint("agent-", i%10)).Obj()})
		if len(batch.Items) == 100 {
			_, err := e.SubmitBatch(context.Background(), batch)
			require.NoError(t, err)
			batch.Items = batch.Items[:0]
		}
	}
	// Resuming the lane dispatches a few rounds in this goroutine and leaves
	// the rest to the dispatcher goroutine: it returns although attempt
	// number backlog/2 is held.
	returned := make(chan error, 1)
	go func() {
		_, err := e.UpdateLane(context.Background(), "main", engine.LaneUpdate{Paused: &running})
		returned <- err
	}()
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(x.release)
		t.Fatal("updateLane dispatched the whole backlog in the caller's goroutine")
	}
	close(x.release)
	waitfor.Eventually(t, "the whole backlog has run", func() bool { return x.done.Load() == backlog })
}

// noPicks never picks anything.
type noPicks struct{ calls int }

func (f *noPicks) Pick(policy.PickContext, []policy.Candidate, []uint32) int { f.calls++; return 0 }

func TestAFairnessPolicyThatPicksNoneLeavesTheDecisionToTheNativeOrder(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, &engine.Config{MaxInFlight: 2, AgingThreshold: -1})
	f := &noPicks{}
	require.NoError(t, h.SetFairness("none", f))
	paused(t, h, "main", true)
	b1 := h.Submit(enginetest.Spec("b").Obj())
	a1 := h.Submit(enginetest.Spec("a").Obj())
	b2 := h.Submit(enginetest.Spec("b").Obj())
	paused(t, h, "main", false)
	require.Positive(t, f.calls)
	// The native order: oldest head first, then the agent with less in flight.
	require.Equal(t, ids(b1, a1), h.Exec.Started())
	require.Zero(t, h.Stats(context.Background()).PolicyInvalid, "picking none is an answer, not a fault")
	plan, err := h.Plan(context.Background(), 10)
	require.NoError(t, err)
	require.NotEmpty(t, plan.Steps)
	require.Equal(t, b2.ID, plan.Steps[0].TaskID, "the plan previews the same fallback")
	require.NoError(t, h.Exec.Succeed(b1.ID, `{}`))
	require.Equal(t, ids(b1, a1, b2), h.Exec.Started())
}

// A session key is its agent's own: another agent's session of the same name
// is another session. Bob's task in "bank" neither waits for alice's
// "bank" (its ceiling), nor is given the tab alice's "bank" is bound to, nor
// interrupts alice's running task; a tab both name is one session.
func TestTwoAgentsWithTheSameSessionNameHaveTwoSessions(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	h.SetInstance(engine.InstanceInfo{ID: "i1", Capacity: 5, Healthy: true})
	first := h.Submit(enginetest.Spec("alice").Session("bank").Obj())
	run := h.Exec.Run(first.ID)
	run.Started(run.InstanceID(), "alice-tab")
	require.NoError(t, h.Exec.Succeed(first.ID, `{}`))

	alice := h.Submit(enginetest.Spec("alice").Session("bank").Obj())
	require.Equal(t, "alice-tab", h.Exec.Run(alice.ID).TabID(), "alice's session goes back to her tab")
	bob := h.Submit(enginetest.Spec("bob").Session("bank").Obj())
	require.ElementsMatch(t, ids(alice, bob), h.Exec.Running(), "bob's bank does not wait for alice's")
	require.Empty(t, h.Exec.Run(bob.ID).TabID(), "bob's bank is not bound to alice's tab")

	urgent := h.Submit(enginetest.Spec("bob").Session("bank").Interrupt().Obj())
	require.Equal(t, engine.StateCancelled, h.State(bob.ID), "bob's interrupt takes over his own session")
	require.NotEqual(t, engine.StateCancelled, h.State(alice.ID), "bob's interrupt reached alice's session")
	require.NoError(t, h.Exec.Fail(bob.ID, context.Canceled))
	require.Equal(t, engine.StateAssigned, h.State(urgent.ID))

	// A named tab is one session, whoever names it.
	onTab := h.Submit(enginetest.Spec("alice").Tab("T").Obj())
	waits := h.Submit(enginetest.Spec("bob").Tab("T").Obj())
	require.Equal(t, engine.StateAssigned, h.State(onTab.ID))
	require.Equal(t, engine.StateQueued, h.State(waits.ID), "tasks naming one tab run one at a time")
}
