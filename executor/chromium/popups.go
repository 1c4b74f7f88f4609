// Popups: a tab a page opened itself is followed from the moment the
// browser reports it. Attaching to a page (chromedp's attaching enables the
// page's domains one by one) needs its renderer to answer, and a page that
// shows a JavaScript dialog answers nothing until the dialog is gone; the
// browser reports a dialog (Page.javascriptDialogOpening), and lets it be
// answered (Page.handleJavaScriptDialog), only to a session whose Page
// domain was enabled before the dialog opened. So a popup gets, at once, a
// watcher: a session of its own (not flat: its messages go through the
// browser's, Target.sendMessageToTarget) whose Page domain is enabled by
// the browser process itself, whatever the page's renderer is doing. Until
// the popup is attached (tab.ready) the watcher's dialog events are the
// tab's, and a dialog is answered through it; then the watcher goes.

package chromium

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// watcher is a popup's session before the instance is attached to it.
type watcher struct {
	session target.SessionID
	mu      sync.Mutex
	next    int64
	replies map[int64]chan error
}

// watch attaches a watcher to the popup t and enables its Page domain;
// once the browser took that, the tab's dialogs go through the watcher
// until the tab is ready. A popup the watcher could not attach to is
// followed by its attaching alone.
func (i *Instance) watch(t *tab) {
	ctx, cancel := context.WithTimeout(t.ctx, closeTimeout)
	defer cancel()
	res, err := chromedp.CallBrowser(ctx, target.AttachToTarget, target.AttachToTargetParams{TargetID: target.ID(t.id), Flatten: new(false)})
	if err != nil {
		i.log.Debug("a popup could not be watched", "tab", t.id, "error", err)
		return
	}
	w := &watcher{session: res.SessionID, replies: make(map[int64]chan error)}
	i.mu.Lock()
	i.watchers[w.session] = w
	i.watched[w.session] = t
	i.mu.Unlock()
	// The browser answers sendMessageToTarget once it dispatched the
	// message: the Page domain's browser side is enabled then (the
	// renderer's answer to Page.enable may come much later).
	if err := i.sendTo(ctx, w, -1, "Page.enable", struct{}{}); err != nil {
		i.log.Debug("a popup's watcher could not enable its Page domain", "tab", t.id, "error", err)
		i.unwatch(t, w.session)
		return
	}
	t.setWatcher(w)
	if t.isReady() || t.ctx.Err() != nil {
		i.unwatch(t, "") // attached (or closed) meanwhile: the watcher is not needed
	}
}

// sendTo sends a command to the watcher's session with id; a negative
// id is a command whose answer nobody waits for.
func (i *Instance) sendTo(ctx context.Context, w *watcher, id int64, method string, params any) error {
	msg, err := json.Marshal(struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	if err != nil {
		return err
	}
	return chromedp.FromContext(i.browserCtx).Browser.Call(ctx, "Target.sendMessageToTarget",
		map[string]any{"sessionId": w.session, "message": string(msg)}, nil)
}

// callWatcher sends a command to the watcher's session and waits, within
// ctx, for its answer.
func (i *Instance) callWatcher(ctx context.Context, w *watcher, method string, params any) error {
	w.mu.Lock()
	w.next++
	id := w.next
	reply := make(chan error, 1)
	w.replies[id] = reply
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.replies, id)
		w.mu.Unlock()
	}()
	if err := i.sendTo(ctx, w, id, method, params); err != nil {
		return err
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watcherMessage takes a message of a watcher's session: an answer to a
// command, or an event; the dialog events are the tab's while it is not
// ready. It runs on the browser's event reader: it must not block.
func (i *Instance) watcherMessage(ev *target.EventReceivedMessageFromTarget) {
	i.mu.Lock()
	w, t := i.watchers[ev.SessionID], i.watched[ev.SessionID]
	i.mu.Unlock()
	if w == nil {
		return
	}
	var m struct {
		ID     int64           `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Error  *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(ev.Message), &m) != nil {
		return
	}
	if m.ID > 0 {
		w.mu.Lock()
		reply := w.replies[m.ID]
		w.mu.Unlock()
		if reply != nil {
			var err error
			if m.Error != nil {
				err = errors.New(m.Error.Message + " (" + strconv.FormatInt(m.Error.Code, 10) + ")")
			}
			reply <- err
		}
		return
	}
	if t.isReady() {
		return // the tab's own session reports its dialogs now
	}
	switch m.Method {
	case "Page.javascriptDialogOpening":
		var opening page.EventJavascriptDialogOpening
		if json.Unmarshal(m.Params, &opening) == nil {
			t.dialogs.on(&opening)
		}
	case "Page.javascriptDialogClosed":
		t.dialogs.on(&page.EventJavascriptDialogClosed{})
	}
}

// unwatch ends the watcher session of t, if it has one (or session, when
// the tab has not taken it yet).
func (i *Instance) unwatch(t *tab, session target.SessionID) {
	if w := t.takeWatcher(); w != nil {
		session = w.session
	}
	if session == "" {
		return
	}
	i.mu.Lock()
	_, ok := i.watchers[session]
	delete(i.watchers, session)
	delete(i.watched, session)
	i.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(i.browserCtx, closeTimeout)
	defer cancel()
	_, _ = chromedp.CallBrowser(ctx, target.DetachFromTarget, target.DetachFromTargetParams{SessionID: session})
}

// setWatcher gives the tab its watcher; takeWatcher takes it away.
func (t *tab) setWatcher(w *watcher) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.watcher = w
}

func (t *tab) takeWatcher() *watcher {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	w := t.watcher
	t.watcher = nil
	return w
}

// dialogWatcher returns the watcher the tab's dialogs go through, or nil
// once the tab is ready (or when it has none).
func (t *tab) dialogWatcher() *watcher {
	if t.isReady() {
		return nil
	}
	t.wmu.Lock()
	defer t.wmu.Unlock()
	return t.watcher
}

// sendDialog sends Page.handleJavaScriptDialog for the tab: through its
// watcher while it has one and is not ready, else on the tab's own session
// (ctx is then the tab's).
func (i *Instance) sendDialog(ctx context.Context, t *tab, p page.HandleJavaScriptDialogParams) error {
	if w := t.dialogWatcher(); w != nil {
		return i.callWatcher(ctx, w, "Page.handleJavaScriptDialog", p)
	}
	_, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, p)
	return err
}
