package edf

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine/policy"
)

func TestEarlierDeadlinesRankFirstAndNoDeadlineLast(t *testing.T) {
	t.Parallel()
	tasks := []policy.Task{
		{Seq: 1, DeadlineMs: 5000},
		{Seq: 2, Priority: 3},
		{Seq: 3, DeadlineMs: 1000},
		{Seq: 4, Priority: 0},
	}
	ranks := make([]int64, len(tasks))
	Selection{}.Rank(0, tasks, ranks)
	require.Less(t, ranks[2], ranks[0], "deadline 1000 before 5000")
	require.Less(t, ranks[0], ranks[3], "any deadline before none")
	require.Less(t, ranks[3], ranks[1], "without deadlines, CRITICAL before LOW")
}
