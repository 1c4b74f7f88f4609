// Package chromium is Switchyard's built-in browser instance: it starts
// headless Chromium with chromedp and serves PinchTab's instance HTTP API over
// it, behind a bearer token, so that `switchyard serve` does real browser work
// on a fresh machine and the executor talks to it exactly as to a PinchTab
// bridge.
//
// Served (every route but GET /health needs "Authorization: Bearer <token>",
// as PinchTab's do; the executor/instancetest suite checks them):
//
//	GET  /health                       {"status":"ok","tabs":N,"browser":"…"} ("pending":true: see below)
//	GET  /tabs                         {"tabs":[{"id","url","title","type"}]}
//	POST /tab {"action":"new"|"close","url","tabId"}   (a page that opens a dialog as it loads keeps its tab: dialog_blocking, details.tabId)
//	POST /tabs/{id}/navigate {"url"}   {"tabId","url","title"}
//	POST /tabs/{id}/action {"kind","selector"|"ref",…}   {"success":true,"result":{…}}
//	     kinds: click dblclick hover focus fill type press select check uncheck scroll scrollintoview
//	     any kind: "dialogAction" (accept|dismiss), "dialogText": answer the dialog it opens (dialogs.go)
//	GET  /tabs/{id}/text[?selector=]   {"url","title","text"}
//	GET  /tabs/{id}/snapshot[?filter=interactive&maxNodes=]  {"url","title","nodes":[{"ref","role","name","depth",…}],"count"[,"truncated","totalNodes"]}
//	GET  /tabs/{id}/screenshot[?format=png|jpeg&quality=&raw=true]
//	POST /tabs/{id}/evaluate {"expression"}  {"result":…}
//	GET  /tabs/{id}/title, /tabs/{id}/url
//	POST /tabs/{id}/back, /forward, /reload   {"tabId","url"} (nothing happens at either end of the history)
//	POST /tabs/{id}/wait {"selector"|"ms","timeout"}  {"waited","elapsed","match"|"error"}
//	POST /tabs/{id}/dialog {"action":"accept"|"dismiss","text"}  {"type","message","handled":true}
//	POST /tabs/{id}/close              {"closed":true}
//
// Agents: a request that says which agent it is for (the X-Switchyard-Agent
// header, which the executor sets on every request of a task) opens its tab
// in that agent's own browser context, made on the agent's first tab
// (Target.createBrowserContext: an incognito-like profile in the same
// browser), so that each agent has its own cookies, storage and cache and
// sees no other agent's. Its tabs answer only requests for the same agent (or
// for none: the executor's own listing, probing and closing): a request of
// another agent gets 404 tab_not_found, as for a tab that does not exist. A
// tab opened with no agent is in the browser's default context, shared by
// all such tabs. An agent's context outlives its last tab by
// Options.AgentContextIdle (default DefaultAgentContextIdle, the executor's
// default idle tab timeout): an agent that opens a tab again within it finds
// its cookies and storage; one that does not has its context disposed
// (Target.disposeBrowserContext, DisposeIdleContexts), so that an instance
// serving many short-lived agents does not keep them all, and its next tab
// starts in a new, empty context.
//
// Errors are {"error","code"}, with "retryable": true when a retry may help
// (timeouts, failed loads, browser errors, an element not visible yet). A
// JavaScript dialog open in a tab's page holds up every request on the tab
// but its answer and the tab's closing: 500 dialog_blocking at once,
// naming the dialog (dialogs.go); so does a popup's, one its page opens as
// it loads included (popups.go).
//
// One tab cannot wedge the others, nor itself for ever:
//   - a request is answered within its time: ActionTimeout, or less when
//     it says how long its attempt has left (X-Switchyard-Timeout, in
//     milliseconds; a value that is not a positive whole number is refused
//     400 bad_timeout, a larger one counts as ActionTimeout). A request
//     waits for its tab's previous operation within that time, less the
//     margin for its answer, and answers 504 timeout (retryable) when the
//     tab stays busy. What is left is
//     split between the request's work on its tab, a probe
//     of the page when the work runs out of time (a quarter of it, at most
//     ProbeTimeout), and a margin for the answer (an eighth, at most a
//     second); the tab's closing is not waited for. A page that does not
//     run the probe's trivial script (its script never yields) while the
//     browser answers for its tab (Target.getTargetInfo, asked at the
//     same time) has its tab closed, and the request is answered 504
//     page_unresponsive, not retryable; later requests for the tab get
//     404 tab_not_found, saying why. When the browser does not answer
//     either, the page is not to blame: 504 timeout (retryable), and the
//     tab stays. A request cancelled mid-work is not probed (and a probe
//     under way stops when its request is cancelled): its tab stays.
//     Under MinProbedTimeout (4 s) there is no probe (so a probe has
//     MinProbe, a second, at least): the request answers
//     504 timeout and the tab stays, and the first request on it with time
//     enough finds the page hung;
//   - a snapshot carries at most SnapshotMaxNodes nodes and says when it was
//     cut short; a page of more than SnapshotTreeMaxElements elements
//     (those in open shadow roots included) is read from the DOM instead of
//     its accessibility tree (snapshot.go);
//   - GET /health asks the browser by a probe of its own and waits for it
//     for a second: while a tab's operation holds the one connection to the
//     browser, a browser that answered the last probe within 30 s is ok
//     ("pending": true).
//
// Selectors: "css:#go" or a bare CSS selector, "xpath://button", "text:Go",
// and refs from the tab's last snapshot ("e12", or "ref:e12", or the "ref"
// field). A request's cancellation or deadline stops its browser call.
package chromium

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// Options configures a built-in instance. Zero values mean the defaults.
type Options struct {
	Addr        string       // listen address; default "127.0.0.1:0" (a free port)
	Token       string       // bearer token; default a random one (see Instance.Token)
	ExecPath    string       // the browser; default what Find returns
	UserDataDir string       // default a fresh temporary directory, removed by Close
	Logger      hclog.Logger // default silent
	// ActionTimeout bounds the answer to one request on a tab: its work, and
	// the probe of the page after the work ran out of time; default 60s.
	ActionTimeout time.Duration
	// ProbeTimeout is the most time a tab's page has to answer a trivial
	// script after a request's work on it ran out of time (a request with
	// less time left gives it a quarter of that: split); a page that does
	// not (its script never yields) while the browser answers for its tab
	// has stopped responding, and its tab is closed (page_unresponsive).
	// Default DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// StartTimeout bounds the browser's start. Default: the deadline of
	// Start's context when it has one (a caller that gives the start a
	// minute, on a loaded machine, gets the minute), else 30 s.
	StartTimeout time.Duration
	// AgentContextIdle is how long an agent's browser context outlives the
	// agent's last tab: an agent that opens a tab again within it finds its
	// cookies and storage, and one that does not has its context disposed
	// (DisposeIdleContexts), freeing its memory. Default
	// DefaultAgentContextIdle; negative: kept while the instance runs.
	AgentContextIdle time.Duration
	// DialogAutoAccept accepts every JavaScript dialog (alert, confirm,
	// prompt with its default text, beforeunload) as it opens, so that no
	// operation is ever held up by one. Off, an open dialog holds up its
	// tab's operations (500 dialog_blocking) until it is answered (POST
	// /tabs/{id}/dialog, or an action's "dialogAction").
	DialogAutoAccept bool
}

// Find returns the path of a Chromium (or Chrome) executable, looking at
// /usr/bin/chromium, Debian's package, first.
func Find() (string, bool) {
	if st, err := os.Stat("/usr/bin/chromium"); err == nil && !st.IsDir() {
		return "/usr/bin/chromium", true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// Flags are the command-line flags of the browser, besides the user-data
// directory and what chromedp adds to talk to it (a debugging pipe).
var Flags = []string{
	"headless", "no-sandbox", "disable-gpu", "disable-background-networking",
	"disable-component-update", "disable-sync", "no-first-run", "disable-quic",
	"no-default-browser-check", "disable-dev-shm-usage", "hide-scrollbars", "mute-audio",
}

// Instance is a running built-in instance: a browser and the HTTP server in
// front of it.
type Instance struct {
	opts Options
	log  hclog.Logger

	allocCancel   context.CancelFunc
	browserCtx    context.Context
	browserCancel context.CancelFunc
	keeper        target.ID // the browser's first tab, kept hidden so the browser lives

	mu   sync.Mutex
	tabs map[string]*tab
	// contexts holds each agent's browser context, by agent id, and agents
	// the agent of each, by context (a popup opens in its opener's context).
	contexts map[string]*agentContext
	agents   map[cdp.BrowserContextID]string
	ctxMu    sync.Mutex // one browser context made at a time
	// hung holds the tabs closed because their page stopped responding, and
	// when: a request for one is told so (404 tab_not_found), and the
	// target, which the browser may list for a while yet, is never taken
	// for a popup. Guarded by mu; entries go after hungRetention.
	hung map[string]time.Time
	// watchers holds the watcher sessions of popups not attached yet, and
	// watched their tabs (popups.go). Guarded by mu.
	watchers map[target.SessionID]*watcher
	watched  map[target.SessionID]*tab

	health healthProbe // GET /health's probe of the browser

	stop chan struct{} // closed by Close: the disposing loop ends
	// wg counts the instance's goroutines (the disposing loop, the closing
	// of hung tabs): Close waits for them. closing, guarded by mu, is set
	// by Close before it waits: no goroutine is added to wg after it.
	wg      sync.WaitGroup
	closing bool

	ln        net.Listener
	srv       *http.Server
	url       string
	dataDir   string
	removeDir bool
	closeOnce sync.Once
	closeErr  error
}

// tab is a browser tab the instance drives.
type tab struct {
	id      string
	agent   string          // the agent whose browser context it is in, or "" (the default context)
	ctx     context.Context // chromedp context of the tab
	cancel  context.CancelFunc
	lock    chan struct{}      // one operation at a time on a tab
	refs    map[string]nodeRef // snapshot ref → the element it names; guarded by lock
	dialogs *dialogs           // the page's JavaScript dialog (dialogs.go)
	// ready is closed once the instance follows the tab's page (its
	// chromedp target is attached, its events reach dialogs), and
	// attachErr, then, says why it could not. A tab the instance opened is
	// ready at once; a popup is attached in the background (follow).
	ready     chan struct{}
	attachErr error
	// watcher is a popup's session until it is ready (popups.go).
	wmu     sync.Mutex
	watcher *watcher
}

// closedChan is a channel that is closed: a tab the instance opened is
// ready from the start.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// isReady reports whether the instance follows the tab's page.
func (t *tab) isReady() bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// attached waits, within ctx, until the instance follows the tab's page,
// and returns why it could not (a target that went). With dialogOK, a
// dialog the page opened meanwhile ends the wait too (nil): the tab's
// session is up (its events arrive) and can answer it, though the rest of
// its attaching waits for the page.
func (t *tab) attached(ctx context.Context, dialogOK bool) error {
	if t.isReady() {
		return t.attachErr
	}
	d, opened := t.dialogs.watch()
	if !dialogOK {
		opened = nil
	} else if d != nil {
		return nil
	}
	select {
	case <-t.ready:
		return t.attachErr
	case <-opened:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start launches the browser and the HTTP server. ctx bounds the start only;
// the instance runs until Close.
func Start(ctx context.Context, o Options) (*Instance, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Token == "" {
		var b [24]byte
		_, _ = rand.Read(b[:])
		o.Token = hex.EncodeToString(b[:])
	}
	if o.ExecPath == "" {
		p, ok := Find()
		if !ok {
			return nil, errors.New("chromium: no Chromium or Chrome executable found (install Debian's chromium package)")
		}
		o.ExecPath = p
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.ActionTimeout <= 0 {
		o.ActionTimeout = 60 * time.Second
	}
	if o.AgentContextIdle == 0 {
		o.AgentContextIdle = DefaultAgentContextIdle
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	i := &Instance{opts: o, log: o.Logger.Named("chromium"), tabs: make(map[string]*tab), hung: make(map[string]time.Time),
		contexts: make(map[string]*agentContext), agents: make(map[cdp.BrowserContextID]string), stop: make(chan struct{}),
		watchers: make(map[target.SessionID]*watcher), watched: make(map[target.SessionID]*tab)}
	i.dataDir = o.UserDataDir
	if i.dataDir == "" {
		removeStaleProfiles(os.TempDir(), i.log)
		dir, err := os.MkdirTemp("", profilePrefix)
		if err != nil {
			return nil, fmt.Errorf("chromium: create user-data dir: %w", err)
		}
		i.dataDir, i.removeDir = dir, true
	}
	if err := i.startBrowser(ctx); err != nil {
		i.cleanup()
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		i.cleanup()
		return nil, fmt.Errorf("chromium: listen on %s: %w", o.Addr, err)
	}
	i.ln = ln
	i.url = "http://" + ln.Addr().String()
	i.srv = &http.Server{Handler: i.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := i.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			i.log.Error("server stopped", "error", err)
		}
	}()
	if o.AgentContextIdle > 0 {
		i.wg.Add(1)
		go i.disposeLoop()
	}
	i.log.Info("built-in browser instance started", "url", i.url, "browser", o.ExecPath, "user_data_dir", i.dataDir)
	return i, nil
}

func (i *Instance) startBrowser(ctx context.Context) error {
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(i.opts.ExecPath), chromedp.UserDataDir(i.dataDir), chromedp.WindowSize(1280, 800)}
	for _, f := range Flags {
		opts = append(opts, chromedp.Flag(f, true))
	}
	opts = append(opts, chromedp.CombinedOutput(logWriter{i.log}))
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, browserCancel := chromedp.NewContext(allocCtx)
	i.allocCancel, i.browserCtx, i.browserCancel = allocCancel, browserCtx, browserCancel

	started := make(chan error, 1)
	go func() { started <- chromedp.Do(browserCtx) }() // starts the browser, bound to browserCtx
	wait := i.opts.StartTimeout
	if wait <= 0 {
		wait = defaultStartTimeout
		if d, ok := ctx.Deadline(); ok {
			wait = time.Until(d)
		}
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case err := <-started:
		if err != nil {
			return fmt.Errorf("chromium: start %s: %w", i.opts.ExecPath, err)
		}
	case <-ctx.Done():
		return fmt.Errorf("chromium: start: %w", ctx.Err())
	case <-timer.C:
		return fmt.Errorf("chromium: start: browser not ready after %v", wait.Round(time.Millisecond))
	}
	i.keeper = chromedp.FromContext(browserCtx).Target.TargetID
	if err := i.followPopups(); err != nil {
		return fmt.Errorf("chromium: follow popups: %w", err)
	}
	i.health.ok = time.Now() // it answered: it started
	return nil
}

// URL returns the base URL of the instance's HTTP API.
func (i *Instance) URL() string { return i.url }

// Token returns the bearer token the instance requires.
func (i *Instance) Token() string { return i.opts.Token }

// Close stops the HTTP server once the closing of hung tabs under way is
// done (in-flight requests see their connection drop), closes the browser
// and removes a temporary user-data directory.
func (i *Instance) Close() error {
	i.closeOnce.Do(func() {
		close(i.stop)
		i.mu.Lock()
		i.closing = true
		i.mu.Unlock()
		i.wg.Wait()
		if i.srv != nil {
			i.closeErr = i.srv.Close()
		}
		i.cleanup()
		i.log.Info("built-in browser instance stopped", "url", i.url)
	})
	return i.closeErr
}

func (i *Instance) cleanup() {
	i.mu.Lock()
	tabs := i.tabs
	i.tabs = make(map[string]*tab)
	i.mu.Unlock()
	for _, t := range tabs {
		t.cancel()
	}
	if i.browserCancel != nil {
		i.browserCancel()
	}
	if i.allocCancel != nil {
		i.allocCancel()
	}
	if i.removeDir {
		_ = os.RemoveAll(i.dataDir)
	}
}

// openTab opens a new tab, at pageURL unless it is "", in the agent's own
// browser context, or in the default one when agent is "".
// Its load of pageURL answers by deadline (runOp); a tab whose load failed
// is closed, but one held up by a dialog its page opened stays (the error,
// dialogBlocked, names it), as after a navigation of an open tab.
func (i *Instance) openTab(ctx context.Context, pageURL, agent string, deadline time.Time) (*tab, error) {
	var opts []chromedp.ContextOption
	if agent != "" {
		bc, err := i.agentContext(ctx, agent)
		if err != nil {
			return nil, fmt.Errorf("open tab: %w", err)
		}
		opts = append(opts, chromedp.WithExistingBrowserContext(bc))
	}
	ds := newDialogs(i.opts.DialogAutoAccept)
	opts = append(opts, chromedp.WithListener(ds.on))
	tctx, cancel := chromedp.NewContext(i.browserCtx, opts...)
	ds.bind(tctx, i.opts.ActionTimeout)
	if err := chromedp.Do(tctx); err != nil {
		cancel()
		if agent != "" {
			i.opened(agent, false)
		}
		return nil, fmt.Errorf("open tab: %w", err)
	}
	t := &tab{id: string(chromedp.FromContext(tctx).Target.TargetID), agent: agent, ctx: tctx, cancel: cancel,
		lock: make(chan struct{}, 1), refs: map[string]nodeRef{}, dialogs: ds, ready: closedChan}
	i.mu.Lock()
	i.tabs[t.id] = t
	i.mu.Unlock()
	if agent != "" {
		i.opened(agent, true)
	}
	if pageURL != "" {
		err := i.runOp(ctx, t, deadline, "navigate", func(ctx context.Context) error { return navigate(ctx, pageURL) })
		var db *dialogBlocked
		if errors.As(err, &db) {
			// As a navigation of an open tab: the tab stays, held by its
			// page's dialog, and the answer names it (the dialog's
			// details carry its tabId) so that the dialog can be answered.
			return nil, err
		}
		if err != nil {
			i.closeTab(t.id, "")
			return nil, err
		}
	}
	return t, nil
}

// tab returns the tab with id, following a tab the page opened itself (a
// popup) from its first use when the browser's report of it (follow) did
// not come first. It does not wait for the popup's attaching: a request
// waits for that within its own time (runOp).
func (i *Instance) tab(id string) (*tab, bool) {
	i.mu.Lock()
	t, ok := i.tabs[id]
	i.mu.Unlock()
	if ok {
		return t, true
	}
	if id == string(i.keeper) || i.wasHung(id) {
		return nil, false
	}
	infos, err := chromedp.Targets(i.browserCtx)
	if err != nil {
		return nil, false
	}
	for _, info := range infos {
		if string(info.TargetID) == id && info.Type == "page" {
			return i.follow(info), true
		}
	}
	return nil, false
}

// followPopups has the instance follow each popup (a page target with an
// opener) as soon as the browser reports it, rather than on the first
// request for it: a JavaScript dialog that opens in a page before a
// session asked for its dialogs is out of reach of the browser's protocol
// (it reports no dialog, answers none, and the page's renderer answers
// nothing until the dialog is gone). A popup's watcher (popups.go) asks
// at once. It also routes the watchers' messages.
func (i *Instance) followPopups() error {
	return chromedp.ListenBrowser(i.browserCtx, func(ev any) {
		if msg, ok := ev.(*target.EventReceivedMessageFromTarget); ok {
			i.watcherMessage(msg)
			return
		}
		created, ok := ev.(*target.EventTargetCreated)
		if !ok || created.TargetInfo == nil || created.TargetInfo.Type != "page" || created.TargetInfo.OpenerID == "" {
			return
		}
		i.mu.Lock()
		closing := i.closing
		i.mu.Unlock()
		if !closing {
			i.follow(created.TargetInfo)
		}
	})
}

// follow adds the page target info, which the instance did not open (a
// popup), to its tabs, and attaches to it in the background: the tab is
// ready (tab.attached) once the attaching is done, which a page showing a
// JavaScript dialog holds up until the dialog is gone (or the tab closed).
// Until then its watcher (popups.go) reports and answers its dialogs. A
// target already among the tabs is returned as it is.
func (i *Instance) follow(info *target.Info) *tab {
	id := string(info.TargetID)
	i.mu.Lock()
	defer i.mu.Unlock()
	if t, ok := i.tabs[id]; ok {
		return t
	}
	ds := newDialogs(i.opts.DialogAutoAccept)
	t := &tab{id: id, lock: make(chan struct{}, 1), refs: map[string]nodeRef{}, dialogs: ds,
		ready: make(chan struct{}), agent: i.agents[info.BrowserContextID]} // a popup is its opener's agent's
	own := func(ev any) {
		switch ev.(type) {
		case *page.EventJavascriptDialogOpening, *page.EventJavascriptDialogClosed:
			if t.dialogWatcher() != nil {
				return // the watcher reports the tab's dialogs until it is ready
			}
		}
		ds.on(ev)
	}
	tctx, cancel := chromedp.NewContext(i.browserCtx, chromedp.WithTargetID(info.TargetID), chromedp.WithListener(own))
	t.ctx, t.cancel = tctx, cancel
	ds.bind(tctx, i.opts.ActionTimeout)
	ds.send = func(ctx context.Context, p page.HandleJavaScriptDialogParams) error { return i.sendDialog(ctx, t, p) }
	i.tabs[id] = t
	go i.watch(t) // first: the watcher's Page domain is enabled by the browser alone
	go func() {
		err := chromedp.Do(tctx) // bound to tctx: closing the tab (or the instance) ends it
		if err != nil {
			t.attachErr = notFound("tab_not_found", "tab %s not found: it could not be followed (%v)", id, err)
		}
		close(t.ready)
		i.unwatch(t, "")
		if err != nil {
			i.mu.Lock()
			if i.tabs[id] == t {
				delete(i.tabs, id)
			}
			i.mu.Unlock()
			cancel()
		}
	}()
	return t
}

// tabFor returns the tab with id if a request for agent may use it: a tab
// of another agent's browser context is not there for it. agent "" (a
// request for no agent) may use any tab.
func (i *Instance) tabFor(id, agent string) (*tab, bool) {
	t, ok := i.tab(id)
	if !ok || agent != "" && t.agent != "" && t.agent != agent {
		return nil, false
	}
	return t, true
}

// closeTab closes a tab a request for agent may use (tabFor); it reports
// whether there was one.
func (i *Instance) closeTab(id, agent string) bool {
	t, ok := i.tabFor(id, agent)
	if !ok {
		return false
	}
	i.mu.Lock()
	delete(i.tabs, id)
	i.tabClosedLocked(t.agent, time.Now())
	i.mu.Unlock()
	t.dialogs.forget()
	i.release(t) // closes the target (a dialog open in it goes with it)
	return true
}

// release ends the instance's hold on a tab it no longer has in its books
// and closes its target. Cancelling the tab's context closes a target
// chromedp attached to; one whose attaching has not got that far (a popup
// follow is still attaching) is closed by the browser directly.
func (i *Instance) release(t *tab) {
	ready := t.isReady()
	t.cancel()
	i.unwatch(t, "")
	if !ready {
		ctx, cancel := context.WithTimeout(i.browserCtx, closeTimeout)
		defer cancel()
		_, _ = chromedp.CallBrowser(ctx, target.CloseTarget, target.CloseTargetParams{TargetID: target.ID(t.id)})
	}
}

// closeTimeout bounds the browser's closing of a tab the instance did not
// attach to yet.
const closeTimeout = 10 * time.Second

// listTabs returns the page targets of the browser, but the hidden first one.
func (i *Instance) listTabs(ctx context.Context) ([]*target.Info, error) {
	infos, err := chromedp.Targets(i.browserCtxFor(ctx))
	if err != nil {
		return nil, err
	}
	out := infos[:0]
	for _, info := range infos {
		if info.Type == "page" && info.TargetID != i.keeper && !i.wasHung(string(info.TargetID)) {
			out = append(out, info)
		}
	}
	return out, ctx.Err()
}

// MinProbe is the least time the probe of a page gets (when ProbeTimeout
// is not less): a busy machine may keep a page that is slow but alive from
// answering in less, and a page that fails its probe loses its tab.
const MinProbe = time.Second

// MinProbedTimeout is the shortest time left (X-Switchyard-Timeout, or
// ActionTimeout) for which a request's page is probed when its work runs
// out of time: its quarter is MinProbe, and a shorter one would leave the
// work too little of it. A request with less answers 504 timeout
// (retryable) within its time when its work runs out of it, and its tab
// stays open.
const MinProbedTimeout = 4 * MinProbe

// budget is how long a request's answer may take from its arrival:
// ActionTimeout, or less when the request says how long its attempt has
// left (pinchtab.HeaderTimeout, checked by checkTimeout).
func (i *Instance) budget(r *http.Request) time.Duration {
	d, _ := parseTimeout(r.Header.Get(pinchtab.HeaderTimeout), i.opts.ActionTimeout)
	return d
}

// parseTimeout reads an X-Switchyard-Timeout value: "" is limit; a
// positive whole number of milliseconds is itself, at most limit (a huge
// one, even beyond int64, is limit); anything else is an error.
func parseTimeout(v string, limit time.Duration) (time.Duration, error) {
	if v == "" {
		return limit, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-"):
		return limit, nil
	case err != nil || ms <= 0:
		return 0, badRequest("bad_timeout", "%s must be a positive whole number of milliseconds (what the attempt has left), got %q",
			pinchtab.HeaderTimeout, v)
	case ms >= limit.Milliseconds():
		return limit, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// split divides the time left for a request's answer between its work on
// the tab, the probe of the page that follows when the work runs out of
// time, and a margin for closing a hung tab and sending the answer, so
// that the whole answer arrives within left: the probe gets a quarter of
// it, at most ProbeTimeout, and the margin an eighth, at most a second
// (answerMargin). Under MinProbedTimeout there is no probe (probe 0), so a
// probe has MinProbe at least (ProbeTimeout, when that is less).
func (i *Instance) split(left time.Duration) (work, probe time.Duration) {
	margin := answerMargin(left)
	if left < MinProbedTimeout {
		return left - margin, 0
	}
	probe = min(i.opts.ProbeTimeout, left/4)
	return left - probe - margin, probe
}

// answerMargin is the part of left kept for sending a request's answer:
// an eighth, at most a second.
func answerMargin(left time.Duration) time.Duration { return min(time.Second, left/8) }

// waitTab takes the tab's lock, waiting for its previous operation at
// most until the request's deadline less the margin for its answer: a
// request queued behind a long operation answers 504 timeout (retryable:
// the tab is busy, not lost) within its time, whether or not the client
// set a deadline of its own.
func (i *Instance) waitTab(reqCtx context.Context, t *tab, deadline time.Time) error {
	select {
	case t.lock <- struct{}{}:
		return nil
	default:
	}
	waited := time.Now()
	wait := time.NewTimer(time.Until(deadline) - answerMargin(time.Until(deadline)))
	defer wait.Stop()
	select {
	case t.lock <- struct{}{}:
		return nil
	case <-reqCtx.Done():
		return reqCtx.Err()
	case <-wait.C:
		return &apiError{http.StatusGatewayTimeout, codeTimeout, fmt.Errorf(
			"tab %s is busy with another operation: it was not free within the request's time (waited %v); try again",
			t.id, time.Since(waited).Round(time.Millisecond))}
	}
}

// codeTimeout is the error code of a request that ran out of its time.
const codeTimeout = "timeout"

// runOp does fn, the operation op ("navigate", "click", "text", …), on a
// tab, alone, answering by deadline: it waits for the tab's previous
// operation within the request's time (waitTab), and fn's context ends
// when the request's does, or when its share of what is left of the time
// after the wait (split) runs out.
// When fn's time ran out, the tab's page is asked to run a trivial script
// within the probe's share (probe): a page that cannot (its script loops
// for ever and the renderer's main thread never yields) while the browser
// answers would hold every later operation on the tab until its own
// timeout, so its tab is closed and the error says the page stopped
// responding (page_unresponsive). A request that was cancelled is not
// probed: nobody waits for the verdict, and its tab stays.
// A JavaScript dialog holds the page up too, but it is no hang: an
// operation (but op "dialog", which answers it) that comes while the
// tab's page has a dialog open, or during which one opens, stops at once
// and answers dialogBlocked; the page is not probed, and its tab stays.
func (i *Instance) runOp(reqCtx context.Context, t *tab, deadline time.Time, op string, fn func(ctx context.Context) error) error {
	if err := i.waitTab(reqCtx, t, deadline); err != nil {
		return err
	}
	defer func() { <-t.lock }()
	if i.wasHung(t.id) {
		return hungTab(t.id) // closed while this request waited for it
	}
	limit, probe := i.split(time.Until(deadline))
	ctx, cancel := context.WithTimeout(t.ctx, limit)
	defer cancel()
	stop := context.AfterFunc(reqCtx, cancel)
	defer stop()
	if op != "dialog" {
		d, stopWatching := t.dialogs.cancelOnOpen(cancel)
		if d != nil {
			return &dialogBlocked{op: op, tabID: t.id, dialog: d}
		}
		defer stopWatching()
	}
	err := t.attached(ctx, op == "dialog")
	if err == nil {
		err = fn(ctx)
	}
	if err == nil {
		return nil
	}
	if d := t.dialogs.current(); d != nil && op != "dialog" {
		return &dialogBlocked{op: op, tabID: t.id, dialog: d}
	}
	if ctx.Err() == nil || t.ctx.Err() != nil {
		return err
	}
	if reqCtx.Err() != nil {
		// Cancelled: nobody waits for the answer, and a probe would hold
		// the tab for nothing. The tab stays; the next request with time
		// enough finds its page hung, if it is.
		return fmt.Errorf("%w: %w", reqCtx.Err(), err)
	}
	v := alive
	if probe > 0 {
		v = i.probe(reqCtx, t, probe)
	}
	if d := t.dialogs.current(); d != nil {
		// A dialog is open: the page is held, not hung.
		if op == "dialog" {
			return err
		}
		return &dialogBlocked{op: op, tabID: t.id, dialog: d}
	}
	switch v {
	case hung:
		i.closeHung(t, limit, probe)
		return &apiError{http.StatusGatewayTimeout, codePageUnresponsive, fmt.Errorf(
			"the page in tab %s stopped responding (a script that never yields?): it did not answer within %v after the request's work ran out of its %v, "+
				"while the browser did; the tab was closed, and its page is lost: open a new tab (%w)", t.id, probe, limit, err)}
	case browserSilent:
		return &apiError{http.StatusGatewayTimeout, codeTimeout, fmt.Errorf(
			"tab %s: the request's work ran out of its %v, and neither the page nor the browser answered within %v after it "+
				"(a busy machine, or a large answer holding the browser's connection): the tab is kept; try again (%w)", t.id, limit, probe, err)}
	}
	if reqCtx.Err() != nil {
		return fmt.Errorf("%w: %w", reqCtx.Err(), err)
	}
	return err
}

// verdict is what a probe found of a tab's page.
type verdict int

const (
	alive         verdict = iota // the page answered (or opened a dialog, or its tab went, or the probe was cut short)
	hung                         // the browser answered, the page did not: its renderer is stuck
	browserSilent                // the browser did not answer either: the page is not to blame
)

// DefaultProbeTimeout is Options.ProbeTimeout when it is 0.
const DefaultProbeTimeout = 3 * time.Second

// codePageUnresponsive is the error code of a request whose tab's page
// stopped responding, and whose tab was closed for it.
const codePageUnresponsive = pinchtab.CodePageUnresponsive

// hungRetention is how long the instance remembers a tab it closed because
// its page stopped responding.
const hungRetention = time.Hour

// probe asks the tab's page to run a trivial script within d, and the
// browser, at once and within the same d, about the tab's target
// (Target.getTargetInfo, which the browser process answers itself, however
// busy the tab's renderer is). The page answering means it is alive; a
// page that does not while the browser does is hung: its renderer's main
// thread never gets to the script (a script that never yields, or a
// renderer that stopped); neither answering says nothing of the page (the
// machine, the browser or its one connection is slow) and the tab is not
// to be closed for it. A page that opens a JavaScript dialog responds: the
// probe ends then (runOp answers dialogBlocked). The probe ends when the
// request that asked for it is cancelled: nobody waits for its verdict.
func (i *Instance) probe(reqCtx context.Context, t *tab, d time.Duration) verdict {
	ctx, cancel := context.WithTimeout(t.ctx, d)
	defer cancel()
	stop := context.AfterFunc(reqCtx, cancel)
	defer stop()
	open, stopWatching := t.dialogs.cancelOnOpen(cancel)
	if open != nil {
		return alive
	}
	defer stopWatching()

	browser := make(chan error, 1)
	go func() {
		bctx, bcancel := context.WithCancel(i.browserCtx)
		defer bcancel()
		defer context.AfterFunc(ctx, bcancel)()
		_, err := chromedp.CallBrowser(bctx, target.GetTargetInfo, target.GetTargetInfoParams{TargetID: target.ID(t.id)})
		browser <- err
	}()
	err := t.attached(ctx, false) // a page not followed yet answers once it is
	if err == nil {
		_, err = chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: "1", ReturnByValue: new(true)})
	}
	if err == nil || ctx.Err() == nil && t.ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return alive
	}
	if reqCtx.Err() != nil || t.ctx.Err() != nil || t.dialogs.current() != nil {
		return alive // cut short, or the tab went, or a dialog holds the page: no verdict of a hang
	}
	if berr := <-browser; berr != nil {
		return browserSilent
	}
	return hung
}

// closeHung closes a tab whose page stopped responding. Closing a target is
// the browser process's work (Target.closeTarget), which a renderer stuck in
// a script does not hold up; the answer does not wait for it (it may take
// seconds on a busy machine): the tab is out of the instance's books at
// once, and a request for it is told why (hungTab).
func (i *Instance) closeHung(t *tab, took, probe time.Duration) {
	now := time.Now()
	i.mu.Lock()
	for id, at := range i.hung {
		if now.Sub(at) > hungRetention {
			delete(i.hung, id)
		}
	}
	i.hung[t.id] = now
	delete(i.tabs, t.id)
	i.tabClosedLocked(t.agent, now)
	closing := i.closing
	if !closing {
		i.wg.Add(1)
	}
	i.mu.Unlock()
	t.dialogs.forget()
	i.log.Warn("a tab's page stopped responding: the tab is closed", "tab", t.id, "agent", t.agent, "action_timeout", took, "probe_timeout", probe)
	if closing {
		t.cancel() // Close is closing the browser: it waits for nothing
		return
	}
	go func() {
		defer i.wg.Done()
		i.release(t)
	}()
}

// wasHung reports whether the instance closed tab id because its page
// stopped responding.
func (i *Instance) wasHung(id string) bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	_, ok := i.hung[id]
	return ok
}

// hungTab is the error for a request to a tab closed because its page
// stopped responding.
func hungTab(id string) error {
	return notFound("tab_not_found", "tab %s not found: it was closed because its page stopped responding", id)
}

// logWriter sends the browser's output to the log, at debug level.
type logWriter struct{ log hclog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if line != "" {
			w.log.Debug("browser output", "line", line)
		}
	}
	return len(p), nil
}

var _ io.Writer = logWriter{}

// defaultStartTimeout bounds a browser's start when neither
// Options.StartTimeout nor Start's context does.
const defaultStartTimeout = 30 * time.Second
