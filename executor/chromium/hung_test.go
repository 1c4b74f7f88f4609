package chromium_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// startOwn starts an instance of the test's own, with a short action cap,
// skipping when Chromium is not installed.
func startOwn(t *testing.T, o chromium.Options) *chromium.Instance {
	t.Helper()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed (looked for /usr/bin/chromium and chromium on PATH): skipping the real-browser test")
	}
	o.ExecPath = path
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := chromium.Start(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = inst.Close() })
	return inst
}

// TestAHungPagesTabIsClosedWithAClearAnswer: once a page's script loops for
// ever, the next request on its tab runs out of its time; the page does not
// answer the probe either, so the instance closes the tab and says the page
// stopped responding (504 page_unresponsive, not retryable: the tab is
// gone). Later requests for the tab are 404s that say why, while other tabs
// and the health check work on.
func TestAHungPagesTabIsClosedWithAClearAnswer(t *testing.T) {
	t.Parallel()
	inst := startOwn(t, chromium.Options{ActionTimeout: 5 * time.Second})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Evaluate(ctx, tab, "setTimeout(() => { for (;;) {} }, 0); 'armed'", nil)
	require.NoError(t, err)

	start := time.Now()
	_, err = c.Read(ctx, tab, "text", nil)
	require.Less(t, time.Since(start), time.Minute, "the action cap and a short probe bound the request")
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusGatewayTimeout, pe.Status)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code, "%v", err)
	require.False(t, pe.Retryable(), "no request to the tab can succeed again")
	require.False(t, pe.InstanceFault(), "the instance is fine")
	require.Contains(t, pe.Message, "stopped responding")

	_, err = c.Read(ctx, tab, "url", nil)
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusNotFound, pe.Status, "the tab is gone")
	require.Contains(t, pe.Message, "stopped responding", "and the answer says why")
	tabs, err := c.Tabs(ctx)
	require.NoError(t, err)
	require.NotContains(t, tabIDs(tabs), tab)

	_, err = c.Health(ctx)
	require.NoError(t, err, "the instance is healthy")
	other := openTab(t, c)
	text, err := c.Read(ctx, other, "title", nil)
	require.NoError(t, err, "a new tab works")
	require.Contains(t, string(text), "Switchyard test form")
}
