package chromium_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// TestAHungPageIsAnsweredWithinAShortTimeout: a request that says its
// attempt has 4 s left (X-Switchyard-Timeout) on a tab whose page loops
// for ever hears page_unresponsive within those 4 s: the work, the probe
// and the tab's closing all fit in them. The client's own deadline is the
// attempt's, so an answer that comes after it is lost, as the executor's
// would be.
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

	deadline := time.Now().Add(4 * time.Second)
	actx, acancel := context.WithDeadline(pinchtab.WithRequestInfo(ctx, pinchtab.RequestInfo{Deadline: deadline}), deadline)
	defer acancel()
	_, err = c.Act(actx, tab, pinchtab.Action{Kind: "click", Selector: "#go"})
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "the answer came within the attempt's 4 s: %v", err)
	require.Equal(t, http.StatusGatewayTimeout, pe.Status)
}

// TestAVeryShortTimeoutIsNotProbed: under chromium.MinProbedTimeout there
// is no time to tell a hung page from a busy one: the request answers 504
// timeout (retryable) within its time, and the tab stays; a later request
// with time enough finds the page hung and closes its tab.
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

	status, body := rawRequest(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "1500")
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
// included, comes within it.
func TestTheTimeoutHeaderIsChecked(t *testing.T) {
	// Not parallel: its browser runs before the parallel tests' (huge_test.go's
	// health checks want a browser that is not starved of the 2 cores).
	inst := startOwn(t, chromium.Options{ActionTimeout: 5 * time.Second})
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
	// The cap is 5 s: the answer, probe included, comes within it; the
	// client waits that long and no more.
	done := make(chan struct{})
	timer := time.AfterFunc(5*time.Second, func() { close(done) })
	defer timer.Stop()
	status, body := rawRequestUntil(t, inst, http.MethodGet, "/tabs/"+tab+"/title", "99999999999", done)
	require.Equal(t, http.StatusGatewayTimeout, status, "answered within the cap: %v", body)
	require.Equal(t, pinchtab.CodePageUnresponsive, body["code"], "%v", body)
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
