package chromium_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
)

// TestPage is the local test site: a form with a text field, a select, a
// checkbox, a button and an output element.
const TestPage = `<!doctype html>
<html><head><title>Switchyard test form</title></head><body>
<h1>Greeter</h1>
<form onsubmit="return false">
  <label for="name">Name</label> <input id="name" type="text">
  <select id="color"><option value="r">Red</option><option value="g">Green</option></select>
  <label><input id="agree" type="checkbox"> Agree</label>
  <button id="go" type="button">Go</button>
  <button id="slow" type="button">Slow</button>
</form>
<div id="out"></div>
<div id="clicks">0</div>
<script>
  let clicks = 0;
  document.getElementById("go").addEventListener("click", () => {
    clicks++;
    document.getElementById("clicks").textContent = String(clicks);
    const agree = document.getElementById("agree").checked ? " (agreed)" : "";
    document.getElementById("out").textContent = "Hello, " + document.getElementById("name").value + "!" + agree;
  });
</script>
</body></html>`

var (
	shared     *chromium.Instance
	sharedErr  error
	sharedOnce sync.Once
	site       *httptest.Server
)

func TestMain(m *testing.M) {
	site = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/selectors":
			_, _ = io.WriteString(w, pinchtabtest.SelectorPage)
			return
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "<!doctype html><title>Not here</title><p>No such page.")
			return
		case "/moved":
			http.Redirect(w, r, "/missing", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, TestPage)
	}))
	code := m.Run()
	if shared != nil {
		_ = shared.Close()
	}
	site.Close()
	os.Exit(code)
}

// instance returns the browser instance the tests share, skipping when
// Chromium is not installed.
func instance(t *testing.T) *chromium.Instance {
	t.Helper()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed (looked for /usr/bin/chromium and chromium on PATH): skipping the real-browser test")
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// The cap bounds a request's whole answer, the probe of a hung
		// page included: generous for a busy machine.
		shared, sharedErr = chromium.Start(ctx, chromium.Options{ExecPath: path, Token: "test-token", ActionTimeout: 30 * time.Second})
	})
	require.NoError(t, sharedErr)
	return shared
}

func client(t *testing.T, inst *chromium.Instance) *pinchtab.Client {
	t.Helper()
	c, err := pinchtab.New(inst.URL(), inst.Token())
	require.NoError(t, err)
	return c
}

func openTab(t *testing.T, c *pinchtab.Client) string {
	t.Helper()
	ctx := context.Background()
	tab, err := c.OpenTab(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), tab.TabID) })
	_, err = c.Navigate(ctx, tab.TabID, site.URL, nil)
	require.NoError(t, err)
	return tab.TabID
}

func field[T any](t *testing.T, raw json.RawMessage, path ...string) T {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	for _, p := range path {
		m, ok := v.(map[string]any)
		require.True(t, ok, "no object at %s in %s", p, raw)
		v = m[p]
	}
	b, _ := json.Marshal(v)
	var out T
	require.NoError(t, json.Unmarshal(b, &out), "field %v of %s", path, raw)
	return out
}

func TestFormFillClickAndReadText(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)

	res, err := c.Act(ctx, tab, pinchtab.Action{Kind: "fill", Selector: "css:#name", Params: json.RawMessage(`{"text":"Ada"}`)})
	require.NoError(t, err)
	require.True(t, field[bool](t, res, "success"))
	require.True(t, field[bool](t, res, "result", "filled"))

	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "check", Selector: "#agree"})
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "select", Selector: "#color", Params: json.RawMessage(`{"value":"Green"}`)})
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "css:#go"})
	require.NoError(t, err)

	text, err := c.Text(ctx, tab, "#out", nil)
	require.NoError(t, err)
	require.Equal(t, "Hello, Ada! (agreed)", field[string](t, text, "text"))
	require.Equal(t, "Switchyard test form", field[string](t, text, "title"))

	ev, err := c.Evaluate(ctx, tab, `document.getElementById("color").value + ":" + document.getElementById("clicks").textContent`, nil)
	require.NoError(t, err)
	require.Equal(t, "g:1", field[string](t, ev, "result"))
}

func TestTypeAndPressUseRealKeyEvents(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)
	_, err := c.Evaluate(ctx, tab, `window.keys = []; document.getElementById("name").addEventListener("keydown", e => keys.push(e.key)); true`, nil)
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "type", Selector: "#name", Params: json.RawMessage(`{"text":"Bo"}`)})
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "press", Selector: "#name", Params: json.RawMessage(`{"key":"Enter"}`)})
	require.NoError(t, err)
	ev, err := c.Evaluate(ctx, tab, `document.getElementById("name").value + "|" + keys.join(",")`, nil)
	require.NoError(t, err)
	require.Equal(t, "Bo|B,o,Enter", field[string](t, ev, "result"))
}

func TestSnapshotRefsDriveActions(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)
	snap, err := c.Snapshot(ctx, tab, url.Values{"filter": {"interactive"}})
	require.NoError(t, err)
	nodes := field[[]chromium.SnapshotNode](t, snap, "nodes")
	refOf := func(role, name string) string {
		for _, n := range nodes {
			if n.Role == role && n.Name == name {
				return n.Ref
			}
		}
		t.Fatalf("no %s %q in snapshot %s", role, name, snap)
		return ""
	}
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "fill", Ref: refOf("textbox", "Name"), Params: json.RawMessage(`{"text":"Grace"}`)})
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Ref: refOf("button", "Go")})
	require.NoError(t, err)
	text, err := c.Text(ctx, tab, "#out", nil)
	require.NoError(t, err)
	require.Equal(t, "Hello, Grace!", field[string](t, text, "text"))

	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Ref: "e999"})
	require.Equal(t, 404, pinchtab.StatusOf(err), "an unknown ref is not found")
}

// The browser resolves every selector of the shared table as the check
// before submission reads it: "(//li)[2]" is an XPath, "e12" a ref, and what
// the check refuses the page refuses too (bad_selector), but for refs and
// lengths, which only the page can judge.
func TestSelectorsResolveByTheSharedTable(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)
	_, err := c.Navigate(ctx, tab, site.URL+"/selectors", nil)
	require.NoError(t, err)
	for _, tc := range pinchtabtest.SelectorCases {
		raw, err := c.Text(ctx, tab, tc.Selector, nil)
		if tc.Code != "" {
			var pe *pinchtab.Error
			require.ErrorAs(t, err, &pe, "%q", tc.Selector)
			require.Equal(t, tc.Code, pe.Code, "%q: %v", tc.Selector, err)
			continue
		}
		require.NoError(t, err, "%q", tc.Selector)
		require.Equal(t, tc.Text, field[string](t, raw, "text"), "%q", tc.Selector)
	}
}

func TestScreenshotIsAnImage(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	tab := openTab(t, c)
	bin, err := c.Screenshot(context.Background(), tab, url.Values{"format": {"png"}})
	require.NoError(t, err)
	require.Equal(t, "image/png", bin.ContentType)
	require.Equal(t, "\x89PNG", string(bin.Data[:4]))
	require.Greater(t, len(bin.Data), 1000)
}

func TestErrorsHaveTheirStatusFamilies(t *testing.T) {
	t.Parallel()
	inst := instance(t)
	c := client(t, inst)
	ctx := context.Background()
	tab := openTab(t, c)

	_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#does-not-exist"})
	require.Equal(t, 404, pinchtab.StatusOf(err), "missing element")
	_, err = c.Act(ctx, "NO-SUCH-TAB", pinchtab.Action{Kind: "click", Selector: "#go"})
	require.Equal(t, 404, pinchtab.StatusOf(err), "missing tab")
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "teleport", Selector: "#go"})
	require.Equal(t, 400, pinchtab.StatusOf(err), "unknown kind")
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "fill", Selector: "#name"})
	require.Equal(t, 400, pinchtab.StatusOf(err), "fill without text")
	_, err = c.Evaluate(ctx, tab, `throw new Error("boom")`, nil)
	require.Equal(t, 400, pinchtab.StatusOf(err), "a script error")
	require.ErrorContains(t, err, "boom")
	_, err = c.Navigate(ctx, tab, "file:///etc/passwd", nil)
	require.Equal(t, 400, pinchtab.StatusOf(err), "a file URL")

	noToken, err := pinchtab.New(inst.URL(), "")
	require.NoError(t, err)
	_, err = noToken.Health(ctx)
	require.NoError(t, err, "/health answers without a token, as PinchTab's does")
	_, err = noToken.Tabs(ctx)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 401, pe.Status)
	require.Equal(t, "missing_token", pe.Code)
	badToken, err := pinchtab.New(inst.URL(), "wrong")
	require.NoError(t, err)
	_, err = badToken.Tabs(ctx)
	require.Equal(t, 401, pinchtab.StatusOf(err))
}

func TestTabsAreListedAndClosed(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	h, err := c.Health(ctx)
	require.NoError(t, err)
	require.Equal(t, "ok", h.Status)
	opened, err := c.OpenTab(ctx, site.URL)
	require.NoError(t, err)
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Contains(t, tabIDs(tabs), opened.TabID)
	require.NoError(t, c.CloseTab(ctx, opened.TabID))
	tabs, err = c.Tabs(ctx)
	require.NoError(t, err)
	require.NotContains(t, tabIDs(tabs), opened.TabID)
	require.Equal(t, 404, pinchtab.StatusOf(c.CloseTab(ctx, opened.TabID)))
}

func tabIDs(tabs []pinchtab.Tab) []string {
	var ids []string
	for _, t := range tabs {
		ids = append(ids, t.ID)
	}
	return ids
}

func TestCancellingARequestStopsTheBrowserCall(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	tab := openTab(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// A promise that never settles: the browser call waits until stopped.
	_, err := c.Evaluate(ctx, tab, `window.stage = "waiting"; new Promise(() => {})`, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)

	// The tab is free at once: the instance stopped the call rather than
	// letting it run to its own 30 s limit while holding the tab.
	quick, qcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer qcancel()
	res, err := c.Evaluate(quick, tab, `window.stage + ":" + document.title`, nil)
	require.NoError(t, err)
	require.Equal(t, "waiting:Switchyard test form", field[string](t, res, "result"))
}

func TestStartFailsClearlyWithABadExecutable(t *testing.T) {
	t.Parallel()
	_, err := chromium.Start(context.Background(), chromium.Options{ExecPath: "/nonexistent/chromium", StartTimeout: 5 * time.Second})
	require.Error(t, err)
	require.Contains(t, fmt.Sprint(err), "/nonexistent/chromium")
}

// A wait takes what PinchTab's takes: an element, text on the page, a URL
// the page has reached or a load state; one that is not met in time says so
// (waited: false), and one that names none, or two, is refused.
func TestWaitForTextURLAndLoadState(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)

	for _, params := range []string{
		`{"text":"Greeter"}`,
		`{"url":"` + site.URL + `"}`,
		`{"load":"load"}`,
		`{"load":"domcontentloaded"}`,
		`{"load":"networkidle"}`,
		`{"selector":"#name"}`,
	} {
		res, err := c.Wait(ctx, tab, json.RawMessage(params))
		require.NoError(t, err, params)
		require.True(t, field[bool](t, res, "waited"), "%s: %s", params, res)
	}

	// Text that comes later, written by the page itself.
	_, err := c.Evaluate(ctx, tab, `setTimeout(() => document.body.append("arrived later"), 200); true`, nil)
	require.NoError(t, err)
	res, err := c.Wait(ctx, tab, json.RawMessage(`{"text":"arrived later","timeout":5000}`))
	require.NoError(t, err)
	require.True(t, field[bool](t, res, "waited"), "%s", res)

	for _, params := range []string{`{"text":"never on this page","timeout":300}`, `{"url":"/elsewhere","timeout":300}`} {
		_, err := c.Wait(ctx, tab, json.RawMessage(params))
		var wt *pinchtab.WaitTimeoutError
		require.ErrorAs(t, err, &wt, params)
	}
	for _, params := range []string{`{}`, `{"text":"a","url":"b"}`, `{"load":"soon"}`} {
		_, err := c.Wait(ctx, tab, json.RawMessage(params))
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe, params)
		require.Equal(t, 400, pe.Status, params)
	}
}

// TestNavigateReportsTheDocumentsHTTPStatus: a navigation's answer carries
// the main document's HTTP status, after redirects; a 404 page is a page
// (the navigation succeeds), and a URL without an HTTP response has none.
func TestNavigateReportsTheDocumentsHTTPStatus(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx := context.Background()
	tab := openTab(t, c)

	res, err := c.Navigate(ctx, tab, site.URL+"/", nil)
	require.NoError(t, err)
	require.Equal(t, 200, field[int](t, res, "status"), "%s", res)

	res, err = c.Navigate(ctx, tab, site.URL+"/missing", nil)
	require.NoError(t, err, "an error page is a page")
	require.Equal(t, 404, field[int](t, res, "status"), "%s", res)
	require.Equal(t, "Not here", field[string](t, res, "title"))

	res, err = c.Navigate(ctx, tab, site.URL+"/moved", nil)
	require.NoError(t, err)
	require.Equal(t, 404, field[int](t, res, "status"), "the status of the document the redirect led to: %s", res)
	require.Equal(t, site.URL+"/missing", field[string](t, res, "url"))

	res, err = c.Navigate(ctx, tab, "about:blank", nil)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(res, &m))
	require.NotContains(t, m, "status", "about:blank has no HTTP response")

	res, err = c.Navigate(ctx, tab, "data:text/html,<title>inline</title>", nil)
	require.NoError(t, err)
	m = nil
	require.NoError(t, json.Unmarshal(res, &m))
	require.Equal(t, "inline", m["title"])
	require.NotContains(t, m, "status", "a data: URL has no HTTP response (Chromium says 200)")

	blank, err := c.OpenTab(ctx, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), blank.TabID) })
	require.Equal(t, "about:blank", blank.URL, "a new tab without a URL says what it shows")
}
