// Interactions: finding the element a selector or ref names (at once — a
// missing element is a 404, not a wait until the deadline), then acting on it
// the way a person would: pointer actions are real mouse events at the
// element's centre, typing is real key events, and form controls get the
// input and change events that pages listen for.

package chromium

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// actionRequest is the body of POST /tabs/{id}/action.
type actionRequest struct {
	Kind     string   `json:"kind"`
	Ref      string   `json:"ref"`
	Selector string   `json:"selector"`
	Text     *string  `json:"text"`
	Value    *string  `json:"value"`
	Key      string   `json:"key"`
	X        *float64 `json:"x"`
	Y        *float64 `json:"y"`
	DeltaX   *float64 `json:"deltaX"`
	DeltaY   *float64 `json:"deltaY"`
	ScrollX  *float64 `json:"scrollX"`
	ScrollY  *float64 `json:"scrollY"`
	WaitNav  bool     `json:"waitNav"` // a click that may navigate: wait for the new page instead of answering 409
	// DialogAction answers the JavaScript dialog the action opens
	// ("accept" or "dismiss"), with DialogText for a prompt (its default
	// when absent), so that the action is not held up by it.
	DialogAction string  `json:"dialogAction"`
	DialogText   *string `json:"dialogText"`
}

func (i *Instance) handleAction(ctx context.Context, t *tab, r *http.Request) (any, error) {
	var req actionRequest
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	sel := req.Selector
	if req.Ref != "" {
		sel = "ref:" + strings.TrimPrefix(req.Ref, "ref:")
	}
	switch req.DialogAction = strings.ToLower(strings.TrimSpace(req.DialogAction)); req.DialogAction {
	case "":
	case "accept", "dismiss":
		t.dialogs.arm(&dialogAnswer{accept: req.DialogAction == "accept", text: req.DialogText})
	default:
		return nil, badRequest("bad_request", "dialogAction must be 'accept' or 'dismiss'")
	}
	res, err := act(ctx, t, req, sel)
	if req.DialogAction != "" {
		if d := t.dialogs.disarm(); d != nil && err == nil {
			res["dialog"] = map[string]any{"type": d.Type, "message": d.Message, "action": req.DialogAction}
		}
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"success": true, "result": res}, nil
}

// act performs one interaction and returns its result.
func act(ctx context.Context, t *tab, req actionRequest, sel string) (map[string]any, error) {
	kind := strings.ToLower(req.Kind)
	// Kinds that may work without an element.
	switch kind {
	case "":
		return nil, badRequest("bad_request", "missing required field 'kind'")
	case "press":
		if sel != "" {
			el, err := resolve(ctx, t, sel)
			if err != nil {
				return nil, err
			}
			if _, err := callOn[bool](ctx, el, `function() { this.focus(); return true; }`); err != nil {
				return nil, err
			}
		}
		keys, err := keyOf(req.Key)
		if err != nil {
			return nil, err
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent(keys)); err != nil {
			return nil, err
		}
		return map[string]any{"pressed": req.Key}, nil
	case "scroll":
		if sel == "" {
			dx, dy := first(req.DeltaX, req.ScrollX, 0), first(req.DeltaY, req.ScrollY, 300)
			pos, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]float64](fmt.Sprintf(`(() => { window.scrollBy(%g, %g); return {x: window.scrollX, y: window.scrollY}; })()`, dx, dy)))
			if err != nil {
				return nil, err
			}
			return map[string]any{"scrolled": true, "x": pos["x"], "y": pos["y"]}, nil
		}
	case "click", "dblclick", "hover", "mouse-move":
		if sel == "" && req.X != nil && req.Y != nil {
			return pointerOn(ctx, t, req, kind, *req.X, *req.Y)
		}
	}
	if sel == "" {
		return nil, badRequest("bad_request", "%s needs a selector or a ref", kind)
	}
	el, err := resolve(ctx, t, sel)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "click", "dblclick", "hover", "mouse-move":
		x, y, err := centre(ctx, el)
		if err != nil {
			return nil, err
		}
		return pointerOn(ctx, t, req, kind, x, y)
	case "focus":
		_, err := callOn[bool](ctx, el, `function() { this.focus(); return true; }`)
		return map[string]any{"focused": err == nil}, err
	case "fill":
		text, ok := textOf(req)
		if !ok {
			return nil, badRequest("bad_request", `fill requires "text" (or "value"); send "text": "" to clear the field`)
		}
		v, err := callOn[string](ctx, el, jsFill, text)
		if err != nil {
			return nil, err
		}
		return map[string]any{"filled": true, "value": v}, nil
	case "type":
		text, ok := textOf(req)
		if !ok {
			return nil, badRequest("bad_request", `type requires "text"`)
		}
		if _, err := callOn[bool](ctx, el, `function() { this.focus(); return true; }`); err != nil {
			return nil, err
		}
		if err := chromedp.Do(ctx, chromedp.KeyEvent(text)); err != nil {
			return nil, err
		}
		return map[string]any{"typed": true, "len": len([]rune(text))}, nil
	case "select":
		v := ""
		switch {
		case req.Value != nil:
			v = *req.Value
		case req.Text != nil:
			v = *req.Text
		default:
			return nil, badRequest("bad_request", `select requires "value" (or "text")`)
		}
		got, err := callOn[string](ctx, el, jsSelect, v)
		if err != nil {
			return nil, err
		}
		return map[string]any{"selected": got}, nil
	case "check", "uncheck":
		checked, err := callOn[bool](ctx, el, jsCheck, kind == "check")
		if err != nil {
			return nil, err
		}
		return map[string]any{"checked": checked}, nil
	case "scroll", "scrollintoview":
		if _, err := callOn[bool](ctx, el, `function() { this.scrollIntoView({block: "center", inline: "center"}); return true; }`); err != nil {
			return nil, err
		}
		return map[string]any{"scrolled": true}, nil
	}
	return nil, badRequest("unknown_action", "unknown action kind %q (known: click dblclick hover focus fill type press select check uncheck scroll scrollintoview)", req.Kind)
}

// pointer sends the mouse events of a click, a double click or a hover at x, y.
// pointerOn is pointer on tab t, telling a click that navigates apart
// (watchedClick).
func pointerOn(ctx context.Context, t *tab, req actionRequest, kind string, x, y float64) (map[string]any, error) {
	if kind != "click" && kind != "dblclick" {
		return pointer(ctx, kind, x, y)
	}
	return watchedClick(ctx, t, req.WaitNav, func() (map[string]any, error) { return pointer(ctx, kind, x, y) })
}

func pointer(ctx context.Context, kind string, x, y float64) (map[string]any, error) {
	move := chromedp.MouseEvent(chromedp.MouseMoved, x, y)
	var err error
	switch kind {
	case "click":
		err = chromedp.Do(ctx, move, chromedp.MouseClickXY(x, y))
	case "dblclick":
		err = chromedp.Do(ctx, move, chromedp.MouseClickXY(x, y), chromedp.MouseClickXY(x, y, chromedp.ClickCount(2)))
	default:
		err = chromedp.Do(ctx, move)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"clicked": kind != "hover" && kind != "mouse-move", "x": x, "y": y}, nil
}

func first(a, b *float64, def float64) float64 {
	switch {
	case a != nil:
		return *a
	case b != nil:
		return *b
	}
	return def
}

func textOf(req actionRequest) (string, bool) {
	switch {
	case req.Text != nil:
		return *req.Text, true
	case req.Value != nil:
		return *req.Value, true
	}
	return "", false
}

// namedKeys maps key names to what chromedp's KeyEvent sends.
var namedKeys = map[string]string{
	"enter": kb.Enter, "return": kb.Enter, "tab": kb.Tab, "escape": kb.Escape, "esc": kb.Escape,
	"backspace": kb.Backspace, "delete": kb.Delete, "space": " ", " ": " ",
	"arrowup": kb.ArrowUp, "arrowdown": kb.ArrowDown, "arrowleft": kb.ArrowLeft, "arrowright": kb.ArrowRight,
	"up": kb.ArrowUp, "down": kb.ArrowDown, "left": kb.ArrowLeft, "right": kb.ArrowRight,
	"home": kb.Home, "end": kb.End, "pageup": kb.PageUp, "pagedown": kb.PageDown, "insert": kb.Insert,
	"f1": kb.F1, "f2": kb.F2, "f3": kb.F3, "f4": kb.F4, "f5": kb.F5, "f6": kb.F6,
	"f7": kb.F7, "f8": kb.F8, "f9": kb.F9, "f10": kb.F10, "f11": kb.F11, "f12": kb.F12,
}

func keyOf(key string) (string, error) {
	if key == "" {
		return "", badRequest("bad_request", `press requires "key"`)
	}
	if k, ok := namedKeys[strings.ToLower(key)]; ok {
		return k, nil
	}
	if len([]rune(key)) == 1 {
		return key, nil
	}
	return "", badRequest("bad_key", "unknown key %q", key)
}

// element is a DOM element found by a selector, as a remote object.
type element struct {
	id  runtime.RemoteObjectID
	sel string
}

// resolve finds the first element sel names, without waiting. The syntax
// is pinchtab.ParseSelector's, the one Switchyard checks before submitting.
func resolve(ctx context.Context, t *tab, sel string) (element, error) {
	s, err := pinchtab.ParseSelector(sel)
	if err != nil {
		return element{}, badRequest("bad_selector", "%v", err)
	}
	value := s.Value
	if s.Kind == pinchtab.SelectorRef {
		ref, ok := t.refs[value]
		if !ok {
			return element{}, notFound("ref_not_found", "ref %s not found - take a snapshot first", value)
		}
		if ref.object != "" {
			return element{id: ref.object, sel: sel}, nil
		}
		res, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: cdp.BackendNodeID(ref.backend)})
		if err != nil || res.Object == nil || res.Object.ObjectID == "" {
			return element{}, notFound("ref_stale", "ref %s no longer names an element - take a new snapshot", value)
		}
		return element{id: res.Object.ObjectID, sel: sel}, nil
	}
	k, _ := json.Marshal(s.Kind)
	v, _ := json.Marshal(value)
	res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: "(" + jsFind + ")(" + string(k) + "," + string(v) + ")"})
	if err != nil {
		return element{}, err
	}
	if res.ExceptionDetails != nil {
		return element{}, badRequest("bad_selector", "selector %q: %s", sel, exceptionText(res.ExceptionDetails))
	}
	if res.Result == nil || res.Result.ObjectID == "" || res.Result.Subtype == "null" {
		return element{}, notFound("element_not_found", "no element matches %q", sel)
	}
	return element{id: res.Result.ObjectID, sel: sel}, nil
}

// callOn calls a JavaScript function with the element as this, and decodes
// its result into T.
func callOn[T any](ctx context.Context, el element, fn string, args ...any) (T, error) {
	var zero T
	p := runtime.CallFunctionOnParams{FunctionDeclaration: fn, ObjectID: el.id, ReturnByValue: new(true), AwaitPromise: new(true)}
	for _, a := range args {
		raw, err := json.Marshal(a)
		if err != nil {
			return zero, err
		}
		p.Arguments = append(p.Arguments, &runtime.CallArgument{Value: raw})
	}
	res, err := chromedp.Call(ctx, runtime.CallFunctionOn, p)
	if err != nil {
		return zero, err
	}
	if res.ExceptionDetails != nil {
		return zero, &apiError{http.StatusBadRequest, "action_failed", fmt.Errorf("%s: %s", el.sel, exceptionText(res.ExceptionDetails))}
	}
	if res.Result == nil || len(res.Result.Value) == 0 {
		return zero, nil
	}
	if err := json.Unmarshal(res.Result.Value, &zero); err != nil {
		return zero, fmt.Errorf("decode result: %w", err)
	}
	return zero, nil
}

// centre scrolls the element into view and returns its centre, refusing an
// element with no box (hidden).
func centre(ctx context.Context, el element) (float64, float64, error) {
	box, err := callOn[struct{ X, Y, W, H float64 }](ctx, el, `function() {
		this.scrollIntoView({block: "center", inline: "center"});
		const r = this.getBoundingClientRect();
		return {X: r.left + r.width / 2, Y: r.top + r.height / 2, W: r.width, H: r.height};
	}`)
	if err != nil {
		return 0, 0, err
	}
	if box.W == 0 && box.H == 0 {
		return 0, 0, &apiError{http.StatusConflict, "not_visible", errors.New(el.sel + " is not visible")}
	}
	return box.X, box.Y, nil
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		if line, _, ok := strings.Cut(d.Exception.Description, "\n"); ok {
			return line
		}
		return d.Exception.Description
	}
	return d.Text
}

// jsFind finds the first element of a kind of selector.
const jsFind = `function(kind, value) {
	if (kind === "css") return document.querySelector(value);
	if (kind === "xpath") return document.evaluate(value, document, null, XPathResult.FIRST_ORDERED_NODE_TYPE, null).singleNodeValue;
	if (kind === "text") {
		const want = value.trim();
		let best = null;
		const walker = document.createTreeWalker(document.body || document.documentElement, NodeFilter.SHOW_ELEMENT);
		for (let n = walker.currentNode; n; n = walker.nextNode()) {
			const t = (n.innerText || n.textContent || "").trim();
			if (t === want) best = n;            // the deepest exact match wins
			else if (!best && t.includes(want)) best = n;
		}
		return best;
	}
	return null;
}`

// jsFill sets a control's value through the native setter (so frameworks that
// track it notice), then fires input and change.
const jsFill = `function(v) {
	this.focus();
	if (this.isContentEditable) {
		this.textContent = v;
	} else {
		const proto = Object.getPrototypeOf(this);
		const desc = proto && Object.getOwnPropertyDescriptor(proto, "value");
		if (desc && desc.set) desc.set.call(this, v); else this.value = v;
	}
	this.dispatchEvent(new Event("input", {bubbles: true}));
	this.dispatchEvent(new Event("change", {bubbles: true}));
	return this.isContentEditable ? this.textContent : String(this.value);
}`

const jsSelect = `function(v) {
	if (!this.options) throw new Error("not a <select>");
	const opts = Array.from(this.options);
	const o = opts.find(o => o.value === v) || opts.find(o => o.text.trim() === v);
	if (!o) throw new Error("no option " + JSON.stringify(v));
	this.value = o.value;
	this.dispatchEvent(new Event("input", {bubbles: true}));
	this.dispatchEvent(new Event("change", {bubbles: true}));
	return o.value;
}`

const jsCheck = `function(want) {
	if (!("checked" in this)) throw new Error("not a checkbox or radio");
	if (this.checked !== want) this.click();
	return this.checked;
}`
