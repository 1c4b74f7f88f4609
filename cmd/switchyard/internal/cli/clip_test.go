package cli

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestClipNeverCutsInsideAWord: a cut reason never ends in part of a word
// or number ("1ms" must not become "1m…", which reads as a minute).
func TestClipNeverCutsInsideAWord(t *testing.T) {
	reason := "quarantined for 20s: a decision ran past its deadline of 1ms: still running after its deadline of 1ms: abandoned"
	for n := 13; n < len(reason); n++ {
		got := clip(reason, n)
		require.LessOrEqual(t, len(strings.TrimSuffix(got, "…")), n-1, "n=%d: %q", n, got)
		require.True(t, strings.HasSuffix(got, "…"), "n=%d: %q", n, got)
		kept := strings.TrimSuffix(got, "…")
		require.True(t, strings.HasPrefix(reason, kept), "n=%d: %q", n, got)
		require.Equal(t, byte(' '), reason[len(kept)], "n=%d: %q ends inside a word", n, got)
	}
	require.Equal(t, "quarantined for 20s: a decision ran past its deadline of…", clip(reason, 60))
	require.Equal(t, "short", clip("short", 60))
	require.Equal(t, "two lines", clip("two\nlines", 60))

	// One word longer than the column: cut inside it, at a rune boundary.
	got := clip(strings.Repeat("é", 40), 11)
	require.True(t, utf8.ValidString(got), "%q", got)
	require.Equal(t, strings.Repeat("é", 5)+"…", got)
}
