// Selector syntax, checked before a task is submitted: a model that writes
// a malformed selector learns it at once, with the syntax, instead of from a
// task that fails in the browser. The page itself still decides whether a
// well-formed selector matches anything. The syntax is the instances' own
// (pinchtab.ParseSelector), the one the built-in browser resolves.

package mcp

import (
	"errors"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// checkSelector checks a selector's syntax: "ref:e12" or "e12", "css:…" or
// a bare CSS selector, "xpath:…" or "//…" or "(//…)…", "text:…". "" is no
// selector.
func checkSelector(field, sel string) error {
	if sel == "" {
		return nil
	}
	_, err := pinchtab.ValidateSelector(sel)
	var se *pinchtab.SelectorError
	if errors.As(err, &se) {
		return invalid(field, "%s (use a CSS selector like \"#go\", \"xpath://button\", \"text:Sign in\" or a snapshot ref like \"e12\")", se)
	}
	return err
}
