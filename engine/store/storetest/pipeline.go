package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// testPipelined holds a store that pipelines commits (engine.PipelinedStore)
// to its promise: batches started while others are in flight commit in
// order, and a batch started behind one that fails fails too, writing
// nothing, and commits when retried in order. Other stores skip it.
func testPipelined(t *testing.T, d Driver) {
	s := d.open(t)
	ps, ok := s.(engine.PipelinedStore)
	if !ok {
		t.Skip("the store does not pipeline commits")
	}
	a, b := mkTask(1, "a"), mkTask(3, "b")
	first := &engine.Batch{Tasks: []*engine.Task{a}, Events: []engine.Event{ev(1, a, 0, engine.StateQueued)}}
	running := with(a, func(c *engine.Task) { c.State, c.Reason = engine.StateRunning, "running" })
	second := &engine.Batch{Tasks: []*engine.Task{b, running},
		Events: []engine.Event{ev(2, running, engine.StateQueued, engine.StateRunning), ev(3, b, 0, engine.StateQueued)}}
	_, w1 := ps.CommitAsync(bg, first)
	_, w2 := ps.CommitAsync(bg, second)
	require.NoError(t, w1())
	require.NoError(t, w2())
	requireTask(t, running, getTask(t, s, a.ID), "the later batch's snapshot wins")
	requireTask(t, b, getTask(t, s, b.ID))

	c, e := mkTask(5, "c"), mkTask(6, "e")
	bad := &engine.Batch{Tasks: []*engine.Task{c}, Events: []engine.Event{ev(3, c, 0, engine.StateQueued)}} // seq 3 is taken
	behind := &engine.Batch{Tasks: []*engine.Task{e}, Events: []engine.Event{ev(6, e, 0, engine.StateQueued)}}
	before := load(t, s)
	_, w1 = ps.CommitAsync(bg, bad)
	_, w2 = ps.CommitAsync(bg, behind)
	require.Error(t, w1())
	require.Error(t, w2(), "a batch started behind a failing one fails")
	require.Equal(t, before, load(t, s), "and writes nothing")
	_, err := s.Task(bg, e.ID)
	requireNotFound(t, err, "a task of the batch behind")

	bad.Events = []engine.Event{ev(5, c, 0, engine.StateQueued)}
	commit(t, s, bad)
	commit(t, s, behind)
	requireTask(t, c, getTask(t, s, c.ID))
	requireTask(t, e, getTask(t, s, e.ID), "retried in order, the batch behind commits as new")
	require.Equal(t, uint64(6), load(t, s).LastSeq)
}
