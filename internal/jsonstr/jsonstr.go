// Package jsonstr appends Go strings to byte slices as JSON strings, the way
// encoding/json writes them, without its reflection or allocations: for the
// hand-written encoders on hot paths (the event stream's shared encoding, the
// SQLite store's stored forms).
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// safe and htmlSafe say which ASCII bytes go into a JSON string as they
// are, without and with HTML escaping: one table look-up a byte.
var safe, htmlSafe = func() (s, h [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		s[c] = c != '"' && c != '\\'
		h[c] = s[c] && c != '<' && c != '>' && c != '&'
	}
	return s, h
}()

// Append appends s to b as a JSON string and returns the extended slice, as
// encoding/json does: invalid UTF-8 becomes U+FFFD, control characters are
// escaped, and so are U+2028 and U+2029 (for JavaScript). With html, <, > and
// & are escaped too, as encoding/json does by default, so that the output is
// safe inside HTML; without it, as an Encoder with SetEscapeHTML(false).
func Append(b []byte, s string, html bool) []byte {
	table := &safe
	if html {
		table = &htmlSafe
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if table[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
