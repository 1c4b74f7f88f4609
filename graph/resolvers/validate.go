// Input validation and conversion: every input is checked here, with the
// path of the culprit, before anything reaches the engine. The engine checks
// again (it trusts no caller); these checks make sure that malformed input
// is refused at the edge, with a GraphQL field path.

package resolvers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/model"
)

// Limits on what an input may carry: the engine's on what a submission
// carries, and the API's own.
const (
	maxIDLength    = engine.MaxIDLength
	maxLabels      = engine.MaxLabels
	maxLabelLength = engine.MaxLabelLength
	maxDependsOn   = engine.MaxDependsOn
	maxInstruction = engine.MaxInstruction
	maxParamsBytes = engine.MaxParamsBytes
	maxKindLength  = engine.MaxActionKindLength
	maxReason      = 1024
	maxTimeout     = 24 * time.Hour
	maxURLLength   = 2048
	// MaxPageSize is the largest page of a task listing.
	MaxPageSize = 1000
)

// invalid returns an INVALID_INPUT error for the input at path.
func invalid(path, format string, args ...any) *engine.Error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: path, Message: fmt.Sprintf(format, args...)}
}

// checkID checks a required or optional identifier.
func checkID(path, v string, required bool) *engine.Error {
	if idOK(v, required) {
		return nil
	}
	switch {
	case v == "" && required:
		return invalid(path, "is required")
	case len(v) > maxIDLength:
		return invalid(path, "is longer than %d bytes", maxIDLength)
	case !utf8.ValidString(v):
		return invalid(path, "is not valid UTF-8")
	}
	return nil
}

// idOK reports whether checkID accepts v. Where a path is built for each
// call (a task's fields, a batch's items), callers ask this first and build
// the path only for checkID's error: valid input allocates no path.
func idOK(v string, required bool) bool {
	return (v != "" || !required) && len(v) <= maxIDLength && utf8.ValidString(v)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// taskSpec validates a task input at path and returns the engine's spec.
// In a batch (keys != nil), dependsOn may name the keys of other items.
func taskSpec(path string, in *model.SubmitTaskInput, now time.Time) (engine.TaskSpec, *engine.Error) {
	return taskSpecShared(path, in, now, nil, nil)
}

// sharedLabels is the labels map of a batch's last item that had labels,
// with the input it was made from: an item with the same labels, in the same
// order, shares it (the engine does not change a spec's labels, and keeps one
// copy of labels that are the same from one item to the next).
type sharedLabels struct {
	in []*model.LabelInput
	m  map[string]string
}

// sameLabels reports whether a and b are the same labels in the same order.
func sameLabels(a, b []*model.LabelInput) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// taskSpecShared is taskSpec with the labels of the item before (sl: nil
// for none) and room for the spec's action (act: nil to allocate one; the
// spec points to it).
func taskSpecShared(path string, in *model.SubmitTaskInput, now time.Time, sl *sharedLabels, act *engine.Action) (engine.TaskSpec, *engine.Error) {
	p := func(f string) string { return path + "." + f }
	var s engine.TaskSpec
	if in == nil {
		return s, invalid(path, "is required")
	}
	if !idOK(in.AgentID, true) {
		return s, checkID(p("agentId"), in.AgentID, true)
	}
	s.AgentID = in.AgentID
	if in.Lane != nil {
		if !validName(*in.Lane) {
			return s, invalid(p("lane"), "%q is not a lane name (letters, digits, '-' and '_', at most 64)", *in.Lane)
		}
		s.Lane = *in.Lane
	}
	for _, f := range [...]struct {
		name string
		v    *string
	}{{"sessionKey", in.SessionKey}, {"tabId", in.TabID}, {"instanceId", in.InstanceID}, {"parentId", in.ParentID}, {"idempotencyKey", in.IdempotencyKey}} {
		if f.v != nil && !idOK(*f.v, false) {
			return s, checkID(p(f.name), *f.v, false)
		}
	}
	s.SessionKey, s.TabID, s.InstanceID = deref(in.SessionKey), deref(in.TabID), deref(in.InstanceID)
	s.ParentID, s.IdempotencyKey = deref(in.ParentID), deref(in.IdempotencyKey)
	s.Priority = engine.PriorityNormal
	if in.Priority != nil {
		s.Priority = *in.Priority
	}
	if in.Exhausted != nil {
		s.Exhausted = *in.Exhausted
	}
	if v := in.SessionMaxInFlight; v != nil {
		if *v < 1 || *v > 100 {
			return s, invalid(p("sessionMaxInFlight"), "must be within 1..100, got %d", *v)
		}
		s.SessionMaxInFlight = *v
	}
	if in.QueueMode != nil {
		s.QueueMode = *in.QueueMode
	}
	if in.SessionReplay != nil {
		s.SessionReplay = *in.SessionReplay
	}
	if s.QueueMode.Interrupts() && s.SessionKey == "" && s.TabID == "" {
		return s, invalid(p("queueMode"), "INTERRUPT needs a sessionKey or a tabId")
	}

	instruction := deref(in.Instruction)
	switch {
	case in.Action == nil && instruction == "":
		return s, invalid(p("action"), "one of action and instruction is required")
	case in.Action != nil && instruction != "":
		return s, invalid(p("action"), "give either an action or an instruction, not both")
	case len(instruction) > maxInstruction:
		return s, invalid(p("instruction"), "is longer than %d bytes", maxInstruction)
	}
	s.Instruction = instruction
	if a := in.Action; a != nil {
		if act == nil {
			act = new(engine.Action)
		}
		if err := action(path, a, act); err != nil {
			return s, err
		}
		s.Action = act
	}

	if len(in.DependsOn) > maxDependsOn {
		return s, invalid(p("dependsOn"), "names more than %d tasks", maxDependsOn)
	}
	seen := make(map[string]bool, len(in.DependsOn))
	for i, d := range in.DependsOn {
		if !idOK(d, true) {
			return s, checkID(p("dependsOn."+strconv.Itoa(i)), d, true)
		}
		if seen[d] {
			return s, invalid(p("dependsOn."+strconv.Itoa(i)), "%q is named twice", d)
		}
		seen[d] = true
	}
	s.DependsOn = in.DependsOn

	if in.Deadline != nil {
		// With an idempotency key the engine decides, once it has looked
		// the key up: a resend after the deadline may replay a task that
		// was admitted in time, and answers with it.
		if !in.Deadline.After(now) && (in.IdempotencyKey == nil || *in.IdempotencyKey == "") {
			return s, invalid(p("deadline"), "%s is not in the future", in.Deadline.Format(time.RFC3339Nano))
		}
		s.Deadline = *in.Deadline
	}
	if in.TimeoutMs != nil {
		d, err := millis(p("timeoutMs"), *in.TimeoutMs, 1, maxTimeout)
		if err != nil {
			return s, err
		}
		s.Timeout = d
	}
	if in.RetryPolicy != nil {
		rp, err := retryPolicy(p("retryPolicy"), in.RetryPolicy)
		if err != nil {
			return s, err
		}
		s.Retry = &rp
	}
	if in.WebhookURL != nil {
		if err := checkURL(p("webhookUrl"), *in.WebhookURL); err != nil {
			return s, err
		}
		s.WebhookURL = *in.WebhookURL
	}
	if len(in.Labels) > 0 {
		if sl != nil && sl.m != nil && sameLabels(sl.in, in.Labels) {
			// Valid as the same labels were for the item before.
			s.Labels = sl.m
			return s, nil
		}
		labels, err := labelMap(p("labels"), in.Labels)
		if err != nil {
			return s, err
		}
		s.Labels = labels
		if sl != nil {
			sl.in, sl.m = in.Labels, labels
		}
	}
	return s, nil
}

// action validates the action input of the task at taskPath into act.
func action(taskPath string, a *model.ActionInput, act *engine.Action) *engine.Error {
	p := func(f string) string { return taskPath + ".action." + f } // for errors only
	if a.Kind == "" || len(a.Kind) > maxKindLength {
		return invalid(p("kind"), "is required (at most %d bytes)", maxKindLength)
	}
	for _, r := range a.Kind {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return invalid(p("kind"), "%q: letters, digits, '-', '_' and '.' only", a.Kind)
		}
	}
	if ref := deref(a.Ref); !idOK(ref, false) {
		return checkID(p("ref"), ref, false)
	}
	if len(deref(a.Selector)) > 4096 {
		return invalid(p("selector"), "is longer than 4096 bytes")
	}
	*act = engine.Action{Kind: a.Kind, Ref: deref(a.Ref), Selector: deref(a.Selector)}
	if len(a.Params) > 0 && string(a.Params) != "null" {
		if len(a.Params) > maxParamsBytes {
			return invalid(p("params"), "is larger than %d bytes", maxParamsBytes)
		}
		if a.Params[0] != '{' || !json.Valid(a.Params) {
			return invalid(p("params"), "must be a JSON object")
		}
		act.Params = a.Params
	}
	return nil
}

// checkTask checks what of a validated task input depends on the server:
// its action against where it will run (checkAction), and the address of
// its webhook URL (checkWebhook). Every submission path runs it:
// submitTask, each item of submitTasks, a schedule's template, and MCP and
// the CLI through submitTask.
func (r *Resolver) checkTask(ctx context.Context, path string, s *engine.TaskSpec) *engine.Error {
	if err := r.checkAction(ctx, path, s); err != nil {
		return err
	}
	if s.WebhookURL != "" {
		return r.checkWebhook(path+".webhookUrl", s.WebhookURL)
	}
	return nil
}

// checkWebhook refuses a webhook URL whose host is an address the
// deliverer will not call (netguard.Guard.CheckURL, as heartbeat checks
// refuse theirs): a name is checked when it is called.
func (r *Resolver) checkWebhook(path, raw string) *engine.Error {
	if err := r.opts.WebhookGuard.CheckURL(raw); err != nil {
		return invalid(path, "%s", err.Error())
	}
	return nil
}

// checkAction checks a task's action against where it will run: a kind
// some browser instance knows, narrowed to those of the instance it names
// when the registry knows it (a chat instance takes no actions at all),
// with what its kind needs and a well-formed selector
// (executor.CheckAction, the executor's own checks). A pull lane's workers
// define their own kinds: any kind and any parameters go there.
func (r *Resolver) checkAction(ctx context.Context, path string, s *engine.TaskSpec) *engine.Error {
	if s.Action == nil {
		return nil
	}
	k := s.Action.Kind
	known := executor.KnownKind(executor.KindInstance, k) || executor.KnownKind(executor.KindServer, k)
	var bad *executor.ActionError
	if known {
		if err := executor.CheckAction(s.Action); err != nil && !errors.As(err, &bad) {
			return invalid(path+".action", "%v", err)
		}
	}
	if known && bad == nil && (s.InstanceID == "" || r.reg == nil) {
		// Nothing left to check, wherever the task goes: the common case
		// asks the engine nothing (its lock is the one every submission
		// takes).
		return nil
	}
	if l, err := r.eng.Lane(ctx, s.Lane); err == nil && l.Config.Pull {
		return nil
	}
	if !known {
		return invalid(path+".action.kind", "%q is not an action kind that a browser instance (instance, pinchtab) knows; known kinds: %s (a pull lane takes any kind)",
			k, strings.Join(browserKinds(), ", "))
	}
	if bad != nil {
		return invalid(path+".action."+bad.Field, "%s", bad.Message)
	}
	if r.reg == nil || s.InstanceID == "" {
		return nil
	}
	in, ok := r.reg.Get(ctx, s.InstanceID)
	if !ok || executor.KnownKind(in.Kind, s.Action.Kind) {
		return nil
	}
	kinds := executor.Kinds(in.Kind)
	if len(kinds) == 0 {
		return invalid(path+".action.kind", "instance %s is a %s instance: it takes instructions, not actions", in.ID, in.Kind)
	}
	return invalid(path+".action.kind", "%q is not an action kind that instance %s (%s) knows; known kinds: %s",
		s.Action.Kind, in.ID, in.Kind, strings.Join(kinds, ", "))
}

// browserKinds are the action kinds of the instance kinds that run actions
// (chat instances take instructions), sorted, each once.
func browserKinds() []string {
	kinds := append(executor.Kinds(executor.KindInstance), executor.Kinds(executor.KindServer)...)
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// retryPolicy validates a retry policy input, filling in the defaults.
func retryPolicy(path string, in *model.RetryPolicyInput) (engine.RetryPolicy, *engine.Error) {
	def := engine.DefaultRetryPolicy()
	rp := engine.RetryPolicy{MaxAttempts: in.MaxAttempts, Backoff: def.Backoff, Multiplier: def.Multiplier,
		MaxBackoff: def.MaxBackoff, Jitter: deref(in.Jitter)}
	if in.MaxAttempts < 1 || in.MaxAttempts > 100 {
		return rp, invalid(path+".maxAttempts", "must be within 1..100, got %d", in.MaxAttempts)
	}
	var err *engine.Error
	if in.BackoffMs != nil {
		if rp.Backoff, err = millis(path+".backoffMs", *in.BackoffMs, 0, 24*time.Hour); err != nil {
			return rp, err
		}
	}
	if in.MaxBackoffMs != nil {
		if rp.MaxBackoff, err = millis(path+".maxBackoffMs", *in.MaxBackoffMs, 0, 24*time.Hour); err != nil {
			return rp, err
		}
	}
	if in.Multiplier != nil {
		if m := *in.Multiplier; m < 1 || m > 100 {
			return rp, invalid(path+".multiplier", "must be within 1..100, got %g", m)
		}
		rp.Multiplier = *in.Multiplier
	}
	return rp, nil
}

// millis converts milliseconds to a duration within lo..hi.
func millis(path string, ms int, lo int, hi time.Duration) (time.Duration, *engine.Error) {
	if ms < lo || int64(ms) > hi.Milliseconds() {
		return 0, invalid(path, "must be within %d..%d milliseconds, got %d", lo, hi.Milliseconds(), ms)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// checkURL checks an absolute http(s) URL.
func checkURL(path, raw string) *engine.Error {
	if len(raw) > maxURLLength {
		return invalid(path, "is longer than %d bytes", maxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid(path, "is not an absolute http(s) URL")
	}
	if u.User != nil {
		// The API shows URLs to every reader and the logs record them:
		// credentials go in the instance's token or the webhook secret.
		return invalid(path, "must not carry credentials (user:password@)")
	}
	return nil
}

// labelMap validates labels and returns them as a map.
func labelMap(path string, in []*model.LabelInput) (map[string]string, *engine.Error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > maxLabels {
		return nil, invalid(path, "more than %d labels", maxLabels)
	}
	m := make(map[string]string, len(in))
	for i, l := range in {
		lp := func() string { return path + "." + strconv.Itoa(i) } // for errors only
		switch {
		case l.Key == "" || len(l.Key) > maxLabelLength:
			return nil, invalid(lp()+".key", "must be 1..%d bytes", maxLabelLength)
		case len(l.Value) > maxLabelLength:
			return nil, invalid(lp()+".value", "is longer than %d bytes", maxLabelLength)
		}
		if _, dup := m[l.Key]; dup {
			return nil, invalid(lp()+".key", "%q is given twice", l.Key)
		}
		m[l.Key] = l.Value
	}
	return m, nil
}

// taskFilter validates a task filter.
func taskFilter(path string, in *model.TaskFilter) (engine.TaskFilter, *engine.Error) {
	var f engine.TaskFilter
	if in == nil {
		return f, nil
	}
	if len(in.Ids) > MaxPageSize {
		return f, invalid(path+".ids", "names more than %d tasks", MaxPageSize)
	}
	for i, id := range in.Ids {
		if err := checkID(path+".ids."+strconv.Itoa(i), id, true); err != nil {
			return f, err
		}
	}
	for f2, v := range map[string]*string{"agentId": in.AgentID, "sessionKey": in.SessionKey, "batchId": in.BatchID, "parentId": in.ParentID} {
		if err := checkID(path+"."+f2, deref(v), false); err != nil {
			return f, err
		}
	}
	if in.Lane != nil && !validName(*in.Lane) {
		return f, invalid(path+".lane", "%q is not a lane name", *in.Lane)
	}
	labels, err := labelMap(path+".labels", in.Labels)
	if err != nil {
		return f, err
	}
	f = engine.TaskFilter{IDs: in.Ids, States: in.States, AgentID: deref(in.AgentID), Lane: deref(in.Lane),
		SessionKey: deref(in.SessionKey), BatchID: deref(in.BatchID), ParentID: deref(in.ParentID), Labels: labels}
	return f, nil
}

// eventMatcher validates an event filter and returns its predicate (nil:
// everything).
func eventMatcher(path string, in *model.TaskEventFilter) (func(*engine.Event) bool, *engine.Error) {
	if in == nil {
		return nil, nil
	}
	if len(in.TaskIds) > MaxPageSize {
		return nil, invalid(path+".taskIds", "names more than %d tasks", MaxPageSize)
	}
	ids := make(map[string]bool, len(in.TaskIds))
	for i, id := range in.TaskIds {
		if err := checkID(path+".taskIds."+strconv.Itoa(i), id, true); err != nil {
			return nil, err
		}
		ids[id] = true
	}
	for f, v := range map[string]*string{"agentId": in.AgentID, "lane": in.Lane, "sessionKey": in.SessionKey, "batchId": in.BatchID} {
		if err := checkID(path+"."+f, deref(v), false); err != nil {
			return nil, err
		}
	}
	var kinds, states uint64 // bit sets
	for _, k := range in.Kinds {
		if k < 64 {
			kinds |= 1 << k
		}
	}
	if len(in.Kinds) > 0 && kinds == 0 {
		kinds = 1 // LAGGED only: no engine event matches (bit 0 is no event type)
	}
	for _, s := range in.States {
		states |= 1 << s
	}
	agent, lane, session, batch := deref(in.AgentID), deref(in.Lane), deref(in.SessionKey), deref(in.BatchID)
	return func(e *engine.Event) bool {
		switch {
		case len(ids) > 0 && !ids[e.TaskID],
			kinds != 0 && kinds&(1<<e.Type) == 0,
			states != 0 && (e.Type != engine.EventState || states&(1<<e.To) == 0),
			agent != "" && e.AgentID != agent,
			lane != "" && e.Lane != lane,
			session != "" && e.SessionKey != session,
			batch != "" && e.BatchID != batch:
			return false
		}
		return true
	}, nil
}

// instanceConfig validates an instance registration.
func instanceConfig(path string, in *model.RegisterInstanceInput) (executor.InstanceConfig, *engine.Error) {
	c := executor.InstanceConfig{ID: in.ID, URL: in.URL, Token: deref(in.Token), Capacity: deref(in.Capacity)}
	if err := checkURL(path+".url", in.URL); err != nil {
		return c, err
	}
	if in.Kind != nil {
		c.Kind = *in.Kind
	}
	if in.Dialect != nil {
		c.Dialect = *in.Dialect
	}
	labels, err := labelMap(path+".labels", in.Labels)
	if err != nil {
		return c, err
	}
	c.Labels = labels
	if c.Capacity < 0 {
		return c, invalid(path+".capacity", "must not be negative, got %d", c.Capacity)
	}
	if verr := c.Validate(); verr != nil {
		return c, fieldError(path, verr)
	}
	return c, nil
}

// fieldError turns an error of the form "field: message" (the executor's and
// the engine's config errors) into INVALID_INPUT naming path.field.
func fieldError(path string, err error) *engine.Error {
	msg := err.Error()
	if first, _, ok := strings.Cut(msg, "\n"); ok {
		msg = first
	}
	field, rest, ok := strings.Cut(msg, ": ")
	if !ok || strings.ContainsAny(field, " \"") {
		return invalid(path, "%s", msg)
	}
	return invalid(path+"."+field, "%s", rest)
}

// validName reports whether s is a name the API takes for a lane or a
// plugin it loads: the engine's rule for lane names.
func validName(s string) bool { return engine.ValidLaneName(s) }
