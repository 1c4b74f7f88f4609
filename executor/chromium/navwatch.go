// Clicks that navigate: a click that sends its tab to another document (a
// link, a form's submit, a script) answers 409 navigation_changed, not
// retryable, unless the request said waitNav: true, as PinchTab does; with
// waitNav the click waits for the new document and succeeds.

package chromium

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// navDetectWindow is how long a click waits, after a round trip through the
// page that handled it, for a navigation it set off to show.
const navDetectWindow = 25 * time.Millisecond

// errNavigationChanged is the answer to a click that navigated without
// waitNav.
var errNavigationChanged = &apiError{http.StatusConflict, "navigation_changed",
	errors.New("unexpected page navigation while executing click (send \"waitNav\": true for a click that may navigate)")}

// navWatch follows a tab's main frame while a click happens.
type navWatch struct {
	frame     string
	requested chan struct{} // closed at the first navigation to another document
	ended     chan struct{} // closed once that navigation committed or stopped
	reqOnce   sync.Once
	endOnce   sync.Once
	mu        sync.Mutex
	seen      bool
}

func (w *navWatch) request() {
	w.reqOnce.Do(func() {
		w.mu.Lock()
		w.seen = true
		w.mu.Unlock()
		close(w.requested)
	})
}

func (w *navWatch) end() {
	w.mu.Lock()
	seen := w.seen
	w.mu.Unlock()
	if seen {
		w.endOnce.Do(func() { close(w.ended) })
	}
}

// on is the tab's event listener: it runs on the tab's reader goroutine and
// returns at once.
func (w *navWatch) on(ev any) {
	switch ev := ev.(type) {
	case *page.EventFrameRequestedNavigation:
		if string(ev.FrameID) == w.frame && ev.Disposition == page.ClientNavigationDispositionCurrentTab {
			w.request()
		}
	case *page.EventFrameStartedNavigating:
		if string(ev.FrameID) == w.frame && ev.NavigationType != page.FrameStartedNavigatingNavigationTypeSameDocument &&
			ev.NavigationType != page.FrameStartedNavigatingNavigationTypeHistorySameDocument {
			w.request()
		}
	case *page.EventFrameNavigated:
		if ev.Frame != nil && ev.Frame.ParentID == "" {
			w.request()
			w.end()
		}
	case *page.EventFrameStoppedLoading:
		if string(ev.FrameID) == w.frame {
			w.end() // a navigation that ended without a new document (a download, a 204)
		}
	}
}

func (w *navWatch) navigated() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// watchedClick runs click on tab t and tells a click that navigated apart:
// the answer waits for the new document, then is errNavigationChanged
// without waitNav, and says "navigated": true with it.
// The main frame of a page target has the target's id.
func watchedClick(ctx context.Context, t *tab, waitNav bool, click func() (map[string]any, error)) (map[string]any, error) {
	w := &navWatch{frame: t.id, requested: make(chan struct{}), ended: make(chan struct{})}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	if err := chromedp.Listen(lctx, w.on); err != nil {
		return nil, err
	}
	res, err := click()
	if err != nil {
		return nil, err
	}
	if !w.navigated() {
		// The page has handled the input; whatever the click set off in it
		// is requested by the end of a round trip through its main thread
		// (which a leaving document may refuse), or shows soon after.
		_, _ = chromedp.Run(ctx, chromedp.Evaluate[bool](`true`))
		timer := time.NewTimer(navDetectWindow)
		select {
		case <-w.requested:
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
	if !w.navigated() {
		return res, nil
	}
	clear(t.refs) // refs belong to the page they were taken on
	// Either way the tab is left on its new page, not in the middle of
	// leaving the old one (the next request would race the navigation).
	select {
	case <-w.ended:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := waitReady(ctx); err != nil {
		return nil, err
	}
	if !waitNav {
		return nil, errNavigationChanged
	}
	res["navigated"] = true
	return res, nil
}
