// Snapshots: the page's accessibility tree, flattened into nodes with refs
// ("e0", "e1", …) that later actions can name instead of a selector. A ref
// holds the DOM node's backend id (or, from a page too large for its
// accessibility tree, the element itself), so it survives until the next
// snapshot or navigation of the tab.
//
// A snapshot is bounded, as a text result is: it carries at most
// SnapshotMaxNodes nodes (the query's maxNodes may ask for fewer), and one
// cut short says so ("truncated": true, "totalNodes"). A page with more than
// SnapshotTreeMaxElements elements (counting those in open shadow roots,
// which the tree has too) does not have its accessibility tree fetched at
// all: the browser would take minutes to build it and send it,
// hundreds of megabytes through the one connection every tab and the health
// check share. Its nodes are read from the DOM instead, from the root
// element and into open shadow roots, by a script that describes at most
// the bound and counts the rest: roles from the elements' role attributes and tags,
// names from their labels and text ("source": "dom").

package chromium

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// SnapshotMaxNodes is the most nodes a snapshot carries, and its default:
// the query's maxNodes may ask for fewer.
const SnapshotMaxNodes = 10_000

// SnapshotTreeMaxElements is the most elements a page may have for a
// snapshot to read its accessibility tree; a larger page's snapshot is
// read from the DOM (snapshotDOM).
const SnapshotTreeMaxElements = 20_000

// nodeRef is what a snapshot's ref names: a DOM node by its backend id, or,
// from a snapshot read from the DOM, the element as a remote object (in the
// snapshotGroup object group, released by the tab's next snapshot).
type nodeRef struct {
	backend int64
	object  runtime.RemoteObjectID
}

// snapshotGroup is the object group of the elements a DOM snapshot names.
const snapshotGroup = "switchyard-snapshot"

// SnapshotNode is one node of a snapshot.
type SnapshotNode struct {
	Ref      string `json:"ref"`
	Role     string `json:"role"`
	Name     string `json:"name"`
	Depth    int    `json:"depth"`
	Value    string `json:"value,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
	Focused  bool   `json:"focused,omitempty"`
	Checked  string `json:"checked,omitempty"`
}

// skippedRoles carry no meaning of their own; their children are kept.
var skippedRoles = map[string]bool{"none": true, "generic": true, "InlineTextBox": true, "LineBreak": true, "": true}

// interactiveRoles are what filter=interactive keeps.
var interactiveRoles = map[string]bool{
	"button": true, "link": true, "textbox": true, "searchbox": true, "checkbox": true, "radio": true,
	"combobox": true, "listbox": true, "option": true, "menuitem": true, "menuitemcheckbox": true,
	"menuitemradio": true, "slider": true, "spinbutton": true, "switch": true, "tab": true, "treeitem": true,
}

func (i *Instance) handleSnapshot(ctx context.Context, t *tab, r *http.Request) (any, error) {
	q := r.URL.Query()
	interactive := q.Get("filter") == "interactive"
	limit := SnapshotMaxNodes
	if v := q.Get("maxNodes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > SnapshotMaxNodes {
			return nil, badRequest("bad_request", "maxNodes must be an integer within 1..%d, got %q", SnapshotMaxNodes, v)
		}
		limit = n
	}
	clear(t.refs)
	_, _ = chromedp.Call(ctx, runtime.ReleaseObjectGroup, runtime.ReleaseObjectGroupParams{ObjectGroup: snapshotGroup})
	elements, err := chromedp.Run(ctx, chromedp.Evaluate[int](jsCountElements))
	if err != nil {
		return nil, fmt.Errorf("snapshot: count the page's elements: %w", err)
	}
	var (
		nodes []SnapshotNode
		total int
		out   = map[string]any{}
	)
	if elements > SnapshotTreeMaxElements {
		nodes, total, err = snapshotDOM(ctx, t, interactive, limit)
		out["source"] = "dom"
		out["elements"] = elements
	} else {
		nodes, total, err = snapshotTree(ctx, t, interactive, limit)
	}
	if err != nil {
		return nil, err
	}
	out["nodes"], out["count"] = nodes, len(nodes)
	if total > len(nodes) {
		out["truncated"], out["totalNodes"] = true, total
	}
	return pageInfo(ctx, out)
}

// jsCountElements counts the document's elements, those in open shadow
// roots included (the accessibility tree has them too).
const jsCountElements = `(() => {
	let n = 0;
	const count = root => {
		const all = root.querySelectorAll("*");
		n += all.length;
		for (const el of all) if (el.shadowRoot) count(el.shadowRoot);
	};
	count(document);
	return n;
})()`

// snapshotTree reads the page's accessibility tree: its first limit nodes,
// and how many it has.
func snapshotTree(ctx context.Context, t *tab, interactive bool, limit int) ([]SnapshotNode, int, error) {
	res, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: %w", err)
	}
	byID := make(map[accessibility.NodeID]*accessibility.Node, len(res.Nodes))
	for _, n := range res.Nodes {
		byID[n.NodeID] = n
	}
	nodes := make([]SnapshotNode, 0, min(len(res.Nodes)/2, limit))
	total := 0
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		role, name := axString(n.Role), axString(n.Name)
		keep := !n.Ignored && !skippedRoles[role] && n.BackendDOMNodeID != 0 && (!interactive || interactiveRoles[role])
		if role == "StaticText" && !interactive {
			keep = keep && name != ""
		}
		next := depth
		if keep {
			total++
			next = depth + 1
		}
		if keep && len(nodes) < limit {
			ref := fmt.Sprintf("e%d", len(nodes))
			sn := SnapshotNode{Ref: ref, Role: role, Name: name, Depth: depth, Value: axString(n.Value)}
			for _, p := range n.Properties {
				switch p.Name {
				case "disabled":
					sn.Disabled = axString(p.Value) == "true"
				case "focused":
					sn.Focused = axString(p.Value) == "true"
				case "checked":
					sn.Checked = axString(p.Value)
				}
			}
			nodes = append(nodes, sn)
			t.refs[ref] = nodeRef{backend: int64(n.BackendDOMNodeID)}
		}
		for _, c := range n.ChildIDs {
			if child, ok := byID[c]; ok {
				walk(child, next)
			}
		}
	}
	for _, n := range res.Nodes {
		if n.ParentID == "" {
			walk(n, 0)
		}
	}
	return nodes, total, nil
}

// snapshotDOM reads a snapshot from the DOM, for a page too large for its
// accessibility tree: jsSnapshot walks the elements in document order,
// counts those with a role and describes the first limit of them; the refs
// hold those elements as remote objects.
func snapshotDOM(ctx context.Context, t *tab, interactive bool, limit int) ([]SnapshotNode, int, error) {
	expr := "(" + jsSnapshot + ")(" + strconv.FormatBool(interactive) + "," + strconv.Itoa(limit) + ")"
	res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: expr, ObjectGroup: snapshotGroup})
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: %w", err)
	}
	if res.ExceptionDetails != nil || res.Result == nil || res.Result.ObjectID == "" {
		return nil, 0, fmt.Errorf("snapshot: read the page's elements: %s", exceptionTextOr(res.ExceptionDetails))
	}
	props, err := chromedp.Call(ctx, runtime.GetProperties, runtime.GetPropertiesParams{ObjectID: res.Result.ObjectID, OwnProperties: new(true)})
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: %w", err)
	}
	var (
		meta struct {
			Nodes []SnapshotNode `json:"nodes"`
			Total int            `json:"total"`
		}
		els runtime.RemoteObjectID
	)
	for _, p := range props.Result {
		switch {
		case p.Value == nil:
		case p.Name == "meta":
			var text string
			if err := json.Unmarshal(p.Value.Value, &text); err != nil {
				return nil, 0, fmt.Errorf("snapshot: decode: %w", err)
			}
			if err := json.Unmarshal([]byte(text), &meta); err != nil {
				return nil, 0, fmt.Errorf("snapshot: decode: %w", err)
			}
		case p.Name == "els":
			els = p.Value.ObjectID
		}
	}
	if els == "" {
		return nil, 0, fmt.Errorf("snapshot: the page's elements were not returned")
	}
	items, err := chromedp.Call(ctx, runtime.GetProperties, runtime.GetPropertiesParams{ObjectID: els, OwnProperties: new(true)})
	if err != nil {
		return nil, 0, fmt.Errorf("snapshot: %w", err)
	}
	objects := make(map[int]runtime.RemoteObjectID, len(meta.Nodes))
	for _, p := range items.Result {
		if k, err := strconv.Atoi(p.Name); err == nil && p.Value != nil && p.Value.ObjectID != "" {
			objects[k] = p.Value.ObjectID
		}
	}
	nodes := meta.Nodes[:0]
	for k, n := range meta.Nodes {
		obj, ok := objects[k]
		if !ok || len(nodes) >= limit {
			continue
		}
		n.Ref = fmt.Sprintf("e%d", len(nodes))
		t.refs[n.Ref] = nodeRef{object: obj}
		nodes = append(nodes, n)
	}
	return nodes, max(meta.Total, len(nodes)), nil
}

func exceptionTextOr(d *runtime.ExceptionDetails) string {
	if d == nil {
		return "no result"
	}
	return exceptionText(d)
}

// jsSnapshot walks the document's elements in order, from the root element
// and into open shadow roots, and returns {meta, els}:
// meta the JSON of {nodes, total} (the first limit elements that have a role
// — their role, name, depth among such elements, value and states — and
// how many have one), els those elements. Roles are the role attribute's,
// else the tag's own (a link for a[href], a heading for h1…h6, …); names
// are aria-label, a label's, alt, title, placeholder, or, for the roles
// named by their content (links, buttons, headings, cells, paragraphs, …),
// the element's own text, cut to 200 characters. Hidden subtrees (hidden, aria-hidden) and
// what never shows (script, style, template) are skipped.
const jsSnapshot = `function(interactive, limit) {
	const interactiveRoles = new Set(["button","link","textbox","searchbox","checkbox","radio","combobox","listbox","option","menuitem","menuitemcheckbox","menuitemradio","slider","spinbutton","switch","tab","treeitem"]);
	const skip = new Set(["SCRIPT","STYLE","TEMPLATE","NOSCRIPT","HEAD","META","LINK"]);
	const inputRole = {checkbox: "checkbox", radio: "radio", button: "button", submit: "button", reset: "button", image: "button", range: "slider", number: "spinbutton", search: "searchbox", hidden: ""};
	const tagRole = {A: "", BUTTON: "button", SELECT: "combobox", TEXTAREA: "textbox", OPTION: "option", H1: "heading", H2: "heading", H3: "heading", H4: "heading", H5: "heading", H6: "heading",
		IMG: "img", UL: "list", OL: "list", LI: "listitem", NAV: "navigation", MAIN: "main", HEADER: "banner", FOOTER: "contentinfo", FORM: "form", TABLE: "table", TR: "row", TD: "cell", TH: "columnheader",
		P: "paragraph", DIALOG: "dialog", ARTICLE: "article", ASIDE: "complementary", SECTION: "region", LABEL: "LabelText", SUMMARY: "button", PROGRESS: "progressbar"};
	function roleOf(el) {
		const r = (el.getAttribute("role") || "").trim().split(/\s+/)[0];
		if (r) return r;
		if (el.tagName === "A") return el.hasAttribute("href") ? "link" : "";
		if (el.tagName === "INPUT") { const t = (el.type || "text").toLowerCase(); return t in inputRole ? inputRole[t] : "textbox"; }
		return tagRole[el.tagName] || "";
	}
	const fromContent = new Set(["link","button","heading","option","cell","columnheader","rowheader","listitem","paragraph","menuitem","menuitemcheckbox","menuitemradio","tab","treeitem","LabelText","checkbox","radio","switch"]);
	function nameOf(el, role) {
		const cut = s => (s || "").replace(/\s+/g, " ").trim().slice(0, 200);
		let n = el.getAttribute("aria-label");
		if (n) return cut(n);
		if (el.labels && el.labels.length) return cut(el.labels[0].textContent);
		n = el.getAttribute("alt") || el.getAttribute("title") || el.getAttribute("placeholder");
		if (n) return cut(n);
		if (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA" || !fromContent.has(role)) return "";
		return cut(el.textContent);
	}
	const nodes = [], els = [];
	let total = 0;
	// The walk starts at the root element: a page may put elements
	// outside its body (the parser moves them in; a script need not).
	// An element with an open shadow root shows that root's children, and
	// a slot the elements assigned to it (else its own), as the
	// accessibility tree does.
	function childrenOf(el) {
		if (el.shadowRoot) return el.shadowRoot.children;
		if (el.tagName === "SLOT") { const a = el.assignedElements(); if (a.length) return a; }
		return el.children;
	}
	if (!document.documentElement) return {meta: JSON.stringify({nodes: [], total: 0}), els: []};
	const stack = [[document.documentElement, 0]];
	while (stack.length) {
		const [el, depth] = stack.pop();
		if (skip.has(el.tagName) || el.hidden || el.getAttribute("aria-hidden") === "true") continue;
		const role = roleOf(el);
		const keep = role !== "" && role !== "none" && role !== "presentation" && role !== "generic" && (!interactive || interactiveRoles.has(role));
		if (keep) {
			total++;
			if (nodes.length < limit) {
				const n = {role: role, name: nameOf(el, role), depth: depth};
				if ("value" in el && typeof el.value === "string" && el.value !== "" && el.tagName !== "BUTTON" && el.tagName !== "LI" && el.tagName !== "OPTION") n.value = el.value;
				if (el.disabled) n.disabled = true;
				if (el === document.activeElement) n.focused = true;
				if (el.type === "checkbox" || el.type === "radio") n.checked = String(!!el.checked);
				nodes.push(n);
				els.push(el);
			}
		}
		const next = keep ? depth + 1 : depth;
		const kids = childrenOf(el);
		for (let k = kids.length - 1; k >= 0; k--) stack.push([kids[k], next]);
	}
	return {meta: JSON.stringify({nodes: nodes, total: total}), els: els};
}`

// axString returns an accessibility value as text.
func axString(v *accessibility.Value) string {
	if v == nil || len(v.Value) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.Value, &s) == nil {
		return s
	}
	return string(v.Value)
}
