package spa

import (
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io/fs"
	"net/http"
	"strings"
)

// The placeholders an app's built index.html holds for RenderPage to fill.
const (
	TitlePlaceholder  = "{{TITLE}}"
	ConfigPlaceholder = "{{CONFIG}}"
)

// RenderPage fills an app's built index.html (in files) with its title,
// HTML-escaped, and its configuration, as JSON. app names the app in errors.
func RenderPage(files fs.FS, app, title string, config any) ([]byte, error) {
	tmpl, err := fs.ReadFile(files, "index.html")
	if err != nil {
		return nil, fmt.Errorf("%s: embedded index.html: %w", app, err)
	}
	// json.Marshal escapes <, > and & (and U+2028/2029), so the blob cannot
	// close its <script> element whatever the configuration holds.
	blob, err := json.Marshal(config)
	if err != nil {
		return nil, fmt.Errorf("%s: encode page config: %w", app, err)
	}
	page := string(tmpl)
	for _, p := range []string{TitlePlaceholder, ConfigPlaceholder} {
		if strings.Count(page, p) != 1 {
			return nil, errors.New(app + ": embedded index.html lacks " + p + "; rebuild dist with go generate")
		}
	}
	page = strings.NewReplacer(TitlePlaceholder, html.EscapeString(title), ConfigPlaceholder, string(blob)).Replace(page)
	return []byte(page), nil
}

// Embedded serves an app built into the dist folder of an embedded file
// system: its page is dist/index.html filled by RenderPage with title and
// config, served with headers, and its files are served as New serves them.
// app names the app in errors.
func Embedded(embedded fs.FS, app, title string, config any, headers http.Header) (*Handler, error) {
	files, err := fs.Sub(embedded, "dist")
	if err != nil {
		return nil, fmt.Errorf("%s: embedded dist: %w", app, err)
	}
	page, err := RenderPage(files, app, title, config)
	if err != nil {
		return nil, err
	}
	h, err := New(files, Options{Page: page, PageHeaders: headers})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", app, err)
	}
	return h, nil
}

// PageHeaders returns the security headers of an app's page: the given
// Content-Security-Policy directives, no framing and no referrer.
func PageHeaders(csp ...string) http.Header {
	h := http.Header{}
	h.Set("Content-Security-Policy", strings.Join(csp, "; "))
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	return h
}
