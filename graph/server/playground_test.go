package server_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"
)

// GraphiQL 5's editors (Monaco) and run button.
const (
	pgQuery    = ".graphiql-query-editor"
	pgResponse = ".graphiql-response"
	pgRun      = ".graphiql-execute-button"
)

func chromiumOrSkip(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("chromium is not installed: skipping the playground test (apt-get install chromium)")
	return ""
}

func jsQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// editorText reads what a Monaco editor shows.
func editorText(sel string) string {
	return `(() => { const el = document.querySelector(` + jsQuote(sel+" .view-lines") + `);
		return el ? el.innerText.replace(/\u00a0/g, ' ') : ''; })()`
}

// typeQuery replaces the editor's text by typing, as a person would; what
// Monaco adds after the cursor (closing brackets) is deleted at the end.
func typeQuery(sel, text string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		return chromedp.Void{}, chromedp.Do(ctx,
			chromedp.Click(chromedp.CSS(sel+" .view-lines")),
			chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
			chromedp.KeyEvent(kb.Delete),
			chromedp.KeyEvent(text),
			chromedp.KeyEvent(kb.Escape),
			chromedp.KeyEvent(kb.End, chromedp.KeyModifiers(chromedp.ModifierCtrl, chromedp.ModifierShift)),
			chromedp.KeyEvent(kb.Delete),
		)
	}
}

func waitForResponse(want string) chromedp.Action[string] {
	return chromedp.Poll[string](
		`(() => { const t = `+editorText(pgResponse)+`; return t.includes(`+jsQuote(want)+`) ? t : false; })()`,
		chromedp.WithPollingTimeout(30*time.Second))
}

func TestPlaygroundRunsAMutationAndASubscriptionAgainstTheServer(t *testing.T) {
	t.Parallel()
	browser := chromiumOrSkip(t)
	b := setup(t, succeed)
	u, err := url.Parse(b.base)
	require.NoError(t, err)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.WindowSize(1400, 900), chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+u.Hostname()),
		)...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(cancelTimeout)
	t.Cleanup(func() {
		if t.Failed() {
			if shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
				p := filepath.Join(t.TempDir(), "playground.png")
				if os.WriteFile(p, shot, 0o644) == nil {
					t.Logf("screenshot: %s", p)
				}
			}
			for _, sel := range []string{pgQuery, pgResponse} {
				text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](editorText(sel)))
				t.Logf("%s shows:\n%s", sel, text)
			}
		}
	})

	// The playground loads from the server with its welcome query.
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(b.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(pgQuery+" .view-lines")),
	))
	_, err = chromedp.Run(ctx, chromedp.Poll[string](
		`(() => { const t = `+editorText(pgQuery)+`; return t.includes("Welcome to Switchyard") ? t : false; })()`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.NoError(t, err, "the server's welcome query fills the editor")

	// A mutation typed in the editor submits a task.
	require.NoError(t, chromedp.Do(ctx,
		typeQuery(pgQuery, `mutation { submitTask(input: {agentId: "browser", action: {kind: "click", selector: "css:#go"}}) { id agentId } }`),
		chromedp.Click(chromedp.CSS(pgRun)),
	))
	shown, err := chromedp.Run(ctx, waitForResponse(`"agentId": "browser"`))
	require.NoError(t, err, "the result panel shows the submitted task")
	require.Contains(t, shown, `"submitTask"`)
	var listed struct {
		Tasks struct{ Nodes []struct{ ID, State string } }
	}
	require.NoError(t, b.c.Do(ctxFor(t), `{ tasks(filter: {agentId: "browser"}) { nodes { id state } } }`, nil, &listed))
	require.Len(t, listed.Tasks.Nodes, 1, "the task exists on the server")
	require.Contains(t, shown, listed.Tasks.Nodes[0].ID)

	// A subscription streams the task's events into the result panel.
	require.NoError(t, chromedp.Do(ctx,
		typeQuery(pgQuery, `subscription { taskEvents(after: 0, filter: {agentId: "browser"}) { seq taskId to } }`),
		chromedp.Click(chromedp.CSS(pgRun)),
	))
	_, err = chromedp.Run(ctx, waitForResponse(`"to": "SUCCEEDED"`))
	require.NoError(t, err, "the subscription's events show in the result panel")
}
