package pinchtabtest

import (
	"strings"

	"github.com/switchyard/switchyard/executor/pinchtab"
)

// SelectorPage is the page SelectorCases' Code and Text are measured on.
const SelectorPage = `<!doctype html>
<html><head><title>Selectors</title></head><body>
<h1 id="title">Selectors</h1>
<ul><li class="item">one</li><li class="item">two</li></ul>
<button id="go" type="button">Sign in</button>
<p id="quote" data-q="a]b">Quoted</p>
</body></html>`

// SelectorCase is one selector: how pinchtab.ParseSelector reads it, whether
// pinchtab.ValidateSelector accepts it, and what a browser instance answers
// for it on SelectorPage before any snapshot is taken.
type SelectorCase struct {
	Selector string
	Kind     pinchtab.SelectorKind // "" when ParseSelector refuses it
	Value    string                // the value after the prefix
	Valid    bool                  // ValidateSelector accepts it
	Code     string                // the instance's error code, or "" when it finds the element
	Text     string                // the text of the element it finds
}

// SelectorCases is the one table of the selector syntax that the check
// before submission and the browser's resolution are both tested against.
// "" is not in it: it is no selector, not a bad one.
var SelectorCases = []SelectorCase{
	// CSS, bare and prefixed.
	{Selector: "#go", Kind: pinchtab.SelectorCSS, Value: "#go", Valid: true, Text: "Sign in"},
	{Selector: "css:#go", Kind: pinchtab.SelectorCSS, Value: "#go", Valid: true, Text: "Sign in"},
	{Selector: "ul > li + li", Kind: pinchtab.SelectorCSS, Value: "ul > li + li", Valid: true, Text: "two"},
	{Selector: `[data-q="a]b"]`, Kind: pinchtab.SelectorCSS, Value: `[data-q="a]b"]`, Valid: true, Text: "Quoted"},
	{Selector: "e12x", Kind: pinchtab.SelectorCSS, Value: "e12x", Valid: true, Code: "element_not_found"},
	{Selector: "#missing", Kind: pinchtab.SelectorCSS, Value: "#missing", Valid: true, Code: "element_not_found"},
	{Selector: "css:div[", Kind: pinchtab.SelectorCSS, Value: "div[", Code: "bad_selector"},
	{Selector: "div[[", Kind: pinchtab.SelectorCSS, Value: "div[[", Code: "bad_selector"},
	{Selector: "a >", Kind: pinchtab.SelectorCSS, Value: "a >", Code: "bad_selector"},
	{Selector: "li,", Kind: pinchtab.SelectorCSS, Value: "li,", Code: "bad_selector"},
	{Selector: ", li", Kind: pinchtab.SelectorCSS, Value: ", li", Code: "bad_selector"},
	{Selector: "#" + strings.Repeat("x", pinchtab.MaxSelectorLen), Kind: pinchtab.SelectorCSS, Value: "#" + strings.Repeat("x", pinchtab.MaxSelectorLen), Code: "element_not_found"},

	// XPath: prefixed, or bare from "//" or "(//", as PinchTab reads them.
	{Selector: "xpath://h1", Kind: pinchtab.SelectorXPath, Value: "//h1", Valid: true, Text: "Selectors"},
	{Selector: "//li[2]", Kind: pinchtab.SelectorXPath, Value: "//li[2]", Valid: true, Text: "two"},
	{Selector: "(//li)[2]", Kind: pinchtab.SelectorXPath, Value: "(//li)[2]", Valid: true, Text: "two"},
	{Selector: "(//li)[last()]", Kind: pinchtab.SelectorXPath, Value: "(//li)[last()]", Valid: true, Text: "two"},
	{Selector: "xpath:(//li)[1]", Kind: pinchtab.SelectorXPath, Value: "(//li)[1]", Valid: true, Text: "one"},
	{Selector: "//div[@id='x'", Kind: pinchtab.SelectorXPath, Value: "//div[@id='x'", Code: "bad_selector"},
	{Selector: "(//li", Kind: pinchtab.SelectorXPath, Value: "(//li", Code: "bad_selector"},

	// Text.
	{Selector: "text:Sign in", Kind: pinchtab.SelectorText, Value: "Sign in", Valid: true, Text: "Sign in"},
	{Selector: "text:Nowhere", Kind: pinchtab.SelectorText, Value: "Nowhere", Valid: true, Code: "element_not_found"},

	// Refs: from a snapshot, so none is known before one is taken.
	{Selector: "e12", Kind: pinchtab.SelectorRef, Value: "e12", Valid: true, Code: "ref_not_found"},
	{Selector: "ref:e12", Kind: pinchtab.SelectorRef, Value: "e12", Valid: true, Code: "ref_not_found"},
	{Selector: "ref:abc", Kind: pinchtab.SelectorRef, Value: "abc", Code: "ref_not_found"},

	// Nothing after the prefix.
	{Selector: "  ", Code: "bad_selector"},
	{Selector: "css:", Code: "bad_selector"},
	{Selector: "xpath:", Code: "bad_selector"},
	{Selector: "text: ", Code: "bad_selector"},
	{Selector: "ref:", Code: "bad_selector"},
}
