// JavaScript dialogs: alert(), confirm(), prompt() and a page's beforeunload
// question stop the page until they are answered, and with them every
// operation on the tab. The instance follows each tab's dialog
// (Page.javascriptDialogOpening and Closed): an operation that opens one, or
// that comes while one is open, answers at once 500 dialog_blocking, naming
// the dialog, instead of waiting for its time to run out; POST
// /tabs/{id}/dialog answers the dialog; a click (any action) that says
// "dialogAction" answers the dialog it opens itself; with
// Options.DialogAutoAccept every dialog is accepted as it opens. A page
// held by a dialog is not a hung page: its tab is never closed for it.

package chromium

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// codeDialogBlocking is the code of an operation a JavaScript dialog held up.
const codeDialogBlocking = "dialog_blocking"

// maxDialogText bounds a dialog's message and default prompt as the
// instance reports them.
const maxDialogText = 8 << 10

// dialogInfo is a JavaScript dialog a page opened.
type dialogInfo struct {
	Type          string `json:"type"` // alert, confirm, prompt or beforeunload
	Message       string `json:"message"`
	DefaultPrompt string `json:"defaultPrompt,omitempty"`
}

// dialogAnswer is how a dialog is to be answered: accepted (with the text
// for a prompt, or its default when text is nil) or dismissed.
type dialogAnswer struct {
	accept bool
	text   *string
}

// dialogs follows the JavaScript dialog of one tab. Its methods, but on, run
// anywhere; on runs on the tab's event reader.
type dialogs struct {
	mu sync.Mutex
	// pending is the open dialog nobody answered yet, or nil. opened is
	// closed exactly while pending is set: an operation under way waits on
	// it, and stops when a dialog opens.
	pending *dialogInfo
	opened  chan struct{}
	// armed answers the next dialog that opens (an action's
	// "dialogAction"), once; answered is the dialog it answered.
	armed    *dialogAnswer
	answered *dialogInfo
	// leaving is set while the tab is asked to leave its page (navigate,
	// reload, back, forward): the page's beforeunload question is accepted.
	leaving bool
	// autoAccept accepts every dialog as it opens (Options.DialogAutoAccept).
	autoAccept bool
	// answer sends an answer to the tab's open dialog; set by bind.
	answer func(dialogAnswer, *dialogInfo) error
	// send sends Page.handleJavaScriptDialog for the tab (ctx is the
	// tab's): on its session, or, for a popup not attached yet, through
	// its watcher (popups.go). Set by bind; a popup's is set by follow.
	send func(ctx context.Context, p page.HandleJavaScriptDialogParams) error
}

func newDialogs(autoAccept bool) *dialogs {
	return &dialogs{opened: make(chan struct{}), autoAccept: autoAccept}
}

// bind has the dialogs of the tab whose chromedp context is tctx answered
// within timeout. It is called before the tab's target starts: the
// dialogs' on is the target's listener from its start (WithListener), so
// that no event of the tab is missed.
func (ds *dialogs) bind(tctx context.Context, timeout time.Duration) {
	ds.answer = func(a dialogAnswer, d *dialogInfo) error {
		ctx, cancel := context.WithTimeout(tctx, timeout)
		defer cancel()
		return ds.answerDialog(ctx, a, d)
	}
	ds.send = func(ctx context.Context, p page.HandleJavaScriptDialogParams) error {
		_, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, p)
		return err
	}
}

// answerDialog answers the open dialog d (nil when the instance did not see
// it open) of the tab whose context ctx is.
func (ds *dialogs) answerDialog(ctx context.Context, a dialogAnswer, d *dialogInfo) error {
	p := page.HandleJavaScriptDialogParams{Accept: a.accept}
	switch {
	case a.text != nil:
		p.PromptText = *a.text
	case d != nil:
		p.PromptText = d.DefaultPrompt
	}
	return ds.send(ctx, p)
}

// on follows the tab's events. It runs on the tab's event reader, which it
// must not hold up: a dialog it answers itself is answered on a goroutine
// of its own.
func (ds *dialogs) on(ev any) {
	switch ev := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		d := &dialogInfo{Type: truncate(string(ev.Type), 32), Message: truncate(ev.Message, maxDialogText),
			DefaultPrompt: truncate(ev.DefaultPrompt, maxDialogText)}
		ds.mu.Lock()
		defer ds.mu.Unlock()
		var a *dialogAnswer
		switch {
		case ds.armed != nil:
			a, ds.armed, ds.answered = ds.armed, nil, d
		case ds.leaving && ev.Type == page.DialogTypeBeforeunload, ds.autoAccept:
			a = &dialogAnswer{accept: true}
		default:
			ds.setPendingLocked(d)
			return
		}
		go func() {
			if err := ds.answer(*a, d); err != nil && !noDialogOpen(err) {
				// Left open: the operation under way stops, and the
				// dialog waits for POST /tabs/{id}/dialog.
				ds.mu.Lock()
				ds.setPendingLocked(d)
				ds.mu.Unlock()
			}
		}()
	case *page.EventJavascriptDialogClosed:
		ds.mu.Lock()
		ds.clearLocked()
		ds.mu.Unlock()
	}
}

func (ds *dialogs) setPendingLocked(d *dialogInfo) {
	if ds.pending == nil {
		close(ds.opened)
	}
	ds.pending = d
}

func (ds *dialogs) clearLocked() {
	if ds.pending != nil {
		ds.pending = nil
		ds.opened = make(chan struct{})
	}
}

// watch returns the tab's open dialog, or nil and a channel closed when
// one opens.
func (ds *dialogs) watch() (*dialogInfo, <-chan struct{}) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.pending, ds.opened
}

// cancelOnOpen returns the tab's open dialog, if there is one; otherwise
// it calls cancel as soon as a dialog opens, until stop is called: an
// operation under way on the tab stops then instead of waiting for its
// time to run out.
func (ds *dialogs) cancelOnOpen(cancel func()) (open *dialogInfo, stop func()) {
	d, opened := ds.watch()
	if d != nil {
		return d, func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-opened:
			cancel()
		case <-done:
		}
	}()
	return nil, func() { close(done) }
}

// current returns the tab's open dialog, or nil.
func (ds *dialogs) current() *dialogInfo {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	return ds.pending
}

// take returns the tab's open dialog, or nil, and forgets it: it is being
// answered. put puts it back when the answer failed.
func (ds *dialogs) take() *dialogInfo {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.pending
	ds.clearLocked()
	return d
}

func (ds *dialogs) put(d *dialogInfo) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.setPendingLocked(d)
}

// arm has the next dialog answered by a; disarm ends that and returns the
// dialog a answered, or nil.
func (ds *dialogs) arm(a *dialogAnswer) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.armed, ds.answered = a, nil
}

func (ds *dialogs) disarm() *dialogInfo {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.answered
	ds.armed, ds.answered = nil, nil
	return d
}

// leave accepts the page's beforeunload question until the returned func
// is called.
func (ds *dialogs) leave() func() {
	ds.mu.Lock()
	ds.leaving = true
	ds.mu.Unlock()
	return func() {
		ds.mu.Lock()
		ds.leaving = false
		ds.mu.Unlock()
	}
}

// forget drops the tab's open dialog: the tab is closed.
func (ds *dialogs) forget() {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	ds.clearLocked()
	ds.armed, ds.answered = nil, nil
}

// noDialogOpen reports whether err is the browser saying there is no
// dialog to answer.
func noDialogOpen(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no dialog is showing") || strings.Contains(msg, "no dialog open")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut]
}

// dialogBlocked is the answer to an operation a dialog held up: 500
// dialog_blocking, not retryable (the same operation is held up again
// until the dialog is answered), with the dialog in its details.
type dialogBlocked struct {
	op, tabID string
	dialog    *dialogInfo
}

func (e *dialogBlocked) Error() string {
	return fmt.Sprintf("%s blocked by JavaScript dialog (%s: %q) — answer it with POST /tabs/%s/dialog "+
		`{"action":"accept"|"dismiss"}, or send "dialogAction" with the action that opens it`, e.op, e.dialog.Type, e.dialog.Message, e.tabID)
}

func (e *dialogBlocked) details() map[string]any {
	return map[string]any{
		"suggestion":     `POST /tabs/` + e.tabID + `/dialog {"action":"accept"} or {"action":"dismiss"}`,
		"dialog_type":    e.dialog.Type,
		"dialog_message": e.dialog.Message,
		"tabId":          e.tabID,
	}
}

// handleDialog answers the tab's open dialog, as PinchTab's POST
// /tabs/{id}/dialog does: {"action":"accept"|"dismiss","text"} answers
// {"type","message","handled":true}; with no dialog open, 400 "no dialog
// open on tab …". A dialog that opened before the instance followed the tab
// (a popup's) is answered too, as type "unknown". "text" is the answer to
// a prompt; without it the prompt's default is accepted.
func (i *Instance) handleDialog(ctx context.Context, t *tab, r *http.Request) (any, error) {
	var req struct {
		Action string  `json:"action"`
		Text   *string `json:"text"`
	}
	if err := decodeBody(r, &req); err != nil {
		return nil, err
	}
	switch req.Action {
	case "accept", "dismiss":
	case "":
		return nil, badRequest("bad_request", "action required (accept or dismiss)")
	default:
		return nil, badRequest("bad_request", "action must be 'accept' or 'dismiss'")
	}
	a := dialogAnswer{accept: req.Action == "accept", text: req.Text}
	d := t.dialogs.take()
	err := t.dialogs.answerDialog(ctx, a, d)
	switch {
	case err != nil && noDialogOpen(err) && d == nil:
		return nil, badRequest("no_dialog", "no dialog open on tab %s", t.id)
	case err != nil && noDialogOpen(err):
		// It closed meanwhile (the page went away): it is answered.
	case err != nil:
		if d != nil {
			t.dialogs.put(d)
		}
		return nil, fmt.Errorf("handle dialog: %w", err)
	}
	if d == nil {
		d = &dialogInfo{Type: "unknown"}
	}
	if d.Type == string(page.DialogTypeBeforeunload) && a.accept {
		clear(t.refs) // the page is leaving: refs belong to it
	}
	return map[string]any{"type": d.Type, "message": d.Message, "handled": true}, nil
}
