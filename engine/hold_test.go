package engine_test

import (
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
		require.Zero(t, h.Stats().PolicyInvalid, "a hold is an answer, not a fault")
		require.ElementsMatch(t, []string{"alice", "bob"}, f.agents, "the policy sees the agents' ids")
		require.Equal(t, []string{"main"}, f.lanes)
		plan, err := h.Plan(10)
		require.NoError(t, err)
		require.Empty(t, plan.Steps, "the plan shows no dispatch while the policy holds")
		require.Equal(t, []engine.PlanSkip{
			{Lane: "main", AgentID: "alice", Reason: "held by fairness policy hold (asks again in 500ms)", Tasks: 1},
			{Lane: "main", AgentID: "bob", Reason: "held by fairness policy hold (asks again in 500ms)", Tasks: 1},
		}, plan.Skipped, "the plan says which policy holds which queues, and its hint")

		f.set(false)
		h.Clock.Advance(499 * time.Millisecond)
		require.Empty(t, h.Exec.Started(), "not asked again before the hint")
		h.Clock.Advance(time.Millisecond)
		require.Equal(t, ids(a, b), h.Exec.Started(), "asked again when the hint elapsed")
	}
}
