package jsonstr_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/jsonstr"
)

// Append writes what encoding/json writes, with and without HTML escaping,
// and what it writes reads back as the string (when that is valid UTF-8).
func TestAppendAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "\"", "\\", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "<", ">", "&", "é", "日", "\u2028", "\u2029", "\xff", "\xc3", "😀", " "}
	for i := 0; i < 4000; i++ {
		var sb strings.Builder
		for n := rng.IntN(12); n > 0; n-- {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := sb.String()
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			require.NoError(t, enc.Encode(s))
			got := jsonstr.Append([]byte("x"), s, html)
			require.Equal(t, "x", string(got[:1]), "appends to what is there")
			got = got[1:]
			require.Equal(t, strings.TrimSuffix(want.String(), "\n"), string(got), "for %q (html %v)", s, html)
			if utf8.ValidString(s) {
				var back string
				require.NoError(t, json.Unmarshal(got, &back))
				require.Equal(t, s, back)
			}
		}
	}
}

func TestAppendDoesNotAllocateWithRoom(t *testing.T) {
	b := make([]byte, 0, 256)
	s := "a \"quoted\" <tag> & a\nnewline, é and \xff"
	require.Zero(t, testing.AllocsPerRun(100, func() { b = jsonstr.Append(b[:0], s, true) }))
}

func BenchmarkAppend(b *testing.B) {
	buf := make([]byte, 0, 256)
	s := "https://example.com/search?q=browser+automation&page=2"
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = jsonstr.Append(buf[:0], s, true)
	}
}
