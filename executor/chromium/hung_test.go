package chromium_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

// TestACancelledRequestLeavesItsTabToTheNext: a request cancelled while its
// page never yields is not followed by a probe of the page (nobody waits
// for its verdict, and it would hold the tab for its whole time): the tab
// stays, and the next request with time enough finds the page hung itself.
func TestACancelledRequestLeavesItsTabToTheNext(t *testing.T) {
	t.Parallel()
	inst := startOwn(t, chromium.Options{ActionTimeout: 5 * time.Second})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	tab := openTab(t, c)
	_, err := c.Evaluate(ctx, tab, "setTimeout(() => { for (;;) {} }, 0); 'armed'", nil)
	require.NoError(t, err)

	// The page never answers: the request is under way when it is
	// cancelled (or, on a slow machine, not started yet: then there is
	// nothing to probe either).
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	_, err = c.Read(short, tab, "text", nil)
	cancelShort()
	require.Error(t, err)

	_, err = c.Read(ctx, tab, "url", nil)
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, pinchtab.CodePageUnresponsive, pe.Code,
		"the next request found the page hung itself, not a tab a cancelled request's probe had closed: %v", err)
}

// browserPID is the process id of the browser (not a renderer) started
// with the user-data dir dir.
func browserPID(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if slices.Contains(args, "--user-data-dir="+dir) && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--type=") }) {
			return pid
		}
	}
	t.Fatalf("no browser process with --user-data-dir=%s", dir)
	return 0
}

// TestATabIsNotClosedWhenTheBrowserDoesNotAnswerEither: a page that does
// not answer the probe while the browser does not answer either is not
// taken for hung — the delay is the browser's (here: its process is
// stopped), not the page's: the request answers 504 timeout, retryable,
// and the tab stays and works once the browser runs again.
func TestATabIsNotClosedWhenTheBrowserDoesNotAnswerEither(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	inst := startOwn(t, chromium.Options{ActionTimeout: 5 * time.Second, UserDataDir: dir})
	c := client(t, inst)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // ends a hang only
	defer cancel()
	tab := openTab(t, c)
	pid := browserPID(t, dir)

	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			require.NoError(t, syscall.Kill(pid, syscall.SIGCONT))
		}
	}
	defer resume()
	_, err := c.Read(ctx, tab, "text", nil)
	resume()
	var pe *pinchtab.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, http.StatusGatewayTimeout, pe.Status, "%v", err)
	require.Equal(t, "timeout", pe.Code, "%v", err)
	require.True(t, pe.Retryable(), "%v", err)

	raw, err := c.Read(ctx, tab, "title", nil)
	require.NoError(t, err, "the tab was kept")
	require.Contains(t, string(raw), "Switchyard test form")
}
