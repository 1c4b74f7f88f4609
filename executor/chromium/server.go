// The HTTP side of the built-in instance: PinchTab's routes, the bearer-token
// check, and errors as {"error","code"} with the status a PinchTab client
// classifies (4xx for what retrying cannot fix, 5xx and 504 for what it may).

package chromium

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Handler returns the instance's HTTP API.
func (i *Instance) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", i.handleHealth)
	mux.HandleFunc("GET /tabs", i.handleTabs)
	mux.HandleFunc("POST /tab", i.handleTab)
	mux.HandleFunc("POST /tabs/{id}/navigate", i.withTab(i.handleNavigate))
	mux.HandleFunc("POST /tabs/{id}/action", i.withTab(i.handleAction))
	mux.HandleFunc("GET /tabs/{id}/text", i.withTab(i.handleText))
	mux.HandleFunc("GET /tabs/{id}/snapshot", i.withTab(i.handleSnapshot))
	mux.HandleFunc("GET /tabs/{id}/screenshot", i.withTab(i.handleScreenshot))
	mux.HandleFunc("POST /tabs/{id}/evaluate", i.withTab(i.handleEvaluate))
	mux.HandleFunc("GET /tabs/{id}/title", i.withTab(i.handleTitle))
	mux.HandleFunc("GET /tabs/{id}/url", i.withTab(i.handleURL))
	mux.HandleFunc("POST /tabs/{id}/close", i.handleClose)
	mux.HandleFunc("POST /tabs/{id}/back", i.withTab(i.handleHistory(-1)))
	mux.HandleFunc("POST /tabs/{id}/forward", i.withTab(i.handleHistory(+1)))
	mux.HandleFunc("POST /tabs/{id}/reload", i.withTab(i.handleHistory(0)))
	mux.HandleFunc("POST /tabs/{id}/wait", i.withTab(i.handleWait))
	mux.HandleFunc("POST /tabs/{id}/dialog", i.withTab(i.handleDialog))
	return i.auth(i.checkTimeout(mux))
}

// arrivedKey holds when a request arrived (checkTimeout), from which its
// X-Switchyard-Timeout counts.
type arrivedKey struct{}

// arrived is when the request arrived.
func arrived(r *http.Request) time.Time {
	if at, ok := r.Context().Value(arrivedKey{}).(time.Time); ok {
		return at
	}
	return time.Now()
}

// checkTimeout refuses a request whose X-Switchyard-Timeout is not a
// positive whole number of milliseconds (400 bad_timeout), rather than
// taking the action cap in its place: the caller's attempt would end long
// before the answer. A value above the cap counts as the cap (budget). It
// notes when the request arrived.
func (i *Instance) checkTimeout(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		if _, err := parseTimeout(r.Header.Get(pinchtab.HeaderTimeout), i.opts.ActionTimeout); err != nil {
			writeError(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), arrivedKey{}, at)))
	})
}

// apiError is an error with the HTTP status and code it is answered with.
type apiError struct {
	status int
	code   string
	err    error
}

func (e *apiError) Error() string { return e.err.Error() }
func (e *apiError) Unwrap() error { return e.err }

func badRequest(code, format string, args ...any) error {
	return &apiError{http.StatusBadRequest, code, fmt.Errorf(format, args...)}
}

func notFound(code, format string, args ...any) error {
	return &apiError{http.StatusNotFound, code, fmt.Errorf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers err with its status: an apiError's own; 504 for a
// deadline; 502 for a page that failed to load; 500 otherwise. Like
// PinchTab, the body says "retryable": true only when another try may help:
// a timeout, a failed load, a browser error, an element not visible yet (a
// 409, but for navigation_changed: clicking again would click on the next page).
// A page that stopped responding (504 page_unresponsive) is not: its tab is
// closed, and no request to it can succeed again.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := http.StatusInternalServerError, "browser_error"
	var ae *apiError
	var le *chromedp.LoadError
	var db *dialogBlocked
	switch {
	case errors.As(err, &db):
		// Not retryable: the operation is held up again until the
		// dialog is answered.
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": db.Error(), "code": codeDialogBlocking, "details": db.details()})
		return
	case errors.As(err, &ae):
		status, code = ae.status, ae.code
	case r.Context().Err() != nil:
		status, code = 499, "client_closed_request" // nobody reads it
	case errors.Is(err, context.DeadlineExceeded):
		status, code = http.StatusGatewayTimeout, codeTimeout
	case errors.As(err, &le):
		status, code = http.StatusBadGateway, "navigate_failed"
	}
	body := map[string]any{"error": err.Error(), "code": code}
	if (status >= 500 || status == http.StatusConflict) && code != errNavigationChanged.code && code != codePageUnresponsive {
		body["retryable"] = true
	}
	writeJSON(w, status, body)
}

// auth wants the bearer token on every route but GET /health, which answers
// without one, as PinchTab's does: a token that stopped matching shows as a
// 401 on the first real request, not as a dead instance.
func (i *Instance) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + i.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/health":
			next.ServeHTTP(w, r)
		case got == "":
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing bearer token", "code": "missing_token"})
		case subtle.ConstantTimeCompare([]byte(got), want) != 1:
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid bearer token", "code": "bad_token"})
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// agentOf is the agent a request is for (pinchtab.HeaderAgent), or "".
func agentOf(r *http.Request) string { return r.Header.Get(pinchtab.HeaderAgent) }

// withTab resolves the {id} tab, if the request's agent may use it (tabFor),
// and runs h on it, alone.
func (i *Instance) withTab(h func(ctx context.Context, t *tab, r *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		t, ok := i.tabFor(id, agentOf(r))
		if !ok {
			if i.wasHung(id) {
				writeError(w, r, hungTab(id))
				return
			}
			writeError(w, r, notFound("tab_not_found", "tab %s not found", id))
			return
		}
		op := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		if op == "action" {
			// A dialog that holds up an action names its kind.
			body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
			if err != nil {
				writeError(w, r, badRequest("bad_request", "read request body: %v", err))
				return
			}
			var k struct {
				Kind string `json:"kind"`
			}
			if json.Unmarshal(body, &k) == nil && k.Kind != "" {
				op = strings.ToLower(k.Kind)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		var out any
		err := i.runOp(r.Context(), t, arrived(r).Add(i.budget(r)), op, func(ctx context.Context) error {
			var err error
			out, err = h(ctx, t, r)
			return err
		})
		if err != nil {
			writeError(w, r, err)
			return
		}
		if raw, ok := out.(rawReply); ok {
			w.Header().Set("Content-Type", raw.contentType)
			_, _ = w.Write(raw.data)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// rawReply is an answer that is not JSON.
type rawReply struct {
	contentType string
	data        []byte
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBody))
	if err := dec.Decode(v); err != nil {
		return badRequest("bad_request", "decode request body: %v", err)
	}
	return nil
}

// handleHealth answers whether the browser answers. The browser is asked
// (Browser.getVersion, Target.getTargets) by a probe of its own, which the
// request waits for only healthWait: the answer of a large operation on a
// tab (a page's screenshot, a result of megabytes) can hold the one
// connection to the browser for seconds, and the health check must not
// queue behind it. While a probe is under way, a browser that answered one
// less than healthStale ago is ok (the answer says "pending"); one that has
// not answered for longer, or that failed, or whose process ended, is down.
func (i *Instance) handleHealth(w http.ResponseWriter, r *http.Request) {
	if err := i.browserCtx.Err(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": "browser stopped: " + err.Error(), "code": "browser_down"})
		return
	}
	done, last := i.health.probe(i)
	timer := time.NewTimer(healthWait)
	defer timer.Stop()
	pending := false
	select {
	case <-done:
		last = i.health.result()
	case <-timer.C:
		pending = true
	case <-r.Context().Done():
		return
	}
	switch {
	case !pending && last.err != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down", "error": "browser not answering: " + last.err.Error(), "code": "browser_down"})
	case pending && (last.at.IsZero() || time.Since(last.at) > healthStale):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "down",
			"error": fmt.Sprintf("browser not answering: no answer for %v", time.Since(last.at).Round(time.Millisecond)), "code": "browser_down"})
	default:
		out := map[string]any{"status": "ok", "tabs": last.tabs, "browser": last.product, "implementation": pinchtab.Builtin}
		if pending {
			out["pending"] = true
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// healthWait is how long a health request waits for its probe of the
// browser; healthStale how long a browser that answered a probe stays ok
// while the next is under way.
const (
	healthWait  = time.Second
	healthStale = 30 * time.Second
)

// healthProbe is the health check's probe of the browser: one at a time,
// its last answer kept.
type healthProbe struct {
	mu      sync.Mutex
	running chan struct{} // closed when the probe under way ends; nil when none is
	last    healthResult  // of the last probe that ended
	ok      time.Time     // when a probe last succeeded
}

type healthResult struct {
	at      time.Time // when the browser last answered a probe
	err     error     // the last probe's failure, or nil
	product string
	tabs    int
}

// probe starts a probe unless one is under way, and returns the channel
// closed when it ends, and the last result.
func (h *healthProbe) probe(i *Instance) (<-chan struct{}, healthResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := h.last
	last.at = h.ok
	if h.running != nil {
		return h.running, last
	}
	done := make(chan struct{})
	h.running = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(i.browserCtx, healthStale)
		defer cancel()
		res := healthResult{}
		v, err := chromedp.CallBrowser(ctx, browser.GetVersion, cdp.Empty{})
		if err == nil {
			tabs, lerr := i.listTabs(ctx)
			res.product, res.tabs, err = v.Product, len(tabs), lerr
		}
		res.err = err
		h.mu.Lock()
		defer h.mu.Unlock()
		h.running = nil
		if err == nil {
			h.ok = time.Now()
		}
		h.last = res
	}()
	return done, last
}

// result returns the last probe's result.
func (h *healthProbe) result() healthResult {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.last
	r.at = h.ok
	return r
}

// browserCtxFor returns a context with the browser of the instance and the
// cancellation of ctx.
func (i *Instance) browserCtxFor(ctx context.Context) context.Context {
	bctx, cancel := context.WithCancel(i.browserCtx)
	context.AfterFunc(ctx, cancel)
	return bctx
}

func (i *Instance) handleTabs(w http.ResponseWriter, r *http.Request) {
	infos, err := i.listTabs(r.Context())
	if err != nil {
		writeError(w, r, err)
		return
	}
	tabs := make([]map[string]string, 0, len(infos))
	for _, info := range infos {
		tabs = append(tabs, map[string]string{"id": string(info.TargetID), "url": info.URL, "title": info.Title, "type": info.Type})
	}
	writeJSON(w, http.StatusOK, map[string]any{"tabs": tabs})
}

func (i *Instance) handleTab(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Action string `json:"action"`
		URL    string `json:"url"`
		TabID  string `json:"tabId"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	switch req.Action {
	case "new":
		if req.URL != "" {
			if err := checkURL(req.URL); err != nil {
				writeError(w, r, err)
				return
			}
		}
		t, err := i.openTab(r.Context(), req.URL, agentOf(r), arrived(r).Add(i.budget(r)))
		if err != nil {
			writeError(w, r, err)
			return
		}
		loaded := req.URL
		if loaded == "" {
			loaded = "about:blank"
		}
		writeJSON(w, http.StatusOK, map[string]string{"tabId": t.id, "url": loaded})
	case "close":
		if !i.closeTab(req.TabID, agentOf(r)) {
			writeError(w, r, notFound("tab_not_found", "tab %s not found", req.TabID))
			return
		}
		writeJSON(w, http.StatusOK, map[string]bool{"closed": true})
	default:
		writeError(w, r, badRequest("bad_request", "action must be \"new\" or \"close\""))
	}
}

func (i *Instance) handleClose(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !i.closeTab(id, agentOf(r)) {
		writeError(w, r, notFound("tab_not_found", "tab %s not found", id))
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"closed": true})
}

// checkURL accepts the URLs a tab may load (pinchtab.ValidateURL, the
// check tasks pass at submission too).
func checkURL(s string) error {
	if err := pinchtab.ValidateURL(s); err != nil {
		return badRequest("bad_url", "%s", err.Error())
	}
	return nil
}

func navigate(ctx context.Context, pageURL string) error {
	_, err := navigateStatus(ctx, pageURL)
	return err
}

// navigateStatus loads a URL and returns the HTTP status of the main
// document's response, after redirects (0 when there was none: about:, a
// fragment of the same document, a data: URL, for which Chromium reports
// 200).
func navigateStatus(ctx context.Context, pageURL string) (int, error) {
	if err := checkURL(pageURL); err != nil {
		return 0, err
	}
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(pageURL))
	if err != nil || resp == nil {
		return 0, err
	}
	if u := strings.ToLower(resp.URL); !strings.HasPrefix(u, "http:") && !strings.HasPrefix(u, "https:") {
		return 0, nil
	}
	return int(resp.Status), nil
}

func (i *Instance) handleNavigate(ctx context.Context, t *tab, r *http.Request) (any, error) {
	var req struct {
		URL string `json:"url"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if req.URL == "" {
		return nil, badRequest("bad_request", "url is required")
	}
	defer t.dialogs.leave()() // asked to leave the page: its beforeunload question is accepted
	status, err := navigateStatus(ctx, req.URL)
	if err != nil {
		return nil, err
	}
	clear(t.refs) // refs belong to the page they were taken on
	out := map[string]any{"tabId": t.id}
	if status > 0 {
		// The page's own status, 404 included: an error page is a page,
		// and the task succeeds; the caller reads the status.
		out["status"] = status
	}
	return pageInfo(ctx, out)
}

// handleHistory moves a tab in its history (step -1 back, +1 forward) or
// reloads it (step 0), as PinchTab's routes do: at either end of the
// history nothing happens, and the answer is {"tabId","url"} either way. It
// waits for the document to leave "loading" (a page from the back-forward
// cache may fire no load event).
func (i *Instance) handleHistory(step int) func(ctx context.Context, t *tab, r *http.Request) (any, error) {
	return func(ctx context.Context, t *tab, _ *http.Request) (any, error) {
		defer t.dialogs.leave()() // asked to leave the page: its beforeunload question is accepted
		moved := false
		if step == 0 {
			if _, err := chromedp.Call(ctx, page.Reload, page.ReloadParams{}); err != nil {
				return nil, err
			}
			moved = true
		} else {
			hist, err := chromedp.Call(ctx, page.GetNavigationHistory, cdp.Empty{})
			if err != nil {
				return nil, err
			}
			if to := int(hist.CurrentIndex) + step; to >= 0 && to < len(hist.Entries) {
				if _, err := chromedp.Call(ctx, page.NavigateToHistoryEntry, page.NavigateToHistoryEntryParams{EntryID: hist.Entries[to].ID}); err != nil {
					return nil, err
				}
				moved = true
			}
		}
		if moved {
			clear(t.refs) // refs belong to the page they were taken on
			if err := waitReady(ctx); err != nil {
				return nil, err
			}
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			return nil, err
		}
		return map[string]any{"tabId": t.id, "url": loc}, nil
	}
}

// waitReady waits until the tab's document has left the "loading" state.
func waitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState`))
		if err == nil && state != "loading" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// handleWait waits, as PinchTab's /wait does, for a selector to match (or
// for a fixed "ms"), up to "timeout" milliseconds (default 10 s): it answers
// {"waited":true,"elapsed","match"}, or {"waited":false,"error"} when the
// time is up.
func (i *Instance) handleWait(ctx context.Context, t *tab, r *http.Request) (any, error) {
	var req struct {
		Selector string `json:"selector"`
		Text     string `json:"text"`
		URL      string `json:"url"`
		Load     string `json:"load"`
		Ms       *int   `json:"ms"`
		Timeout  *int   `json:"timeout"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	start := time.Now()
	elapsed := func() int64 { return time.Since(start).Milliseconds() }
	if req.Ms != nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(min(max(*req.Ms, 0), 30_000)) * time.Millisecond):
		}
		return map[string]any{"waited": true, "elapsed": elapsed()}, nil
	}
	met, what, err := waitCondition(t, req.Selector, req.Text, req.URL, req.Load)
	if err != nil {
		return nil, err
	}
	timeout := 10 * time.Second
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(min(*req.Timeout, 60_000)) * time.Millisecond
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := met(ctx)
		switch {
		case err != nil:
			return nil, err
		case ok:
			return map[string]any{"waited": true, "elapsed": elapsed(), "match": what}, nil
		case time.Since(start) >= timeout:
			return map[string]any{"waited": false, "elapsed": elapsed(), "error": "timeout waiting for " + what}, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// networkQuiet is how long no resource may have finished loading for a
// page to count as network-idle.
const networkQuiet = 500 * time.Millisecond

// waitCondition is what a wait polls for: an element (selector), text on
// the page, a URL (or part of one) the page has reached, or a load state
// ("load", "domcontentloaded", "networkidle": the page loaded and no
// resource finished in the last networkQuiet), as PinchTab's wait takes
// them. Exactly one must be given. what names it for the answer.
func waitCondition(t *tab, selector, text, url, load string) (met func(context.Context) (bool, error), what string, err error) {
	given := 0
	for _, v := range []string{selector, text, url, load} {
		if v != "" {
			given++
		}
	}
	if given != 1 {
		return nil, "", badRequest("bad_request", "give one of selector, text, url, load or ms")
	}
	js := func(expr string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			return chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		}
	}
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	switch {
	case selector != "":
		return func(ctx context.Context) (bool, error) {
			_, err := resolve(ctx, t, selector)
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusNotFound {
				return false, nil
			}
			return err == nil, err
		}, selector, nil
	case text != "":
		return js("!!document.body && document.body.innerText.includes(" + quote(text) + ")"), "text " + quote(text), nil
	case url != "":
		return js("location.href.includes(" + quote(url) + ")"), "url " + quote(url), nil
	}
	switch load {
	case "load":
		return js(`document.readyState === "complete"`), "load", nil
	case "domcontentloaded":
		return js(`document.readyState !== "loading"`), "domcontentloaded", nil
	case "networkidle":
		return js(`document.readyState === "complete" && performance.now() - Math.max(0, ...performance.getEntriesByType("resource").map(e => e.responseEnd)) >= ` +
			strconv.FormatInt(networkQuiet.Milliseconds(), 10)), "networkidle", nil
	}
	return nil, "", badRequest("bad_request", "load must be load, domcontentloaded or networkidle, not %s", quote(load))
}

// pageInfo adds the page's url and title to out.
func pageInfo(ctx context.Context, out map[string]any) (map[string]any, error) {
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		return nil, err
	}
	title, err := chromedp.Run(ctx, chromedp.Title())
	if err != nil {
		return nil, err
	}
	out["url"], out["title"] = loc, title
	return out, nil
}

func (i *Instance) handleText(ctx context.Context, t *tab, r *http.Request) (any, error) {
	sel := r.URL.Query().Get("selector")
	if sel == "" {
		sel = r.URL.Query().Get("ref")
	}
	var text string
	if sel == "" {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		if err != nil {
			return nil, err
		}
		text = v
	} else {
		el, err := resolve(ctx, t, sel)
		if err != nil {
			return nil, err
		}
		v, err := callOn[string](ctx, el, `function() { return this.innerText !== undefined ? this.innerText : this.textContent; }`)
		if err != nil {
			return nil, err
		}
		text = v
	}
	return pageInfo(ctx, map[string]any{"text": text})
}

func (i *Instance) handleTitle(ctx context.Context, _ *tab, _ *http.Request) (any, error) {
	return pageInfo(ctx, map[string]any{})
}

func (i *Instance) handleURL(ctx context.Context, _ *tab, _ *http.Request) (any, error) {
	return pageInfo(ctx, map[string]any{})
}

func (i *Instance) handleScreenshot(ctx context.Context, _ *tab, r *http.Request) (any, error) {
	q := r.URL.Query()
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
	format := "png"
	if q.Get("format") == "jpeg" || q.Get("format") == "jpg" {
		p.Format, format = page.CaptureScreenshotFormatJpeg, "jpeg"
		quality := int64(80)
		if n, err := strconv.ParseInt(q.Get("quality"), 10, 64); err == nil && n > 0 && n <= 100 {
			quality = n
		}
		p.Quality = &quality
	}
	res, err := chromedp.Call(ctx, page.CaptureScreenshot, p)
	if err != nil {
		return nil, err
	}
	if q.Get("raw") == "true" {
		return rawReply{contentType: "image/" + format, data: res.Data}, nil
	}
	return map[string]string{"format": format, "base64": base64.StdEncoding.EncodeToString(res.Data)}, nil
}

func (i *Instance) handleEvaluate(ctx context.Context, _ *tab, r *http.Request) (any, error) {
	var req struct {
		Expression string `json:"expression"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Expression) == "" {
		return nil, badRequest("bad_request", "expression is required")
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](req.Expression, chromedp.EvalAwaitPromise))
	if err != nil {
		var ee *chromedp.ExceptionError
		if errors.As(err, &ee) {
			return nil, &apiError{http.StatusBadRequest, "js_exception", err}
		}
		return nil, err
	}
	if len(raw) == 0 {
		raw = []byte("null")
	}
	return map[string]json.RawMessage{"result": raw}, nil
}
