package chromium_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// dialogPage opens each kind of JavaScript dialog from a button, and says
// what the dialog answered in #out. /leave asks before it is left (once it
// had a click: a page without a user's gesture may not ask).
const dialogPage = `<!doctype html><title>Dialogs</title>
<button id="alert" onclick="alert('Hello from alert'); out.textContent = 'after alert'">A</button>
<button id="confirm" onclick="out.textContent = confirm('Sure?') ? 'yes' : 'no'">C</button>
<button id="prompt" onclick="out.textContent = 'name=' + prompt('Name?', 'def')">P</button>
<a id="away" href="/other">away</a>
<div id="out"></div>`

func dialogSite(t *testing.T) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/leave":
			_, _ = io.WriteString(w, dialogPage+`<script>addEventListener("beforeunload", e => { e.preventDefault(); e.returnValue = "" })</script>`)
		case "/alerting":
			_, _ = io.WriteString(w, `<!doctype html><title>Alerting</title><script>alert("while loading")</script><div id="out">loaded</div>`)
		case "/other":
			_, _ = io.WriteString(w, `<!doctype html><title>Other</title><p>other page`)
		default:
			_, _ = io.WriteString(w, dialogPage)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// dialogTab opens a tab on the page at u.
func dialogTab(t *testing.T, c *pinchtab.Client, u string) string {
	t.Helper()
	tab, err := c.OpenTab(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), tab.TabID) })
	_, err = c.Navigate(context.Background(), tab.TabID, u, nil)
	require.NoError(t, err)
	return tab.TabID
}

// requireBlocked checks that err is the answer of an operation a dialog
// held up: 500 dialog_blocking, not retryable, naming the dialog.
func requireBlocked(t *testing.T, err error, op, typ, msg string) {
	t.Helper()
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusInternalServerError, pe.Status, "%v", err)
	require.Equal(t, "dialog_blocking", pe.Code, "%v", err)
	require.False(t, pe.Retryable(), "the same operation is held up again until the dialog is answered")
	require.False(t, pe.InstanceFault())
	require.Contains(t, pe.Message, op+" blocked by JavaScript dialog ("+typ+": \""+msg+"\")")
}

func outText(t *testing.T, c *pinchtab.Client, tab string) string {
	t.Helper()
	raw, err := c.Text(context.Background(), tab, "#out", nil)
	require.NoError(t, err)
	return field[string](t, raw, "text")
}

// TestADialogHoldsUpItsTabUntilItIsAnswered: a click that opens an alert
// answers at once that the dialog holds it up (500 dialog_blocking, not
// after its time ran out), and so does every operation on the tab until
// POST /tabs/{id}/dialog answers the dialog; the tab is not taken for
// hung, and the page goes on once the dialog is answered. With no dialog
// open, POST /tabs/{id}/dialog is a 400.
func TestADialogHoldsUpItsTabUntilItIsAnswered(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	tab := dialogTab(t, c, dialogSite(t).URL)

	_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#alert"})
	requireBlocked(t, err, "click", "alert", "Hello from alert")
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	_, err = c.Text(ctx, tab, "", nil)
	requireBlocked(t, err, "text", "alert", "Hello from alert")
	_, err = c.Evaluate(ctx, tab, "1 + 1", nil)
	requireBlocked(t, err, "evaluate", "alert", "Hello from alert")
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Contains(t, tabIDs(tabs), tab, "a page held by a dialog is not hung: its tab stays")

	raw, err := c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"alert","message":"Hello from alert","handled":true}`, string(raw))
	require.Equal(t, "after alert", outText(t, c, tab), "the page went on")

	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusBadRequest, pe.Status, "%v", err)
	require.Contains(t, pe.Message, "no dialog open on tab "+tab)
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"maybe"}`))
	require.Equal(t, http.StatusBadRequest, pinchtab.StatusOf(err), "%v", err)

	// A script's own dialog holds up the request that runs it, and
	// dismissing a confirm answers false.
	_, err = c.Evaluate(ctx, tab, "out.textContent = String(confirm('Proceed?'))", nil)
	requireBlocked(t, err, "evaluate", "confirm", "Proceed?")
	raw, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"dismiss"}`))
	require.NoError(t, err)
	require.Equal(t, "confirm", field[string](t, raw, "type"))
	require.Equal(t, "false", outText(t, c, tab))

	// A prompt takes the answer's text; without one, its default.
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#prompt"})
	requireBlocked(t, err, "click", "prompt", "Name?")
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept","text":"Ada"}`))
	require.NoError(t, err)
	require.Equal(t, "name=Ada", outText(t, c, tab))
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#prompt"})
	requireBlocked(t, err, "click", "prompt", "Name?")
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.NoError(t, err)
	require.Equal(t, "name=def", outText(t, c, tab))
}

// TestAClickAnswersTheDialogItOpens: "dialogAction" (and "dialogText" for a
// prompt) answers the dialog the click opens, in the same request, which
// succeeds and says what the dialog was.
func TestAClickAnswersTheDialogItOpens(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	tab := dialogTab(t, c, dialogSite(t).URL)

	raw, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#confirm", Params: json.RawMessage(`{"dialogAction":"dismiss"}`)})
	require.NoError(t, err)
	require.Equal(t, "confirm", field[string](t, raw, "result", "dialog", "type"))
	require.Equal(t, "Sure?", field[string](t, raw, "result", "dialog", "message"))
	require.Equal(t, "no", outText(t, c, tab))

	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#prompt", Params: json.RawMessage(`{"dialogAction":"accept","dialogText":"Grace"}`)})
	require.NoError(t, err)
	require.Equal(t, "name=Grace", outText(t, c, tab))

	// A click that opens no dialog leaves nothing armed for the next one.
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#out", Params: json.RawMessage(`{"dialogAction":"accept"}`)})
	require.NoError(t, err)
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#confirm"})
	requireBlocked(t, err, "click", "confirm", "Sure?")
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.NoError(t, err)
	require.Equal(t, "yes", outText(t, c, tab))

	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#alert", Params: json.RawMessage(`{"dialogAction":"later"}`)})
	require.Equal(t, http.StatusBadRequest, pinchtab.StatusOf(err), "%v", err)
}

// TestLeavingAPageThatAsksFirst: a page that asks before it is left
// (beforeunload) does not hold up a navigation or a reload the caller asked
// for (its question is accepted), nor the closing of its tab; a click that
// leaves it is held up by its question like by any dialog, until answered.
func TestLeavingAPageThatAsksFirst(t *testing.T) {
	t.Parallel()
	c := client(t, instance(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	s := dialogSite(t)
	tab := dialogTab(t, c, s.URL+"/leave")
	gesture := func() { // a page may ask only after a user's gesture
		t.Helper()
		_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#out"})
		require.NoError(t, err)
	}

	gesture()
	raw, err := c.Navigate(ctx, tab, s.URL+"/other", nil)
	require.NoError(t, err)
	require.Equal(t, "Other", field[string](t, raw, "title"))

	_, err = c.Navigate(ctx, tab, s.URL+"/leave", nil)
	require.NoError(t, err)
	_, err = c.Evaluate(ctx, tab, "window.before = true", nil)
	require.NoError(t, err)
	gesture()
	_, err = c.Post(ctx, tab, "reload", nil, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the reload answers as it starts
		raw, err := c.Evaluate(ctx, tab, `!window.before && document.readyState === "complete"`, nil)
		return err == nil && string(field[json.RawMessage](t, raw, "result")) == "true"
	}, time.Minute, 20*time.Millisecond, "the page was reloaded")

	gesture()
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#away", Params: json.RawMessage(`{"waitNav":true}`)})
	requireBlocked(t, err, "click", "beforeunload", "")
	raw, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.NoError(t, err)
	require.Equal(t, "beforeunload", field[string](t, raw, "type"))
	require.Eventually(t, func() bool { // the page leaves once the question is answered
		raw, err := c.Evaluate(ctx, tab, `location.pathname === "/other" && document.readyState === "complete"`, nil)
		return err == nil && string(field[json.RawMessage](t, raw, "result")) == "true"
	}, time.Minute, 20*time.Millisecond, "the page was left")

	// Closing a tab whose page asks, or whose dialog is open, closes it.
	_, err = c.Navigate(ctx, tab, s.URL+"/leave", nil)
	require.NoError(t, err)
	gesture()
	_, err = c.Evaluate(ctx, tab, "alert('still here')", nil)
	requireBlocked(t, err, "evaluate", "alert", "still here")
	require.NoError(t, c.CloseTab(ctx, tab))
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.NotContains(t, tabIDs(tabs), tab)
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err), "the tab and its dialog are gone: %v", err)
}

// TestDialogAutoAccept: an instance that accepts every dialog as it opens
// holds no operation up: a confirm is accepted, a prompt takes its default.
func TestDialogAutoAccept(t *testing.T) {
	t.Parallel()
	inst := startOwn(t, chromium.Options{DialogAutoAccept: true, ActionTimeout: 30 * time.Second})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	tab := dialogTab(t, c, dialogSite(t).URL)

	_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#confirm"})
	require.NoError(t, err)
	require.Equal(t, "yes", outText(t, c, tab))
	_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#prompt"})
	require.NoError(t, err)
	require.Equal(t, "name=def", outText(t, c, tab))
	_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.Equal(t, http.StatusBadRequest, pinchtab.StatusOf(err), "nothing is left open: %v", err)
}

// postJSON posts body to path of the instance and returns the answer's
// status and decoded body.
func postJSON(t *testing.T, ctx context.Context, inst *chromium.Instance, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, inst.URL()+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+inst.Token())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// TestATabOpenedAtAPageThatAlertsIsKept: a tab opened with a URL whose page
// opens a dialog while it loads is held up by it as a tab opened blank and
// then navigated there is: the answer is 500 dialog_blocking, naming the
// dialog and the tab (details.tabId), the tab stays, and POST
// /tabs/{id}/dialog answers the dialog, after which the page goes on.
func TestATabOpenedAtAPageThatAlertsIsKept(t *testing.T) {
	t.Parallel()
	inst := instance(t)
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	status, body := postJSON(t, ctx, inst, "/tab", `{"action":"new","url":"`+dialogSite(t).URL+`/alerting"}`)
	require.Equal(t, http.StatusInternalServerError, status, "%v", body)
	require.Equal(t, "dialog_blocking", body["code"], "%v", body)
	details, ok := body["details"].(map[string]any)
	require.True(t, ok, "%v", body)
	require.Equal(t, "alert", details["dialog_type"])
	require.Equal(t, "while loading", details["dialog_message"])
	tab, _ := details["tabId"].(string)
	require.NotEmpty(t, tab, "the answer names the tab the dialog holds: %v", body)
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), tab) })

	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Contains(t, tabIDs(tabs), tab, "the tab is kept, as after a navigation its page held up")
	_, err = c.Read(ctx, tab, "title", nil)
	requireBlocked(t, err, "title", "alert", "while loading")
	raw, err := c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"alert","message":"while loading","handled":true}`, string(raw))
	require.Eventually(t, func() bool { // the page loads on once the dialog is answered
		raw, err := c.Evaluate(ctx, tab, `document.readyState === "complete" && out.textContent`, nil)
		return err == nil && string(field[json.RawMessage](t, raw, "result")) == `"loaded"`
	}, time.Minute, 20*time.Millisecond, "the page loaded")
}

// popupSite serves an opener page whose link opens a popup on another site
// (localhost rather than 127.0.0.1: a renderer of its own) at path.
func popupSite(t *testing.T, popup http.HandlerFunc) (opener string) {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/" {
			u := strings.Replace("http://"+r.Host, "127.0.0.1", "localhost", 1)
			_, _ = io.WriteString(w, `<!doctype html><title>Opener</title><a id="pop" target="_blank" href="`+u+`/popup">pop</a>`)
			return
		}
		popup(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL + "/"
}

// openPopup clicks the opener's link in tab and returns the popup's tab.
func openPopup(t *testing.T, ctx context.Context, c *pinchtab.Client, tab string) string {
	t.Helper()
	_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#pop"})
	require.NoError(t, err)
	var popup string
	require.Eventually(t, func() bool {
		tabs, err := c.Tabs(ctx)
		require.NoError(t, err)
		for _, tb := range tabs {
			if strings.HasSuffix(tb.URL, "/popup") {
				popup = tb.ID
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "the popup is listed")
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), popup) })
	return popup
}

// TestAPopupThatOpensWithADialogShowingIsAnsweredInTime: the first request
// on a popup whose page opened an alert as it loaded ends within its time
// (it waited on the page with no limit), and the dialog is reported as on
// any tab (500 dialog_blocking, answered by POST /tabs/{id}/dialog): the
// instance asks for the popup's dialogs as soon as the browser reports
// the popup. Should the page still show its dialog before that (the
// browser's protocol then neither reports nor answers it, and the page
// answers nothing), the page is silent while the browser answers, and the
// popup is closed as a page that stopped responding.
func TestAPopupThatOpensWithADialogShowingIsAnsweredInTime(t *testing.T) {
	t.Parallel()
	inst := startOwn(t, chromium.Options{ActionTimeout: 8 * time.Second})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	opener := dialogTab(t, c, popupSite(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `<!doctype html><title>Popup</title><script>alert("popup says hi")</script><div id="out">loaded</div>`)
	}))
	popup := openPopup(t, ctx, c, opener)

	_, err := c.Read(ctx, popup, "title", nil)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe, "the instance answered, within the request's time")
	t.Logf("the first request on the popup: %v", err)
	switch pe.Code {
	case "dialog_blocking":
		requireBlocked(t, err, "title", "alert", "popup says hi")
		raw, err := c.Post(ctx, popup, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"type":"alert","message":"popup says hi","handled":true}`, string(raw))
		require.Eventually(t, func() bool {
			raw, err := c.Read(ctx, popup, "title", nil)
			return err == nil && field[string](t, raw, "title") == "Popup"
		}, time.Minute, 20*time.Millisecond, "the popup goes on once its dialog is answered")
	case pinchtab.CodePageUnresponsive:
		tabs, err := c.Tabs(ctx)
		require.NoError(t, err)
		require.NotContains(t, tabIDs(tabs), popup, "a popup closed as unresponsive is gone")
	default:
		t.Fatalf("neither dialog_blocking nor page_unresponsive: %v", err)
	}
	_, err = c.Read(ctx, opener, "title", nil)
	require.NoError(t, err, "the opener works on")
}

// TestAPopupsDialogIsReportedAsAnyTabs: a dialog a popup's page opens once
// the instance follows the popup holds up the popup's requests (500
// dialog_blocking, naming it) until POST /tabs/{id}/dialog answers it.
func TestAPopupsDialogIsReportedAsAnyTabs(t *testing.T) {
	t.Parallel()
	inst := instance(t)
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	release := make(chan struct{})
	opener := dialogTab(t, c, popupSite(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/go" {
			select { // the popup alerts once the test has followed it
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		_, _ = io.WriteString(w, `<!doctype html><title>Popup</title><div id="out">waiting</div>
<script>fetch("/go").then(() => { out.textContent = String(confirm("Go on?")) })</script>`)
	}))
	popup := openPopup(t, ctx, c, opener)
	require.Eventually(t, func() bool {
		raw, err := c.Read(ctx, popup, "title", nil)
		return err == nil && field[string](t, raw, "title") == "Popup"
	}, time.Minute, 20*time.Millisecond, "the popup loaded")
	close(release)

	require.Eventually(t, func() bool {
		_, err := c.Read(ctx, popup, "title", nil)
		return err != nil
	}, time.Minute, 20*time.Millisecond, "the popup's dialog holds it up")
	_, err := c.Read(ctx, popup, "title", nil)
	requireBlocked(t, err, "title", "confirm", "Go on?")
	raw, err := c.Post(ctx, popup, "dialog", nil, json.RawMessage(`{"action":"dismiss"}`))
	require.NoError(t, err)
	require.Equal(t, "confirm", field[string](t, raw, "type"))
	require.Equal(t, "false", outText(t, c, popup))
}
