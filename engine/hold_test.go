package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
)

// holder holds while hold is set (with a re-ask hint), else picks the first
// candidate; it records the agent ids and lane names it was given.
type holder struct {
	mu      sync.Mutex
	hold    bool
	hintMs  int64
	inline  bool
	calls   int
	agents  []string
	lanes   []string
	singles int // decisions over one candidate
}

func (h *holder) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if len(cands) == 1 {
		h.singles++
	}
	for i := range cands {
		if id := ctx.Names.AgentID(i); !slices.Contains(h.agents, id) {
			h.agents = append(h.agents, id)
		}
		if l := ctx.Names.LaneName(i); !slices.Contains(h.lanes, l) {
			h.lanes = append(h.lanes, l)
		}
	}
	if h.hold {
		return policy.Hold(h.hintMs)
	}
	picks[0] = 0
	return 1
}

func (h *holder) set(hold bool) { h.mu.Lock(); h.hold = hold; h.mu.Unlock() }

func (h *holder) Stateless() bool { return true }
func (h *holder) MayHold() bool   { return true }
func (h *holder) Inline() bool    { return h.inline }

func TestAFairnessHoldDispatchesNothingUntilTheHintElapses(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{true, false} {
		h := enginetest.New(t, &engine.Config{MaxInFlight: 4, AgingThreshold: -1})
		f := &holder{hold: true, hintMs: 500, inline: inline}
		require.NoError(t, h.SetFairness("hold", f))
		a := h.Submit(enginetest.Spec("alice").Obj())
		require.Empty(t, h.Exec.Started(), "held: not the native order either (inline %v)", inline)
		require.Equal(t, 1, f.singles, "a policy that may hold is asked about a single candidate")
		b := h.Submit(enginetest.Spec("bob").Obj())
		require.Empty(t, h.Exec.Started())
		require.Zero(t, h.Stats(context.Background()).PolicyInvalid, "a hold is an answer, not a fault")
		require.ElementsMatch(t, []string{"alice", "bob"}, f.agents, "the policy sees the agents' ids")
		require.Equal(t, []string{"main"}, f.lanes)
		plan, err := h.Plan(context.Background(), 10)
		require.NoError(t, err)
		require.Empty(t, plan.Steps, "the plan shows no dispatch while the policy holds")
		require.Equal(t, []engine.PlanSkip{
			{Lane: "main", AgentID: "alice", Reason: "held by fairness plugin hold (asks again in 500ms)", Tasks: 1},
			{Lane: "main", AgentID: "bob", Reason: "held by fairness plugin hold (asks again in 500ms)", Tasks: 1},
		}, plan.Skipped, "the plan says which policy holds which queues, and its hint")

		f.set(false)
		h.Clock.Advance(499 * time.Millisecond)
		require.Empty(t, h.Exec.Started(), "not asked again before the hint")
		h.Clock.Advance(time.Millisecond)
		require.Equal(t, ids(a, b), h.Exec.Started(), "asked again when the hint elapsed")
	}
}

// A held task says so, with the policy, its lane and when the policy is
// asked again; the next decision that does not hold clears it, and a hold
// without a hint says it waits for a change.
func TestAHeldTaskSaysWhichPolicyHoldsItAndUntilWhen(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{true, false} {
		h := enginetest.New(t, &engine.Config{MaxInFlight: 4, AgingThreshold: -1})
		f := &holder{hold: true, hintMs: 250, inline: inline}
		require.NoError(t, h.SetFairness("ratecap", f))
		a := h.Submit(enginetest.Spec("alice").Obj())
		got, ok := h.HoldOf(a.ID)
		require.True(t, ok, "the task's queue is held (inline %v)", inline)
		at := h.Clock.Now()
		require.Equal(t, engine.Hold{Policy: "ratecap", Lane: "main", Since: at, ReaskAt: at.Add(250 * time.Millisecond)}, got)
		require.Equal(t, "held by fairness plugin ratecap on lane main (asks again at "+at.Add(250*time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z07:00")+")", got.Reason())

		f.set(false)
		h.Clock.Advance(250 * time.Millisecond)
		require.Equal(t, ids(a), h.Exec.Started(), "asked again when the hint elapsed")
		_, ok = h.HoldOf(a.ID)
		require.False(t, ok, "a dispatched task is not held")

		f.mu.Lock()
		f.hold, f.hintMs = true, 0
		f.mu.Unlock()
		b := h.Submit(enginetest.Spec("bob").Lane("team").Obj())
		got, ok = h.HoldOf(b.ID)
		require.True(t, ok)
		require.Equal(t, "team", got.Lane)
		require.True(t, got.ReaskAt.IsZero(), "no hint, no re-ask time")
		require.Contains(t, got.Reason(), "held by fairness plugin ratecap on lane team (asks again when something changes")

		// The next decision that does not hold clears the hold.
		f.set(false)
		h.Submit(enginetest.Spec("carol").Obj())
		_, ok = h.HoldOf(b.ID)
		require.False(t, ok, "the policy no longer holds")
		_, ok = h.HoldOf("no-such-task")
		require.False(t, ok)
	}
}

// holdEvents returns the HELD and HOLD_ENDED events of h's log, as
// "KIND task-id".
func holdEvents(h *enginetest.Harness) []string {
	evs, _ := h.Events().Read(0, 1<<20, nil)
	var out []string
	for _, ev := range evs {
		if ev.Type == engine.EventHeld || ev.Type == engine.EventHoldEnded {
			out = append(out, ev.Type.String()+" "+ev.TaskID)
		}
	}
	return out
}

// A hold is an event, for the live feed: HELD when a task's queue is held
// (its state stays QUEUED), once — a policy that holds it again at every
// re-ask says nothing new — and HOLD_ENDED when a decision no longer holds
// it while it is still QUEUED. A held task that is dispatched says so with
// its state event.
func TestAHoldIsAnnouncedOnceAndSoIsItsEnd(t *testing.T) {
	t.Parallel()
	for _, inline := range []bool{true, false} {
		h := enginetest.New(t, &engine.Config{MaxInFlight: 1, AgingThreshold: -1})
		f := &holder{hold: true, hintMs: 500, inline: inline}
		require.NoError(t, h.SetFairness("ratecap", f))
		a := h.Submit(enginetest.Spec("alice").Obj())
		b := h.Submit(enginetest.Spec("bob").Obj())
		h.Clock.Advance(500 * time.Millisecond) // asked again: it holds again
		require.GreaterOrEqual(t, f.calls, 3, "the policy was asked again (inline %v)", inline)
		require.Equal(t, []string{"HELD " + a.ID, "HELD " + b.ID}, holdEvents(h), "each hold said once")
		evs, _ := h.Events().Read(0, 1<<20, nil)
		for _, ev := range evs {
			if ev.Type == engine.EventHeld {
				require.Equal(t, engine.StateQueued, ev.To)
				require.Contains(t, ev.Reason, "held by fairness plugin ratecap on lane main")
			}
		}

		f.set(false)
		h.Clock.Advance(500 * time.Millisecond) // one slot: a goes, b stays QUEUED, no longer held
		require.Equal(t, ids(a), h.Exec.Started())
		require.Equal(t, []string{"HELD " + a.ID, "HELD " + b.ID, "HOLD_ENDED " + b.ID}, holdEvents(h))
		_, held := h.HoldOf(b.ID)
		require.False(t, held)

		// Held again later: a new hold, said again.
		f.set(true)
		require.NoError(t, h.Exec.Succeed(a.ID, `{}`))
		require.Equal(t, []string{"HELD " + a.ID, "HELD " + b.ID, "HOLD_ENDED " + b.ID, "HELD " + b.ID}, holdEvents(h))
	}
}

// gatedHolder holds every decision (hint 3 s); while armed, its next
// decision waits for the gate first.
type gatedHolder struct {
	mu    sync.Mutex
	armed *gate
}

func (f *gatedHolder) arm(g *gate) { f.mu.Lock(); f.armed = g; f.mu.Unlock() }

func (f *gatedHolder) Pick(policy.PickContext, []policy.Candidate, []uint32) int {
	f.mu.Lock()
	g := f.armed
	f.armed = nil
	f.mu.Unlock()
	if g != nil {
		g.hold()
	}
	return policy.Hold(3000)
}

func (f *gatedHolder) Stateless() bool { return true }
func (f *gatedHolder) MayHold() bool   { return true }

// A decision outside the lock leaves its scope's hold standing until it
// ends: work let in meanwhile — the other scope's decision, which announces
// holds too — does not end the held tasks' holds, so a policy that holds the
// same heads again emits nothing new. Both ways: a pull deciding while
// pushed dispatch decides and announces, and a round of dispatch deciding
// while a pull does.
func TestARedecidedHoldOutsideTheLockIsNotEndedMeanwhile(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullFairConfig())
	ctx := context.Background()
	f := &gatedHolder{}
	require.NoError(t, h.SetFairness("favour", f))
	a := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj())
	runs, err := h.Pull(ctx, "jobs", 3, time.Minute, "w1")
	require.NoError(t, err)
	require.Empty(t, runs)
	b := h.Submit(enginetest.Spec("bob").Obj())
	want := []string{"HELD " + a.ID, "HELD " + b.ID}
	require.Equal(t, want, holdEvents(h))

	// The pull re-asks outside the lock; pushed dispatch decides meanwhile.
	g := newGate(t)
	f.arm(g)
	done := make(chan error, 1)
	go func() {
		runs, err := h.Pull(ctx, "jobs", 3, time.Minute, "w1")
		if err == nil && len(runs) > 0 {
			err = context.Canceled
		}
		done <- err
	}()
	waitFor(t, g.entered, "the pull's decision")
	c := h.Submit(enginetest.Spec("carol").Obj())
	want = append(want, "HELD "+c.ID)
	g.open()
	require.NoError(t, waitFor(t, done, "the pull"))
	require.Equal(t, want, holdEvents(h), "held again by the same policy: nothing new")
	_, ok := h.HoldOf(a.ID)
	require.True(t, ok)

	// A round of dispatch re-asks outside the lock; a pull decides meanwhile.
	g = newGate(t)
	f.arm(g)
	sub := submitAsync(h.Engine, spec("main", "dave"))
	waitFor(t, g.entered, "the round's decision")
	runs, err = h.Pull(ctx, "jobs", 3, time.Minute, "w1")
	require.NoError(t, err)
	require.Empty(t, runs)
	g.open()
	d := waitFor(t, sub, "the submission")
	want = append(want, "HELD "+d.ID)
	require.Equal(t, want, holdEvents(h), "held again by the same policy: nothing new")
	for _, id := range []string{a.ID, b.ID, c.ID} {
		_, ok := h.HoldOf(id)
		require.True(t, ok, id)
	}
}

// A change of fairness policy ends every hold at once, a pull lane's too,
// though no lease has asked since: the policy that held is gone. Setting
// it again does not revive the hold.
func TestAFairnessPolicyChangeEndsAPullLanesHold(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, pullFairConfig())
	ctx := context.Background()
	f := &holder{hold: true, hintMs: 3000}
	require.NoError(t, h.SetFairness("ratecap", f))
	a := h.Submit(enginetest.Spec("alice").Lane("jobs").Action("crawl").Obj())
	runs, err := h.Pull(ctx, "jobs", 3, time.Minute, "w1")
	require.NoError(t, err)
	require.Empty(t, runs)
	require.Equal(t, []string{"HELD " + a.ID}, holdEvents(h))

	require.NoError(t, h.SetFairness("other", &holder{hold: true, hintMs: 3000}))
	require.Equal(t, []string{"HELD " + a.ID, "HOLD_ENDED " + a.ID}, holdEvents(h), "no lease asked, and the hold ended")
	_, ok := h.HoldOf(a.ID)
	require.False(t, ok)
	require.NoError(t, h.SetFairness("ratecap", f))
	_, ok = h.HoldOf(a.ID)
	require.False(t, ok, "the policy set again has not held since")
	_, ok = h.PullHold("jobs")
	require.False(t, ok)
	require.Equal(t, []string{"HELD " + a.ID, "HOLD_ENDED " + a.ID}, holdEvents(h))
}
