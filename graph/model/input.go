// The task inputs (SubmitTaskInput and what it holds, SubmitTasksInput and
// its items), unmarshalled by hand.
//
// gqlgen's generated unmarshaller copies every input map, adds a context
// and a path element for every field present and allocates each optional
// scalar on its own: about 39 allocations per item of a submitTasks (ADR
// 0005, findings 12 and 13). These types have their own
// UnmarshalGQLContext, which gqlgen.yml binds in its place. It gives the
// values the generated code gave, field for field:
//
//   - gqlparser has already validated the input (its fields, their types,
//     the required ones): an unknown field never reaches this code, and one
//     that does (__typename) is ignored, as the generated code ignores it;
//   - an absent field leaves its Go field at its zero value, or at the
//     schema's default (SubmitTaskInput's priority, queueMode and
//     sessionReplay); a field given as null leaves it nil;
//   - a null item of a list of non-null input objects is a pointer to a
//     zero value, and a non-null list given as null is empty, not nil;
//   - scalars go through gqlgen's own functions (graphql.UnmarshalString,
//     UnmarshalInt, UnmarshalTime, …) and this package's UnmarshalJSON;
//     an enum name the schema does not define is the enum's zero value;
//   - an error names the path of its field (…, "items", 3, "task",
//     "deadline"), and of several the first in the schema's field order
//     and the list's order is reported.
//
// The values a task's input carries (its optional strings and numbers,
// its action, its defaults) live in one allocation, and a batch's items in
// one for the whole batch. input_test.go holds this code to a reference
// that reads the schema: a field added to the schema and not here fails it.

package model

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/switchyard/switchyard/engine"
)

// Tasks to submit as one batch.
type SubmitTasksInput struct {
	// The tasks, in order (1..Limits.maxBatch).
	Items []*BatchItemInput `json:"items"`
	// How many of the batch's tasks may run at once (1..10; omit for no cap).
	Parallelism *int `json:"parallelism,omitempty"`
	// An absolute http(s) URL called when the whole batch has ended.
	WebhookURL *string `json:"webhookUrl,omitempty"`
}

// One task of a batch.
type BatchItemInput struct {
	// A key unique within the batch, so that other items can name this one in their dependsOn.
	Key *string `json:"key,omitempty"`
	// The task.
	Task *SubmitTaskInput `json:"task"`
}

// A task to submit.
type SubmitTaskInput struct {
	// The agent submitting it: the unit of fairness (1..256 bytes).
	AgentID string `json:"agentId"`
	// The lane to run in (default "main"). An unknown lane is INVALID_INPUT.
	Lane *string `json:"lane,omitempty"`
	// Tasks sharing a session key run one at a time (default: the tab, if any).
	SessionKey *string `json:"sessionKey,omitempty"`
	// Its priority within its queue.
	Priority *engine.Priority `json:"priority,omitempty"`
	// The browser interaction to perform.
	Action *ActionInput `json:"action,omitempty"`
	// A free-text instruction, for chat-style instances.
	Instruction *string `json:"instruction,omitempty"`
	// The tab to run in (else the session's tab, or a new one).
	TabID *string `json:"tabId,omitempty"`
	// The instance to run on (else the scheduler chooses).
	InstanceID *string `json:"instanceId,omitempty"`
	// Tasks that must succeed first: task ids, or in `submitTasks` the keys of other items.
	DependsOn []string `json:"dependsOn,omitempty"`
	// The task that spawned this one (its depth + 1 must fit the lane's maxDepth).
	ParentID *string `json:"parentId,omitempty"`
	// When it must have ended (in the future, for a new task; a resend under the same idempotencyKey answers with its task even once it has passed): no attempt starts at or after it (see `Task.deadline`).
	Deadline *time.Time `json:"deadline,omitempty"`
	// The per-attempt timeout, in milliseconds (1..86400000; default the lane's).
	TimeoutMs *int `json:"timeoutMs,omitempty"`
	// Its own retry policy, overriding the lane's.
	RetryPolicy *RetryPolicyInput `json:"retryPolicy,omitempty"`
	// An absolute http(s) URL called when it reaches a terminal state.
	WebhookURL *string `json:"webhookUrl,omitempty"`
	// A key that makes resubmission safe: the same agent and key return the original task.
	IdempotencyKey *string `json:"idempotencyKey,omitempty"`
	// Free-form labels (at most 64; keys 1..256 bytes, values at most 256).
	Labels []*LabelInput `json:"labels,omitempty"`
	// How it joins its session's queue.
	QueueMode *engine.QueueMode `json:"queueMode,omitempty"`
	// What it becomes when its retries are spent (default: its lane's `exhausted`).
	Exhausted *engine.Exhausted `json:"exhausted,omitempty"`
	// Sets its session's concurrency (1..100; GoClaw's per-request concurrency, e.g. 3 for a group chat). The latest task that sets it wins; omitted, the session keeps its ceiling (default engine.sessionMaxInFlight). Needs a sessionKey or a tabId.
	SessionMaxInFlight *int `json:"sessionMaxInFlight,omitempty"`
	// Opts its session into replay: if the session's tab is lost (closed behind
	// Switchyard's back, gone with its instance's restart or removal), the
	// executor opens a new tab and replays the session's actions from its first
	// task, then runs this one, instead of failing it with SESSION_LOST. The
	// session's log is kept (in memory, up to executor.maxReplayActions actions)
	// only while every task of the session, from its first, asks for it. Needs
	// a sessionKey and no tabId.
	SessionReplay *bool `json:"sessionReplay,omitempty"`
}

// A browser interaction.
type ActionInput struct {
	// What to do: click, dblclick, fill, type, press, hover, focus, select, check, uncheck, scroll, navigate, text, snapshot, screenshot, pdf, evaluate, close, … (the README's table; another kind is INVALID_INPUT).
	Kind string `json:"kind"`
	// An element reference from a snapshot (e.g. `e12`).
	Ref *string `json:"ref,omitempty"`
	// A selector: `css:#go`, a bare CSS selector, `xpath://button` or `text:Go`.
	Selector *string `json:"selector,omitempty"`
	// Kind-specific parameters: a JSON object (e.g. `{"url": "https://example.com"}`, `{"text": "hello"}`).
	Params json.RawMessage `json:"params,omitempty"`
}

// A retry policy override.
type RetryPolicyInput struct {
	// The attempt budget, the first attempt included (1..100).
	MaxAttempts int `json:"maxAttempts"`
	// The delay before the first retry, in milliseconds (default 1000).
	BackoffMs *int `json:"backoffMs,omitempty"`
	// The growth of the delay per retry (1..100, default 2).
	Multiplier *float64 `json:"multiplier,omitempty"`
	// The cap on the delay, in milliseconds (default 60000).
	MaxBackoffMs *int `json:"maxBackoffMs,omitempty"`
	// Spread the delays (equal jitter).
	Jitter *bool `json:"jitter,omitempty"`
}

// A key and its value.
type LabelInput struct {
	// The key (1..256 bytes).
	Key string `json:"key"`
	// The value (at most 256 bytes).
	Value string `json:"value"`
}

// The enums of SubmitTaskInput, by their GraphQL names (gqlgen.yml binds
// the same constants; input_test.go checks both against the schema).
var (
	priorities = map[string]engine.Priority{
		"CRITICAL": engine.PriorityCritical, "HIGH": engine.PriorityHigh,
		"NORMAL": engine.PriorityNormal, "LOW": engine.PriorityLow,
	}
	queueModes = map[string]engine.QueueMode{
		"ENQUEUE": engine.QueueEnqueue, "INTERRUPT": engine.QueueInterrupt,
		"INTERRUPT_DRAIN": engine.QueueInterruptDrain,
	}
	exhaustions = map[string]engine.Exhausted{
		"PARK": engine.ExhaustedPark, "FAIL": engine.ExhaustedFail,
	}
)

// UnmarshalGQLContext reads a SubmitTasksInput that gqlparser validated.
// A *SubmitTasksJSON (read from the request's JSON by
// DecodeSubmitTasksJSON) is taken as it is.
func (in *SubmitTasksInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	if d, ok := v.(*SubmitTasksJSON); ok {
		*in = d.in
		return nil
	}
	return onPath(ctx, in.decode(v))
}

// UnmarshalGQL is UnmarshalGQLContext without a request (errors carry no
// path above the input). gqlgen calls UnmarshalGQLContext; this method is
// what tells it not to generate an unmarshaller of its own.
func (in *SubmitTasksInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON. gqlgen binds an input type to
// its own unmarshaller only if it can marshal it too; it never does.
func (in SubmitTasksInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

// UnmarshalGQLContext reads a BatchItemInput that gqlparser validated.
func (in *BatchItemInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	s := &batchSlot{}
	if err := s.decode(v); err != nil {
		return onPath(ctx, err)
	}
	*in = s.item
	return nil
}

// UnmarshalGQL is UnmarshalGQLContext without a request (see SubmitTasksInput.UnmarshalGQL).
func (in *BatchItemInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON (see SubmitTasksInput.MarshalGQLContext).
func (in BatchItemInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

// UnmarshalGQLContext reads a SubmitTaskInput that gqlparser validated.
// A *SubmitTaskJSON (DecodeSubmitTaskJSON) is taken as it is, as
// SubmitTasksInput takes a *SubmitTasksJSON.
func (in *SubmitTaskInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	if v == nil {
		return nil
	}
	if d, ok := v.(*SubmitTaskJSON); ok {
		*in = d.in // read from the request's JSON (DecodeSubmitTaskJSON)
		return nil
	}
	return onPath(ctx, in.decode(v, &taskValues{}))
}

// UnmarshalGQL is UnmarshalGQLContext without a request (see SubmitTasksInput.UnmarshalGQL).
func (in *SubmitTaskInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON (see SubmitTasksInput.MarshalGQLContext).
func (in SubmitTaskInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

// UnmarshalGQLContext reads an ActionInput that gqlparser validated.
func (in *ActionInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	if v == nil {
		return nil
	}
	var ref, selector string
	return onPath(ctx, in.decode(v, &ref, &selector))
}

// UnmarshalGQL is UnmarshalGQLContext without a request (see SubmitTasksInput.UnmarshalGQL).
func (in *ActionInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON (see SubmitTasksInput.MarshalGQLContext).
func (in ActionInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

// UnmarshalGQLContext reads a RetryPolicyInput that gqlparser validated.
func (in *RetryPolicyInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	if v == nil {
		return nil
	}
	return onPath(ctx, in.decode(v, &retryValues{}))
}

// UnmarshalGQL is UnmarshalGQLContext without a request (see SubmitTasksInput.UnmarshalGQL).
func (in *RetryPolicyInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON (see SubmitTasksInput.MarshalGQLContext).
func (in RetryPolicyInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

// UnmarshalGQLContext reads a LabelInput that gqlparser validated.
func (in *LabelInput) UnmarshalGQLContext(ctx context.Context, v any) error {
	return onPath(ctx, in.decode(v))
}

// UnmarshalGQL is UnmarshalGQLContext without a request (see SubmitTasksInput.UnmarshalGQL).
func (in *LabelInput) UnmarshalGQL(v any) error {
	return in.UnmarshalGQLContext(context.Background(), v)
}

// MarshalGQLContext writes the input as JSON (see SubmitTasksInput.MarshalGQLContext).
func (in LabelInput) MarshalGQLContext(_ context.Context, w io.Writer) error {
	return writeJSON(w, in)
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding an input: %w", err)
	}
	_, err = w.Write(b)
	return err
}

// fieldError is the error of a field somewhere inside the input being
// unmarshalled, with its path from there (outermost first).
type fieldError struct {
	path ast.Path
	err  error
}

func (e *fieldError) Error() string { return e.err.Error() }

// under puts e under parent (a field name or a list index).
func (e *fieldError) under(parent ast.PathElement) *fieldError {
	e.path = append(ast.Path{parent}, e.path...)
	return e
}

// fieldErr starts the error of a field.
func fieldErr(name string, err error) *fieldError {
	return &fieldError{path: ast.Path{ast.PathName(name)}, err: err}
}

// onPath turns e into the error gqlgen's generated code returns: the
// scalar's error with the path of its field (graphql.ErrorOnPath under
// the path contexts the generated code would have made).
func onPath(ctx context.Context, e *fieldError) error {
	if e == nil {
		return nil
	}
	for _, p := range e.path {
		switch p := p.(type) {
		case ast.PathName:
			ctx = graphql.WithPathContext(ctx, graphql.NewPathWithField(string(p)))
		case ast.PathIndex:
			ctx = graphql.WithPathContext(ctx, graphql.NewPathWithIndex(int(p)))
		}
	}
	return graphql.ErrorOnPath(ctx, e.err)
}

// firstError keeps, of the errors of an object's fields, the one the
// generated code reports: the first in the schema's order.
type firstError struct {
	at  int
	err *fieldError
}

func (f *firstError) keep(at int, err *fieldError) {
	if err != nil && (f.err == nil || at < f.at) {
		f.at, f.err = at, err
	}
}

// notAnObject is the error of an input object that is not a map: gqlparser
// lets none through (the generated code would panic).
func notAnObject(v any) *fieldError {
	return &fieldError{err: fmt.Errorf("%T is not an input object", v)}
}

// batchSlot is one item of a batch with everything its input points to.
type batchSlot struct {
	item  BatchItemInput
	key   string
	task  SubmitTaskInput
	parts taskValues
}

// taskValues holds what a SubmitTaskInput points to, but for its retry
// policy, labels and dependencies.
type taskValues struct {
	action ActionInput
	// The optional strings.
	lane, sessionKey, instruction, tabID, instanceID    string
	parentID, webhookURL, idempotencyKey, ref, selector string
	deadline                                            time.Time
	timeoutMs, sessionMaxInFlight                       int
	priority                                            engine.Priority
	queueMode                                           engine.QueueMode
	exhausted                                           engine.Exhausted
	sessionReplay                                       bool
}

// retryValues holds what a RetryPolicyInput points to.
type retryValues struct {
	backoffMs, maxBackoffMs int
	multiplier              float64
	jitter                  bool
}

func (in *SubmitTasksInput) decode(v any) *fieldError {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	var first firstError
	for k, fv := range m {
		switch k {
		case "items":
			first.keep(0, in.decodeItems(fv))
		case "parallelism":
			in.Parallelism = nil
			if fv != nil {
				n, err := graphql.UnmarshalInt(fv)
				if err != nil {
					first.keep(1, fieldErr(k, err))
					continue
				}
				in.Parallelism = &n
			}
		case "webhookUrl":
			in.WebhookURL = nil
			if fv != nil {
				s, err := graphql.UnmarshalString(fv)
				if err != nil {
					first.keep(2, fieldErr(k, err))
					continue
				}
				in.WebhookURL = &s
			}
		}
	}
	return first.err
}

// decodeItems reads a batch's items into one allocation.
func (in *SubmitTasksInput) decodeItems(v any) *fieldError {
	list := graphql.CoerceList(v)
	slots := make([]batchSlot, len(list))
	in.Items = make([]*BatchItemInput, len(list))
	for i, e := range list {
		s := &slots[i]
		in.Items[i] = &s.item
		if err := s.decode(e); err != nil {
			in.Items = nil
			return err.under(ast.PathIndex(i)).under(ast.PathName("items"))
		}
	}
	return nil
}

func (s *batchSlot) decode(v any) *fieldError {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	var first firstError
	for k, fv := range m {
		switch k {
		case "key":
			s.item.Key = nil
			if fv != nil {
				str, err := graphql.UnmarshalString(fv)
				if err != nil {
					first.keep(0, fieldErr(k, err))
					continue
				}
				s.key = str
				s.item.Key = &s.key
			}
		case "task":
			s.item.Task = &s.task
			if err := s.task.decode(fv, &s.parts); err != nil {
				first.keep(1, err.under(ast.PathName(k)))
			}
		}
	}
	return first.err
}

// decode reads a task's input; what it points to is in p. A nil v leaves
// the zero value (no defaults), as the generated code does for a null
// SubmitTaskInput! in a batch item.
func (in *SubmitTaskInput) decode(v any, p *taskValues) *fieldError {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	// The schema's defaults, replaced below if the field is given.
	p.priority, in.Priority = engine.PriorityNormal, &p.priority
	p.queueMode, in.QueueMode = engine.QueueEnqueue, &p.queueMode
	p.sessionReplay, in.SessionReplay = false, &p.sessionReplay
	var first firstError
	// str reads an optional string field at index at into *dst, pointing
	// *field at it.
	str := func(at int, k string, fv any, dst *string, field **string) {
		*field = nil
		if fv == nil {
			return
		}
		s, err := graphql.UnmarshalString(fv)
		if err != nil {
			first.keep(at, fieldErr(k, err))
			return
		}
		*dst, *field = s, dst
	}
	optInt := func(at int, k string, fv any, dst *int, field **int) {
		*field = nil
		if fv == nil {
			return
		}
		n, err := graphql.UnmarshalInt(fv)
		if err != nil {
			first.keep(at, fieldErr(k, err))
			return
		}
		*dst, *field = n, dst
	}
	for k, fv := range m {
		switch k {
		case "agentId":
			s, err := graphql.UnmarshalString(fv)
			if err != nil {
				first.keep(0, fieldErr(k, err))
				continue
			}
			in.AgentID = s
		case "lane":
			str(1, k, fv, &p.lane, &in.Lane)
		case "sessionKey":
			str(2, k, fv, &p.sessionKey, &in.SessionKey)
		case "priority":
			in.Priority = nil
			if fv != nil {
				s, err := graphql.UnmarshalString(fv)
				p.priority = priorities[s]
				in.Priority = &p.priority
				if err != nil {
					first.keep(3, fieldErr(k, err))
				}
			}
		case "action":
			in.Action = nil
			if fv != nil {
				in.Action = &p.action
				if err := p.action.decode(fv, &p.ref, &p.selector); err != nil {
					first.keep(4, err.under(ast.PathName(k)))
				}
			}
		case "instruction":
			str(5, k, fv, &p.instruction, &in.Instruction)
		case "tabId":
			str(6, k, fv, &p.tabID, &in.TabID)
		case "instanceId":
			str(7, k, fv, &p.instanceID, &in.InstanceID)
		case "dependsOn":
			in.DependsOn = nil
			if fv != nil {
				ids, err := decodeIDs(fv)
				if err != nil {
					first.keep(8, err.under(ast.PathName(k)))
					continue
				}
				in.DependsOn = ids
			}
		case "parentId":
			in.ParentID = nil
			if fv != nil {
				s, err := graphql.UnmarshalID(fv)
				if err != nil {
					first.keep(9, fieldErr(k, err))
					continue
				}
				p.parentID, in.ParentID = s, &p.parentID
			}
		case "deadline":
			in.Deadline = nil
			if fv != nil {
				t, err := graphql.UnmarshalTime(fv)
				p.deadline, in.Deadline = t, &p.deadline
				if err != nil {
					first.keep(10, fieldErr(k, err))
				}
			}
		case "timeoutMs":
			optInt(11, k, fv, &p.timeoutMs, &in.TimeoutMs)
		case "retryPolicy":
			in.RetryPolicy = nil
			if fv != nil {
				in.RetryPolicy = &RetryPolicyInput{}
				if err := in.RetryPolicy.decode(fv, &retryValues{}); err != nil {
					first.keep(12, err.under(ast.PathName(k)))
				}
			}
		case "webhookUrl":
			str(13, k, fv, &p.webhookURL, &in.WebhookURL)
		case "idempotencyKey":
			str(14, k, fv, &p.idempotencyKey, &in.IdempotencyKey)
		case "labels":
			in.Labels = nil
			if fv != nil {
				labels, err := decodeLabels(fv)
				if err != nil {
					first.keep(15, err.under(ast.PathName(k)))
					continue
				}
				in.Labels = labels
			}
		case "queueMode":
			in.QueueMode = nil
			if fv != nil {
				s, err := graphql.UnmarshalString(fv)
				p.queueMode = queueModes[s]
				in.QueueMode = &p.queueMode
				if err != nil {
					first.keep(16, fieldErr(k, err))
				}
			}
		case "exhausted":
			in.Exhausted = nil
			if fv != nil {
				s, err := graphql.UnmarshalString(fv)
				p.exhausted = exhaustions[s]
				in.Exhausted = &p.exhausted
				if err != nil {
					first.keep(17, fieldErr(k, err))
				}
			}
		case "sessionMaxInFlight":
			optInt(18, k, fv, &p.sessionMaxInFlight, &in.SessionMaxInFlight)
		case "sessionReplay":
			in.SessionReplay = nil
			if fv != nil {
				b, err := graphql.UnmarshalBoolean(fv)
				if err != nil {
					first.keep(19, fieldErr(k, err))
					continue
				}
				p.sessionReplay, in.SessionReplay = b, &p.sessionReplay
			}
		}
	}
	return first.err
}

// decode reads an action; its ref and selector go to *ref and *selector.
func (in *ActionInput) decode(v any, ref, selector *string) *fieldError {
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	var first firstError
	for k, fv := range m {
		switch k {
		case "kind":
			s, err := graphql.UnmarshalString(fv)
			if err != nil {
				first.keep(0, fieldErr(k, err))
				continue
			}
			in.Kind = s
		case "ref", "selector":
			at, dst, field := 1, ref, &in.Ref
			if k == "selector" {
				at, dst, field = 2, selector, &in.Selector
			}
			*field = nil
			if fv != nil {
				s, err := graphql.UnmarshalString(fv)
				if err != nil {
					first.keep(at, fieldErr(k, err))
					continue
				}
				*dst, *field = s, dst
			}
		case "params":
			in.Params = nil
			if fv != nil {
				b, err := UnmarshalJSON(fv)
				if err != nil {
					first.keep(3, fieldErr(k, err))
					continue
				}
				in.Params = b
			}
		}
	}
	return first.err
}

func (in *RetryPolicyInput) decode(v any, p *retryValues) *fieldError {
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	var first firstError
	for k, fv := range m {
		switch k {
		case "maxAttempts":
			n, err := graphql.UnmarshalInt(fv)
			if err != nil {
				first.keep(0, fieldErr(k, err))
				continue
			}
			in.MaxAttempts = n
		case "backoffMs", "maxBackoffMs":
			at, dst, field := 1, &p.backoffMs, &in.BackoffMs
			if k == "maxBackoffMs" {
				at, dst, field = 3, &p.maxBackoffMs, &in.MaxBackoffMs
			}
			*field = nil
			if fv != nil {
				n, err := graphql.UnmarshalInt(fv)
				if err != nil {
					first.keep(at, fieldErr(k, err))
					continue
				}
				*dst, *field = n, dst
			}
		case "multiplier":
			in.Multiplier = nil
			if fv != nil {
				f, err := graphql.UnmarshalFloat(fv)
				if err != nil {
					first.keep(2, fieldErr(k, err))
					continue
				}
				p.multiplier, in.Multiplier = f, &p.multiplier
			}
		case "jitter":
			in.Jitter = nil
			if fv != nil {
				b, err := graphql.UnmarshalBoolean(fv)
				if err != nil {
					first.keep(4, fieldErr(k, err))
					continue
				}
				p.jitter, in.Jitter = b, &p.jitter
			}
		}
	}
	return first.err
}

func (in *LabelInput) decode(v any) *fieldError {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return notAnObject(v)
	}
	var first firstError
	for k, fv := range m {
		switch k {
		case "key", "value":
			at, dst := 0, &in.Key
			if k == "value" {
				at, dst = 1, &in.Value
			}
			s, err := graphql.UnmarshalString(fv)
			if err != nil {
				first.keep(at, fieldErr(k, err))
				continue
			}
			*dst = s
		}
	}
	return first.err
}

// decodeLabels reads a list of labels (a null label is a zero one).
func decodeLabels(v any) ([]*LabelInput, *fieldError) {
	list := graphql.CoerceList(v)
	labels := make([]LabelInput, len(list))
	out := make([]*LabelInput, len(list))
	for i, e := range list {
		if err := labels[i].decode(e); err != nil {
			return nil, err.under(ast.PathIndex(i))
		}
		out[i] = &labels[i]
	}
	return out, nil
}

// decodeIDs reads a list of IDs.
func decodeIDs(v any) ([]string, *fieldError) {
	list := graphql.CoerceList(v)
	out := make([]string, len(list))
	for i, e := range list {
		s, err := graphql.UnmarshalID(e)
		if err != nil {
			return nil, &fieldError{path: ast.Path{ast.PathIndex(i)}, err: err}
		}
		out[i] = s
	}
	return out, nil
}
