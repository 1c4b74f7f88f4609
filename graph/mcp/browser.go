// The browser tools: one task each, in the caller's browser session. Their
// names, descriptions and input schemas are what a model reads to use them,
// so each says what it does, the selector syntax and an example.

package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/model"
)

// selectorHelp is the selector syntax, in every tool that takes one.
const selectorHelp = `The element: a CSS selector ("#email", "button.primary", or "css:#email"), an XPath ("xpath://button[@type='submit']" or "//button"), visible text ("text:Sign in"), or a ref from the last snapshot ("e12").`

// Common are the arguments every browser tool takes.
type Common struct {
	Session   string `json:"session,omitempty" jsonschema:"The browser session (tab) to run in; default this MCP session's own. Calls in one session run in order in one tab."`
	TimeoutMs int    `json:"timeoutMs,omitempty" jsonschema:"Per-attempt timeout in milliseconds (1..86400000); default the lane's."`
}

// Args are the arguments of the browser tools; each tool's schema lists only
// the fields it uses.
type Args struct {
	Common
	URL        string   `json:"url,omitempty"`
	Selector   string   `json:"selector,omitempty"`
	Text       string   `json:"text,omitempty"`
	Value      string   `json:"value,omitempty"`
	Key        string   `json:"key,omitempty"`
	Expression string   `json:"expression,omitempty"`
	DeltaY     *float64 `json:"deltaY,omitempty"`
	Format     string   `json:"format,omitempty"`
	Quality    int      `json:"quality,omitempty"`
	FullPage   bool     `json:"fullPage,omitempty"`
	// Interactive limits a snapshot to interactive elements.
	Interactive bool `json:"interactive,omitempty"`
	// WaitNav says a click may navigate (PinchTab waits for the new page).
	WaitNav bool `json:"waitNav,omitempty"`
	// The conditions of wait.
	Load string `json:"load,omitempty"`
	Ms   int    `json:"ms,omitempty"`
	// WaitTimeoutMs is how long the instance waits for the condition
	// (the wait's own timeout).
	WaitTimeoutMs int `json:"waitTimeoutMs,omitempty"`
	// MaxChars bounds the text tool's text (default textMaxChars).
	MaxChars int `json:"maxChars,omitempty"`
	// MaxNodes bounds the snapshot tool's nodes (default and most
	// executor.SnapshotMaxNodes); a pointer, so that 0 is refused as
	// GraphQL refuses it rather than taken for the default.
	MaxNodes *int `json:"maxNodes,omitempty"`
}

// textMaxChars is the text tool's default bound: a page's whole text can
// run to megabytes, more than a model's context should take unasked.
const textMaxChars = 100_000

// field describes one argument of a browser tool.
type field struct {
	name, typ, desc string
	required        bool
	enum            []any
	min, max        *float64
}

// browserTool is one browser tool: its name, the action kind it submits and
// how its arguments become the action.
type browserTool struct {
	name, kind, title, desc string
	fields                  []field
	readOnly                bool
	// build makes the action's selector and params; an error is
	// INVALID_INPUT naming the argument.
	build func(a *Args) (selector string, params map[string]any, err error)
}

func fnum(v float64) *float64 { return &v }

var (
	selectorField = field{name: "selector", typ: "string", desc: selectorHelp, required: true}
	optSelector   = field{name: "selector", typ: "string", desc: selectorHelp + " Optional."}
	textField     = field{name: "text", typ: "string", required: true}
)

// browserTools lists the browser tools. Their kinds are the instance API's
// (packages executor and executor/chromium).
var browserTools = []browserTool{
	{name: "navigate", kind: "navigate", title: "Open a URL",
		desc: `Open a URL in the session's tab (a new tab on the session's first call). Example: {"url": "https://example.com/login"}. Returns the page's URL and title, and its HTTP status ("status": 404 for a missing page, which is not an error) where the instance reports it (the built-in Chromium does, PinchTab does not).`,
		// The URL is checked as GraphQL's submitTask checks it
		// (executor.CheckAction, in callBrowser).
		fields: []field{{name: "url", typ: "string", desc: `An absolute http(s) URL, or an about: or data: URL ("about:blank", "data:text/html,<p>hi</p>").`, required: true}},
		build: func(a *Args) (string, map[string]any, error) {
			return "", map[string]any{"url": a.URL}, nil
		}},
	{name: "click", kind: "click", title: "Click an element",
		desc:   `Click an element the way a person would (mouse events at its centre). Set waitNav when the click opens another page. Example: {"selector": "text:Sign in", "waitNav": true}.`,
		fields: []field{selectorField, {name: "waitNav", typ: "boolean", desc: "The click may navigate: wait for the new page (PinchTab refuses a navigating click without it)."}},
		build: func(a *Args) (string, map[string]any, error) {
			if a.WaitNav {
				return a.Selector, map[string]any{"waitNav": true}, nil
			}
			return a.Selector, nil, nil
		}},
	{name: "hover", kind: "hover", title: "Hover over an element",
		desc:   `Move the mouse over an element. Example: {"selector": "#menu"}.`,
		fields: []field{selectorField},
		build:  selectorOnly},
	{name: "fill", kind: "fill", title: "Fill a field",
		desc:   `Set a form field's value at once (input and change events fire). Example: {"selector": "#email", "text": "ada@example.com"}. Use "type" for keystrokes.`,
		fields: []field{selectorField, withDesc(textField, `The value; "" clears the field.`)},
		build: func(a *Args) (string, map[string]any, error) {
			return a.Selector, map[string]any{"text": a.Text}, nil
		}},
	{name: "type", kind: "type", title: "Type text",
		desc:   `Focus an element and type text as key events. Example: {"selector": "#search", "text": "switchyard"}.`,
		fields: []field{selectorField, withDesc(textField, "The text to type.")},
		build: func(a *Args) (string, map[string]any, error) {
			if a.Text == "" {
				return "", nil, invalid("text", "is required (the text to type)")
			}
			return a.Selector, map[string]any{"text": a.Text}, nil
		}},
	{name: "press", kind: "press", title: "Press a key",
		desc:   `Press a key, in the focused element or in the one a selector names. Keys: Enter, Tab, Escape, Backspace, Delete, Space, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown, F1..F12, or one character. Example: {"key": "Enter", "selector": "#search"}.`,
		fields: []field{{name: "key", typ: "string", desc: `The key ("Enter", "Tab", "a").`, required: true}, optSelector},
		build: func(a *Args) (string, map[string]any, error) {
			return a.Selector, map[string]any{"key": a.Key}, nil
		}},
	{name: "select", kind: "select", title: "Choose an option",
		desc:   `Choose an option of a <select> by its value or its visible text. Example: {"selector": "#country", "value": "FR"}.`,
		fields: []field{selectorField, {name: "value", typ: "string", desc: "The option's value or visible text.", required: true}},
		build: func(a *Args) (string, map[string]any, error) {
			return a.Selector, map[string]any{"value": a.Value}, nil
		}},
	{name: "check", kind: "check", title: "Check a checkbox",
		desc:   `Check a checkbox or radio button (no change if it is checked). Example: {"selector": "#terms"}.`,
		fields: []field{selectorField},
		build:  selectorOnly},
	{name: "uncheck", kind: "uncheck", title: "Uncheck a checkbox",
		desc:   `Uncheck a checkbox (no change if it is unchecked). Example: {"selector": "#newsletter"}.`,
		fields: []field{selectorField},
		build:  selectorOnly},
	{name: "scroll", kind: "scroll", title: "Scroll",
		desc:   `Scroll an element into view, or the page by deltaY pixels (default 300). Examples: {"selector": "#footer"}, {"deltaY": 800}.`,
		fields: []field{optSelector, {name: "deltaY", typ: "number", desc: "Pixels to scroll the page down (negative: up) when no selector is given."}},
		build: func(a *Args) (string, map[string]any, error) {
			if a.Selector != "" {
				return a.Selector, nil, nil
			}
			dy := 300.0
			if a.DeltaY != nil {
				dy = *a.DeltaY
			}
			return "", map[string]any{"deltaY": dy}, nil
		}},
	{name: "text", kind: "text", title: "Read text", readOnly: true,
		desc:   `Read the visible text of the page, or of one element. Example: {"selector": "#result"}. At most maxChars characters (default 100000): a longer text is cut, and the result says "truncated": true with "totalChars".`,
		fields: []field{optSelector, {name: "maxChars", typ: "integer", desc: "The most characters of text to return, 1..1000000 (default 100000).", min: fnum(1), max: fnum(executor.TextMaxChars)}},
		build: func(a *Args) (string, map[string]any, error) {
			n := a.MaxChars
			if n == 0 {
				n = textMaxChars
			}
			return a.Selector, map[string]any{"maxChars": n}, nil
		}},
	{name: "snapshot", kind: "snapshot", title: "Snapshot the page", readOnly: true,
		desc: `The page's accessibility tree: one node per element with a ref ("e12"), its role and name. Use the refs as selectors in later calls of the same session. A snapshot has at most maxNodes nodes (default and most 10,000), and one cut short says so. Example: {"interactive": true, "maxNodes": 200}.`,
		fields: []field{{name: "interactive", typ: "boolean", desc: "Only interactive elements (links, buttons, fields)."},
			// No bounds in the schema: out of 1..10000 it is refused
			// by checkAction, in submitTask's words.
			{name: "maxNodes", typ: "integer", desc: "The most nodes to return, 1..10000 (default 10000)."}},
		build: func(a *Args) (string, map[string]any, error) {
			p := map[string]any{}
			if a.Interactive {
				p["filter"] = "interactive"
			}
			if a.MaxNodes != nil {
				p["maxNodes"] = *a.MaxNodes
			}
			return "", orNone(p), nil
		}},
	{name: "screenshot", kind: "screenshot", title: "Take a screenshot", readOnly: true,
		desc: `A screenshot of the page (or of one element), returned as an image. Example: {"format": "png"}.`,
		fields: []field{optSelector,
			{name: "format", typ: "string", desc: "png (default) or jpeg.", enum: []any{"png", "jpeg"}},
			{name: "quality", typ: "integer", desc: "JPEG quality, 1..100.", min: fnum(1), max: fnum(100)}},
		build: func(a *Args) (string, map[string]any, error) {
			p := map[string]any{}
			if a.Format != "" {
				p["format"] = a.Format
			}
			if a.Quality != 0 {
				p["quality"] = a.Quality
			}
			return a.Selector, orNone(p), nil
		}},
	{name: "back", kind: "back", title: "Go back",
		desc:   historyHelp("Go back one page in the tab's history", `{}`),
		fields: nil, build: noArgs},
	{name: "forward", kind: "forward", title: "Go forward",
		desc:   historyHelp("Go forward one page in the tab's history", `{}`),
		fields: nil, build: noArgs},
	{name: "reload", kind: "reload", title: "Reload the page",
		desc:   historyHelp("Reload the page", `{}`),
		fields: nil, build: noArgs},
	{name: "wait", kind: "wait", title: "Wait for the page", readOnly: true,
		desc: `Wait until the page shows something: an element (selector), some text, a URL, a load state, or a number of milliseconds; give one. Example: {"selector": "#results", "waitTimeoutMs": 5000}. If that does not happen within waitTimeoutMs (10 s by default), the attempt fails with instanceCode wait_timeout, which is transient: the lane's retry policy may try again before the call ends (by default 4 attempts with backoff, then FAILED).`,
		fields: []field{optSelector,
			{name: "text", typ: "string", desc: "Text that must appear on the page."},
			{name: "url", typ: "string", desc: "A URL (or part of one) the page must reach."},
			{name: "load", typ: "string", desc: "A load state.", enum: []any{"load", "domcontentloaded", "networkidle"}},
			{name: "ms", typ: "integer", desc: "Milliseconds to wait, 1..60000.", min: fnum(1), max: fnum(60_000)},
			{name: "waitTimeoutMs", typ: "integer", desc: "How long the instance waits for the condition, 1..60000 ms (default 10000). The task's timeoutMs, if given, must be longer, or the attempt ends first with code timeout.", min: fnum(1), max: fnum(60_000)}},
		build: func(a *Args) (string, map[string]any, error) {
			p := map[string]any{}
			for k, v := range map[string]string{"text": a.Text, "url": a.URL, "load": a.Load} {
				if v != "" {
					p[k] = v
				}
			}
			if a.Ms != 0 {
				p["ms"] = a.Ms
			}
			if a.Selector == "" && len(p) == 0 {
				return "", nil, invalid("selector", "give one of selector, text, url, load or ms")
			}
			if a.WaitTimeoutMs != 0 {
				p["timeout"] = a.WaitTimeoutMs
			}
			return a.Selector, p, nil
		}},
	{name: "evaluate", kind: "evaluate", title: "Run JavaScript",
		desc:   `Evaluate a JavaScript expression in the page and return its JSON value (the instance may refuse it by configuration). Example: {"expression": "document.title"}.`,
		fields: []field{{name: "expression", typ: "string", desc: "A JavaScript expression.", required: true}},
		build: func(a *Args) (string, map[string]any, error) {
			return "", map[string]any{"expression": a.Expression}, nil
		}},
}

func historyHelp(what, example string) string {
	return what + ". Example: " + example + "."
}

// orNone is p, or nil when p is empty: an action without options has no
// params, and the instance applies its defaults.
func orNone(p map[string]any) map[string]any {
	if len(p) == 0 {
		return nil
	}
	return p
}

func noArgs(*Args) (string, map[string]any, error) { return "", nil, nil }

func withDesc(f field, desc string) field { f.desc = desc; return f }

func selectorOnly(a *Args) (string, map[string]any, error) { return a.Selector, nil, nil }

// inputSchema builds a browser tool's input schema: its own fields and the
// common ones, no others.
func (bt *browserTool) inputSchema() *jsonschema.Schema {
	common, err := jsonschema.For[Common](nil)
	if err != nil {
		panic(err) // a static type
	}
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	for _, f := range bt.fields {
		p := &jsonschema.Schema{Type: f.typ, Description: f.desc, Enum: f.enum, Minimum: f.min, Maximum: f.max}
		if f.required && f.typ == "string" && f.name != "text" {
			p.MinLength = new(1)
		}
		s.Properties[f.name] = p
		s.PropertyOrder = append(s.PropertyOrder, f.name)
		if f.required {
			s.Required = append(s.Required, f.name)
		}
	}
	for _, name := range []string{"session", "timeoutMs"} {
		s.Properties[name] = common.Properties[name]
		s.PropertyOrder = append(s.PropertyOrder, name)
	}
	s.Properties["timeoutMs"].Minimum, s.Properties["timeoutMs"].Maximum = fnum(1), fnum(86_400_000)
	return s
}

// addBrowserTool registers a browser tool.
func (s *Server) addBrowserTool(bt browserTool) error {
	tool := &sdk.Tool{Name: bt.name, Title: bt.title, Description: bt.desc, InputSchema: bt.inputSchema(),
		OutputSchema: outputSchema(),
		Annotations:  &sdk.ToolAnnotations{Title: bt.title, ReadOnlyHint: bt.readOnly, OpenWorldHint: new(true)}}
	return addAuditedTool(s.mcp, tool, func(ctx context.Context, req *sdk.CallToolRequest, a Args) (*sdk.CallToolResult, *Output, error) {
		return s.callBrowser(ctx, req, &bt, &a)
	}, s.failure, s.refusedCall(bt.name))
}

// callBrowser runs a browser tool: checks, submits, waits, answers.
func (s *Server) callBrowser(ctx context.Context, req *sdk.CallToolRequest, bt *browserTool, a *Args) (*sdk.CallToolResult, *Output, error) {
	c, err := s.callerOf(req.Session, req.Extra, clientInfo(req.Session))
	if err != nil {
		return s.failure(ctx, err)
	}
	sel, params, err := bt.build(a)
	var raw json.RawMessage // the params, encoded once: checked, then submitted
	if err == nil && len(params) > 0 {
		if raw, err = json.Marshal(params); err != nil {
			err = fmt.Errorf("encode params: %w", err)
		}
	}
	if err == nil {
		err = checkSelector("selector", sel)
	}
	if err == nil {
		err = checkAction(bt.kind, sel, raw)
	}
	if err != nil {
		s.record(c, bt.name, "", err) // refused before submission: audited as submitTask's refusals are
		return s.failure(ctx, err)
	}
	session := c.session
	if a.Session != "" {
		session = a.Session
	}
	in := model.SubmitTaskInput{AgentID: c.agent, SessionKey: &session,
		Action: &model.ActionInput{Kind: bt.kind}, Exhausted: failExhausted(),
		Labels: []*model.LabelInput{{Key: "via", Value: "mcp"}}}
	if s.opts.Lane != "" {
		in.Lane = &s.opts.Lane
	}
	if sel != "" {
		in.Action.Selector = &sel
	}
	if raw != nil {
		in.Action.Params = raw
	}
	if a.TimeoutMs != 0 {
		in.TimeoutMs = &a.TimeoutMs
	}
	return s.submitAndWait(ctx, req, c, bt.name, in)
}

// submitAndWait submits a task for a tool call, waits for its end and
// answers with its result.
func (s *Server) submitAndWait(ctx context.Context, req *sdk.CallToolRequest, c *caller, tool string, in model.SubmitTaskInput) (*sdk.CallToolResult, *Output, error) {
	if err := s.allow(c, "Mutation", "submitTask"); err != nil {
		s.record(c, tool, "", err)
		return s.failure(ctx, err)
	}
	cursor := s.opts.Engine.Events().Last()
	mt, _, err := s.opts.Mutations.SubmitTask(c.ctx(ctx), in)
	if err != nil {
		s.record(c, tool, "", err)
		return s.failure(ctx, err)
	}
	s.record(c, tool, mt.T.ID, nil)
	// The call ends with its MCP session too (terminate.go).
	wctx, leave := s.enter(ctx, c)
	defer leave()
	t, err := s.wait(wctx, req, c, mt.T, cursor)
	if err != nil {
		return s.failure(ctx, err)
	}
	return s.answer(ctx, c, tool, t)
}

// failExhausted is the exhausted setting of the tasks an interactive call
// submits and waits for (the browser tools, close_session): FAIL, whatever
// the lane's. The call answers when its task's retries are spent; a task
// left PARKED behind it would wait for an operator's reset, and a reset
// would run the old action in the agent's tab after the agent had moved on
// (or retried it). FAILED is terminal: nothing runs it again unless the
// agent calls again. submit_task, which does not wait, keeps the lane's
// setting unless its caller asks for one.
func failExhausted() *engine.Exhausted {
	x := engine.ExhaustedFail
	return &x
}

// checkAction checks a browser tool's action as submitTask checks an
// action (executor.CheckAction: navigate's URL, snapshot's maxNodes, text's
// maxChars…), so that a call is refused with the same words as GraphQL's
// submission, naming the tool's argument (a parameter's name is its
// argument's).
func checkAction(kind, sel string, params json.RawMessage) error {
	err := executor.CheckAction(&engine.Action{Kind: kind, Selector: sel, Params: params})
	var bad *executor.ActionError
	if errors.As(err, &bad) {
		return invalid(strings.TrimPrefix(bad.Field, "params."), "%s", bad.Message)
	}
	return err
}

// invalid is an INVALID_INPUT error naming an argument.
func invalid(field, format string, args ...any) *engine.Error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}
