package chromium_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

type domSnapshot struct {
	Nodes      []chromium.SnapshotNode `json:"nodes"`
	Count      int                     `json:"count"`
	Truncated  bool                    `json:"truncated"`
	TotalNodes int                     `json:"totalNodes"`
	Source     string                  `json:"source"`
	Elements   int                     `json:"elements"`
}

// snapshotOf loads a data: URL into a new tab and returns its snapshot.
func snapshotOf(t *testing.T, c *pinchtab.Client, page string, q url.Values) (domSnapshot, *pinchtab.Client, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Navigate(ctx, tab, page, nil)
	require.NoError(t, err)
	raw, err := c.Read(ctx, tab, "snapshot", q)
	require.NoError(t, err)
	var snap domSnapshot
	require.NoError(t, json.Unmarshal(raw, &snap))
	return snap, c, tab
}

// TestDOMSnapshots reads large pages from the DOM, on an instance of their
// own with a generous cap: a busy machine takes many seconds to build
// pages of 25,000 elements.
func TestDOMSnapshots(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	c := client(t, startOwn(t, chromium.Options{ActionTimeout: 3 * time.Minute}))
	t.Run("outside the body", func(t *testing.T) { testADOMSnapshotFindsElementsOutsideTheBody(t, c) })
	t.Run("shadow DOM", func(t *testing.T) { testShadowDOMCountsTowardsTheTreeBound(t, c) })
	t.Run("both paths", func(t *testing.T) { testASmallShadowRootIsInBothSnapshots(t, c) })
}

// testADOMSnapshotFindsElementsOutsideTheBody: a script may put elements
// outside <body>, where the accessibility tree has them too; a page too
// large for its tree has them read from the DOM all the same, and the
// answer says it was cut short.
func testADOMSnapshotFindsElementsOutsideTheBody(t *testing.T, c *pinchtab.Client) {
	// One fragment appended at once: 25,000 appends to the root element
	// one by one take a busy machine a minute.
	page := `data:text/html,<script>const f=document.createDocumentFragment();for(let i=0;i<25000;i++){const b=document.createElement("button");b.textContent="b"+i;f.appendChild(b)}document.documentElement.appendChild(f)</script>`
	snap, _, tab := snapshotOf(t, c, page, url.Values{"maxNodes": {"50"}})
	require.Equal(t, "dom", snap.Source)
	require.Greater(t, snap.Elements, chromium.SnapshotTreeMaxElements)
	require.Equal(t, 50, snap.Count)
	require.True(t, snap.Truncated, "cut short, and says so")
	require.Equal(t, 25_000, snap.TotalNodes)
	require.Equal(t, "button", snap.Nodes[0].Role)
	require.Equal(t, "b0", snap.Nodes[0].Name)

	_, err := c.Act(context.Background(), tab, pinchtab.Action{Kind: "click", Ref: snap.Nodes[1].Ref})
	require.NoError(t, err, "its refs name the elements")
}

// testShadowDOMCountsTowardsTheTreeBound: elements in an open shadow root
// are in the accessibility tree, so they count towards
// SnapshotTreeMaxElements; a page whose shadow root holds more is read
// from the DOM, shadow root included.
func testShadowDOMCountsTowardsTheTreeBound(t *testing.T, c *pinchtab.Client) {
	page := `data:text/html,<div id=host></div><script>const r=document.getElementById("host").attachShadow({mode:"open"});for(let i=0;i<30000;i++){const b=document.createElement("button");b.textContent="s"+i;r.appendChild(b)}</script>`
	snap, _, tab := snapshotOf(t, c, page, url.Values{"filter": {"interactive"}, "maxNodes": {"50"}})
	require.Equal(t, "dom", snap.Source, "the shadow root's elements count")
	require.Greater(t, snap.Elements, 30_000)
	require.Equal(t, 30_000, snap.TotalNodes, "the DOM path reads the shadow root")
	require.True(t, snap.Truncated)
	require.Equal(t, "button", snap.Nodes[0].Role)
	require.Equal(t, "s0", snap.Nodes[0].Name)

	_, err := c.Act(context.Background(), tab, pinchtab.Action{Kind: "click", Ref: snap.Nodes[0].Ref})
	require.NoError(t, err, "its refs name the elements")
}

// testASmallShadowRootIsInBothSnapshots: below the bound the tree path
// reads a shadow root's buttons; the DOM path, on a page made large
// elsewhere, reads the same ones, slotted light children included.
func testASmallShadowRootIsInBothSnapshots(t *testing.T, c *pinchtab.Client) {
	small := `data:text/html,<div id=host><button>light</button></div><script>const r=document.getElementById("host").attachShadow({mode:"open"});r.innerHTML="<button>inner</button><slot></slot>"</script>`
	snap, _, _ := snapshotOf(t, c, small, url.Values{"filter": {"interactive"}})
	require.Empty(t, snap.Source, "the accessibility tree")
	names := func(s domSnapshot) []string {
		var out []string
		for _, n := range s.Nodes {
			if n.Role == "button" {
				out = append(out, n.Name)
			}
		}
		return out
	}
	require.Equal(t, []string{"inner", "light"}, names(snap))

	large := small + `<script>for(let i=0;i<21000;i++)document.body.appendChild(document.createElement("span"))</script>`
	snap, _, _ = snapshotOf(t, c, large, url.Values{"filter": {"interactive"}})
	require.Equal(t, "dom", snap.Source)
	require.Equal(t, []string{"inner", "light"}, names(snap))
}
