package resolvers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// A submitTasks request's engine items, and the room for their actions,
// come from pools: handed out zero, whatever the request before left in
// them, and put back zeroed to their capacity, so that a list waiting in a
// pool keeps nothing of its request alive.
func TestPooledBatchListsComeZeroAndKeepNothing(t *testing.T) {
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
