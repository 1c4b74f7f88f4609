package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/policy"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// capHolder is a fairness policy that holds the queues of agent "held"
// (with a re-ask hint of ten minutes) and picks any other agent's head
// first: what a rate cap does to a capped agent.
type capHolder struct{ mu sync.Mutex }

func (h *capHolder) Pick(ctx policy.PickContext, cands []policy.Candidate, picks []uint32) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range cands {
		if ctx.Names.AgentID(i) != "held" {
			picks[0] = uint32(i)
			return 1
		}
	}
	return policy.Hold(10 * 60 * 1000)
}

func (h *capHolder) Stateless() bool { return true }
func (h *capHolder) MayHold() bool   { return true }
func (h *capHolder) Inline() bool    { return true }

// The dashboard shows what the API says of pull lanes (the lane's pull
// flag, a leased task's lease), of attempts (their tab and action times,
// an instance fault, their error code), of fairness holds (each plugin's holds, a held
// task's hold in words) and of the watchdog's deadline graces (a column of their own).
func TestDashboardShowsPullLanesLeasesAttemptTimingsAndHoldsInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setupServer(t, true)
	server, err := url.Parse(b.base)
	require.NoError(t, err)
	ctx := context.Background()

	// A pull lane with a leased task.
	require.NoError(t, b.c.Do(ctx, `mutation { createLane(name: "jobs", input: {pull: true}) { name } }`, nil, nil))
	leased := b.submit(t, "worker-fed", "jobs")
	var lease struct {
		LeaseTasks []struct{ Task struct{ ID string } }
	}
	require.NoError(t, b.c.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 600000) { task { id } } }`, nil, &lease))
	require.Len(t, lease.LeaseTasks, 1)
	require.Equal(t, leased, lease.LeaseTasks[0].Task.ID)

	// An attempt that ends in an instance fault, with its two timed parts.
	timed := b.submit(t, "timed", "main")
	waitfor.Eventually(t, "the timed task to start", func() bool { return b.exec.Run(timed) != nil })
	require.NoError(t, b.exec.Finish(timed, engine.Outcome{
		Err:     engine.Transient(fmt.Errorf("instance restarting: %w", engine.ErrInstanceFault)),
		TabTime: 12 * time.Millisecond, ActionTime: 340 * time.Millisecond,
	}))

	// A task a fairness policy holds.
	require.NoError(t, b.eng.SetFairness("capper", &capHolder{}))
	held := b.submit(t, "held", "main")
	waitfor.Eventually(t, "the task to be held", func() bool {
		_, ok := b.eng.HoldOf(held)
		return ok
	})
	// And one on the pull lane, held at a worker's lease: no timer asks
	// again there, so the detail promises no time.
	heldPull := b.submit(t, "held", "jobs")
	require.NoError(t, b.c.Do(ctx, `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 600000) { task { id } } }`, nil, nil))
	_, ok := b.eng.HoldOf(heldPull)
	require.True(t, ok, "the lease held the pull lane's task")

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.WindowSize(1440, 1000),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+server.Hostname()),
			chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		)...)
	t.Cleanup(cancelAlloc)
	page, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	page, cancelTimeout := context.WithTimeout(page, 60*time.Second)
	t.Cleanup(cancelTimeout)

	require.NoError(t, chromedp.Do(page,
		chromedp.Navigate(b.base+"/dashboard/"),
		chromedp.WaitVisible(chromedp.CSS(`#link.live`)),
		chromedp.WaitVisible(chromedp.CSS(`#lanes tr[data-lane="jobs"] .lane-pull`)),
		chromedp.WaitVisible(chromedp.CSS(`#policies table.plugins tr[data-plugin]`)),
	))
	mainPull, err := chromedp.Run(page, chromedp.Evaluate[bool](`!!document.querySelector('#lanes tr[data-lane="main"] .lane-pull')`))
	require.NoError(t, err)
	require.False(t, mainPull, "a lane of browser instances is not marked pull")
	heads, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#policies table.plugins thead`)))
	require.NoError(t, err)
	require.Contains(t, heads, "holds", "the plugins table has a holds column")
	require.Contains(t, heads, "graces", "and one of the watchdog's deadline graces")

	open := func(id string) {
		t.Helper()
		_, err := chromedp.Run(page, chromedp.Evaluate[string](`location.hash = '#/task/' + `+jsString(id)))
		require.NoError(t, err)
	}

	open(leased)
	text, err := chromedp.Run(page, waitFor[string](`(() => { const l = document.querySelector('#detail-lease');
		return l && l.textContent.includes('attempt 1') ? l.textContent : false; })()`))
	require.NoError(t, err, "the detail shows the task's lease")
	require.Contains(t, text, "expires")

	open(timed)
	row, err := chromedp.Run(page, waitFor[string](`(() => { const r = document.querySelector('#detail table.attempts tbody.attempt');
		return r && r.querySelector('.instance-fault') ? r.textContent : false; })()`))
	require.NoError(t, err, "the first attempt shows its instance fault")
	require.Contains(t, row, "12 ms", "its tab time")
	require.Contains(t, row, "340 ms", "its action time")
	code, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('#detail table.attempts tbody.attempt .error-code').textContent`))
	require.NoError(t, err)
	require.Equal(t, engine.CodeInstanceFault, code, "its error code, the one the retry policy was given")
	fit, err := chromedp.Run(page, chromedp.Evaluate[[]string](attemptsProblems))
	require.NoError(t, err)
	require.Empty(t, fit, "the attempt's class, fault, code and error fit the detail")

	open(held)
	hold, err := chromedp.Run(page, waitFor[string](`(() => { const h = document.querySelector('#detail-hold');
		return h ? h.textContent : false; })()`))
	require.NoError(t, err, "the detail says the task is held")
	require.Contains(t, hold, "held by fairness plugin capper on lane main (asks again at ")
	kv, err := chromedp.Run(page, chromedp.Text(chromedp.CSS(`#detail table.kv`)))
	require.NoError(t, err)
	require.Contains(t, kv, "by capper on lane main since")
	require.Contains(t, kv, "asks again at")

	open(heldPull)
	kv, err = chromedp.Run(page, waitFor[string](`(() => { const t = document.querySelector('#detail table.kv');
		return t && t.textContent.includes('on pull lane jobs') ? t.textContent : false; })()`))
	require.NoError(t, err, "the detail says the pull lane's task is held")
	require.Contains(t, kv, "by capper on pull lane jobs since")
	require.Contains(t, kv, "asks again at the next lease")
	if shot, err := chromedp.Run(page, chromedp.FullScreenshot(100)); err == nil {
		p := filepath.Join(artifactsDir(t), "dashboard-held-task.png")
		if os.WriteFile(p, shot, 0o644) == nil {
			t.Logf("screenshot: %s", p)
		}
	}
}

// With tokens on and no token given yet, every panel that reads the API
// says why it is empty: the agents and instances panels show the same
// authentication error as the lanes, not "no agent" or "no instance" (the
// server has an instance). Once the token is given, they fill.
func TestDashboardPanelsShowTheAuthenticationErrorUntilATokenIsGivenInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	token, err := auth.NewToken()
	require.NoError(t, err)
	hash, err := auth.HashToken(token)
	require.NoError(t, err)
	authn, err := auth.NewAuthenticator([]auth.Token{{Name: "ops", Hash: hash, Role: auth.RoleOperator}})
	require.NoError(t, err)
	b := setupServer(t, true, func(o *server.Options) { o.Auth = authn })
	site, err := url.Parse(b.base)
	require.NoError(t, err)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.WindowSize(1440, 1000),
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+site.Hostname()),
			chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		)...)
	t.Cleanup(cancelAlloc)
	page, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	page, cancelTimeout := context.WithTimeout(page, 60*time.Second)
	t.Cleanup(cancelTimeout)

	require.NoError(t, chromedp.Do(page, chromedp.Navigate(b.base+"/dashboard/")))
	lanes, err := chromedp.Run(page, waitFor[string](`(() => { const e = document.querySelector('#lanes .error');
		return e && e.textContent.includes(`+jsString(auth.ErrUnauthenticated.Error())+`) ? e.textContent : false; })()`))
	require.NoError(t, err, "the lanes panel shows the authentication error")
	for _, panel := range []string{"agents", "instances"} {
		text, err := chromedp.Run(page, chromedp.Evaluate[string](`document.querySelector('#`+panel+`').textContent`))
		require.NoError(t, err)
		require.Contains(t, text, lanes, "the %s panel shows the authentication error", panel)
		require.NotContains(t, text, "No agent has submitted work yet", "the %s panel does not say there is no agent", panel)
		require.NotContains(t, text, "No browser instance is registered", "the %s panel does not say there is no instance", panel)
	}

	// The token given, the errors go and the panels fill.
	require.NoError(t, chromedp.Do(page,
		chromedp.SetValue(chromedp.CSS(`header.top input[name="token"]`), token),
		chromedp.Click(chromedp.CSS(`header.top form.token button`)),
		chromedp.WaitVisible(chromedp.CSS(`#instances tr[data-instance="chromium-1"]`)),
	))
	_, err = chromedp.Run(page, waitFor[bool](`(() => !document.querySelector('#lanes .error, #agents .error, #instances .error')
		&& document.querySelector('#agents').textContent.includes('No agent has submitted work yet'))()`))
	require.NoError(t, err, "with the token, the panels show what the server has")
}
