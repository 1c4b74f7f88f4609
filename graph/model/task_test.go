package model

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// nextRunAt is documented for RETRY_WAIT only: the engine keeps the last
// retry's time in its snapshot after that (a PARKED task's would be stale),
// so the API answers null in every other state.
func TestNextRunAtIsNullOutsideRetryWait(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	for _, s := range []engine.State{engine.StateQueued, engine.StateRunning, engine.StateParked, engine.StateFailed} {
		require.Nil(t, NewTask(&engine.Task{State: s, NextRunAt: at}).NextRunAt(), s.String())
	}
	got := NewTask(&engine.Task{State: engine.StateRetryWait, NextRunAt: at}).NextRunAt()
	require.NotNil(t, got)
	require.True(t, got.Equal(at))
}
