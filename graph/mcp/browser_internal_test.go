package mcp

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A browser tool called without options builds no params, so its task
// carries none and the instance applies its defaults; with options, only
// those it was given.
func TestBrowserToolsWithoutOptionsBuildNoParams(t *testing.T) {
	build := func(name string, a *Args) map[string]any {
		t.Helper()
		for _, bt := range browserTools {
			if bt.name == name {
				_, p, err := bt.build(a)
				require.NoError(t, err)
				return p
			}
		}
		t.Fatalf("no tool %s", name)
		return nil
	}
	for _, name := range []string{"snapshot", "screenshot", "back", "hover"} {
		require.Nil(t, build(name, &Args{}), name)
	}
	n := 50
	require.Equal(t, map[string]any{"maxNodes": 50}, build("snapshot", &Args{MaxNodes: &n}))
	require.Equal(t, map[string]any{"filter": "interactive"}, build("snapshot", &Args{Interactive: true}))
	require.Equal(t, map[string]any{"format": "jpeg"}, build("screenshot", &Args{Format: "jpeg"}))
}
