package resolvers

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/model"
)

// taskSpecShared gives each item what taskSpec gives it, sharing the map of
// the item before only when the labels are the same, in the same order;
// labels that are refused are refused at their own path every time.
func TestItemsLabelledAlikeShareOneMap(t *testing.T) {
	t.Parallel()
	now := time.Now()
	labels := func(kv ...string) []*model.LabelInput {
		var out []*model.LabelInput
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &model.LabelInput{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	inputs := [][]*model.LabelInput{
		labels("a", "1", "b", "2"), labels("a", "1", "b", "2"), labels("b", "2", "a", "1"), nil,
		labels("a", "1", "a", "1"), labels("a", "1", "a", "1"), labels("x", "")}
	var sl sharedLabels
	var maps []map[string]string
	for i, ls := range inputs {
		in := &model.SubmitTaskInput{AgentID: "a", Instruction: ptr("go"), Labels: ls}
		path := "input.items." + string(rune('0'+i)) + ".task"
		want, wantErr := taskSpec(path, in, now)
		got, gotErr := taskSpecShared(path, in, now, &sl, nil)
		require.Equal(t, wantErr, gotErr, i)
		require.Equal(t, want, got, i)
		maps = append(maps, got.Labels)
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	require.True(t, same(maps[0], maps[1]))
	require.False(t, same(maps[1], maps[2]), "the same labels in another order are made again")
	require.Nil(t, maps[4])
	require.Nil(t, maps[5])
}
