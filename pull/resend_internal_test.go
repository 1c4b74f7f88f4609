package pull

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
)

// An attempt's ender decides whether its worker ended it. An attempt
// recorded without one (ended by a build before the stores kept it) is
// told by its code as it was: a failure with a code the engine also gives
// may be the engine's, so the record cannot be sure it is the worker's.
func TestWorkerEndReadsWhoEndedTheAttempt(t *testing.T) {
	t.Parallel()
	failed := func(by engine.Ender, code string) engine.Attempt {
		return engine.Attempt{N: 1, Class: policy.ClassTransient, Error: "boom", Code: code, EndedBy: by}
	}
	task := &engine.Task{State: engine.StateRetryWait, Attempts: []engine.Attempt{{N: 1}}}
	for _, c := range []struct {
		att      engine.Attempt
		sure, ok bool
	}{
		{failed(engine.EndedByWorker, engine.CodeTimeout), true, true},
		{failed(engine.EndedByWorker, "upstream_503"), true, true},
		{failed(engine.EndedByEngine, engine.CodeLeaseExpired), false, false},
		{failed(engine.EndedByEngine, "upstream_503"), false, false},
		{failed(engine.EndedByExecutor, ""), false, false},
		{failed(engine.EndedByUnknown, "upstream_503"), true, true},
		{failed(engine.EndedByUnknown, engine.CodeTimeout), false, true},
		{failed(engine.EndedByUnknown, engine.CodeRestart), false, true},
	} {
		end, sure, ok := workerEnd(task, c.att)
		require.Equal(t, c.ok, ok, "%+v", c.att)
		require.Equal(t, c.sure, sure, "%+v", c.att)
		if ok {
			require.Equal(t, EndFailed, end)
		}
	}
	done := &engine.Task{State: engine.StateSucceeded, Attempts: []engine.Attempt{{N: 1, EndedBy: engine.EndedByWorker}}}
	end, sure, ok := workerEnd(done, done.Attempts[0])
	require.True(t, ok && sure)
	require.Equal(t, EndCompleted, end)
	done.Attempts[0].EndedBy = engine.EndedByEngine
	_, _, ok = workerEnd(done, done.Attempts[0])
	require.False(t, ok, "a success not recorded as its worker's")
}
