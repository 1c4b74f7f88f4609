package instancetest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/executor/instancetest"
	"github.com/switchyard/switchyard/executor/pinchtab/pinchtabtest"
)

func TestThePinchTabDoubleConforms(t *testing.T) {
	t.Parallel()
	instancetest.Run(t, func(t *testing.T) instancetest.Target {
		d := pinchtabtest.New(t, pinchtabtest.Options{Mode: pinchtabtest.ModeBridge, Token: "tok"})
		d.SetPage("http://site.test/form", pinchtabtest.Page{Title: "Form", Elements: map[string]pinchtabtest.Element{
			"#name": {}, "#out": {},
			"#go":   {OnClick: func(p map[string]*pinchtabtest.Element) { p["#out"].Text = "Hello, " + p["#name"].Value + "!" }},
			"#next": {Href: "http://site.test/form/second"},
			"#ask": {Dialog: &pinchtabtest.Dialog{Type: "confirm", Message: "Sure?", OnAnswer: func(p map[string]*pinchtabtest.Element, yes bool) {
				p["#out"].Text = map[bool]string{true: "yes", false: "no"}[yes]
			}}},
		}})
		d.SetPage("http://site.test/form/second", pinchtabtest.Page{Title: "Second"})
		return instancetest.Target{URL: d.URL(), Token: "tok", FormURL: "http://site.test/form"}
	})
}

const form = `<!doctype html><html><head><title>Form</title></head><body>
<input id="name"><button id="go">Go</button><button id="ask">Ask</button><p id="out"></p><a id="next" href="second">Next</a>
<script>document.getElementById("go").addEventListener("click", () => {
  document.getElementById("out").textContent = "Hello, " + document.getElementById("name").value + "!";
});
document.getElementById("ask").addEventListener("click", () => {
  document.getElementById("out").textContent = confirm("Sure?") ? "yes" : "no";
});</script></body></html>`

func TestTheBuiltInChromiumConforms(t *testing.T) {
	t.Parallel()
	path, ok := chromium.Find()
	if !ok {
		t.Skip("Chromium is not installed (looked for /usr/bin/chromium and chromium on PATH): skipping the real-browser test")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, form)
	}))
	t.Cleanup(site.Close)
	// The test's own browser, closed when it ends (so that -count=2 starts
	// another rather than using a closed one).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	browser, err := chromium.Start(ctx, chromium.Options{ExecPath: path, ActionTimeout: 20 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = browser.Close() })
	instancetest.Run(t, func(t *testing.T) instancetest.Target {
		return instancetest.Target{URL: browser.URL(), Token: browser.Token(), FormURL: site.URL}
	})
}

// TestARealPinchTabConforms runs the suite against a PinchTab instance you
// run yourself, a bridge (one browser; behind a PinchTab server, its
// instances' own ports, listed by GET /instances): set
// SWITCHYARD_PINCHTAB_URL (http://127.0.0.1:9868) and
// SWITCHYARD_PINCHTAB_TOKEN. Its browser must be allowed to load pages from
// 127.0.0.1 (PinchTab's default security.allowedDomains allows it).
func TestARealPinchTabConforms(t *testing.T) {
	url := os.Getenv("SWITCHYARD_PINCHTAB_URL")
	if url == "" {
		t.Skip("SWITCHYARD_PINCHTAB_URL is not set: no real PinchTab to check")
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, form)
	}))
	t.Cleanup(site.Close)
	instancetest.Run(t, func(t *testing.T) instancetest.Target {
		return instancetest.Target{URL: url, Token: os.Getenv("SWITCHYARD_PINCHTAB_TOKEN"), FormURL: site.URL}
	})
}
