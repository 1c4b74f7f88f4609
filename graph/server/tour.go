// The README tour's page: a small sign-in form the server serves itself, so
// that the tour's browser session works on every instance kind — PinchTab
// refuses data: URLs — wherever the instance can reach the server.

package server

import (
	"io"
	"net/http"
)

// tourPage greets whoever signs in: #name, #go, and #out that reads
// "Hello, <name>" after a click.
const tourPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in</title></head>
<body><h1>Sign in</h1>
<input id="name"> <button id="go" type="button">Go</button>
<p id="out"></p>
<script>
document.getElementById("go").addEventListener("click", function () {
  document.getElementById("out").textContent = "Hello, " + document.getElementById("name").value;
});
</script></body></html>
`

// serveTourPage answers GET /tour/sign-in. It needs no token: it is a static
// page with nothing to protect, and browsers fetch it without one.
func serveTourPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, tourPage)
}
