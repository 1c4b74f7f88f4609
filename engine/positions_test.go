package engine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
)

// Positions, computed for many tasks at once, are the positions Task
// computes one by one.
func TestPositionsForManyTasksAreTheOnesTaskReports(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	paused(t, h, "main", true)
	var ids []string
	for i := range 60 {
		b := enginetest.Spec(fmt.Sprintf("agent-%d", i%3)).Lane("main")
		switch i % 5 {
		case 0:
			b = b.High()
		case 1:
			b = b.Session(fmt.Sprintf("s%d", i%4))
		case 2:
			b = b.Low()
		}
		ids = append(ids, h.Submit(b.Obj()).ID)
	}
	running := h.Submit(enginetest.Spec("agent-0").Lane("cron").Obj()) // another lane, not queued for long
	ids = append(ids, ids[0], "no-such-task", running.ID)              // a repeat and ids without a position

	got := h.Positions(ids)
	for _, id := range ids[:60] {
		tk, err := h.Task(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, engine.StateQueued, tk.State)
		require.GreaterOrEqual(t, tk.Position, 0)
		require.Equal(t, tk.Position, got[id], "task %s", id)
	}
	require.NotContains(t, got, "no-such-task")
	// Any subset gives the same answers.
	sub := h.Positions([]string{ids[7], ids[33]})
	require.Equal(t, map[string]int{ids[7]: got[ids[7]], ids[33]: got[ids[33]]}, sub)
}

// BenchmarkPositions: a page of 1000 QUEUED tasks of one agent's queue of
// 50,000, all at once (Positions) and one by one (what Task does per task).
func BenchmarkPositions(b *testing.B) {
	lanes := engine.DefaultLanes()
	for i := range lanes {
		lanes[i].Paused = true
		lanes[i].MaxQueued = 100_000
	}
	h := enginetest.New(b, &engine.Config{Lanes: lanes})
	var ids []string
	for i := range 50_000 {
		tk := h.Submit(enginetest.Spec("a").Lane("main").Session(fmt.Sprintf("s%d", i%100)).Obj())
		if i%50 == 0 {
			ids = append(ids, tk.ID)
		}
	}
	b.Run("Positions/page=1000", func(b *testing.B) {
		for b.Loop() {
			_ = h.Positions(ids)
		}
	})
	b.Run("Task/page=1000", func(b *testing.B) {
		for b.Loop() {
			for _, id := range ids {
				_, _ = h.Task(context.Background(), id)
			}
		}
	})
}
