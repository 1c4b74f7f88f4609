// Package jsonnum scans JSON numbers for the hand-written JSON readers on
// hot paths (the POST body's one-pass reader, the typed task inputs), so
// that both follow one reading of JSON's number grammar.
package jsonnum

// End returns the end of the JSON number that starts at b[i] (an optional
// minus, an integer part without leading zeros, an optional fraction and
// an optional exponent), and false when no number of JSON's grammar starts
// there. It looks no further than the number: what follows it is the
// caller's to check.
func End(b []byte, i int) (int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	digits := func() int {
		n := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
			n++
		}
		return n
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case digits() == 0:
		return i, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		if digits() == 0 {
			return i, false
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return i, false
		}
	}
	return j, true
}
