// Tabs by agent: a task may name a tab by its id (TaskSpec.TabID), and
// PinchTab's instance API has no notion of whose tab that is. The executor
// knows the tabs it opened and for which agent (its pool and its sessions'
// tabs), and refuses a task that names one opened for another agent, as the
// built-in Chromium does at the instance: 404 tab_not_found, as for a tab
// that does not exist. A tab it did not open (an operator's own, opened
// outside Switchyard) stays reachable by any task that names it.

package executor

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// codeTabNotFound is the code of the refusal of another agent's tab, the
// built-in instance's for a tab that is not there (or not the agent's).
const codeTabNotFound = "tab_not_found"

// ownerOf returns the agent the executor opened tab for, or "" when it did
// not open it (or opened it for no agent).
func (e *Executor) ownerOf(tab string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o, ok := e.owned[tab]; ok {
		return o.agent
	}
	return ""
}

// refuseForeignTab returns the error of a task of agent that names tab, when
// the executor opened tab for another agent, or nil. The error is the one the
// built-in instance answers for another agent's tab: a *pinchtab.Error, 404
// tab_not_found, not retryable, so that the task fails permanently with the
// same status and code whatever the instance's kind, and learns nothing of
// the tab but that it is not there for it. op, method and endpoint name the
// request the task would have made (requestOf).
func (e *Executor) refuseForeignTab(agent, tab, taskID, op, method, endpoint string) error {
	owner := e.ownerOf(tab)
	if owner == "" || owner == agent {
		return nil
	}
	e.log.Warn("a task named a tab opened for another agent: refused as not found",
		"task", taskID, "agent", agent, "tab", tab, "tabAgent", owner)
	path := "/tabs/" + url.PathEscape(tab) + "/" + endpoint
	if endpoint == "" {
		path = "/chat"
	}
	return &pinchtab.Error{Op: op, Method: method, Path: path, Status: http.StatusNotFound,
		Code: codeTabNotFound, Message: fmt.Sprintf("tab %s not found", tab)}
}

// requestOf returns the method and the tab route's last segment of the
// request an action kind is sent as (kinds.go).
func requestOf(a *engine.Action) (op, method, endpoint string) {
	kind := strings.ToLower(a.Kind)
	switch routeOf(kind) {
	case routeRead, routeBinary:
		return kind, http.MethodGet, kind
	case routeNavigate:
		return "navigate", http.MethodPost, "navigate"
	case routeEvaluate:
		return "evaluate", http.MethodPost, "evaluate"
	case routeClose:
		return "close tab", http.MethodPost, "close"
	case routePost, routeHistory:
		return kind, http.MethodPost, kind
	}
	return "action", http.MethodPost, "action"
}
