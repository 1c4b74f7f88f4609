// Package instancetest is the conformance suite for browser instances: the
// part of PinchTab's instance API Switchyard relies on, checked the same way
// against every implementation — the built-in Chromium instance and the
// PinchTab double (pinchtabtest) — so that they cannot drift apart, nor from
// PinchTab.
//
// An implementation passes when:
//   - GET /health answers the bearer token with {"status":"ok","tabs":N}
//     (PinchTab wants the token there too; the built-in Chromium does not);
//   - every other route wants the bearer token: 401 with code
//     "missing_token" without one, "bad_token" with a wrong one;
//   - POST /tab {"action":"new"} opens a tab that /health counts and that
//     GET /tabs lists once it shows a page (PinchTab's list leaves out blank
//     tabs, the built-in Chromium's does not);
//   - a form can be navigated to, filled, clicked and read back;
//   - failures answer {"error","code"} with a 4xx or 5xx status, and no
//     "retryable": true when retrying cannot help (a selector that matches
//     nothing, an unknown action kind, an unknown tab);
//   - a click that navigates answers 409 "navigation_changed", not
//     retryable, unless it said "waitNav": true, which makes it a success
//     on the new page; a click that does not navigate is no such thing;
//   - back, forward and reload have their own routes (nothing happens at
//     either end of the history), and /wait waits for a selector;
//   - a wait whose selector does not match within its timeout answers 200
//     {"waited":false,"error":"…"}, with the instance's reason, which the
//     client's Wait turns into a *pinchtab.WaitTimeoutError (the executor
//     fails the attempt with the code wait_timeout);
//   - a click that opens a JavaScript dialog answers 500 "dialog_blocking",
//     not retryable, naming the dialog, and so does the next click while
//     it is open; POST /tabs/{id}/dialog answers it
//     ({"type","message","handled":true}), after which the page goes on,
//     and is a 400 "no dialog open on tab …" when none is; a click whose
//     "dialogAction" answers the dialog it opens succeeds;
//   - a closed tab is gone from GET /tabs and answers 404.
package instancetest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// Target is an instance under test.
type Target struct {
	URL   string
	Token string
	// FormURL shows the suite's form: an input #name, a button #go that sets
	// #out's text to "Hello, <name>!", an element #out, a button #ask
	// that asks confirm("Sure?") and sets #out's text to "yes" or "no", and
	// a link #next to another page (FormURL + "/second").
	FormURL string
}

// Run runs the suite against the instance newTarget starts (once per test).
func Run(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Run("HealthAnswersTheToken", func(t *testing.T) {
		tg := newTarget(t)
		status, body := raw(t, http.MethodGet, tg.URL+"/health", "Bearer "+tg.Token, "")
		require.Equal(t, http.StatusOK, status, body)
		var h struct {
			Status string `json:"status"`
			Tabs   *int   `json:"tabs"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &h), body)
		require.Equal(t, "ok", h.Status)
		require.NotNil(t, h.Tabs, "a single instance counts its tabs")
	})

	t.Run("EveryOtherRouteWantsTheToken", func(t *testing.T) {
		tg := newTarget(t)
		status, body := raw(t, http.MethodGet, tg.URL+"/tabs", "", "")
		require.Equal(t, http.StatusUnauthorized, status)
		require.Equal(t, "missing_token", codeOf(t, body))
		status, body = raw(t, http.MethodGet, tg.URL+"/tabs", "Bearer wrong-"+tg.Token, "")
		require.Equal(t, http.StatusUnauthorized, status)
		require.Equal(t, "bad_token", codeOf(t, body))
	})

	t.Run("AFormCanBeFilledClickedAndRead", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		_, err := c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "fill", Selector: "#name", Params: json.RawMessage(`{"text":"Ada"}`)})
		require.NoError(t, err)
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#go"})
		require.NoError(t, err)
		res, err := c.Text(ctx, tab, "#out", nil)
		require.NoError(t, err)
		var text struct{ Text string }
		require.NoError(t, json.Unmarshal(res, &text))
		require.Equal(t, "Hello, Ada!", strings.TrimSpace(text.Text))
	})

	t.Run("TabsAreListedAndCounted", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		h, err := c.Health(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, h.Tabs, 1, "/health counts the blank tab")
		_, err = c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		tabs, err := c.Tabs(ctx)
		require.NoError(t, err)
		ids := make([]string, 0, len(tabs))
		for _, x := range tabs {
			ids = append(ids, x.ID)
		}
		require.Contains(t, ids, tab, "a tab that shows a page is listed")
		h, err = c.Health(ctx)
		require.NoError(t, err)
		require.GreaterOrEqual(t, h.Tabs, len(tabs), "/health counts every tab GET /tabs lists")
	})

	t.Run("FailuresCarryACodeAndNoRetryableFlagWhenRetryingCannotHelp", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		_, err := c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		for name, call := range map[string]func() error{
			"a text selector that matches nothing": func() error { _, err := c.Text(ctx, tab, "#nothing-here", nil); return err },
			"a click on nothing": func() error {
				_, err := c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#nothing-here"})
				return err
			},
			"an unknown tab": func() error { _, err := c.Text(ctx, "NO-SUCH-TAB", "", nil); return err },
		} {
			err := call()
			var pe *pinchtab.Error
			require.ErrorAs(t, err, &pe, name)
			require.GreaterOrEqual(t, pe.Status, 400, name)
			require.NotEmpty(t, pe.Code, "%s: the body has a code", name)
			require.False(t, pe.RetryableFlag, "%s: not retryable", name)
			require.False(t, pe.Retryable(), name)
			require.False(t, pe.InstanceFault(), name)
		}
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "levitate", Selector: "#go"})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, http.StatusBadRequest, pe.Status, "an unknown action kind")
	})

	t.Run("AClickThatNavigatesSaysSoUnlessItWaitsForTheNavigation", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		second := strings.TrimSuffix(tg.FormURL, "/") + "/second"
		urlNow := func() string {
			res, err := c.Read(ctx, tab, "url", nil)
			require.NoError(t, err)
			var out struct{ URL string }
			require.NoError(t, json.Unmarshal(res, &out), string(res))
			return strings.TrimSuffix(out.URL, "/")
		}
		_, err := c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#go"})
		require.NoError(t, err, "a click that stays on the page")

		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#next"})
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, http.StatusConflict, pe.Status)
		require.Equal(t, "navigation_changed", pe.Code)
		require.False(t, pe.RetryableFlag, "clicking again would click on the next page")
		require.False(t, pe.Retryable())
		require.False(t, pe.InstanceFault())

		_, err = c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#next", Params: json.RawMessage(`{"waitNav":true}`)})
		require.NoError(t, err, "a click that may navigate, and says so")
		require.Equal(t, second, urlNow(), "on the new page when the click answers")
	})

	t.Run("HistoryAndWaitHaveTheirOwnRoutes", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		second := strings.TrimSuffix(tg.FormURL, "/") + "/second"
		for _, u := range []string{tg.FormURL, second} {
			_, err := c.Navigate(ctx, tab, u, nil)
			require.NoError(t, err)
		}
		urlOf := func(res json.RawMessage) string {
			var out struct{ URL string }
			require.NoError(t, json.Unmarshal(res, &out))
			return strings.TrimSuffix(out.URL, "/")
		}
		res, err := c.Post(ctx, tab, "back", nil, nil)
		require.NoError(t, err)
		require.Equal(t, strings.TrimSuffix(tg.FormURL, "/"), urlOf(res))
		res, err = c.Post(ctx, tab, "forward", nil, nil)
		require.NoError(t, err)
		require.Equal(t, second, urlOf(res))
		_, err = c.Post(ctx, tab, "forward", nil, nil)
		require.NoError(t, err, "at the end of the history, nothing happens")
		_, err = c.Post(ctx, tab, "reload", nil, nil)
		require.NoError(t, err)
		_, err = c.Post(ctx, tab, "back", nil, nil)
		require.NoError(t, err)

		var waited struct{ Waited bool }
		res, err = c.Post(ctx, tab, "wait", nil, json.RawMessage(`{"selector":"#name","timeout":5000}`))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(res, &waited))
		require.True(t, waited.Waited, "#name is on the form")
	})

	t.Run("AWaitThatRunsOutOfTimeSaysSo", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		_, err := c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		// On the wire: 200, with "waited": false and the instance's reason.
		res, err := c.Post(ctx, tab, "wait", nil, json.RawMessage(`{"selector":"#nothing-here","timeout":200}`))
		require.NoError(t, err, "no HTTP error: the answer says it")
		var timedOut struct {
			Waited *bool
			Error  string
		}
		require.NoError(t, json.Unmarshal(res, &timedOut), string(res))
		require.NotNil(t, timedOut.Waited, string(res))
		require.False(t, *timedOut.Waited, "the time ran out")
		require.NotEmpty(t, timedOut.Error, "it says why, in its own words")

		// The client's Wait, which the executor uses, reads it as a
		// failure with the code wait_timeout and the instance's text.
		_, err = c.Wait(ctx, tab, json.RawMessage(`{"timeout":200}`), "selector", "#nothing-here")
		var wt *pinchtab.WaitTimeoutError
		require.ErrorAs(t, err, &wt)
		require.Equal(t, pinchtab.CodeWaitTimeout, wt.ErrorCode())
		require.NotEmpty(t, wt.Message)
		require.Contains(t, err.Error(), wt.Message)
		res, err = c.Wait(ctx, tab, json.RawMessage(`{"timeout":5000}`), "selector", "#name")
		require.NoError(t, err, "a wait that is met is no failure")
		require.NoError(t, json.Unmarshal(res, &timedOut), string(res))
		require.True(t, *timedOut.Waited)
	})

	t.Run("ADialogHoldsUpTheClickUntilItIsAnswered", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		_, err := c.Navigate(ctx, tab, tg.FormURL, nil)
		require.NoError(t, err)
		out := func() string {
			t.Helper()
			res, err := c.Text(ctx, tab, "#out", nil)
			require.NoError(t, err)
			var text struct{ Text string }
			require.NoError(t, json.Unmarshal(res, &text))
			return strings.TrimSpace(text.Text)
		}
		blocked := func(err error) {
			t.Helper()
			var pe *pinchtab.Error
			require.ErrorAs(t, err, &pe)
			require.Equal(t, http.StatusInternalServerError, pe.Status, "%v", err)
			require.Equal(t, "dialog_blocking", pe.Code, "%v", err)
			require.False(t, pe.Retryable(), "the click is held up again until the dialog is answered")
			require.Contains(t, pe.Message, `click blocked by JavaScript dialog (confirm: "Sure?")`)
		}

		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#ask"})
		blocked(err)
		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#go"})
		blocked(err)
		res, err := c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
		require.NoError(t, err)
		require.JSONEq(t, `{"type":"confirm","message":"Sure?","handled":true}`, string(res))
		require.Equal(t, "yes", out(), "the page went on with the answer")

		_, err = c.Post(ctx, tab, "dialog", nil, json.RawMessage(`{"action":"accept"}`))
		var pe *pinchtab.Error
		require.ErrorAs(t, err, &pe)
		require.Equal(t, http.StatusBadRequest, pe.Status, "%v", err)
		require.Contains(t, pe.Message, "no dialog open on tab "+tab)

		_, err = c.Act(ctx, tab, pinchtab.Action{Kind: "click", Selector: "#ask", Params: json.RawMessage(`{"dialogAction":"dismiss"}`)})
		require.NoError(t, err, "the click answered the dialog it opened")
		require.Equal(t, "no", out())
	})

	t.Run("AClosedTabIsGone", func(t *testing.T) {
		tg := newTarget(t)
		c, tab := open(t, tg)
		ctx := context.Background()
		require.NoError(t, c.CloseTab(ctx, tab))
		tabs, err := c.Tabs(ctx)
		require.NoError(t, err)
		for _, x := range tabs {
			require.NotEqual(t, tab, x.ID)
		}
		_, err = c.Read(ctx, tab, "title", nil)
		require.Equal(t, http.StatusNotFound, pinchtab.StatusOf(err))
	})
}

// open returns a client of the target and a new tab, closed with the test.
func open(t *testing.T, tg Target) (*pinchtab.Client, string) {
	t.Helper()
	c, err := pinchtab.New(tg.URL, tg.Token)
	require.NoError(t, err)
	opened, err := c.OpenTab(context.Background(), "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseTab(context.Background(), opened.TabID) })
	return c, opened.TabID
}

func raw(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

func codeOf(t *testing.T, body string) string {
	t.Helper()
	var e struct {
		Code string `json:"code"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Code
}
