// Package priority is the built-in selection policy: a task's rank is its
// priority, so within a queue CRITICAL runs before HIGH before NORMAL before
// LOW, and the engine's tie-break by submission order makes each level FIFO.
// The result is the order (priority, createdAt, id).
package priority

import "github.com/switchyard/switchyard/engine/policy"

// Name is the policy's registered name.
const Name = "priority"

// Selection ranks tasks by priority. The zero value is ready to use.
type Selection struct{}

// Rank implements policy.Selection.
func (Selection) Rank(_ int64, tasks []policy.Task, ranks []int64) {
	for i := range tasks {
		ranks[i] = int64(tasks[i].Priority)
	}
}
