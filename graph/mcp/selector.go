// Selector syntax, checked before a task is submitted: a model that writes
// a malformed selector learns it at once, with the syntax, instead of from a
// task that fails in the browser. The page itself still decides whether a
// well-formed selector matches anything.

package mcp

import (
	"regexp"
	"strings"
)

var refSyntax = regexp.MustCompile(`^e[0-9]+$`)

// checkSelector checks a selector's syntax: "ref:e12" or "e12", "css:…" or
// a bare CSS selector, "xpath:…" or "//…", "text:…". "" is no selector.
func checkSelector(field, sel string) error {
	if sel == "" {
		return nil
	}
	bad := func(why string) error {
		return invalid(field, "%q is not a valid selector: %s (use a CSS selector like \"#go\", \"xpath://button\", \"text:Sign in\" or a snapshot ref like \"e12\")", sel, why)
	}
	if len(sel) > 4096 {
		return bad("longer than 4096 bytes")
	}
	kind, value := "css", sel
	switch {
	case strings.HasPrefix(sel, "ref:"):
		kind, value = "ref", strings.TrimPrefix(sel, "ref:")
	case refSyntax.MatchString(sel):
		kind = "ref"
	case strings.HasPrefix(sel, "css:"):
		value = strings.TrimPrefix(sel, "css:")
	case strings.HasPrefix(sel, "xpath:"):
		kind, value = "xpath", strings.TrimPrefix(sel, "xpath:")
	case strings.HasPrefix(sel, "text:"):
		kind, value = "text", strings.TrimPrefix(sel, "text:")
	case strings.HasPrefix(sel, "//") || strings.HasPrefix(sel, "(//"):
		kind = "xpath"
	}
	if strings.TrimSpace(value) == "" {
		return bad("nothing after the " + kind + " prefix")
	}
	switch kind {
	case "ref":
		if !refSyntax.MatchString(value) {
			return bad("a ref is \"e\" and digits, from the last snapshot")
		}
	case "css":
		if why := balanced(value); why != "" {
			return bad(why)
		}
		switch value[len(value)-1] {
		case '>', '+', '~', ',':
			return bad("it ends with a combinator")
		}
		if strings.HasPrefix(strings.TrimSpace(value), ",") {
			return bad("it starts with a comma")
		}
	case "xpath":
		if why := balanced(value); why != "" {
			return bad(why)
		}
	}
	return nil
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
