// The scheduler and session tools: submit any task without waiting, read
// and list the caller's tasks, cancel one; open and close browser sessions.

package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/graph/model"
)

// SubmitInput is submit_task's input: GraphQL's SubmitTaskInput in JSON.
type SubmitInput struct {
	AgentID     string            `json:"agentId,omitempty" jsonschema:"The agent to submit as; default the caller's (an agent token submits as its own agent only)."`
	Lane        string            `json:"lane,omitempty" jsonschema:"The lane; default the server's lane for MCP calls."`
	SessionKey  string            `json:"sessionKey,omitempty" jsonschema:"Tasks sharing a session key run one at a time, in one tab."`
	Priority    string            `json:"priority,omitempty" jsonschema:"CRITICAL, HIGH, NORMAL (default) or LOW."`
	Action      *ActionInput      `json:"action,omitempty" jsonschema:"The browser interaction (give an action or an instruction)."`
	Instruction string            `json:"instruction,omitempty" jsonschema:"Free text for chat-style instances."`
	TabID       string            `json:"tabId,omitempty" jsonschema:"The tab to run in."`
	InstanceID  string            `json:"instanceId,omitempty" jsonschema:"The instance to run on."`
	DependsOn   []string          `json:"dependsOn,omitempty" jsonschema:"Task ids that must succeed first."`
	ParentID    string            `json:"parentId,omitempty" jsonschema:"The task that spawned this one."`
	Deadline    string            `json:"deadline,omitempty" jsonschema:"When it must have ended (RFC 3339, in the future)."`
	TimeoutMs   int               `json:"timeoutMs,omitempty" jsonschema:"Per-attempt timeout in milliseconds."`
	RetryPolicy *RetryInput       `json:"retryPolicy,omitempty" jsonschema:"Its own retry policy."`
	WebhookURL  string            `json:"webhookUrl,omitempty" jsonschema:"An http(s) URL called when it ends."`
	Idempotency string            `json:"idempotencyKey,omitempty" jsonschema:"Makes resubmission safe: the same agent and key return the original task."`
	Labels      map[string]string `json:"labels,omitempty" jsonschema:"Free-form labels."`
	QueueMode   string            `json:"queueMode,omitempty" jsonschema:"ENQUEUE (default) or INTERRUPT (cancel what the session runs and go first)."`
	Exhausted   string            `json:"exhausted,omitempty" jsonschema:"What it becomes when its retries are spent: PARK (PARKED until an operator resets it) or FAIL (FAILED); default the lane's."`
}

// ActionInput is a task's browser interaction.
type ActionInput struct {
	Kind     string         `json:"kind" jsonschema:"navigate, click, dblclick, hover, focus, fill, type, press, select, check, uncheck, scroll, text, snapshot, screenshot, pdf, evaluate, close, …"`
	Ref      string         `json:"ref,omitempty" jsonschema:"A ref from a snapshot (e12)."`
	Selector string         `json:"selector,omitempty" jsonschema:"A selector: css:#go, a bare CSS selector, xpath://button, text:Go."`
	Params   map[string]any `json:"params,omitempty" jsonschema:"Kind-specific parameters, e.g. {\"url\": \"https://example.com\"} or {\"text\": \"hello\"}."`
}

// RetryInput is a task's own retry policy.
type RetryInput struct {
	MaxAttempts  int      `json:"maxAttempts" jsonschema:"The attempt budget, the first included (1..100)."`
	BackoffMs    *int     `json:"backoffMs,omitempty"`
	Multiplier   *float64 `json:"multiplier,omitempty"`
	MaxBackoffMs *int     `json:"maxBackoffMs,omitempty"`
	Jitter       *bool    `json:"jitter,omitempty"`
}

// IDInput names a task.
type IDInput struct {
	ID string `json:"id" jsonschema:"The task's id."`
}

// CancelInput names a task to cancel and why.
type CancelInput struct {
	ID     string `json:"id" jsonschema:"The task's id."`
	Reason string `json:"reason,omitempty" jsonschema:"Why (recorded with the cancellation)."`
}

// ListOutput is list_tasks' structured content: "tasks" is always there,
// [] when none match.
type ListOutput struct {
	Tasks []TaskView `json:"tasks" jsonschema:"The tasks, newest first."`
	Next  string     `json:"next,omitempty" jsonschema:"Pass as 'after' for the next page."`
	Error *ToolError `json:"error,omitempty" jsonschema:"Why the call failed, when it did."`
}

var listSchema = func() *jsonschema.Schema {
	s, err := jsonschema.For[ListOutput](&jsonschema.ForOptions{IgnoreInvalidTypes: true})
	if err != nil {
		panic(err)
	}
	return s
}()

// listFailure answers a list_tasks call that failed: no tasks, and why.
func listFailure(err error) (*sdk.CallToolResult, *ListOutput, error) {
	res, out, _ := failure(err)
	return res, &ListOutput{Tasks: []TaskView{}, Error: out.Error}, nil
}

// ListInput filters the caller's tasks.
type ListInput struct {
	States  []string `json:"states,omitempty" jsonschema:"Only tasks in these states (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, …)."`
	Session string   `json:"session,omitempty" jsonschema:"Only this session's tasks."`
	First   int      `json:"first,omitempty" jsonschema:"Page size, 1..100 (default 20)."`
	After   string   `json:"after,omitempty" jsonschema:"The 'next' cursor of the previous page."`
}

// SessionInput names a browser session.
type SessionInput struct {
	Session string `json:"session,omitempty" jsonschema:"The session; default this MCP session's current one."`
}

// TaskView is a task in structured content and in its resource.
type TaskView struct {
	ID         string            `json:"id"`
	AgentID    string            `json:"agentId"`
	Lane       string            `json:"lane"`
	Session    string            `json:"session,omitempty"`
	State      string            `json:"state"`
	Reason     string            `json:"reason,omitempty"`
	Kind       string            `json:"kind,omitempty"`
	Selector   string            `json:"selector,omitempty"`
	Position   *int              `json:"position,omitempty" jsonschema:"When QUEUED: how many tasks are ahead of it in its (lane, agent) queue (0: it is next), as GraphQL's Task.position."`
	Attempts   int               `json:"attempts"`
	Instance   string            `json:"instanceId,omitempty"`
	Result     any               `json:"result,omitempty"`
	Error      string            `json:"error,omitempty"`
	ErrorClass string            `json:"errorClass,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	CreatedAt  time.Time         `json:"createdAt"`
	EndedAt    *time.Time        `json:"endedAt,omitempty"`
}

// viewOf returns a task's view.
func viewOf(t *engine.Task) TaskView {
	v := TaskView{ID: t.ID, AgentID: t.Spec.AgentID, Lane: t.Spec.Lane, Session: t.Spec.Session(), State: t.State.String(),
		Reason: t.Reason, Attempts: len(t.Attempts), Error: t.Error, Labels: t.Spec.Labels, CreatedAt: t.CreatedAt}
	if v.Lane == "" {
		v.Lane = "main"
	}
	if a := t.Spec.Action; a != nil {
		v.Kind, v.Selector = a.Kind, a.Selector
	}
	if t.State == engine.StateQueued && t.Position >= 0 {
		v.Position = &t.Position
	}
	if n := len(t.Attempts); n > 0 {
		v.Instance = t.Attempts[n-1].InstanceID
	}
	if len(t.Result) > 0 {
		_ = json.Unmarshal(t.Result, &v.Result)
	}
	if t.Class != policy.ClassNone {
		v.ErrorClass = strings.ToUpper(t.Class.String())
	}
	if !t.EndedAt.IsZero() {
		v.EndedAt = &t.EndedAt
	}
	return v
}

// addTools registers every tool.
func (s *Server) addTools() error {
	for _, bt := range browserTools {
		if err := s.addBrowserTool(bt); err != nil {
			return err
		}
	}
	open := func(title string, ro, destructive bool) *sdk.ToolAnnotations {
		return &sdk.ToolAnnotations{Title: title, ReadOnlyHint: ro, DestructiveHint: &destructive}
	}
	submitSchema, err := jsonschema.For[SubmitInput](nil)
	if err != nil {
		return fmt.Errorf("mcp: submit_task schema: %w", err)
	}
	submitSchema.Properties["priority"].Enum = []any{"CRITICAL", "HIGH", "NORMAL", "LOW"}
	submitSchema.Properties["queueMode"].Enum = []any{"ENQUEUE", "INTERRUPT"}
	submitSchema.Properties["exhausted"].Enum = []any{"PARK", "FAIL"}
	if err := addAuditedTool(s.mcp, &sdk.Tool{Name: "submit_task", Title: "Submit a task",
		Description: `Submit any task without waiting for it (GraphQL's SubmitTaskInput); returns its id at once. Follow it with get_task or the resource switchyard://tasks/{id}. Example: {"action": {"kind": "navigate", "params": {"url": "https://example.com"}}, "sessionKey": "research-1", "idempotencyKey": "step-1"}.`,
		InputSchema: submitSchema, OutputSchema: outputSchema(), Annotations: open("Submit a task", false, false)}, s.submitTask, s.failure, s.refusedCall("submit_task")); err != nil {
		return err
	}
	if err := addTool(s.mcp, &sdk.Tool{Name: "get_task", Title: "Read a task",
		Description:  `A task's state and result. Example: {"id": "01J…"}.`,
		OutputSchema: outputSchema(), Annotations: open("Read a task", true, false)}, s.getTask, s.failure); err != nil {
		return err
	}
	if err := addTool(s.mcp, &sdk.Tool{Name: "list_tasks", Title: "List my tasks",
		Description:  listHelp + ` Example: {"states": ["QUEUED", "RUNNING"], "first": 20}.`,
		OutputSchema: listSchema.CloneSchemas(), Annotations: open("List my tasks", true, false)}, s.listTasks, s.listFailure); err != nil {
		return err
	}
	if err := addAuditedTool(s.mcp, &sdk.Tool{Name: "cancel_task", Title: "Cancel a task",
		Description:  `Cancel a task of yours (queued, waiting or running). Example: {"id": "01J…", "reason": "no longer needed"}.`,
		OutputSchema: outputSchema(), Annotations: open("Cancel a task", false, true)}, s.cancelTask, s.failure, s.refusedCall("cancel_task")); err != nil {
		return err
	}
	if err := addTool(s.mcp, &sdk.Tool{Name: "open_session", Title: "Open a fresh browser session",
		Description:  `Start a fresh browser session (a new tab on its first call) and make it this MCP session's current one: later browser calls without "session" run there. Returns its key.`,
		OutputSchema: outputSchema(), Annotations: open("Open a fresh browser session", false, false)}, s.openSession, s.failure); err != nil {
		return err
	}
	if err := addTool(s.mcp, &sdk.Tool{Name: "close_session", Title: "Close a browser session",
		Description:  `Close a browser session's tab, after the calls queued in it. Default: this MCP session's current session (a fresh one replaces it). A session with no tab (nothing ran in it, or it was closed) is left alone: the answer says so, with result {"closed": false}. Example: {"session": "mcp-…"}.`,
		OutputSchema: outputSchema(), Annotations: open("Close a browser session", false, true)}, s.closeSession, s.failure); err != nil {
		return err
	}
	return nil
}

func (s *Server) submitTask(ctx context.Context, req *sdk.CallToolRequest, in SubmitInput) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err != nil {
		return s.failure(ctx, err)
	}
	gin, err := s.graphInput(c, &in)
	if err != nil {
		s.record(c, "submit_task", "", err)
		return s.failure(ctx, err)
	}
	if err := s.allow(c, "Mutation", "submitTask"); err != nil {
		s.record(c, "submit_task", "", err)
		return s.failure(ctx, err)
	}
	mt, replayed, err := s.opts.Mutations.SubmitTask(c.ctx(ctx), gin)
	if err != nil {
		s.record(c, "submit_task", "", err)
		return s.failure(ctx, err)
	}
	s.record(c, "submit_task", mt.T.ID, nil)
	t := mt.T
	v := viewOf(t)
	msg := fmt.Sprintf("submitted task %s (%s)", t.ID, t.State)
	if replayed {
		msg = fmt.Sprintf("idempotency key %q names task %s, submitted before: nothing new was submitted; it is %s", in.Idempotency, t.ID, t.State)
	}
	return text(msg), &Output{TaskID: t.ID, State: t.State.String(), Session: t.Spec.Session(), Tasks: []TaskView{v}}, nil
}

// graphInput converts submit_task's input into GraphQL's.
func (s *Server) graphInput(c *caller, in *SubmitInput) (model.SubmitTaskInput, error) {
	out := model.SubmitTaskInput{AgentID: c.agent, DependsOn: in.DependsOn}
	if in.AgentID != "" {
		out.AgentID = in.AgentID
	}
	str := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	out.Lane, out.SessionKey, out.Instruction = str(in.Lane), str(in.SessionKey), str(in.Instruction)
	if out.Lane == nil && s.opts.Lane != "" {
		out.Lane = &s.opts.Lane
	}
	out.TabID, out.InstanceID, out.ParentID = str(in.TabID), str(in.InstanceID), str(in.ParentID)
	out.WebhookURL, out.IdempotencyKey = str(in.WebhookURL), str(in.Idempotency)
	if in.Priority != "" {
		p, ok := map[string]engine.Priority{"CRITICAL": engine.PriorityCritical, "HIGH": engine.PriorityHigh,
			"NORMAL": engine.PriorityNormal, "LOW": engine.PriorityLow}[in.Priority]
		if !ok {
			return out, invalid("priority", "%q is not CRITICAL, HIGH, NORMAL or LOW", in.Priority)
		}
		out.Priority = &p
	}
	if in.QueueMode != "" {
		m, ok := map[string]engine.QueueMode{"ENQUEUE": engine.QueueEnqueue, "INTERRUPT": engine.QueueInterrupt,
			"INTERRUPT_DRAIN": engine.QueueInterruptDrain}[in.QueueMode]
		if !ok {
			return out, invalid("queueMode", "%q is not ENQUEUE, INTERRUPT or INTERRUPT_DRAIN", in.QueueMode)
		}
		out.QueueMode = &m
	}
	if in.Exhausted != "" {
		x, ok := map[string]engine.Exhausted{"PARK": engine.ExhaustedPark, "FAIL": engine.ExhaustedFail}[in.Exhausted]
		if !ok {
			return out, invalid("exhausted", "%q is not PARK or FAIL", in.Exhausted)
		}
		out.Exhausted = &x
	}
	if in.Deadline != "" {
		d, err := time.Parse(time.RFC3339Nano, in.Deadline)
		if err != nil {
			return out, invalid("deadline", "%q is not an RFC 3339 time", in.Deadline)
		}
		out.Deadline = &d
	}
	if in.TimeoutMs != 0 {
		out.TimeoutMs = &in.TimeoutMs
	}
	if r := in.RetryPolicy; r != nil {
		out.RetryPolicy = &model.RetryPolicyInput{MaxAttempts: r.MaxAttempts, BackoffMs: r.BackoffMs, Multiplier: r.Multiplier,
			MaxBackoffMs: r.MaxBackoffMs, Jitter: r.Jitter}
	}
	for k, v := range in.Labels {
		out.Labels = append(out.Labels, &model.LabelInput{Key: k, Value: v})
	}
	if a := in.Action; a != nil {
		sel := a.Selector
		if sel == "" {
			sel = a.Ref
		}
		if err := checkSelector("action.selector", sel); err != nil {
			return out, err
		}
		out.Action = &model.ActionInput{Kind: a.Kind, Ref: str(a.Ref), Selector: str(a.Selector)}
		if a.Params != nil {
			raw, err := json.Marshal(a.Params)
			if err != nil {
				return out, invalid("action.params", "%v", err)
			}
			out.Action.Params = raw
		}
	}
	return out, nil
}

func (s *Server) getTask(ctx context.Context, req *sdk.CallToolRequest, in IDInput) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err == nil {
		err = s.allow(c, "Query", "task")
	}
	if err != nil {
		return s.failure(ctx, err)
	}
	mt, err := s.opts.Queries.Task(c.ctx(ctx), in.ID)
	if err != nil {
		return s.failure(ctx, err)
	}
	v := viewOf(mt.T)
	return jsonText(v), &Output{TaskID: v.ID, State: v.State, Session: v.Session, Instance: v.Instance, Result: v.Result, Tasks: []TaskView{v}}, nil
}

// listHelp says whose tasks list_tasks lists.
const listHelp = `Your agent's tasks, newest first ({"tasks": []} when none match): an agent token's own; else those of the agent the X-Switchyard-Agent header names; else, without authentication, those of your MCP client's name. A token without an agent (reader, operator, admin) that names none lists every task, as GraphQL's tasks query does for its role.`

func (s *Server) listTasks(ctx context.Context, req *sdk.CallToolRequest, in ListInput) (*sdk.CallToolResult, *ListOutput, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err == nil {
		err = s.allow(c, "Query", "tasks")
	}
	if err != nil {
		return s.listFailure(ctx, err)
	}
	f := &model.TaskFilter{}
	switch {
	case c.id.Agent() != "":
		// Narrowed to the token's agent by the resolvers.
	case c.named || !s.opts.Auth.Enabled():
		f.AgentID = &c.agent
	}
	if in.Session != "" {
		f.SessionKey = &in.Session
	}
	for i, name := range in.States {
		st, ok := engine.ParseState(name)
		if !ok {
			return s.listFailure(ctx, invalid(fmt.Sprintf("states.%d", i), "%q is not a task state (QUEUED, WAITING, ASSIGNED, RUNNING, RETRY_WAIT, SUCCEEDED, FAILED, PARKED, CANCELLED, REJECTED, EXPIRED)", name))
		}
		f.States = append(f.States, st)
	}
	first := 20
	if in.First != 0 {
		first = in.First
	}
	if first < 1 || first > 100 {
		return s.listFailure(ctx, invalid("first", "must be within 1..100, got %d", first))
	}
	var after *string
	if in.After != "" {
		after = &in.After
	}
	conn, err := s.opts.Queries.Tasks(c.ctx(ctx), f, &first, after, nil)
	if err != nil {
		return s.listFailure(ctx, err)
	}
	out := &ListOutput{Tasks: []TaskView{}}
	for _, e := range conn.Edges {
		out.Tasks = append(out.Tasks, viewOf(e.Node.T))
	}
	if pi := conn.PageInfo; pi != nil && pi.HasNextPage && pi.EndCursor != nil {
		out.Next = *pi.EndCursor
	}
	return jsonText(out), out, nil
}

func (s *Server) cancelTask(ctx context.Context, req *sdk.CallToolRequest, in CancelInput) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err != nil {
		return s.failure(ctx, err)
	}
	if err := s.allow(c, "Mutation", "cancelTask"); err != nil {
		s.record(c, "cancel_task", in.ID, err)
		return s.failure(ctx, err)
	}
	var reason *string
	if in.Reason != "" {
		reason = &in.Reason
	}
	mt, err := s.opts.Mutations.CancelTask(c.ctx(ctx), in.ID, reason)
	s.record(c, "cancel_task", in.ID, err)
	if err != nil {
		return s.failure(ctx, err)
	}
	return text(fmt.Sprintf("task %s is %s", mt.T.ID, mt.T.State)), &Output{TaskID: mt.T.ID, State: mt.T.State.String()}, nil
}

func (s *Server) openSession(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err == nil {
		err = s.allow(c, "Mutation", "submitTask")
	}
	if err != nil {
		return s.failure(ctx, err)
	}
	key := newSessionKey()
	s.setSession(c.mcpID, key)
	return text(fmt.Sprintf("browser session %s is now this MCP session's current one (its tab opens on the first call)", key)), &Output{Session: key}, nil
}

func (s *Server) closeSession(ctx context.Context, req *sdk.CallToolRequest, in SessionInput) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err != nil {
		return s.failure(ctx, err)
	}
	key := c.session
	if in.Session != "" {
		key = in.Session
	}
	// A session with no tab is not opened to be closed: one where nothing
	// ran, or whose last task closed its tab.
	if open, err := s.hasTab(ctx, c, key); err != nil {
		return s.failure(ctx, err)
	} else if !open {
		return text(fmt.Sprintf("no browser session %q with a tab of agent %s: nothing to close", key, c.agent)),
			&Output{Session: key, Result: map[string]any{"closed": false}}, nil
	}
	gin := model.SubmitTaskInput{AgentID: c.agent, SessionKey: &key, Action: &model.ActionInput{Kind: "close"},
		Exhausted: failExhausted(), Labels: []*model.LabelInput{{Key: "via", Value: "mcp"}}}
	if s.opts.Lane != "" {
		gin.Lane = &s.opts.Lane
	}
	res, out, err := s.submitAndWait(ctx, req, c, "close_session", gin)
	if key == c.session && !res.IsError {
		s.setSession(c.mcpID, newSessionKey())
	}
	return res, out, err
}

// hasTab reports whether the caller's agent has browser session key open
// as far as its tasks tell: some task of the agent ran or waits in it, and
// the newest is not a close that succeeded.
func (s *Server) hasTab(ctx context.Context, c *caller, key string) (bool, error) {
	first := 1
	conn, err := s.opts.Queries.Tasks(c.ctx(ctx), &model.TaskFilter{AgentID: &c.agent, SessionKey: &key}, &first, nil, nil)
	if err != nil {
		return false, err
	}
	if len(conn.Edges) == 0 {
		return false, nil
	}
	t := conn.Edges[0].Node.T
	closed := t.State == engine.StateSucceeded && t.Spec.Action != nil && strings.EqualFold(t.Spec.Action.Kind, "close")
	return !closed, nil
}

// text is a plain text result.
func text(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}

// jsonText is a result whose text is v's JSON.
func jsonText(v any) *sdk.CallToolResult {
	b, err := json.Marshal(v)
	if err != nil {
		return text(fmt.Sprint(v))
	}
	return text(string(b))
}
