package playground_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/web/playground"
	"github.com/switchyard/switchyard/graph/web/playground/internal/echoserver"
)

// Selectors of GraphiQL 5's editors (Monaco) and run button.
const (
	queryEditor    = ".graphiql-query-editor"
	headersEditor  = ".graphiql-editor-tool .graphiql-editor:not(.hidden)"
	responseEditor = ".graphiql-response"
	runButton      = ".graphiql-execute-button"
	prettifyButton = `.graphiql-toolbar button[aria-label^="Prettify"]`
)

// pageLog records what the page did: every request and WebSocket it opened,
// and the errors it reported.
type pageLog struct {
	mu       sync.Mutex
	requests []string
	sockets  []string
	errors   []string
}

func (l *pageLog) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.requests = append(l.requests, ev.Request.URL)
	case *network.EventWebSocketCreated:
		l.sockets = append(l.sockets, ev.URL)
	case *runtime.EventExceptionThrown:
		msg := ev.ExceptionDetails.Text
		if ex := ev.ExceptionDetails.Exception; ex != nil {
			msg += " " + ex.Description
		}
		l.errors = append(l.errors, "exception: "+msg)
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			l.errors = append(l.errors, string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
		}
	}
}

func (l *pageLog) snapshot() (requests, sockets, errors []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.requests...), append([]string(nil), l.sockets...), append([]string(nil), l.errors...)
}

func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("chromium is not installed (/usr/bin/chromium): skipping the playground browser test; install Debian's chromium to run it")
	return ""
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("SWITCHYARD_TEST_ARTIFACTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

// editorText reads what a Monaco editor shows (Monaco renders spaces as
// no-break spaces).
func editorText(sel string) string {
	return `(() => { const el = document.querySelector(` + jsString(sel+" .view-lines") + `);
		return el ? el.innerText.replace(/\u00a0/g, ' ') : ''; })()`
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// typeInto focuses a Monaco editor, selects everything in it and types text
// with key events, as a person would. Monaco closes brackets and quotes as
// they are typed; what it added after the cursor is deleted at the end.
func typeInto(sel, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		err := chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(sel+" .view-lines")),
			chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
			chromedp.KeyEvent(kb.Delete),
			chromedp.KeyEvent(text),
			chromedp.KeyEvent(kb.Escape), // close the suggestion list, if open
			chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl, chromedp.ModifierShift)),
			chromedp.KeyEvent(kb.Delete),
		)
		return chromedp.Void{}, err
	}
}

// waitForText waits until the editor shows want and returns its text.
func waitForText(sel, want string) chromedp.Action[string] {
	return chromedp.Poll[string](
		`(() => { const t = `+editorText(sel)+`; return t.includes(`+jsString(want)+`) ? t : false; })()`,
		chromedp.WithPollingTimeout(20*time.Second),
	)
}

func TestPlaygroundRunsQueriesAndSubscriptionsInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)

	const defaultQuery = "# Switchyard test playground\n{ hello }\n"
	page, err := playground.Handler(playground.Options{
		Title:        "Switchyard test",
		DefaultQuery: defaultQuery,
		AuthRequired: true,
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", page)
	mux.Handle("/graphql", echoserver.New())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	server, err := url.Parse(srv.URL)
	require.NoError(t, err)

	// Every host but the test server's is unreachable: names do not
	// resolve, and anything not on loopback goes to a closed proxy port.
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.WindowSize(1400, 900),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+server.Hostname()),
			chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		)...)
	t.Cleanup(cancelAlloc)
	var seen pageLog
	ctx, cancel := chromedp.NewContext(allocCtx, chromedp.WithListener(seen.listen))
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	artifacts := artifactsDir(t)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		// Show what the page looked like and what it said when it failed.
		if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			p := filepath.Join(artifacts, "playground-failure.png")
			if os.WriteFile(p, shot, 0o644) == nil {
				t.Logf("screenshot of the failure: %s", p)
			}
		}
		requests, sockets, errors := seen.snapshot()
		for i, r := range requests {
			if len(r) > 120 {
				requests[i] = r[:120] + "…"
			}
		}
		t.Logf("requests: %q\nsockets: %q\nerrors: %q", requests, sockets, errors)
		for _, sel := range []string{queryEditor, headersEditor, responseEditor} {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](editorText(sel)))
			t.Logf("%s shows:\n%s", sel, text)
		}
	})

	// The page loads, and the server's default query is in the editor.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(queryEditor+" .view-lines")),
	))
	_, err = chromedp.Run(ctx, waitForText(queryEditor, "# Switchyard test playground"))
	require.NoError(t, err, "the default query set by the server should fill the editor")
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	require.Equal(t, "Switchyard test", title)

	// The schema came in by introspection: the documentation explorer lists
	// the root types and the schema's descriptions.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`.graphiql-sidebar button[aria-label="Show Documentation Explorer"]`)),
		chromedp.Click(chromedp.CSS(`.graphiql-plugin a.graphiql-doc-explorer-type-name`)),
	))
	docs, err := chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const el = document.querySelector('.graphiql-plugin');
			const t = el ? el.innerText : ''; return t.includes('Always "world".') ? t : false; })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	require.NoError(t, err, "the documentation explorer should show the field descriptions of the schema")
	require.Contains(t, docs, "hello")

	// With auth on, the headers editor is open with the Authorization template.
	_, err = chromedp.Run(ctx, waitForText(headersEditor, `"Authorization": "Bearer <token>"`))
	require.NoError(t, err)

	// A typed query runs over HTTP and its answer shows in the result panel.
	require.NoError(t, chromedp.Do(ctx,
		typeInto(queryEditor, "{ hello }"),
		chromedp.Click(chromedp.CSS(runButton)),
	))
	got, err := chromedp.Run(ctx, waitForText(responseEditor, `"hello": "world"`))
	require.NoError(t, err, "the result panel should show the query's answer")
	require.Contains(t, got, `"data"`)

	// The token typed in the headers editor goes with HTTP requests...
	require.NoError(t, chromedp.Do(ctx,
		typeInto(headersEditor, `{"Authorization": "Bearer t0k3n"}`),
		typeInto(queryEditor, "{ authorization }"),
	))
	// (Prettify formats the headers too: the JSON-with-comments formatter
	// that stands in for prettier's babel plugin works.)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(prettifyButton))))
	_, err = chromedp.Run(ctx, waitForText(headersEditor, "{\n  \"Authorization\": \"Bearer t0k3n\"\n}"))
	require.NoError(t, err, "prettify should lay the headers out one entry per line")
	_, err = chromedp.Run(ctx, waitForText(queryEditor, "{\n  authorization\n}"))
	require.NoError(t, err, "prettify should format the query")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(runButton))))
	_, err = chromedp.Run(ctx, waitForText(responseEditor, `"authorization": "Bearer t0k3n"`))
	require.NoError(t, err, "the HTTP request should carry the Authorization header from the headers editor")

	// ...and in the connection_init payload of the subscription's WebSocket.
	require.NoError(t, chromedp.Do(ctx,
		typeInto(queryEditor, "subscription { authorization }"),
		chromedp.Click(chromedp.CSS(runButton)),
	))
	_, err = chromedp.Run(ctx, waitForText(responseEditor, `"authorization": "Bearer t0k3n"`))
	require.NoError(t, err, "the subscription should see the token in connection_init")

	// A subscription streams its events into the result panel.
	require.NoError(t, chromedp.Do(ctx,
		typeInto(queryEditor, "subscription { count(to: 3) }"),
		chromedp.Click(chromedp.CSS(runButton)),
	))
	_, err = chromedp.Run(ctx, waitForText(responseEditor, `"count": 3`))
	require.NoError(t, err, "the subscription's last event should show")

	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	shotPath := filepath.Join(artifacts, "playground-subscription.png")
	require.NoError(t, os.WriteFile(shotPath, shot, 0o644))
	t.Logf("screenshot: %s", shotPath)

	// The page talked to the test server only, over HTTP and WebSocket.
	requests, sockets, errors := seen.snapshot()
	require.NotEmpty(t, requests)
	for _, r := range requests {
		if strings.HasPrefix(r, "data:") || strings.HasPrefix(r, "blob:") {
			continue
		}
		u, err := url.Parse(r)
		require.NoError(t, err)
		require.Equal(t, server.Host, u.Host, "the page requested %s", r)
	}
	require.NotEmpty(t, sockets, "subscriptions should use a WebSocket")
	for _, s := range sockets {
		require.Equal(t, "ws://"+server.Host+"/graphql", s)
	}
	require.Empty(t, errors, "the page reported errors (CSP violations, failed loads, exceptions)")
}
