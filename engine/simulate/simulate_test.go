package simulate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/engine/simulate"
)

func TestWorkloadRoundTripsThroughJSONLines(t *testing.T) {
	t.Parallel()
	subs := simulate.Generate(simulate.Synthetic{Agents: 3, Tasks: 50, Seed: 4})
	var buf bytes.Buffer
	require.NoError(t, simulate.WriteWorkload(&buf, subs))
	back, err := simulate.ReadWorkload(&buf)
	require.NoError(t, err)
	require.Len(t, back, 50)
	for i := range subs {
		require.Equal(t, subs[i].Agent, back[i].Agent)
		require.Equal(t, subs[i].Priority, back[i].Priority)
		require.InDelta(t, float64(subs[i].Duration), float64(back[i].Duration), float64(time.Microsecond))
	}
	_, err = simulate.ReadWorkload(strings.NewReader(`{"atMs":1,"agent":"a","durationMs":5,"colour":"red"}`))
	require.ErrorContains(t, err, "line 1")
}

func TestSimulationIsDeterministicAndFairToAQuietAgent(t *testing.T) {
	t.Parallel()
	// A noisy agent submits 8× more than three quiet ones into a narrow lane.
	subs := simulate.Generate(simulate.Synthetic{Agents: 4, Tasks: 600, Span: 5 * time.Second, Duration: 100 * time.Millisecond, Skew: 8, Seed: 1})
	cfg := engine.Config{Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4}}, AgentMaxInFlight: 4}
	a, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	b, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "built-in"})
	require.NoError(t, err)
	require.Equal(t, a.Order, b.Order, "same workload, same decisions")
	require.Len(t, a.Order, 600, "every task was dispatched")

	noisy := a.Agents[0]
	require.Equal(t, "agent-0", noisy.Agent)
	for _, q := range a.Agents[1:] {
		require.Less(t, q.WaitP50, noisy.WaitP50, "fair share serves the quiet %s before the noisy neighbour's backlog", q.Agent)
	}

	// FIFO over the same workload (every agent looks alike to it) makes the
	// quiet agents wait behind the noisy one: a lower fairness index.
	fifo, err := simulate.Run(context.Background(), subs, simulate.Options{Config: cfg, Name: "fifo", Fairness: oldestHead{}})
	require.NoError(t, err)
	t.Logf("Jain: fair share %.3f, FIFO %.3f", a.Jain, fifo.Jain)
	require.Less(t, fifo.Jain, a.Jain)
	require.Greater(t, a.Jain, 0.9)
}

// oldestHead picks the oldest head, ignoring agents: plain FIFO.
type oldestHead struct{}

func (oldestHead) Pick(_ policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	best := 0
	for i := range cands {
		if cands[i].HeadSeq < cands[best].HeadSeq {
			best = i
		}
	}
	picks[0] = uint32(best)
	return 1
}
