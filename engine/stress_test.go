package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// TestConcurrentUseKeepsTheInvariants drives the engine in its production
// mode — its own dispatcher and committer goroutines, the real clock, an
// executor that finishes attempts from other goroutines — with concurrent
// submitters, cancellers and operators, then replays the event stream through
// the reference model of the model test. Run it with -race.
func TestConcurrentUseKeepsTheInvariants(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{
		MaxInFlight: 6, AgentMaxInFlight: 3, SessionMaxInFlight: 1, LeaseGrace: 50 * time.Millisecond,
		EventBuffer: 1 << 20,
		Lanes: []engine.LaneConfig{
			{Name: "main", MaxInFlight: 4, Timeout: 30 * time.Millisecond},
			{Name: "team", MaxInFlight: 3, Timeout: 30 * time.Millisecond, DropPolicy: engine.DropOldest, MaxQueued: 50},
		},
	}
	var executed atomic.Int64
	exec := engine.ExecutorFunc(func(ctx context.Context, run *engine.Run) engine.Outcome {
		executed.Add(1)
		r := rand.New(rand.NewPCG(run.LeaseID(), 7))
		if r.IntN(3) == 0 {
			run.Started("", "")
		}
		select {
		case <-time.After(time.Duration(r.IntN(3000)) * time.Microsecond):
		case <-ctx.Done():
			return engine.Outcome{Err: ctx.Err()}
		}
		switch r.IntN(6) {
		case 0:
			return engine.Outcome{Err: engine.Transient(errors.New("flaky"))}
		case 1:
			return engine.Outcome{Err: engine.Permanent(errors.New("bad"))}
		case 2:
			time.Sleep(40 * time.Millisecond) // past the timeout: the lease may expire first
		}
		return engine.Outcome{}
	})
	e, err := engine.New(engine.Options{Config: cfg, Store: memory.New(memory.Options{MaxEvents: 1 << 20}), Executor: exec})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	ctx := context.Background()

	var wg sync.WaitGroup
	var submitted sync.Map
	stop := time.Now().Add(1500 * time.Millisecond)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for time.Now().Before(stop) {
				b := enginetest.Spec("agent-" + strconv.Itoa(r.IntN(4))).Priority(engine.Priority(r.IntN(4)))
				if r.IntN(2) == 0 {
					b.Lane("team")
				}
				if r.IntN(3) == 0 {
					b.Session("s" + strconv.Itoa(r.IntN(3)))
				}
				b.Retry(engine.RetryPolicy{MaxAttempts: 3, Backoff: time.Duration(r.IntN(5)) * time.Millisecond, Multiplier: 2, MaxBackoff: 10 * time.Millisecond})
				tk, err := e.Submit(ctx, b.Obj())
				if err == nil || engine.IsCode(err, engine.CodeQueueFull) {
					submitted.Store(tk.ID, true)
				} else {
					t.Errorf("submit: %v", err)
					return
				}
				time.Sleep(time.Duration(r.IntN(200)) * time.Microsecond)
			}
		}()
	}
	wg.Add(1)
	go func() { // an operator and a canceller
		defer wg.Done()
		r := rand.New(rand.NewPCG(99, 1))
		for time.Now().Before(stop) {
			switch r.IntN(4) {
			case 0:
				p := r.IntN(2) == 0
				_, _ = e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &p})
			case 1:
				n := 1 + r.IntN(4)
				_, _ = e.UpdateLane(ctx, "team", engine.LaneUpdate{MaxInFlight: &n})
			case 2:
				_, _ = e.CancelWhere(ctx, engine.TaskFilter{AgentID: "agent-" + strconv.Itoa(r.IntN(4))}, "stress")
			case 3:
				_, _ = e.StopSession(ctx, "s"+strconv.Itoa(r.IntN(3)), r.IntN(2) == 0)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	wg.Wait()
	// Let everything finish.
	p := false
	four := 4
	_, err = e.UpdateLane(ctx, "main", engine.LaneUpdate{Paused: &p})
	require.NoError(t, err)
	_, err = e.UpdateLane(ctx, "team", engine.LaneUpdate{MaxInFlight: &four})
	require.NoError(t, err)
	waitfor.CheckFor(t, func() error {
		st := e.Stats(ctx)
		live := st.InFlight + st.Pending + st.ByState[engine.StateParked]
		if live == 0 {
			return nil
		}
		if st.ByState[engine.StateParked] > 0 && st.InFlight+st.Pending == 0 {
			_, err := e.CancelWhere(ctx, engine.TaskFilter{States: []engine.State{engine.StateParked}, Lane: "main"}, "drain")
			require.NoError(t, err)
			_, err = e.CancelWhere(ctx, engine.TaskFilter{States: []engine.State{engine.StateParked}, Lane: "team"}, "drain")
			require.NoError(t, err)
		}
		return fmt.Errorf("the engine does not drain: %+v", st)
	})
	require.NoError(t, e.Sync(ctx))
	evs, missed := e.Events().Read(0, 1<<22, nil)
	require.Zero(t, missed)

	// Replay with limits high enough for the live changes: lane limits
	// changed during the run, so check those against the largest value used.
	m := &model{tb: t, tasks: map[string]*mTask{}, global: cfg.MaxInFlight,
		laneMax: map[string]int{"main": 4, "team": 4}, agentMax: cfg.AgentMaxInFlight, sessMax: 1,
		batchMax: map[string]int{}, instMax: map[string]int{}}
	for _, ev := range evs {
		m.apply(ev, nil)
		if mt := m.tasks[ev.TaskID]; mt != nil && mt.queueKey == "" {
			mt.queueKey = ev.SessionKey
			mt.prio = -1 // priorities are not on events: skip the rank check (the model test covers it)
		}
	}
	n := 0
	submitted.Range(func(k, _ any) bool {
		n++
		mt := m.tasks[k.(string)]
		require.NotNil(t, mt, "task %s has no events", k)
		require.True(t, mt.state.Terminal(), "task %s ended %s", k, mt.state)
		require.Equal(t, 1, mt.ends)
		require.False(t, mt.holding)
		return true
	})
	require.Greater(t, n, 500, "the stress test did real work")
	require.Positive(t, executed.Load())
	require.NoError(t, e.Shutdown(ctx))
}
