package engine

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Idempotency keys: an agent's key names one request. Sent again with the
// same request (a retry after a lost answer), it returns the task recorded
// the first time; sent with a different request, it is a client's mistake,
// refused with CONFLICT, as Stripe refuses a key reused with different
// parameters: answering with the first task would tell the client that
// its second request was done.

// SameRequest reports whether two specs of the same agent and idempotency
// key are the same request: the same action (kind in any case, ref,
// selector, and params as JSON values: key order, spacing and an empty
// object against none do not count) or instruction, lane, session key, tab,
// instance, priority, dependencies (as a set), parent, deadline, timeout,
// retry policy, webhook URL, labels, queue mode, exhausted, session
// ceiling and session replay. The batch a task was submitted in, and when,
// do not count. Specs are compared as admission normalized them (the lane
// "main" when none was named, the API's defaults filled in).
func SameRequest(a, b *TaskSpec) bool { return requestDiffers(a, b, true) == "" }

// requestDiffers returns the name of the first field in which b is not the
// request a is ("" when it is), its dependencies compared only with deps.
func requestDiffers(a, b *TaskSpec, deps bool) string {
	switch {
	case (a.Action == nil) != (b.Action == nil):
		return "action"
	case a.Instruction != b.Instruction:
		return "instruction"
	case a.Lane != b.Lane:
		return "lane"
	case a.SessionKey != b.SessionKey:
		return "sessionKey"
	case a.TabID != b.TabID:
		return "tabId"
	case a.InstanceID != b.InstanceID:
		return "instanceId"
	case a.Priority != b.Priority:
		return "priority"
	case deps && !sameSet(a.DependsOn, b.DependsOn):
		return "dependsOn"
	case a.ParentID != b.ParentID:
		return "parentId"
	case !a.Deadline.Equal(b.Deadline):
		return "deadline"
	case a.Timeout != b.Timeout:
		return "timeoutMs"
	case (a.Retry == nil) != (b.Retry == nil) || a.Retry != nil && *a.Retry != *b.Retry:
		return "retryPolicy"
	case a.WebhookURL != b.WebhookURL:
		return "webhookUrl"
	case !maps.Equal(a.Labels, b.Labels):
		return "labels"
	case a.QueueMode != b.QueueMode:
		return "queueMode"
	case a.Exhausted != b.Exhausted:
		return "exhausted"
	case a.SessionMaxInFlight != b.SessionMaxInFlight:
		return "sessionMaxInFlight"
	case a.SessionReplay != b.SessionReplay:
		return "sessionReplay"
	}
	if x, y := a.Action, b.Action; x != nil {
		switch {
		case !strings.EqualFold(x.Kind, y.Kind):
			return "action.kind"
		case x.Ref != y.Ref:
			return "action.ref"
		case x.Selector != y.Selector:
			return "action.selector"
		case !sameParams(x.Params, y.Params):
			return "action.params"
		}
	}
	return ""
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if slices.Equal(a, b) {
		return true
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// sameParams reports whether two actions' params are the same JSON value;
// none, null and an empty object are the same.
func sameParams(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if !decodeParams(a, &x) || !decodeParams(b, &y) {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// decodeParams decodes params into v, an empty object for none.
func decodeParams(raw json.RawMessage, v *any) bool {
	if len(bytes.TrimSpace(raw)) == 0 {
		*v = map[string]any{}
		return true
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false
	}
	if *v == nil {
		*v = map[string]any{}
	}
	return true
}
