// Selectors: the one reading of the selector syntax of PinchTab's action
// API, shared by what checks a selector before a task is submitted and by
// the built-in Chromium instance that resolves it in the page.

package pinchtab

import (
	"fmt"
	"regexp"
	"strings"
)

// SelectorKind is how a selector names an element.
type SelectorKind string

// The kinds of selector.
const (
	// SelectorRef is a ref from the tab's last snapshot: "ref:e12" or "e12".
	SelectorRef SelectorKind = "ref"
	// SelectorCSS is a CSS selector: "css:#go", or any selector without a
	// prefix that is not a ref or an XPath.
	SelectorCSS SelectorKind = "css"
	// SelectorXPath is an XPath: "xpath://a", or a bare one starting with
	// "//" or "(//" (as in "(//button)[2]").
	SelectorXPath SelectorKind = "xpath"
	// SelectorText is the element whose visible text is the value: "text:Sign in".
	SelectorText SelectorKind = "text"
)

// MaxSelectorLen is the longest selector ValidateSelector accepts, in bytes.
const MaxSelectorLen = 4096

// Selector is a parsed selector: its kind and the value after any prefix.
type Selector struct {
	Kind  SelectorKind
	Value string
}

// SelectorError says why a selector is malformed.
type SelectorError struct {
	Selector string // the selector as written
	Why      string // what is wrong with it
}

func (e *SelectorError) Error() string {
	return fmt.Sprintf("%q is not a valid selector: %s", e.Selector, e.Why)
}

var refSyntax = regexp.MustCompile(`^e[0-9]+$`)

// ParseSelector reads a selector's kind and value. Explicit prefixes come
// first ("ref:", "css:", "xpath:", "text:"); without one, "e" and digits is
// a ref, a value starting with "//" or "(//" an XPath, and anything else
// CSS. It fails, with a *SelectorError, only when nothing (or only white
// space) follows the prefix: whether the value means anything is for
// ValidateSelector, or the page, to say.
func ParseSelector(sel string) (Selector, error) {
	s := Selector{Kind: SelectorCSS, Value: sel}
	switch {
	case strings.HasPrefix(sel, "ref:"):
		s = Selector{SelectorRef, strings.TrimPrefix(sel, "ref:")}
	case refSyntax.MatchString(sel):
		s.Kind = SelectorRef
	case strings.HasPrefix(sel, "css:"):
		s.Value = strings.TrimPrefix(sel, "css:")
	case strings.HasPrefix(sel, "xpath:"):
		s = Selector{SelectorXPath, strings.TrimPrefix(sel, "xpath:")}
	case strings.HasPrefix(sel, "text:"):
		s = Selector{SelectorText, strings.TrimPrefix(sel, "text:")}
	case strings.HasPrefix(sel, "//") || strings.HasPrefix(sel, "(//"):
		s.Kind = SelectorXPath
	}
	if strings.TrimSpace(s.Value) == "" {
		return Selector{}, &SelectorError{sel, "nothing after the " + string(s.Kind) + " prefix"}
	}
	return s, nil
}

// ValidateSelector parses a selector and checks its syntax as far as it can
// be checked without a page: at most MaxSelectorLen bytes, a ref is "e" and
// digits, CSS and XPath have balanced brackets, parentheses and quotes, and
// CSS neither starts with a comma nor ends with a combinator. Errors are
// *SelectorError.
func ValidateSelector(sel string) (Selector, error) {
	if len(sel) > MaxSelectorLen {
		return Selector{}, &SelectorError{sel, fmt.Sprintf("longer than %d bytes", MaxSelectorLen)}
	}
	s, err := ParseSelector(sel)
	if err != nil {
		return Selector{}, err
	}
	why := ""
	switch s.Kind {
	case SelectorRef:
		if !refSyntax.MatchString(s.Value) {
			why = "a ref is \"e\" and digits, from the last snapshot"
		}
	case SelectorCSS:
		why = balanced(s.Value)
		if why == "" {
			switch s.Value[len(s.Value)-1] {
			case '>', '+', '~', ',':
				why = "it ends with a combinator"
			}
		}
		if why == "" && strings.HasPrefix(strings.TrimSpace(s.Value), ",") {
			why = "it starts with a comma"
		}
	case SelectorXPath:
		why = balanced(s.Value)
	}
	if why != "" {
		return Selector{}, &SelectorError{sel, why}
	}
	return s, nil
}

// balanced checks the brackets, parentheses and quotes of a CSS selector
// or an XPath; it returns what is wrong, or "".
func balanced(s string) string {
	var stack []byte
	var quote byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == '\\' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			quote = ch
		case ch == '\\':
			i++
		case ch == '[' || ch == '(':
			stack = append(stack, ch)
		case ch == ']' || ch == ')':
			want := byte('[')
			if ch == ')' {
				want = '('
			}
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return "an unmatched '" + string(ch) + "'"
			}
			stack = stack[:len(stack)-1]
		}
	}
	switch {
	case quote != 0:
		return "an unclosed quote"
	case len(stack) > 0:
		return "an unclosed '" + string(stack[len(stack)-1]) + "'"
	}
	return ""
}
