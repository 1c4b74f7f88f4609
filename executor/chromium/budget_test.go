package chromium_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// TestAHungPageIsAnsweredWithinAShortTimeout: a request that says its
// attempt has 8 s left (X-Switchyard-Timeout) on a tab whose page loops
// for ever hears page_unresponsive, not a timeout of its own: the work
// (5 s), the probe (2 s) and the tab's closing fit in them. The client
// waits 1.5 s more (a busy machine may delay an answer sent in time):
// less than a probe after the 8 s would add, and far less than the
// instance's cap of a minute, which an answer that ignored the header
// would take.
func TestAHungPageIsAnsweredWithinAShortTimeout(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	inst := startOwn(t, chromium.Options{ActionTimeout: time.Minute})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Evaluate(ctx, tab, "setTimeout(() => { for (;;) {} }, 0); 'armed'", nil)
	require.NoError(t, err)

	deadline := time.Now().Add(8 * time.Second)
	actx, acancel := context.WithDeadline(pinchtab.WithRequestInfo(ctx, pinchtab.RequestInfo{Deadline: deadline}), deadline.Add(1500*time.Millisecond))
	defer acancel()
	_, err = c.Act(actx, tab, pinchtab.Action{Kind: "click", Selector: "#go"})
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "the answer came within the attempt's time: %v", err)
	require.Equal(t, http.StatusGatewayTimeout, pe.Status)
}

// TestAVeryShortTimeoutIsNotProbed: under chromium.MinProbedTimeout (4 s)
// the probe's quarter would be under a second, too little to tell a hung
// page from a busy one: the request answers 504 timeout (retryable), and
// the tab stays; a later request with time enough finds the page hung and
// closes its tab.
func TestAVeryShortTimeoutIsNotProbed(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	inst := startOwn(t, chromium.Options{ActionTimeout: time.Minute})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Evaluate(ctx, tab, "setTimeout(() => { for (;;) {} }, 0); 'armed'", nil)
	require.NoError(t, err)

	status, body := rawRequest(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "3000")
	require.Equal(t, http.StatusGatewayTimeout, status, "%s", body)
	require.Equal(t, "timeout", body["code"], "%v", body)
	require.Equal(t, true, body["retryable"])
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.Contains(t, tabIDs(tabs), tab, "the tab stays")

	status, body = rawRequest(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "8000")
	require.Equal(t, http.StatusGatewayTimeout, status, "%s", body)
	require.Equal(t, pinchtab.CodePageUnresponsive, body["code"], "%v", body)
}

// TestTheTimeoutHeaderIsChecked: an X-Switchyard-Timeout that is not a
// positive whole number of milliseconds is refused (400 bad_timeout, in
// the instance's error format), not taken for the action cap; one beyond
// the cap counts as the cap, whose answer, the probe of a hung page
// included, comes within it (work 8 s, probe 3 s): the client waits
// 1.5 s more than the cap (a busy machine may delay an answer sent in
// time), less than a probe after the cap would add.
func TestTheTimeoutHeaderIsChecked(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	inst := startOwn(t, chromium.Options{ActionTimeout: 12 * time.Second})
	c := client(t, inst)
	tab := openTab(t, c)
	for _, v := range []string{"abc", "0", "-5", "1.5", "1e3", "-99999999999999999999999"} {
		status, body := rawRequest(t, inst, http.MethodGet, "/tabs/"+tab+"/title", v)
		require.Equal(t, http.StatusBadRequest, status, "%q: %v", v, body)
		require.Equal(t, "bad_timeout", body["code"], "%q: %v", v, body)
		require.Contains(t, body["error"], pinchtab.HeaderTimeout, "%q", v)
		require.Nil(t, body["retryable"])
	}
	for _, v := range []string{"99999999999", "99999999999999999999999"} {
		status, body := rawRequest(t, inst, http.MethodGet, "/tabs/"+tab+"/title", v)
		require.Equal(t, http.StatusOK, status, "%q: %v", v, body)
	}

	_, err := c.Evaluate(context.Background(), tab, "setTimeout(() => { for (;;) {} }, 0); 'armed'", nil)
	require.NoError(t, err)
	// The cap is 12 s: the answer, probe included, comes within it.
	done := make(chan struct{})
	timer := time.AfterFunc(13500*time.Millisecond, func() { close(done) })
	defer timer.Stop()
	status, body := rawRequestUntil(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "99999999999", done)
	require.Equal(t, http.StatusGatewayTimeout, status, "answered within the cap: %v", body)
	require.Equal(t, pinchtab.CodePageUnresponsive, body["code"], "%v", body)
}

// TestARequestWaitingForABusyTabAnswersWithinItsTime: a request on a tab
// busy with a long operation (an evaluate that waits 45 s) answers 504
// timeout (retryable: the tab is busy, not lost) within its 5 s
// (X-Switchyard-Timeout), while the operation still runs, not once the tab
// is free; the client gives up after 30 s.
func TestARequestWaitingForABusyTabAnswersWithinItsTime(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	inst := startOwn(t, chromium.Options{ActionTimeout: time.Minute})
	c := client(t, inst)
	tab := openTab(t, c)
	started := make(chan struct{}, 1)
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(beacon.Close)
	first := make(chan error, 1)
	go func() {
		_, err := c.Evaluate(context.Background(), tab,
			`new Promise(done => { fetch("`+beacon.URL+`", {mode: "no-cors"}); setTimeout(() => done("done"), 45000) })`, nil)
		first <- err
	}()
	select {
	case <-started: // the evaluate runs: the tab is busy
	case err := <-first:
		t.Fatalf("the long evaluate ended at once: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the long evaluate did not start")
	}

	done := make(chan struct{})
	timer := time.AfterFunc(30*time.Second, func() { close(done) })
	defer timer.Stop()
	status, body := rawRequestUntil(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "5000", done)
	require.Equal(t, http.StatusGatewayTimeout, status, "answered within its time: %v", body)
	require.Equal(t, "timeout", body["code"], "%v", body)
	require.Equal(t, true, body["retryable"])
	require.Contains(t, body["error"], "busy")
	select {
	case err := <-first:
		t.Fatalf("the evaluate ended before the answer (%v): the request waited for the tab", err)
	default:
	}
}

// rawRequest sends a request with the X-Switchyard-Timeout timeout and
// returns its status and decoded body.
func rawRequest(t *testing.T, inst *chromium.Instance, method, path, timeout string) (int, map[string]any) {
	t.Helper()
	return rawRequestUntil(t, inst, method, path, timeout, nil)
}

// rawRequestUntil is rawRequest that gives up when done is closed (status 0).
func rawRequestUntil(t *testing.T, inst *chromium.Instance, method, path, timeout string, done <-chan struct{}) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if done != nil {
		go func() {
			select {
			case <-done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	u, err := url.JoinPath(inst.URL(), path)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, method, u, strings.NewReader(""))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+inst.Token())
	req.Header[pinchtab.HeaderTimeout] = []string{timeout}
	resp, err := http.DefaultClient.Do(req)
	if err != nil && ctx.Err() != nil {
		return 0, map[string]any{"error": "no answer in time: " + err.Error()}
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var body map[string]any
	if len(data) > 0 && data[0] == '{' {
		require.NoError(t, json.Unmarshal(data, &body), "%s", data)
	}
	return resp.StatusCode, body
}
