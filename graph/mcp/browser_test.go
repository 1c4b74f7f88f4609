package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/chromium"
)

// These tests drive real headless Chromium through the whole path: the
// SDK's client over HTTP, the server, the engine, the executor and the
// built-in instance.

const formPage = `<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Welcome to the greeter</h1>
<input id="name" type="text"> <button id="go" type="button">Go</button>
<div id="out"></div>
<script>
document.getElementById("go").addEventListener("click", () => {
  document.getElementById("out").textContent = "Hello, " + document.getElementById("name").value + "!";
});
</script></body></html>`

// browser starts Chromium, a local site and a server whose executor drives
// them; it returns the bundle and the site's URL.
func browser(t *testing.T) (*bundle, string) {
	t.Helper()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed (looked for /usr/bin/chromium and chromium on PATH): skipping the real-browser test")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<!doctype html><title>Not here</title><p>No such page.")
			return
		case "/big": // 1,200,000 characters of text
			_, _ = io.WriteString(w, "<!doctype html><title>Big</title><body><pre>"+strings.Repeat("abcdefghi\n", 120_000)+"</pre>")
			return
		}
		_, _ = io.WriteString(w, formPage)
	}))
	t.Cleanup(site.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := chromium.Start(ctx, chromium.Options{ExecPath: path, ActionTimeout: 20 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	reg := executor.NewRegistry(executor.RegistryOptions{HealthInterval: time.Second, HealthTimeout: 5 * time.Second})
	t.Cleanup(reg.Close)
	_, err = reg.Register(context.Background(), executor.InstanceConfig{ID: "local", URL: inst.URL(), Token: inst.Token(), Capacity: 2})
	require.NoError(t, err)
	arts := artifact.NewMemory()
	exec, err := executor.New(executor.Options{Registry: reg, Artifacts: arts})
	require.NoError(t, err)
	t.Cleanup(func() { _ = exec.Close() })
	b := setup(t, options{executor: exec, registry: reg, arts: arts})
	return b, site.URL
}

func TestNavigateThenTextInOneSessionReadsThePageInRealChromium(t *testing.T) {
	t.Parallel()
	b, site := browser(t)
	c := b.connect(t, "browser-agent", "", "")

	nav := c.call(t, "navigate", map[string]any{"url": site})
	require.False(t, nav.IsError, textOf(nav))
	require.Equal(t, "local", structured(t, nav)["instanceId"])
	res := c.call(t, "fill", map[string]any{"selector": "#name", "text": "Ada"})
	require.False(t, res.IsError, textOf(res))
	res = c.call(t, "click", map[string]any{"selector": "text:Go"})
	require.False(t, res.IsError, textOf(res))
	res = c.call(t, "text", map[string]any{"selector": "#out"})
	require.False(t, res.IsError, textOf(res))
	require.Equal(t, "Hello, Ada!", textOf(res), "the session's calls share one tab")
	res = c.call(t, "text", nil)
	require.Contains(t, textOf(res), "Welcome to the greeter")

	// A snapshot reads as an outline with refs, and a ref works as a selector.
	res = c.call(t, "snapshot", map[string]any{"interactive": true})
	require.False(t, res.IsError, textOf(res))
	m := regexp.MustCompile(`(?m)^\s*(e\d+) button "Go"`).FindStringSubmatch(textOf(res))
	require.NotNil(t, m, "the outline names the button with its ref:\n%s", textOf(res))
	require.False(t, c.call(t, "fill", map[string]any{"selector": "#name", "text": "Bob"}).IsError)
	res = c.call(t, "click", map[string]any{"selector": m[1]})
	require.False(t, res.IsError, textOf(res))
	require.Equal(t, "Hello, Bob!", textOf(c.call(t, "text", map[string]any{"selector": "#out"})))

	// A selector that matches nothing fails the task, with the instance's code.
	res = c.call(t, "click", map[string]any{"selector": "#missing"})
	e := errorOf(t, res)
	require.Equal(t, "FAILED", e["code"])
	require.Equal(t, "element_not_found", e["instanceCode"])
	require.Equal(t, "PERMANENT", e["errorClass"])

	// back has its own route, which the built-in instance serves too.
	res = c.call(t, "back", nil)
	require.False(t, res.IsError, textOf(res))

	// wait takes text, a URL or a load state as well as an element, and
	// its own timeout.
	require.False(t, c.call(t, "navigate", map[string]any{"url": site}).IsError)
	for _, args := range []map[string]any{{"text": "Welcome to the greeter"}, {"url": site}, {"load": "load"}, {"selector": "#name"}} {
		res = c.call(t, "wait", args)
		require.False(t, res.IsError, "%v: %s", args, textOf(res))
	}
	res = c.call(t, "wait", map[string]any{"text": "never on this page", "waitTimeoutMs": 200, "timeoutMs": 5000})
	require.Equal(t, "wait_timeout", errorOf(t, res)["instanceCode"], textOf(res))
}

// TestTheTextToolIsBoundedAndNavigateShowsTheHTTPStatus: a page's text
// comes back cut to maxChars (default 100,000), saying so; a navigation to
// a page that answers 404 succeeds and shows its status.
func TestTheTextToolIsBoundedAndNavigateShowsTheHTTPStatus(t *testing.T) {
	t.Parallel()
	b, site := browser(t)
	c := b.connect(t, "reader", "", "")

	nav := c.call(t, "navigate", map[string]any{"url": site + "/missing"})
	require.False(t, nav.IsError, "an error page is a page: %s", textOf(nav))
	result := structured(t, nav)["result"].(map[string]any)
	require.Equal(t, float64(404), result["status"], "%v", result)
	require.Contains(t, textOf(nav), `"status":404`)

	require.False(t, c.call(t, "navigate", map[string]any{"url": site + "/big"}).IsError)
	res := c.call(t, "text", nil)
	require.False(t, res.IsError, textOf(res)[:200])
	text := textOf(res)
	require.Less(t, len(text), 101_000, "the default bound")
	require.True(t, strings.HasPrefix(text, strings.Repeat("abcdefghi\n", 10_000)), text[:100])
	require.Contains(t, text, "[truncated: the first 100000 of 1200000 characters")
	require.Equal(t, true, structured(t, res)["result"].(map[string]any)["truncated"])
	require.Equal(t, float64(1_200_000), structured(t, res)["result"].(map[string]any)["totalChars"])

	res = c.call(t, "text", map[string]any{"maxChars": 15})
	require.False(t, res.IsError, textOf(res))
	require.True(t, strings.HasPrefix(textOf(res), "abcdefghi\nabcde\n\n[truncated: the first 15 of 1200000"), textOf(res))

	// Within the hard cap a caller gets what it asks for, whole.
	res = c.call(t, "text", map[string]any{"maxChars": 1_000_000})
	require.False(t, res.IsError, textOf(res)[:200])
	require.Contains(t, textOf(res), "[truncated: the first 1000000 of 1200000 characters")
	res = c.call(t, "text", map[string]any{"maxChars": 1_000_001})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"])
}

func TestAScreenshotComesBackAsAnImage(t *testing.T) {
	t.Parallel()
	b, site := browser(t)
	c := b.connect(t, "browser-agent", "", "")
	require.False(t, c.call(t, "navigate", map[string]any{"url": site}).IsError)
	res := c.call(t, "screenshot", nil)
	require.False(t, res.IsError, textOf(res))
	var img *sdk.ImageContent
	var link *sdk.ResourceLink
	for _, ct := range res.Content {
		switch ct := ct.(type) {
		case *sdk.ImageContent:
			img = ct
		case *sdk.ResourceLink:
			link = ct
		}
	}
	require.NotNil(t, img, "the result carries the image")
	require.Equal(t, "image/png", img.MIMEType)
	require.True(t, bytes.HasPrefix(img.Data, []byte("\x89PNG\r\n\x1a\n")), "a PNG")

	// The artifact is a resource too.
	require.NotNil(t, link)
	rr, err := c.ReadResource(ctxFor(t), &sdk.ReadResourceParams{URI: link.URI})
	require.NoError(t, err)
	require.Equal(t, img.Data, rr.Contents[0].Blob)
	require.Equal(t, "image/png", rr.Contents[0].MIMEType)
}

// A browser session is its agent's own: bob, naming alice's session, gets a
// session of his own in a tab of his own (and, on the built-in Chromium, a
// browser context of his own), never her page; what he does there leaves her
// page as it was.
func TestAnotherAgentNamingAlicesSessionGetsItsOwn(t *testing.T) {
	t.Parallel()
	b, site := browser(t)
	alice := b.connect(t, "alice", "", "alice")
	bob := b.connect(t, "bob", "", "bob")
	const session = "other-agents-session"

	res := alice.call(t, "navigate", map[string]any{"url": site + "/?acct=ALICE-BANK", "session": session})
	require.False(t, res.IsError, textOf(res))
	require.False(t, alice.call(t, "fill", map[string]any{"selector": "#name", "text": "alice-card-4111111111111111", "session": session}).IsError)

	res = bob.call(t, "text", map[string]any{"session": session})
	require.False(t, res.IsError, textOf(res))
	require.NotContains(t, textOf(res), "ALICE-BANK", "bob's session of the same name read alice's page")
	require.NotContains(t, textOf(res), "Welcome to the greeter", "bob's session of the same name read alice's page")
	res = bob.call(t, "wait", map[string]any{"url": "acct=ALICE-BANK", "waitTimeoutMs": 300, "session": session})
	require.Equal(t, "wait_timeout", errorOf(t, res)["instanceCode"], "bob's session of the same name is on alice's page: %s", textOf(res))
	bob.call(t, "back", map[string]any{"session": session})
	res = bob.call(t, "text", map[string]any{"session": session})
	require.NotContains(t, textOf(res), "Welcome to the greeter", "bob went back into alice's history")
	res = bob.call(t, "navigate", map[string]any{"url": site + "/?acct=BOB", "session": session})
	require.False(t, res.IsError, textOf(res))
	require.NotEqual(t, "", structured(t, res)["taskId"])

	res = alice.call(t, "wait", map[string]any{"url": "acct=ALICE-BANK", "waitTimeoutMs": 5000, "session": session})
	require.False(t, res.IsError, "alice's session is still on her page: %s", textOf(res))

	var aliceTab, bobTab string
	for _, tk := range b.tasks(t) {
		if n := len(tk.Attempts); n > 0 && tk.Spec.SessionKey == session {
			switch tk.Spec.AgentID {
			case "alice":
				aliceTab = tk.Attempts[n-1].TabID
			case "bob":
				bobTab = tk.Attempts[n-1].TabID
			}
		}
	}
	require.NotEmpty(t, aliceTab)
	require.NotEqual(t, aliceTab, bobTab, "the two agents' sessions of one name share a tab")
}

// TestTheSnapshotToolTakesMaxNodesAndNavigateTakesWhatGraphQLTakes: the
// snapshot tool bounds its nodes by maxNodes, refused out of 1..10000 with
// submitTask's words; navigate loads a data: URL, as submitTask's navigate
// does, and refuses a file: URL with submitTask's words, naming url.
func TestTheSnapshotToolTakesMaxNodesAndNavigateTakesWhatGraphQLTakes(t *testing.T) {
	t.Parallel()
	b, _ := browser(t)
	c := b.connect(t, "snapshotter", "", "")

	page := "data:text/html," + strings.Repeat("<button>b</button>", 20)
	nav := c.call(t, "navigate", map[string]any{"url": page})
	require.False(t, nav.IsError, textOf(nav))

	res := c.call(t, "snapshot", map[string]any{"maxNodes": 5})
	require.False(t, res.IsError, textOf(res))
	result := structured(t, res)["result"].(map[string]any)
	require.Equal(t, float64(5), result["count"], "%v", result)
	require.Equal(t, true, result["truncated"], "%v", result)
	require.Len(t, result["nodes"], 5)

	for _, n := range []int{0, executor.SnapshotMaxNodes + 1} {
		res = c.call(t, "snapshot", map[string]any{"maxNodes": n})
		e := errorOf(t, res)
		require.Equal(t, "INVALID_INPUT", e["code"], "%d: %s", n, textOf(res))
		require.Equal(t, "maxNodes", e["field"], "%v", e)
		want := executor.CheckAction(&engine.Action{Kind: "snapshot", Params: json.RawMessage(fmt.Sprintf(`{"maxNodes":%d}`, n))})
		require.Error(t, want)
		require.Contains(t, textOf(res), want.Error())
	}

	res = c.call(t, "navigate", map[string]any{"url": "file:///etc/passwd"})
	e := errorOf(t, res)
	require.Equal(t, "INVALID_INPUT", e["code"], textOf(res))
	require.Equal(t, "url", e["field"], "%v", e)
	want := executor.CheckAction(&engine.Action{Kind: "navigate", Params: json.RawMessage(`{"url":"file:///etc/passwd"}`)})
	require.Error(t, want)
	require.Contains(t, textOf(res), want.Error())
}
