package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// unreadable is a durable memory store whose reads of single tasks and
// idempotency keys can be made to fail, as a database that is briefly
// unreachable fails them.
type unreadable struct {
	*memory.Store
	fail atomic.Bool
}

var errInjectedRead = errors.New("connection reset (injected)")

func (s *unreadable) Durable() bool { return true }

func (s *unreadable) Task(ctx context.Context, id string) (*engine.Task, error) {
	if s.fail.Load() {
		return nil, errInjectedRead
	}
	return s.Store.Task(ctx, id)
}

func (s *unreadable) FindIdempotent(ctx context.Context, agentID, key string) (*engine.Task, error) {
	if s.fail.Load() {
		return nil, errInjectedRead
	}
	return s.Store.FindIdempotent(ctx, agentID, key)
}

// When the store cannot be read for what admission refers to (an
// idempotency key or a dependency whose task has left memory), the
// submission is refused, retryably, and nothing is recorded: admitted
// without the read, the key would be taken for new and its request run
// twice, and the dependency refused as unknown.
func TestAFailedReadBeforeAdmissionRefusesTheSubmission(t *testing.T) {
	st := &unreadable{Store: memory.New(memory.Options{})}
	e, err := engine.New(engine.Options{Store: st,
		Executor: engine.ExecutorFunc(func(context.Context, *engine.Run) engine.Outcome { return engine.Outcome{} })})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, e.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	})
	first, err := e.Submit(ctx, keyedSpec("K1"))
	require.NoError(t, err)
	waitfor.Eventually(t, "the task ends and leaves memory", func() bool {
		n, err := st.CountTasks(ctx, engine.TaskFilter{States: []engine.State{engine.StateSucceeded}})
		live := 0
		for _, k := range e.Stats(ctx).ByState {
			live += k
		}
		return err == nil && n[engine.StateSucceeded] == 1 && live == 0
	})

	st.fail.Store(true)
	_, err = e.Submit(ctx, keyedSpec("K1"))
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "want UNAVAILABLE, got %v", err)
	var ee *engine.Error
	require.ErrorAs(t, err, &ee)
	require.True(t, ee.Retryable)
	require.ErrorIs(t, err, errInjectedRead)
	dep := keyedSpec("")
	dep.DependsOn = []string{first.ID}
	_, err = e.Submit(ctx, dep)
	require.Truef(t, engine.IsCode(err, engine.CodeUnavailable), "a dependency the store could not read is not unknown: %v", err)

	st.fail.Store(false)
	again, err := e.Submit(ctx, keyedSpec("K1"))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "the key names the first task")
	n, err := st.CountTasks(ctx, engine.TaskFilter{})
	require.NoError(t, err)
	require.Equal(t, 1, n[engine.StateSucceeded]+n[engine.StateQueued]+n[engine.StateRunning], "nothing else was recorded")
}
