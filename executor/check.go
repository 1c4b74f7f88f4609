// Checking an action before it is submitted: what the executor would
// refuse without reaching the page — a parameter its kind needs, a
// malformed selector — is refused at submission instead, naming the field,
// rather than found when the task runs. The executor refuses the same
// things the same way when it runs one (perform.go), through the same
// functions.

package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// ActionError says what is wrong with an action: Field is the action's
// field at fault ("params.url", "selector", "ref"), Message what is wrong
// (it is the error's text: the field is for the caller to place).
type ActionError struct {
	Field   string
	Message string
}

func (e *ActionError) Error() string { return e.Message }

// neededParams are the string parameters a route cannot do without.
var neededParams = map[route]string{routeNavigate: "url", routeEvaluate: "expression"}

// neededParam returns the parameter kind's route needs ("" for a route that
// needs none), or an *ActionError when it is missing, empty or not a string.
func neededParam(kind string, params json.RawMessage) (string, error) {
	key, ok := neededParams[routeOf(strings.ToLower(kind))]
	if !ok {
		return "", nil
	}
	v, err := stringParam(params, key)
	if err != nil || v == "" {
		return "", &ActionError{Field: "params." + key, Message: fmt.Sprintf("%s needs params.%s (a string)", strings.ToLower(kind), key)}
	}
	if key == "url" {
		// The URLs a tab may load (pinchtab.ValidateURL): a file: URL is
		// refused here rather than by the instance once the task runs.
		if err := pinchtab.ValidateURL(v); err != nil {
			return "", &ActionError{Field: "params.url", Message: err.Error()}
		}
	}
	return v, nil
}

// CheckAction checks an action of a kind browser instances know (KnownKind)
// as far as it can be checked before it runs: the parameters its kind needs
// (navigate's params.url, a URL a tab may load — pinchtab.ValidateURL —,
// evaluate's params.expression), text's params.maxChars (1..TextMaxChars),
// snapshot's params.maxNodes (1..SnapshotMaxNodes)
// and the syntax of
// its selector and ref (CheckSelector). The error is an *ActionError. Kinds
// the executor's table does not know are not its to check (a pull lane's
// workers define their own).
func CheckAction(a *engine.Action) error {
	if a == nil {
		return nil
	}
	if _, known := browserRoutes[strings.ToLower(a.Kind)]; !known {
		return nil
	}
	if _, err := neededParam(a.Kind, a.Params); err != nil {
		return err
	}
	if strings.EqualFold(a.Kind, "text") {
		if _, err := textMaxChars(a.Params); err != nil {
			return err
		}
	}
	if strings.EqualFold(a.Kind, "snapshot") {
		if _, err := snapshotMaxNodes(a.Params); err != nil {
			return err
		}
	}
	for _, f := range [...]struct{ name, v string }{{"selector", a.Selector}, {"ref", a.Ref}} {
		if err := CheckSelector(f.v); err != nil {
			return &ActionError{Field: f.name, Message: err.Error()}
		}
	}
	return nil
}

// CheckSelector checks a selector's syntax (pinchtab.ValidateSelector, the
// syntax the built-in browser resolves): "ref:e12" or "e12", "css:…" or a
// bare CSS selector, "xpath:…" or "//…" or "(//…)…", "text:…". "" is no
// selector. Its error says what is wrong and shows the syntax.
func CheckSelector(sel string) error {
	if sel == "" {
		return nil
	}
	_, err := pinchtab.ValidateSelector(sel)
	var se *pinchtab.SelectorError
	if errors.As(err, &se) {
		return fmt.Errorf("%s (use a CSS selector like \"#go\", \"xpath://button\", \"text:Sign in\" or a snapshot ref like \"e12\")", se)
	}
	return err
}
