// The snapshot action's bound, as text's (text.go): a page's accessibility
// tree can run to hundreds of thousands of nodes, which a caller (a model's
// context above all) should not get by surprise, whichever instance read
// it. A snapshot result carries at most params.maxNodes nodes (default and
// most SnapshotMaxNodes); one cut short says so, with the full count. The
// built-in Chromium bounds its own snapshots too, before building them
// (executor/chromium); a PinchTab instance does not, so the executor cuts
// what it answers.

package executor

import (
	"encoding/json"
	"strconv"
)

// SnapshotMaxNodes is the most nodes a snapshot action's result carries,
// and its default: params.maxNodes may ask for fewer.
const SnapshotMaxNodes = 10_000

// snapshotMaxNodes reads a snapshot action's params.maxNodes:
// SnapshotMaxNodes when it is absent, an *ActionError when it is not an
// integer within 1..SnapshotMaxNodes.
func snapshotMaxNodes(params json.RawMessage) (int, error) {
	return boundParam(params, "snapshot", "maxNodes", SnapshotMaxNodes)
}

// minNodeBytes is the fewest bytes a node of a snapshot's JSON takes
// ({"ref":"e1"} and a comma): a result shorter than max of them cannot
// hold more than max nodes, and is not parsed.
const minNodeBytes = 12

// capSnapshot cuts a snapshot result's nodes to max; a result cut short
// gets "truncated": true and "totalNodes" (the instance's own, when it
// cut the result already, else the count of the nodes it sent), and its
// "count" says how many nodes it carries. A result without a nodes list
// is left as is.
func capSnapshot(res json.RawMessage, max int) json.RawMessage {
	if len(res) <= max*minNodeBytes {
		return res
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil {
		return res
	}
	var nodes []json.RawMessage
	if raw, ok := m["nodes"]; !ok || json.Unmarshal(raw, &nodes) != nil || len(nodes) <= max {
		return res
	}
	total := len(nodes)
	if raw, ok := m["totalNodes"]; ok {
		if n, err := strconv.Atoi(string(raw)); err == nil && n > total {
			total = n
		}
	}
	m["nodes"], _ = json.Marshal(nodes[:max])
	m["count"] = json.RawMessage(strconv.Itoa(max))
	m["truncated"] = json.RawMessage("true")
	m["totalNodes"] = json.RawMessage(strconv.Itoa(total))
	out, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return out
}
