package mcp_test

// An X-Switchyard-Agent header that cannot be an agent id is named, with
// what is wrong, rather than blamed on an agentId the caller never wrote.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAnAgentHeaderThatIsNoAgentIDIsNamedWithWhatIsWrong(t *testing.T) {
	t.Parallel()
	b := setup(t, options{auto: true})
	for _, tc := range []struct {
		name, header, says string
	}{
		{"too long", strings.Repeat("a", 300), "is 300 bytes long; an agent id is at most 256 bytes"},
		{"Latin-1", "J\xfcrgen", "is not UTF-8"},
	} {
		c := b.connect(t, "client", "", tc.header)
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{"navigate", map[string]any{"url": "https://example.com"}},
			{"list_tasks", nil},
			{"submit_task", map[string]any{"action": map[string]any{"kind": "text"}}},
		} {
			res := c.call(t, call.tool, call.args)
			e := errorOf(t, res)
			require.Equal(t, "INVALID_INPUT", e["code"], "%s %s: %s", tc.name, call.tool, textOf(res))
			require.Contains(t, textOf(res), "X-Switchyard-Agent header", "%s %s", tc.name, call.tool)
			require.Contains(t, textOf(res), tc.says, "%s %s", tc.name, call.tool)
			require.NotContains(t, textOf(res), "agentId", "%s %s: the header is at fault, not an argument", tc.name, call.tool)
			require.Nil(t, e["field"], "%s %s: no argument is at fault", tc.name, call.tool)
		}
	}
	require.Empty(t, b.tasks(t))

	// A client whose name cannot be an agent id, naming none in the
	// header, is told to name one there.
	c := b.connect(t, strings.Repeat("n", 300), "", "")
	res := c.call(t, "navigate", map[string]any{"url": "https://example.com"})
	require.Equal(t, "INVALID_INPUT", errorOf(t, res)["code"], textOf(res))
	require.Contains(t, textOf(res), "clientInfo.name")
	require.Contains(t, textOf(res), "X-Switchyard-Agent header")
	require.Empty(t, b.tasks(t))
}
