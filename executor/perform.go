// Forwarding one action: which endpoint a kind maps to, and what becomes of
// the answer — JSON inline when small, an artifact reference when binary or
// large.

package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

func isClose(kind string) bool { return routeOf(strings.ToLower(kind)) == routeClose }

// perform forwards an action to its tab, through the endpoint its kind has
// (kinds.go), and returns the result for the task.
func (e *Executor) perform(ctx context.Context, t target, a *engine.Action, taskID string) (json.RawMessage, error) {
	kind := strings.ToLower(a.Kind)
	sel := a.Selector
	if sel == "" {
		sel = a.Ref
	}
	var (
		res json.RawMessage
		err error
	)
	switch routeOf(kind) {
	case routeNavigate:
		u, perr := neededParam(kind, a.Params)
		if perr != nil {
			return nil, engine.Permanent(perr)
		}
		res, err = t.client.Navigate(ctx, t.tab, u, a.Params)
	case routeBinary:
		return e.binary(ctx, t, kind, sel, a.Params, taskID)
	case routeEvaluate:
		expr, perr := neededParam(kind, a.Params)
		if perr != nil {
			return nil, engine.Permanent(perr)
		}
		res, err = t.client.Evaluate(ctx, t.tab, expr, a.Params)
	case routeClose:
		if err := t.client.CloseTab(ctx, t.tab); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"closed":true}`), nil
	case routeRead:
		q, qerr := queryOf(a.Params)
		if qerr != nil {
			return nil, engine.Permanent(qerr)
		}
		if sel != "" {
			q.Set("selector", sel)
		}
		if kind == "snapshot" {
			// Cut here as text is, the same on every instance (a PinchTab
			// instance sends every node; the built-in one bounds its own).
			limit, lerr := snapshotMaxNodes(a.Params)
			if lerr != nil {
				return nil, engine.Permanent(lerr)
			}
			if res, err = t.client.Read(ctx, t.tab, kind, q); err == nil {
				res = capSnapshot(res, limit)
			}
			break
		}
		if kind != "text" {
			res, err = t.client.Read(ctx, t.tab, kind, q)
			break
		}
		// The text is cut here, not by the instance (PinchTab's maxChars
		// counts bytes and says no length), the same on every instance.
		limit, lerr := textMaxChars(a.Params)
		if lerr != nil {
			return nil, engine.Permanent(lerr)
		}
		q.Del("maxChars")
		if res, err = t.client.Read(ctx, t.tab, kind, q); err == nil {
			res = capText(res, limit)
		}
	case routeHistory:
		// PinchTab reads back/forward/reload's options from the query.
		q, qerr := queryOf(a.Params)
		if qerr != nil {
			return nil, engine.Permanent(qerr)
		}
		res, err = t.client.Post(ctx, t.tab, kind, q, nil)
	case routePost:
		if kind == "wait" {
			// A wait that ran out of time answers 200 {"waited":false}:
			// a *pinchtab.WaitTimeoutError, which fails the attempt.
			res, err = t.client.Wait(ctx, t.tab, a.Params, "ref", a.Ref, "selector", a.Selector)
			break
		}
		res, err = t.client.Post(ctx, t.tab, kind, nil, a.Params, "ref", a.Ref, "selector", a.Selector)
	default:
		res, err = t.client.Act(ctx, t.tab, pinchtab.Action{Kind: a.Kind, Ref: a.Ref, Selector: a.Selector, Params: a.Params})
	}
	if err != nil {
		return nil, err
	}
	return e.inline(ctx, res, taskID)
}

// artifactResult is the result of a task whose answer became an artifact.
type artifactResult struct {
	Artifact any    `json:"artifact"`
	Kind     string `json:"kind,omitempty"`
}

// binary fetches a screenshot or PDF and stores it as an artifact.
func (e *Executor) binary(ctx context.Context, t target, kind, sel string, params json.RawMessage, taskID string) (json.RawMessage, error) {
	q, err := queryOf(params)
	if err != nil {
		return nil, engine.Permanent(err)
	}
	if sel != "" {
		q.Set("selector", sel)
	}
	var bin pinchtab.Binary
	if kind == "pdf" {
		bin, err = t.client.PDF(ctx, t.tab, q)
	} else {
		bin, err = t.client.Screenshot(ctx, t.tab, q)
	}
	if err != nil {
		return nil, err
	}
	a, err := e.arts.Put(ctx, bin.ContentType, taskID, bin.Data)
	if err != nil {
		return nil, engine.Transient(fmt.Errorf("store %s: %w", kind, err))
	}
	return json.Marshal(artifactResult{Artifact: a.Ref, Kind: kind})
}

// inline returns res as the task's result, or, when it is larger than the
// inline limit, stores it as a JSON artifact and returns a reference.
func (e *Executor) inline(ctx context.Context, res json.RawMessage, taskID string) (json.RawMessage, error) {
	if len(res) <= e.maxInline {
		return res, nil
	}
	a, err := e.arts.Put(ctx, "application/json", taskID, res)
	if err != nil {
		return nil, engine.Transient(fmt.Errorf("store large result: %w", err))
	}
	return json.Marshal(artifactResult{Artifact: a.Ref, Kind: "result"})
}

// stringParam returns the string member key of a JSON object, "" when absent.
func stringParam(params json.RawMessage, key string) (string, error) {
	if len(params) == 0 {
		return "", nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return "", fmt.Errorf("params must be a JSON object: %w", err)
	}
	raw, ok := m[key]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("params.%s must be a string", key)
	}
	return s, nil
}

// queryOf turns a JSON object of parameters into a query: strings as they are,
// other values as their JSON text.
func queryOf(params json.RawMessage) (url.Values, error) {
	q := url.Values{}
	if len(params) == 0 || string(params) == "null" {
		return q, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return nil, fmt.Errorf("params must be a JSON object: %w", err)
	}
	for k, raw := range m {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			q.Set(k, s)
			continue
		}
		q.Set(k, string(raw))
	}
	return q, nil
}
