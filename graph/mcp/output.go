// What a tool answers: a finished task as MCP content (text, an image for a
// screenshot) with the task in the structured content, or an error result
// whose structured content carries the code.

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/internal/requestid"
	"github.com/switchyard/switchyard/internal/storeerr"
)

// Output is the structured content of every task tool.
type Output struct {
	TaskID   string `json:"taskId,omitempty" jsonschema:"The task's id (its resource: switchyard://tasks/{id})."`
	State    string `json:"state,omitempty" jsonschema:"The task's state: SUCCEEDED, FAILED, CANCELLED, QUEUED, …"`
	Session  string `json:"session,omitempty" jsonschema:"The browser session it ran in."`
	Instance string `json:"instanceId,omitempty" jsonschema:"The browser instance it ran on."`
	Tab      string `json:"tabId,omitempty" jsonschema:"The tab it ran in."`
	// Result is the instance's answer (for a screenshot, the artifact's
	// reference).
	Result any `json:"result,omitempty" jsonschema:"The instance's answer, as JSON."`
	// Tasks is a listing's page.
	Tasks []TaskView `json:"tasks,omitempty" jsonschema:"The tasks of a listing, newest first."`
	// Next is the cursor of a listing's next page.
	Next  string     `json:"next,omitempty" jsonschema:"Pass as 'after' for the next page."`
	Error *ToolError `json:"error,omitempty" jsonschema:"Why the call failed, when it did."`
}

// ToolError is the structured error of a failed call.
type ToolError struct {
	// Code is the API's error code (INVALID_INPUT, FORBIDDEN, RATE_LIMITED,
	// QUEUE_FULL, …) or, for a task that ended badly, its state (FAILED,
	// CANCELLED, EXPIRED, REJECTED, PARKED).
	Code      string `json:"code" jsonschema:"INVALID_INPUT, FORBIDDEN, RATE_LIMITED, QUEUE_FULL, NOT_FOUND, … or the task's end state: FAILED, CANCELLED, EXPIRED, REJECTED, PARKED."`
	Message   string `json:"message" jsonschema:"What went wrong."`
	Field     string `json:"field,omitempty" jsonschema:"The argument at fault."`
	Retryable bool   `json:"retryable" jsonschema:"Whether the same call may succeed later."`
	// ErrorClass is the task's error class (TRANSIENT, PERMANENT, CANCELLED).
	ErrorClass string `json:"errorClass,omitempty" jsonschema:"The task's error class: TRANSIENT, PERMANENT or CANCELLED."`
	HTTPStatus int    `json:"httpStatus,omitempty" jsonschema:"The browser instance's HTTP status."`
	// InstanceCode is the browser instance's own code (element_not_found,
	// bad_selector, …).
	InstanceCode string `json:"instanceCode,omitempty" jsonschema:"The browser instance's own error code (element_not_found, bad_selector, …)."`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty" jsonschema:"For RATE_LIMITED: when to retry."`
	// RequestID names the call's HTTP request in the server's log, when
	// the cause was held back (a store error told in general terms).
	RequestID string `json:"requestId,omitempty" jsonschema:"When the cause was held back (the database's failure, told in general terms): the request's id, which the server's log line for it carries."`
}

var outSchema = func() *jsonschema.Schema {
	s, err := jsonschema.For[Output](&jsonschema.ForOptions{IgnoreInvalidTypes: true})
	if err != nil {
		panic(err)
	}
	return s
}()

func outputSchema() *jsonschema.Schema { return outSchema.CloneSchemas() }

// failure answers a failed call as the function failure does, and logs
// the full error of a store error told in general terms (storeerr.Log:
// the first of a kind, then once a minute while they go on); the answer
// then names the call's request (its text and error.requestId), as the log
// line does (request_id).
func (s *Server) failure(ctx context.Context, err error) (*sdk.CallToolResult, *Output, error) {
	id := s.withhold(ctx, err)
	res, out, _ := failure(err)
	withRequestID(res, out.Error, id)
	return res, out, nil
}

// listFailure answers as the function listFailure does, and logs as
// Server.failure does.
func (s *Server) listFailure(ctx context.Context, err error) (*sdk.CallToolResult, *ListOutput, error) {
	id := s.withhold(ctx, err)
	res, out, _ := listFailure(err)
	withRequestID(res, out.Error, id)
	return res, out, nil
}

// resourceError answers as the function resourceError does, and logs as
// Server.failure does; the JSON-RPC error then names the request (its
// message, and requestId in its data).
func (s *Server) resourceError(ctx context.Context, uri string, err error) error {
	id := s.withhold(ctx, err)
	rerr := resourceError(uri, err)
	var rpc *jsonrpc.Error
	if id != "" && errors.As(rerr, &rpc) {
		data := map[string]any{}
		_ = json.Unmarshal(rpc.Data, &data)
		data["requestId"] = id
		raw, _ := json.Marshal(data)
		return &jsonrpc.Error{Code: rpc.Code, Message: rpc.Message + requestIDText(id), Data: raw}
	}
	return rerr
}

// withhold logs the full error of a store error told in general terms
// (storeerr.Log), with the id of the call's request, which it returns; ""
// for other errors, whose words the client reads in full.
func (s *Server) withhold(ctx context.Context, err error) string {
	if !storeerr.IsStore(err) {
		return ""
	}
	id := requestid.ID(ctx)
	s.withheld.Withheld(s.log, "mcp", id, err)
	return id
}

// withRequestID names the request of a failed call whose detail was held
// back: in its text and in its structured error.
func withRequestID(res *sdk.CallToolResult, te *ToolError, id string) {
	if id == "" || te == nil {
		return
	}
	te.RequestID = id
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			t.Text += requestIDText(id)
		}
	}
}

func requestIDText(id string) string { return " (request id " + id + ")" }

// withCallRequest gives a call's context its HTTP request's id: the SDK
// runs a handler in the MCP session's context, not its request's, but
// passes the request's header, where the server put the id (graph/server);
// an id that is not sane is not taken, and one is made if need be.
func withCallRequest(ctx context.Context, extra *sdk.RequestExtra) context.Context {
	var h http.Header
	if extra != nil {
		h = extra.Header
	}
	return requestid.WithID(ctx, h.Get(requestid.Header))
}

// failure answers a call that failed with an error result (isError), its
// code in the structured content.
func failure(err error) (*sdk.CallToolResult, *Output, error) {
	te := toolError(err)
	msg := te.Code + ": " + te.Message
	if te.Field != "" {
		msg = te.Code + ": " + te.Field + ": " + te.Message
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}, &Output{Error: te}, nil
}

// toolError converts an error of the resolvers, the access checks or the
// tools into a ToolError.
func toolError(err error) *ToolError {
	var rl *rateLimited
	if errors.As(err, &rl) {
		return &ToolError{Code: auth.CodeRateLimited, Message: rl.Error(), Retryable: true, RetryAfterMs: auth.RetryAfterMs(rl.wait)}
	}
	var cc *callCancelled
	if errors.As(err, &cc) {
		return &ToolError{Code: "CANCELLED", Message: cc.Error()}
	}
	// A store error is told in general terms, as GraphQL tells it
	// (resolvers.Message): not the database's address or file.
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &ToolError{Code: "CANCELLED", Message: resolvers.Message(err)}
	}
	var ee *engine.Error
	if !errors.As(err, &ee) {
		return &ToolError{Code: string(model.CodeInternal), Message: resolvers.Message(err)}
	}
	ext := resolvers.Extensions(ee)
	te := &ToolError{Code: string(ee.Code), Message: ee.Message, Retryable: ee.Retryable}
	if f, ok := ext["field"].(string); ok {
		// The resolvers name fields of SubmitTaskInput ("input.action.selector").
		te.Field = strings.TrimPrefix(f, "input.")
	}
	if ee.Err != nil && ee.Message == "" {
		te.Message = resolvers.Message(ee.Err)
	} else if ee.Err != nil && storeerr.IsStore(ee.Err) {
		// The store's failure says whether a retry may help.
		te.Message += ": " + resolvers.Message(ee.Err)
	}
	return te
}

// codeOf is the code of an error, for the audit log.
func codeOf(err error) string { return toolError(err).Code }

// instanceCode finds the instance's error code in a task's error
// ("… 404 Not Found [element_not_found]: …").
var instanceCode = regexp.MustCompile(`\[([a-z][a-z0-9_]*)\]`)

// answer turns a task that stopped waiting into the call's result.
func (s *Server) answer(ctx context.Context, c *caller, tool string, t *engine.Task) (*sdk.CallToolResult, *Output, error) {
	out := &Output{TaskID: t.ID, State: t.State.String(), Session: t.Spec.Session()}
	if n := len(t.Attempts); n > 0 {
		out.Instance, out.Tab = t.Attempts[n-1].InstanceID, t.Attempts[n-1].TabID
	}
	if t.State != engine.StateSucceeded {
		te := &ToolError{Code: t.State.String(), Message: taskMessage(t), Retryable: t.State != engine.StateRejected && t.Class == policy.ClassTransient}
		if t.Class != policy.ClassNone {
			te.ErrorClass = strings.ToUpper(t.Class.String())
		}
		if n := len(t.Attempts); n > 0 {
			te.HTTPStatus = t.Attempts[n-1].HTTPStatus
		}
		if m := instanceCode.FindStringSubmatch(t.Error); m != nil {
			te.InstanceCode = m[1]
		}
		out.Error = te
		text := fmt.Sprintf("%s: task %s %s", te.Code, t.ID, te.Message)
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}, out, nil
	}
	var res any
	if len(t.Result) > 0 {
		_ = json.Unmarshal(t.Result, &res)
	}
	out.Result = res
	content, err := s.content(ctx, c, tool, t.Result)
	if err != nil {
		return s.failure(ctx, err)
	}
	return &sdk.CallToolResult{Content: content}, out, nil
}

// taskMessage says why a task did not succeed.
func taskMessage(t *engine.Task) string {
	switch {
	case t.Error != "" && strings.Contains(t.Reason, t.Error):
		return t.Reason // "retry budget spent: <the error>"
	case t.Error != "" && t.Reason != "" && !strings.Contains(t.Error, t.Reason):
		return t.Reason + ": " + t.Error
	case t.Error != "":
		return t.Error
	case t.Reason != "":
		return t.Reason
	}
	return strings.ToLower(t.State.String())
}

// artifactRef is the reference a result carries to an artifact.
type artifactRef struct {
	Artifact *struct {
		ID          string `json:"id"`
		ContentType string `json:"contentType"`
		Size        int64  `json:"size"`
	} `json:"artifact"`
	Kind string `json:"kind"`
}

// maxInlineImage bounds the image a tool result carries (a bigger one is a
// resource link only).
const maxInlineImage = 8 << 20

// content renders a task's result: an image for a screenshot, the artifact's
// JSON for a large result, the page text for text, the JSON otherwise.
func (s *Server) content(ctx context.Context, c *caller, tool string, result json.RawMessage) ([]sdk.Content, error) {
	var ref artifactRef
	if len(result) > 0 && result[0] == '{' && json.Unmarshal(result, &ref) == nil && ref.Artifact != nil && ref.Artifact.ID != "" {
		a := ref.Artifact
		link := &sdk.ResourceLink{URI: artifactURI(a.ID), Name: a.ID, MIMEType: a.ContentType, Size: &a.Size}
		data, err := s.readArtifact(ctx, a.ID, a.Size)
		if err != nil {
			return nil, err
		}
		switch {
		case data == nil:
			return []sdk.Content{link}, nil
		case strings.HasPrefix(a.ContentType, "image/"):
			return []sdk.Content{&sdk.ImageContent{Data: data, MIMEType: a.ContentType}, link}, nil
		case a.ContentType == "application/json":
			return s.content(ctx, c, tool, data)
		}
		return []sdk.Content{link}, nil
	}
	if tool == "snapshot" {
		if txt, ok := renderSnapshot(result); ok {
			return []sdk.Content{&sdk.TextContent{Text: txt}}, nil
		}
	}
	if tool == "text" {
		var page struct {
			Text       *string `json:"text"`
			Truncated  bool    `json:"truncated"`
			TotalChars int     `json:"totalChars"`
		}
		if json.Unmarshal(result, &page) == nil && page.Text != nil {
			text := *page.Text
			if page.Truncated && page.TotalChars > 0 {
				// Said in the text too: a model reads that, not the
				// structured content.
				text += fmt.Sprintf("\n\n[truncated: the first %d of %d characters; ask for more with maxChars (at most %d), or read one element with a selector]",
					utf8.RuneCountInString(*page.Text), page.TotalChars, executor.TextMaxChars)
			}
			return []sdk.Content{&sdk.TextContent{Text: text}}, nil
		}
	}
	return []sdk.Content{&sdk.TextContent{Text: string(result)}}, nil
}

// readArtifact reads an artifact's bytes for a result, nil when there is no
// store or it is too large to inline.
func (s *Server) readArtifact(ctx context.Context, id string, size int64) ([]byte, error) {
	if s.opts.Artifacts == nil || size > maxInlineImage {
		return nil, nil
	}
	_, body, err := s.opts.Artifacts.Open(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read artifact %s: %w", id, err)
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, maxInlineImage+1))
	if err != nil {
		return nil, fmt.Errorf("read artifact %s: %w", id, err)
	}
	return data, nil
}

// snapshotNode is one node of a snapshot (PinchTab's shape).
type snapshotNode struct {
	Ref      string `json:"ref"`
	Role     string `json:"role"`
	Name     string `json:"name"`
	Depth    int    `json:"depth"`
	Value    string `json:"value"`
	Disabled bool   `json:"disabled"`
	Focused  bool   `json:"focused"`
	Checked  string `json:"checked"`
}

// renderSnapshot writes a snapshot as an indented outline a model reads at
// a glance, one node a line with its ref first:
//
//	page "Greeter" https://example.com/
//	e1 heading "Welcome"
//	  e2 textbox "Name" value="Ada"
//	  e3 button "Go"
//
// A snapshot cut short (the built-in Chromium bounds them) says so on a
// last line. The structured content keeps the instance's JSON.
func renderSnapshot(result json.RawMessage) (string, bool) {
	var snap struct {
		URL        string         `json:"url"`
		Title      string         `json:"title"`
		Nodes      []snapshotNode `json:"nodes"`
		Truncated  bool           `json:"truncated"`
		TotalNodes int            `json:"totalNodes"`
		Source     string         `json:"source"`
	}
	if json.Unmarshal(result, &snap) != nil || snap.Nodes == nil {
		return "", false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "page %q %s\n", snap.Title, snap.URL)
	for _, n := range snap.Nodes {
		b.WriteString(strings.Repeat("  ", min(max(n.Depth, 0), 40)))
		b.WriteString(n.Ref)
		b.WriteByte(' ')
		b.WriteString(n.Role)
		if n.Name != "" {
			fmt.Fprintf(&b, " %q", n.Name)
		}
		if n.Value != "" {
			fmt.Fprintf(&b, " value=%q", n.Value)
		}
		if n.Checked != "" {
			b.WriteString(" checked=" + n.Checked)
		}
		if n.Disabled {
			b.WriteString(" disabled")
		}
		if n.Focused {
			b.WriteString(" focused")
		}
		b.WriteByte('\n')
	}
	if snap.Truncated && snap.TotalNodes > 0 {
		// Said in the text, as a text cut short is: a model reads that.
		fmt.Fprintf(&b, "\n[truncated: the first %d of %d nodes; ask for interactive elements only, or read one element with text and a selector]\n",
			len(snap.Nodes), snap.TotalNodes)
	}
	if snap.Source == "dom" {
		b.WriteString("[the page is too large for its accessibility tree: roles and names were read from its elements]\n")
	}
	return b.String(), true
}
