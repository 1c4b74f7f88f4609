// Snapshots: the page's accessibility tree, flattened into nodes with refs
// ("e0", "e1", …) that later actions can name instead of a selector. A ref
// holds the DOM node's backend id, so it survives until the next snapshot or
// navigation of the tab.

package chromium

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
)

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
	interactive := r.URL.Query().Get("filter") == "interactive"
	res, err := chromedp.Call(ctx, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	byID := make(map[accessibility.NodeID]*accessibility.Node, len(res.Nodes))
	for _, n := range res.Nodes {
		byID[n.NodeID] = n
	}
	clear(t.refs)
	nodes := make([]SnapshotNode, 0, len(res.Nodes)/2)
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		role, name := axString(n.Role), axString(n.Name)
		keep := !n.Ignored && !skippedRoles[role] && n.BackendDOMNodeID != 0 && (!interactive || interactiveRoles[role])
		if role == "StaticText" && !interactive {
			keep = keep && name != ""
		}
		next := depth
		if keep {
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
			t.refs[ref] = int64(n.BackendDOMNodeID)
			next = depth + 1
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
	return pageInfo(ctx, map[string]any{"nodes": nodes, "count": len(nodes)})
}

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
