package resolvers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/internal/poison"
)

// A submitTasks request's engine items, and the room for their actions,
// come from pools: handed out zero, whatever the request before left in
// them, and put back zeroed to their capacity, so that a list waiting in a
// pool keeps nothing of its request alive.
func TestPooledBatchListsComeZeroAndKeepNothing(t *testing.T) {
	t.Cleanup(poison.Set(false)) // the lists as production gives them back
	t.Run("items", func(t *testing.T) {
		checkSlicePool(t, &batchItems, engine.BatchItem{Key: "k", ID: "id", Spec: engine.TaskSpec{
			AgentID: "a", DependsOn: []string{"x"}, Labels: map[string]string{"l": "v"},
			Action: &engine.Action{Kind: "click", Params: []byte(`{}`)},
		}})
	})
	t.Run("actions", func(t *testing.T) {
		checkSlicePool(t, &batchActions, engine.Action{Kind: "click", Ref: "r", Selector: "css:#go", Params: []byte(`{}`)})
	})
}

// checkSlicePool fills the lists sp hands out with full and checks that
// each comes back zero, and that a list too large for the pool is left as
// it is.
func checkSlicePool[T any](t *testing.T, sp *slicePool[T], full T) {
	fill := func(list []T) {
		for i := range list {
			list[i] = full
		}
	}
	list := sp.get(100)
	fill(list)
	sp.put(list[:37]) // compacted: fewer elements than it was made for
	require.Equal(t, make([]T, 100), list[:100], "put back with what it held")
	for n := range 120 {
		got := sp.get(n%100 + 1)
		require.Equal(t, make([]T, n%100+1), got, "handed out with what it held")
		fill(got)
		sp.put(got)
	}
	big := sp.get(maxPooledItems + 1)
	fill(big)
	sp.put(big)
	require.Equal(t, full, big[0], "a list too large for the pool is left to the collector as it is")
}

// Under tests a list put back is overwritten with poison and left out of
// the pool (internal/poison): an engine item's action that something kept
// past SubmitBatch (an engine or a cluster follower that did not copy it)
// reads poison, not the next request's action.
func TestAPooledListPutBackIsPoisonedUnderTests(t *testing.T) {
	acts := batchActions.get(2)
	acts[1] = engine.Action{Kind: "click", Selector: "css:#go"}
	items := batchItems.get(2)
	items[1].Spec.Action = &acts[1]
	kept := items[1].Spec.Action
	item := &items[1]
	batchActions.put(acts)
	batchItems.put(items)
	require.Equal(t, poison.Text, kept.Kind, "an action read after put")
	require.Equal(t, poison.Text, item.Spec.AgentID, "an item read after put")
	again := batchActions.get(2)
	require.NotSame(t, &acts[0], &again[0], "a poisoned list went back to the pool")
}
