package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
)

// TestPluginUsageErrorListsEveryVerb: a flag between `plugin` and its verb
// (or any unknown verb) is answered with every verb of the command, the
// offline tools and the client verbs alike, configure and enable included.
func TestPluginUsageErrorListsEveryVerb(t *testing.T) {
	t.Parallel()
	require.Len(t, pluginToolOrder, len(pluginToolVerbs), "every tool verb is listed once")
	for _, name := range pluginToolOrder {
		require.Contains(t, pluginToolVerbs, name)
	}
	var stdout, stderr bytes.Buffer
	err := runPluginCommand(context.Background(), []string{"--server", "http://127.0.0.1:1", "list"}, &stdout, &stderr)
	require.True(t, errors.Is(err, errUsage), "%v", err)
	require.Contains(t, err.Error(), `unknown verb "--server" (new, build, check, bench, simulate; list, load, unload, set, configure, enable)`)
	for _, v := range cli.PluginVerbs() {
		require.Contains(t, err.Error(), v.Name)
	}
}
