// Selector syntax, checked before a task is submitted: a model that writes
// a malformed selector learns it at once, with the syntax, instead of from a
// task that fails in the browser. The page itself still decides whether a
// well-formed selector matches anything. The check is the executor's
// (executor.CheckSelector), the one every submission path runs.

package mcp

import (
	"github.com/switchyard/switchyard/executor"
)

// checkSelector checks a selector's syntax (executor.CheckSelector): "" is
// no selector.
func checkSelector(field, sel string) error {
	if err := executor.CheckSelector(sel); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}
