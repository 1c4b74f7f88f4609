// The action kinds an instance kind knows, and the endpoint each is sent to.
// This table is the one place that says which kinds exist: the executor routes
// by it, and the API validates submitted kinds against Kinds.

package executor

import (
	"slices"
	"strings"
)

// route says how an action kind reaches a browser instance.
type route uint8

const (
	routeAction   route = iota + 1 // POST /tabs/{id}/action {"kind",…}
	routeNavigate                  // POST /tabs/{id}/navigate {"url",…}
	routeRead                      // GET /tabs/{id}/{kind}?…
	routePost                      // POST /tabs/{id}/{kind} {…params}
	routeHistory                   // POST /tabs/{id}/{kind}?…params (back, forward, reload)
	routeEvaluate                  // POST /tabs/{id}/evaluate {"expression",…}
	routeBinary                    // GET /tabs/{id}/{kind}?raw=true, stored as an artifact
	routeClose                     // POST /tabs/{id}/close
)

// browserRoutes are the kinds of PinchTab's instance API (a bridge, a server,
// the built-in instance), with their aliases. Interactions share /action; the
// others have their own routes.
var browserRoutes = map[string]route{
	// Interactions: POST /tabs/{id}/action.
	"click": routeAction, "dblclick": routeAction, "type": routeAction, "fill": routeAction,
	"press": routeAction, "hover": routeAction, "focus": routeAction, "select": routeAction,
	"scroll": routeAction, "scrollintoview": routeAction, "drag": routeAction,
	"check": routeAction, "uncheck": routeAction,
	"mouse-move": routeAction, "mouse-down": routeAction, "mouse-up": routeAction, "mouse-wheel": routeAction,
	"keyboard-type": routeAction, "keyboard-inserttext": routeAction, "keydown": routeAction, "keyup": routeAction,

	// Navigation and history.
	"navigate": routeNavigate, "goto": routeNavigate,
	"back": routeHistory, "forward": routeHistory, "reload": routeHistory,

	// Waiting, finding, dialogs: their own POST routes.
	"wait": routePost, "find": routePost, "dialog": routePost,

	// Reads: GET routes.
	"text": routeRead, "snapshot": routeRead, "title": routeRead, "url": routeRead,
	"html": routeRead, "styles": routeRead, "value": routeRead, "attr": routeRead,
	"count": routeRead, "box": routeRead, "visible": routeRead, "enabled": routeRead,
	"checked": routeRead, "cookies": routeRead, "timing": routeRead,

	"evaluate": routeEvaluate, "eval": routeEvaluate,
	"screenshot": routeBinary, "pdf": routeBinary,
	"close": routeClose, "closetab": routeClose,
}

// routeOf returns how kind (any case) reaches a browser instance. Kinds the
// table does not know go to /action, where the instance decides.
func routeOf(kind string) route {
	if r, ok := browserRoutes[kind]; ok {
		return r
	}
	return routeAction
}

// readOnly reports whether an action of kind (any case) only reads the tab
// (PinchTab's GET routes: text, snapshot, screenshot, …): a fault after its
// request was sent cannot have changed anything, so running it again is
// safe even for a task that allows a single attempt. Evaluate, find and
// wait, though often reads, run what the page or the instance decides, and
// kinds the table does not know go to /action: neither is read-only.
func readOnly(kind string) bool {
	r, ok := browserRoutes[strings.ToLower(kind)]
	return ok && (r == routeRead || r == routeBinary)
}

// Kinds returns the action kinds an instance kind knows, sorted, aliases
// included: PinchTab's interactions, navigation and history, wait, find,
// dialog, reads, evaluate, screenshot, pdf and close for browser instances
// ("instance", "pinchtab"); none for chat instances, which take instructions
// rather than actions. The caller owns the slice.
func Kinds(k Kind) []string {
	if !k.browser() {
		return nil
	}
	out := make([]string, 0, len(browserRoutes))
	for kind := range browserRoutes {
		out = append(out, kind)
	}
	slices.Sort(out)
	return out
}

// KnownKind reports whether instances of kind k know the action kind (in any
// case).
func KnownKind(k Kind, kind string) bool {
	if !k.browser() {
		return false
	}
	_, ok := browserRoutes[strings.ToLower(kind)]
	return ok
}
