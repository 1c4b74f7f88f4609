package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// slowDurable is a durable memory store whose commits take a random while,
// and which records the leases of the attempts it has committed; it can be
// made to fence the engine off.
type slowDurable struct {
	*memory.Store
	mu      sync.Mutex
	leases  map[uint64]bool
	fenced  atomic.Bool
	commits atomic.Int64
}

func (s *slowDurable) Durable() bool { return true }

func (s *slowDurable) Commit(ctx context.Context, b *engine.Batch) error {
	time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
	if s.fenced.Load() {
		return errors.Join(engine.ErrFenced, errors.New("fenced"))
	}
	if err := s.Store.Commit(ctx, b); err != nil {
		return err
	}
	s.mu.Lock()
	for _, t := range b.Tasks {
		for _, a := range t.Attempts {
			s.leases[a.LeaseID] = true
		}
	}
	s.mu.Unlock()
	s.commits.Add(1)
	return nil
}

// With a durable store the dispatcher does not wait for commits: attempts
// ride in the pending batch and start once it is written. Under concurrent
// submissions, cancellations, drop-oldest, retries and timeouts, no attempt
// may start before its commit, and neither a shutdown with a short deadline
// nor losing the store to another leader may hang.
func TestADurableEngineUnderLoadStartsNoAttemptBeforeItIsCommitted(t *testing.T) {
	t.Parallel()
	for iter := range 3 {
		durableStress(t, iter, false)
		durableStress(t, iter, true)
	}
}

func durableStress(t *testing.T, iter int, fence bool) {
	cfg := engine.Config{
		MaxInFlight: 6, AgentMaxInFlight: 3, SessionMaxInFlight: 1, LeaseGrace: 50 * time.Millisecond,
		EventBuffer: 1 << 20,
		Lanes: []engine.LaneConfig{
			{Name: "main", MaxInFlight: 4, Timeout: 30 * time.Millisecond},
			{Name: "team", MaxInFlight: 3, Timeout: 30 * time.Millisecond, DropPolicy: engine.DropOldest, MaxQueued: 50},
		},
	}
	st := &slowDurable{Store: memory.New(memory.Options{MaxEvents: 1 << 20}), leases: map[uint64]bool{}}
	var stopped atomic.Bool
	var early, afterStop, executed atomic.Int64
	// The check runs in Start, on the goroutine that starts the attempt: once
	// Shutdown or Abandon has returned, no attempt is left to start, and the
	// counts are final without waiting.
	exec := startHook{work: func(ctx context.Context, run *engine.Run) engine.Outcome {
		select {
		case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
		case <-ctx.Done():
			return engine.Outcome{Err: ctx.Err()}
		}
		if rand.IntN(5) == 0 {
			return engine.Outcome{Err: engine.Transient(errors.New("flaky"))}
		}
		return engine.Outcome{}
	}, started: func(run *engine.Run) {
		executed.Add(1)
		if stopped.Load() {
			afterStop.Add(1)
		}
		st.mu.Lock()
		ok := st.leases[run.LeaseID()]
		st.mu.Unlock()
		if !ok {
			early.Add(1)
		}
	}}
	e, err := engine.New(engine.Options{Config: cfg, Store: st, Executor: exec})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := time.Now().Add(500 * time.Millisecond)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(iter)))
			for time.Now().Before(stop) {
				b := engine.TaskSpec{AgentID: "agent-" + strconv.Itoa(r.IntN(4)), Action: &engine.Action{Kind: "click", Selector: "#x"}}
				if r.IntN(2) == 0 {
					b.Lane = "team"
				}
				if r.IntN(3) == 0 {
					b.SessionKey = "s" + strconv.Itoa(r.IntN(3))
				}
				sctx, cancel := context.WithTimeout(ctx, time.Second)
				_, _ = e.Submit(sctx, b)
				cancel()
				if r.IntN(10) == 0 {
					_, _ = e.CancelWhere(ctx, engine.TaskFilter{AgentID: "agent-" + strconv.Itoa(r.IntN(4))}, "stress")
				}
			}
		}()
	}
	if fence {
		time.Sleep(250 * time.Millisecond) // the load runs a while before the store is lost
		st.fenced.Store(true)
		waitfor.Eventually(t, "the engine knows it is fenced", e.Fenced)
		e.Abandon("test")
		stopped.Store(true)
		wg.Wait()
	} else {
		wg.Wait()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- e.Shutdown(sctx) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("Shutdown hangs")
		}
		cancel()
		stopped.Store(true)
	}
	t.Logf("round %d, fenced %v: %d attempts, %d commits, %d executor calls after the stop", iter, fence, executed.Load(), st.commits.Load(), afterStop.Load())
	require.Positive(t, executed.Load())
	require.Zero(t, early.Load(), "attempts started before their commit")
}

// startHook is an Executor that calls started in Start, on the engine's
// goroutine that starts the attempt, then runs work on a goroutine of its own.
type startHook struct {
	started func(run *engine.Run)
	work    func(ctx context.Context, run *engine.Run) engine.Outcome
}

func (x startHook) Start(ctx context.Context, run *engine.Run) {
	x.started(run)
	go func() { run.Finish(x.work(ctx, run)) }()
}
