package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// A round of dispatch runs only when it may find work: one submitted task
// is dispatched by one round, and its end, with nothing else queued, asks
// for none — neither one of its own nor one more of the round that started
// it. It holds whether the lane's selection ranks under the lock or outside
// it (where the task joins its queue only once ranked, after the lock is
// taken again).
func TestATaskCostsOneRoundOfDispatch(t *testing.T) {
	for _, mode := range []string{"inline", "outside"} {
		t.Run(mode, func(t *testing.T) {
			cfg := engine.Config{AgentMaxInFlight: 4, MaxInFlight: 4,
				Lanes: []engine.LaneConfig{{Name: "main", MaxInFlight: 4}}}
			e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{}), Executor: engine.NoopExecutor{}})
			require.NoError(t, err)
			require.NoError(t, e.Start(context.Background()))
			t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
			if mode == "outside" {
				require.NoError(t, e.SetSelection("", "plain", plainSelection{}))
			}
			before := engine.Rounds(e)
			const n = 50
			for range n {
				// The submitter dispatches its own task, which the no-op
				// executor ends inside Start: the task is over when
				// Submit returns.
				_, err := e.Submit(context.Background(), spec("main", "agent"))
				require.NoError(t, err)
			}
			st := e.Stats(context.Background())
			require.Equal(t, uint64(n), st.Ended[engine.StateSucceeded], "every task ran")
			require.Equal(t, uint64(n), engine.Rounds(e)-before, "one round per task")
		})
	}
}
