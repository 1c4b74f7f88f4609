package dashboard_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/waitfor"
)

// layoutProblems is a script that looks at the page's boxes, not its
// pixels, and lists what does not fit: the page wider than the viewport;
// a header control outside the viewport or over another one; a panel
// outside the viewport; a table wider than its panel that cannot be
// scrolled to; the plugins' p50 / p99 column cut off (wide screens); a
// timestamp or any other text cut short with no title to read it whole.
const layoutProblems = `((wide) => {
	const problems = [];
	const vw = document.documentElement.clientWidth;
	const where = (el) => el.id ? '#' + el.id : el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
	const box = (el) => el.getBoundingClientRect();
	const px = (r) => '[' + Math.round(r.left) + ', ' + Math.round(r.right) + ']';
	if (document.documentElement.scrollWidth > vw + 1) problems.push('the page is ' + document.documentElement.scrollWidth + ' px wide in a ' + vw + ' px viewport');

	const header = [...document.querySelectorAll('header.top h1, #link, header.top input[name="token"], header.top form.token button, header.top a[href="../"]')];
	if (header.length !== 5) problems.push('the header has ' + header.length + ' of its 5 controls');
	for (const el of header) {
		const r = box(el);
		if (r.width < 1 || r.height < 1) problems.push(where(el) + ' in the header is not shown');
		if (r.left < -0.5 || r.right > vw + 0.5) problems.push(where(el) + ' in the header is at ' + px(r) + ', outside the viewport [0, ' + vw + ']');
		if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflow !== 'visible') problems.push(where(el) + ' in the header is cut off');
	}
	for (let i = 0; i < header.length; i++) for (let j = i + 1; j < header.length; j++) {
		const a = box(header[i]), b = box(header[j]);
		const w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
		if (w > 0.5 && h > 0.5) problems.push(where(header[i]) + ' and ' + where(header[j]) + ' overlap in the header');
	}

	for (const panel of document.querySelectorAll('.panel, .chart, .tile')) {
		const r = box(panel);
		if (r.left < -0.5 || r.right > vw + 0.5) problems.push(where(panel) + ' is at ' + px(r) + ', outside the viewport [0, ' + vw + ']');
		if (panel.scrollWidth > panel.clientWidth + 1 && !['auto', 'scroll'].includes(getComputedStyle(panel).overflowX))
			problems.push(where(panel) + ' cuts off ' + (panel.scrollWidth - panel.clientWidth) + ' px of its content with no scroll bar');
	}

	const plugins = document.querySelector('#policies table.plugins');
	if (!plugins) problems.push('the policies panel lists no plugin');
	else if (wide) {
		const panel = plugins.closest('.panel'), p = box(panel);
		const right = p.left + panel.clientLeft + panel.clientWidth;
		for (const cell of plugins.querySelectorAll('tr > :last-child')) {
			const r = box(cell);
			if (r.right > right + 0.5) problems.push('the p50 / p99 column ends at ' + Math.round(r.right) + ' px, past its panel (' + Math.round(right) + ' px): "' + cell.textContent.trim() + '" is cut off');
		}
	}

	const times = [...document.querySelectorAll('time')];
	if (times.length === 0) problems.push('no timestamp is shown');
	for (const t of times) {
		if (!t.dateTime || !t.title || !t.title.includes(t.dateTime.slice(0, 10))) problems.push('the timestamp "' + t.textContent + '" has no title with its date (' + t.title + ')');
		if (wide && t.closest('td') && t.closest('td').scrollWidth > t.closest('td').clientWidth + 1) problems.push('the timestamp "' + t.textContent + '" is cut short at 1400 px');
	}
	for (const el of document.querySelectorAll('main *, aside *')) {
		if (el.children.length > 0 && !el.matches('td, th')) continue;
		if (el.scrollWidth <= el.clientWidth + 1 || getComputedStyle(el).textOverflow !== 'ellipsis') continue;
		if (!el.closest('[title]') || !el.closest('[title]').title) problems.push('"' + el.textContent.trim() + '" (' + where(el) + ', ' + el.scrollWidth + ' px in ' + el.clientWidth + ') is cut short with no title to read it whole');
	}
	return problems;
})`

// attemptsProblems is a script that lists what of the task detail's
// attempts table does not fit the detail panel: a cell past the panel's
// edges (the table scrolls sideways, so the code and the error are out of
// sight), an error code or an error not shown, or cut short.
const attemptsProblems = `(() => {
	const aside = document.querySelector('aside.detail');
	if (!aside) return ['the task detail is not open'];
	const table = aside.querySelector('table.attempts');
	if (!table) return ['the task detail shows no attempts table'];
	const problems = [];
	const a = aside.getBoundingClientRect();
	const left = a.left + aside.clientLeft, right = left + aside.clientWidth;
	if (aside.scrollWidth > aside.clientWidth + 1) problems.push('the detail is ' + aside.scrollWidth + ' px wide in ' + aside.clientWidth + ' px: it scrolls sideways');
	for (const cell of table.querySelectorAll('th, td, .error-code, .error')) {
		const r = cell.getBoundingClientRect();
		if (r.width === 0 && r.height === 0) continue;
		if (r.left < left - 0.5 || r.right > right + 0.5)
			problems.push((cell.className || cell.tagName.toLowerCase()) + ' "' + cell.textContent.trim().slice(0, 40) + '" is at [' + Math.round(r.left) + ', ' + Math.round(r.right) + '], outside the detail [' + Math.round(left) + ', ' + Math.round(right) + ']');
	}
	for (const sel of ['.error-code', '.error']) {
		const el = table.querySelector(sel);
		if (!el || el.getBoundingClientRect().width < 1) { problems.push('no ' + sel + ' is shown'); continue; }
		if (el.scrollWidth > el.clientWidth + 1) problems.push(sel + ' "' + el.textContent + '" is cut short');
	}
	return problems;
})()`

// The dashboard fits a wide screen and a phone: checked on the boxes the
// browser lays out at 1400 px, 2400 px and 420 px, not by comparing pixels.
// The task detail's attempts show their error code and error whole at each
// width.
func TestDashboardFitsWideAndNarrowScreensInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	b := setupServer(t, true)
	server, err := url.Parse(b.base)
	require.NoError(t, err)

	// Rows with long values, ended and queued: the feed, the lanes and the
	// policies have something to lay out.
	require.NoError(t, b.c.Do(context.Background(), `mutation { updateLane(name: "team", input: {maxInFlight: 0}) { name } }`, nil, nil))
	done := b.submit(t, "agent-with-a-rather-long-name-for-a-table-cell", "main")
	waitfor.Eventually(t, "the task to start", func() bool { return b.exec.Run(done) != nil })
	require.NoError(t, b.exec.Succeed(done, `{"ok":true}`))
	queued := b.submit(t, "agent-queued", "team")
	require.NoError(t, b.c.Do(context.Background(), `mutation($id: ID!) { cancelTask(id: $id, reason: "a reason long enough to be cut short in the feed's reason column, which is narrow") { id } }`,
		map[string]any{"id": queued}, nil))
	b.submit(t, "agent-queued", "team")

	// A pull task whose worker failed it with a code and a long error: its
	// attempt never reached an instance.
	require.NoError(t, b.c.Do(context.Background(), `mutation { createLane(name: "jobs", input: {pull: true}) { name } }`, nil, nil))
	pulled := b.submit(t, "worker-fed", "jobs")
	var lease struct{ LeaseTasks []struct{ LeaseID string } }
	require.NoError(t, b.c.Do(context.Background(), `mutation { leaseTasks(lane: "jobs", max: 1, leaseForMs: 600000) { leaseId } }`, nil, &lease))
	require.Len(t, lease.LeaseTasks, 1)
	require.NoError(t, b.c.Do(context.Background(), `mutation($l: ID!, $e: String!) { failTask(leaseId: $l, error: $e, retryable: false, code: "upstream_503") { leaseId } }`,
		map[string]any{"l": lease.LeaseTasks[0].LeaseID, "e": "upstream 503: the origin answered Service Unavailable three times in a row, request 7f3a9c2e-55d1-4c1b-9a0e-2b9f1d7c6a44"}, nil))
	require.Equal(t, "FAILED", b.taskState(t, pulled))

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromium),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.UserDataDir(t.TempDir()),
			chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE "+server.Hostname()),
			chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		)...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	require.NoError(t, chromedp.Do(browser)) // start the browser
	artifacts := artifactsDir(t)

	for _, width := range []int64{1400, 2400, 420} {
		t.Run(fmt.Sprintf("%d px", width), func(t *testing.T) {
			ctx, cancel := chromedp.NewContext(browser)
			defer cancel()
			ctx, cancelTimeout := context.WithTimeout(ctx, 40*time.Second)
			defer cancelTimeout()
			shoot := func(name string) {
				shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
				if err == nil {
					p := filepath.Join(artifacts, name)
					if os.WriteFile(p, shot, 0o644) == nil {
						t.Logf("screenshot: %s", p)
					}
				}
			}
			require.NoError(t, chromedp.Do(ctx,
				chromedp.EmulateViewport(width, 900),
				chromedp.Navigate(b.base+"/dashboard/"),
				chromedp.WaitVisible(chromedp.CSS(`#link.live`)),
				chromedp.WaitVisible(chromedp.CSS(`#lanes tr[data-lane="main"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#policies table.plugins tr[data-plugin]`)),
				chromedp.WaitVisible(chromedp.CSS(`#instances tr[data-instance="chromium-1"]`)),
			))
			_, err := chromedp.Run(ctx, waitRowState(done, "SUCCEEDED"))
			require.NoError(t, err)
			_, err = chromedp.Run(ctx, waitRowState(queued, "CANCELLED"))
			require.NoError(t, err)

			problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf("%s(%t)", layoutProblems, width >= 1000)))
			require.NoError(t, err)
			if len(problems) > 0 {
				shoot(fmt.Sprintf("dashboard-%d-failure.png", width))
			}
			require.Empty(t, problems, "at %d px:\n%s", width, strings.Join(problems, "\n"))
			shoot(fmt.Sprintf("dashboard-%d.png", width))

			// The task detail opens beside the feed, or over it on a
			// narrow screen, and fits too.
			require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#feed tr[data-task=`+jsString(done)+`] td.mono a`))))
			_, err = chromedp.Run(ctx, waitFor[string](`(() => { const s = document.querySelector('#detail-state');
				return s && s.textContent === 'SUCCEEDED' ? s.textContent : false; })()`))
			require.NoError(t, err)
			detail, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
				const vw = document.documentElement.clientWidth, r = document.querySelector('aside.detail').getBoundingClientRect();
				const problems = [];
				if (r.left < -0.5 || r.right > vw + 0.5) problems.push('the detail is at [' + r.left + ', ' + r.right + '] in a ' + vw + ' px viewport');
				if (r.width < Math.min(360, vw) - 1) problems.push('the detail is ' + Math.round(r.width) + ' px wide');
				for (const t of document.querySelectorAll('aside.detail time')) if (!t.title) problems.push('the detail timestamp "' + t.textContent + '" has no title');
				return problems; })()`))
			require.NoError(t, err)
			shoot(fmt.Sprintf("dashboard-%d-detail.png", width))
			require.Empty(t, detail, "at %d px:\n%s", width, strings.Join(detail, "\n"))

			// A failed attempt shows its code and its error within the
			// detail, and a pull attempt did not reach an instance.
			_, err = chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = '#/task/' + `+jsString(pulled)))
			require.NoError(t, err)
			_, err = chromedp.Run(ctx, waitFor[string](`(() => { const c = document.querySelector('#detail table.attempts .error-code');
				return c && c.textContent === 'upstream_503' ? c.textContent : false; })()`))
			require.NoError(t, err)
			attempts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](attemptsProblems))
			require.NoError(t, err)
			shoot(fmt.Sprintf("dashboard-%d-attempts.png", width))
			require.Empty(t, attempts, "at %d px:\n%s", width, strings.Join(attempts, "\n"))
			reached, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector('#detail table.attempts .reached') || {textContent: 'no reached cell'}).textContent`))
			require.NoError(t, err)
			require.Equal(t, "–", reached, "a pull attempt never reached an instance")
		})
	}
}
