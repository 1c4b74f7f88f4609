package executor_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor"
)

// TestTheREADMEListsEveryKnownKind keeps the README's table of action kinds
// true to executor.Kinds: every kind listed, none invented.
func TestTheREADMEListsEveryKnownKind(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	text := string(data)
	start := strings.Index(text, "<!-- kinds:")
	end := strings.Index(text, "<!-- /kinds -->")
	require.True(t, start >= 0 && end > start, "the README has a kinds table")
	table := text[start:end]
	var listed []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		for _, m := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(cells[2], -1) {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(listed)
	require.Equal(t, executor.Kinds(executor.KindInstance), listed)
	require.Equal(t, executor.Kinds(executor.KindServer), listed)
	require.Empty(t, executor.Kinds(executor.KindChat), "chat instances take instructions")
	require.True(t, executor.KnownKind(executor.KindServer, "Back"))
	require.False(t, executor.KnownKind(executor.KindChat, "click"))
}
