// Package edf is an earliest-deadline-first selection policy: within a
// queue, the task whose deadline comes first runs first; tasks without a
// deadline run after every task that has one, by priority.
package edf

import (
	"math"

	"github.com/switchyard/switchyard/engine/policy"
)

// Selection ranks tasks by deadline. The zero value is ready to use.
type Selection struct{}

// Rank implements policy.Selection.
func (Selection) Rank(_ int64, tasks []policy.Task, ranks []int64) {
	for i := range tasks {
		if d := tasks[i].DeadlineMs; d > 0 {
			ranks[i] = d
		} else {
			ranks[i] = math.MaxInt64 - 3 + int64(min(max(tasks[i].Priority, 0), 3))
		}
	}
}
