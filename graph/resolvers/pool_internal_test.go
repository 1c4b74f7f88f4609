package resolvers

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
)

// A submitTasks request's engine items come from a pool: handed out zero,
// whatever the request before left in them, and put back zeroed to their
// capacity, so that a list waiting in the pool keeps nothing of its
// request alive.
func TestPooledBatchItemsComeZeroAndKeepNothing(t *testing.T) {
	fill := func(items []engine.BatchItem) {
		for i := range items {
			items[i] = engine.BatchItem{Key: "k", ID: "id", Spec: engine.TaskSpec{
				AgentID: "a", DependsOn: []string{"x"}, Labels: map[string]string{"l": "v"},
				Action: &engine.Action{Kind: "click", Params: []byte(`{}`)},
			}}
		}
	}
	items := getBatchItems(100)
	fill(items)
	putBatchItems(items[:37]) // compacted: fewer items than it was made for
	require.Equal(t, make([]engine.BatchItem, 100), items[:100], "put back with what it held")
	for n := range 120 {
		got := getBatchItems(n%100 + 1)
		require.Equal(t, make([]engine.BatchItem, n%100+1), got, "handed out with what it held")
		fill(got)
		putBatchItems(got)
	}
	big := getBatchItems(maxPooledItems + 1)
	fill(big)
	putBatchItems(big)
	require.Equal(t, "a", big[0].Spec.AgentID, "a list too large for the pool is left to the collector as it is")
}

// The room for a request's actions comes from a pool as its engine items
// do: handed out zero and put back zeroed to its capacity.
func TestPooledBatchActionsComeZeroAndKeepNothing(t *testing.T) {
	fill := func(acts []engine.Action) {
		for i := range acts {
			acts[i] = engine.Action{Kind: "click", Ref: "r", Selector: "css:#go", Params: []byte(`{}`)}
		}
	}
	acts := getBatchActions(100)
	fill(acts)
	putBatchActions(acts[:37])
	require.Equal(t, make([]engine.Action, 100), acts[:100], "put back with what it held")
	for n := range 120 {
		got := getBatchActions(n%100 + 1)
		require.Equal(t, make([]engine.Action, n%100+1), got, "handed out with what it held")
		fill(got)
		putBatchActions(got)
	}
	big := getBatchActions(maxPooledItems + 1)
	fill(big)
	putBatchActions(big)
	require.Equal(t, "click", big[0].Kind, "room too large for the pool is left to the collector as it is")
}
