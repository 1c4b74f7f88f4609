package cluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// codeRecorder is a retry policy that fails every task and records the
// error codes it was given.
type codeRecorder struct {
	mu    sync.Mutex
	codes []string
}

func (r *codeRecorder) Decide(f policy.Failure) policy.Decision {
	return r.DecideDetailed(policy.RetryContext{}, f)
}

func (r *codeRecorder) DecideDetailed(ctx policy.RetryContext, _ policy.Failure) policy.Decision {
	code := ""
	if ctx.Details != nil {
		code = ctx.Details.ErrorCode(0)
	}
	r.mu.Lock()
	r.codes = append(r.codes, code)
	r.mu.Unlock()
	return policy.Decision{Action: policy.ActionFail}
}

func (r *codeRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.codes...)
}

// A new leader's policies are in force before its engine decides anything:
// Lead gets the engine opened, not started, and the retry policy it sets
// there decides the attempt the previous leader left under way (given the
// code `restart`), not the built-in before it.
func TestANewLeadersPoliciesDecideTheAttemptsItTakesOver(t *testing.T) {
	recorders := map[*engine.Engine]*codeRecorder{}
	var mu sync.Mutex
	f := newFleet(t, 2, time.Hour, func(o *cluster.Options) {
		o.Lead = func(_ context.Context, e *engine.Engine, start func() error) (*cluster.Leadership, error) {
			rec := &codeRecorder{}
			if err := e.SetRetry("", "recorder", rec); err != nil {
				return nil, err
			}
			mu.Lock()
			recorders[e] = rec
			mu.Unlock()
			return &cluster.Leadership{}, start()
		}
	})
	ctx := context.Background()
	old := f.leader(f.nodes)
	next := f.nodes[0]
	if next == old {
		next = f.nodes[1]
	}
	task, err := next.API().Submit(ctx, enginetest.Spec("agent").Action("click").Obj())
	require.NoError(t, err)
	waitfor.Eventually(t, "the task runs on the leader", func() bool { return f.exec.count(task.ID) == 1 })
	old.cut.Partition()
	t.Cleanup(old.cut.Heal)
	require.Same(t, next, f.leader([]*testNode{next}))

	got, err := next.API().Task(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, engine.StateFailed, got.State, "%+v", got)
	require.Equal(t, "failed by retry policy recorder: interrupted: the leader changed (node "+next.ID()+" took over)", got.Reason)
	mu.Lock()
	rec := recorders[next.Engine()]
	mu.Unlock()
	require.NotNil(t, rec)
	require.Equal(t, []string{"restart"}, rec.seen())
	require.Equal(t, 1, f.exec.count(task.ID), "it did not run again")
}
