// Navigation URLs: the one reading of which URLs a tab may load, shared by
// what checks a navigate action before a task is submitted, by the executor
// before it forwards one, and by the built-in Chromium instance.

package pinchtab

import (
	"fmt"
	"net/url"
)

// ValidateURL checks a URL a tab is asked to load: an absolute http or
// https URL with a host, or an about: or data: URL. Other schemes (file:,
// javascript:, chrome:, …) and URLs without a scheme are refused: the
// built-in Chromium instance loads none of them, and PinchTab refuses file:
// unless its operator allowed it.
func ValidateURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("url %q: %v", s, err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("url %q has no host", s)
		}
	case "about", "data":
	case "":
		return fmt.Errorf("url %q has no scheme (use an absolute URL such as \"https://example.com/\")", s)
	default:
		return fmt.Errorf("url %q: scheme must be http, https, about or data", s)
	}
	return nil
}
