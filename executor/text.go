// The text action's bound: a page's text can run to megabytes, which a
// caller (a model's context above all) should not get by surprise. A text
// result carries at most params.maxChars characters (default and most
// TextMaxChars); one cut short says so, with the text's full length.

package executor

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// TextMaxChars is the most characters of text a text action's result
// carries, and its default: params.maxChars may ask for fewer.
const TextMaxChars = 1_000_000

// textMaxChars reads a text action's params.maxChars: TextMaxChars when it
// is absent, an *ActionError when it is not an integer within
// 1..TextMaxChars.
func textMaxChars(params json.RawMessage) (int, error) {
	return boundParam(params, "text", "maxChars", TextMaxChars)
}

// boundParam reads the integer parameter name of a kind's params: most
// when it is absent or null, an *ActionError when it is not an integer
// within 1..most.
func boundParam(params json.RawMessage, kind, name string, most int) (int, error) {
	if len(params) == 0 {
		return most, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return 0, &ActionError{Field: "params", Message: "params must be a JSON object"}
	}
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return most, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n < 1 || n > most {
		return 0, &ActionError{Field: "params." + name, Message: fmt.Sprintf("%s's params.%s must be an integer within 1..%d, got %s", kind, name, most, raw)}
	}
	return n, nil
}

// capText cuts a text result's text to max characters (runes, never one in
// half); a result cut short gets "truncated": true and "totalChars", the
// length of the whole text. A result without a text string is left as is.
func capText(res json.RawMessage, max int) json.RawMessage {
	if len(res) <= max { // bytes ≥ characters: nothing to cut
		return res
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(res, &m) != nil {
		return res
	}
	var text string
	if raw, ok := m["text"]; !ok || json.Unmarshal(raw, &text) != nil {
		return res
	}
	total := utf8.RuneCountInString(text)
	if total <= max {
		return res
	}
	cut, n := 0, 0
	for i := range text {
		if n == max {
			cut = i
			break
		}
		n++
	}
	m["text"], _ = json.Marshal(text[:cut])
	m["truncated"] = json.RawMessage("true")
	m["totalChars"] = json.RawMessage(strconv.Itoa(total))
	out, err := json.Marshal(m)
	if err != nil {
		return res
	}
	return out
}
