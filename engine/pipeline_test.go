package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
)

// pipelined is a durable memory store that pipelines commits: each batch is
// written by a goroutine of its own once the one before it is written, and
// fails without writing when that one failed. Every failEvery-th async
// commit fails (the engine retries it with Commit).
type pipelined struct {
	*memory.Store
	failEvery int64
	n         atomic.Int64
	mu        sync.Mutex
	last      chan struct{}
	lastErr   *error
	inFlight  atomic.Int32
	maxFlight atomic.Int32
}

func (s *pipelined) Durable() bool { return true }

func (s *pipelined) CommitAsync(ctx context.Context, b *engine.Batch) (<-chan struct{}, func() error) {
	done := make(chan struct{})
	var err error
	s.mu.Lock()
	pred, predErr := s.last, s.lastErr
	s.last, s.lastErr = done, &err
	s.mu.Unlock()
	if n := s.inFlight.Add(1); n > s.maxFlight.Load() {
		s.maxFlight.Store(n)
	}
	fail := s.failEvery > 0 && s.n.Add(1)%s.failEvery == 0
	go func() {
		defer close(done)
		defer s.inFlight.Add(-1)
		if pred != nil {
			<-pred
			if *predErr != nil {
				err = fmt.Errorf("the commit before failed: %w", *predErr)
				return
			}
		}
		if fail {
			err = errors.New("injected failure")
			return
		}
		err = s.Store.Commit(ctx, b)
	}()
	return done, func() error {
		<-done
		return err
	}
}

// With a store that pipelines commits, and some of its commits failing,
// every accepted task is committed when its submission answers, every
// attempt is committed before it starts, and subscribers see the events in
// seq order without a gap.
func TestPipelinedCommitsKeepTheGuarantees(t *testing.T) {
	t.Parallel()
	st := &pipelined{Store: memory.New(memory.Options{}), failEvery: 7}
	var unrecorded atomic.Int32
	exec := engine.ExecutorFunc(func(ctx context.Context, r *engine.Run) engine.Outcome {
		got, err := st.Store.Task(ctx, r.TaskID())
		if err != nil || len(got.Attempts) < r.Attempt() {
			unrecorded.Add(1)
		}
		return engine.Outcome{}
	})
	e, err := engine.New(engine.Options{Store: st, Executor: exec})
	require.NoError(t, err)
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})

	var wg sync.WaitGroup
	var ids sync.Map
	for c := range 8 {
		wg.Go(func() {
			for i := range 20 {
				items := make([]engine.BatchItem, 10)
				for j := range items {
					items[j] = engine.BatchItem{Spec: engine.TaskSpec{AgentID: fmt.Sprintf("a%d", c),
						Action: &engine.Action{Kind: "click", Selector: "#go"}}}
				}
				res, err := e.SubmitBatch(context.Background(), engine.BatchSpec{Items: items})
				if !assertNoError(t, err, "caller %d batch %d", c, i) {
					return
				}
				for _, it := range res.Items {
					if it.Task == nil {
						continue
					}
					_, err := st.Store.Task(context.Background(), it.Task.ID)
					assertNoError(t, err, "task %s is committed when its submission answers", it.Task.ID)
					ids.Store(it.Task.ID, true)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, e.Sync(context.Background()))
	require.Zero(t, unrecorded.Load(), "no attempt started before it was committed")
	require.LessOrEqual(t, st.maxFlight.Load(), int32(2), "at most two batches in the store's hands")
	require.GreaterOrEqual(t, st.n.Load(), int64(st.failEvery), "some commits failed and were retried")
	t.Logf("%d asynchronous commits, at most %d in flight", st.n.Load(), st.maxFlight.Load())

	evs, err := st.Events(context.Background(), 0, 1<<20)
	require.NoError(t, err)
	for i := 1; i < len(evs); i++ {
		require.Greater(t, evs[i].Seq, evs[i-1].Seq)
	}
	n := 0
	ids.Range(func(any, any) bool { n++; return true })
	require.Equal(t, 8*20*10, n)
}

func assertNoError(t *testing.T, err error, msg string, args ...any) bool {
	t.Helper()
	if err != nil {
		t.Errorf(msg+": %v", append(args, err)...)
		return false
	}
	return true
}
