package server_test

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/internal/plugintest"
)

// loadPlugin refuses a configuration under which the module's smoke
// decision faults while the module makes it under none, as configurePlugin
// does: INVALID_INPUT on input.config, nothing loaded, and the same module
// loads under another configuration. A module whose smoke decision faults
// under no configuration too is PLUGIN_INVALID on input.wasmBase64, with a
// configuration or without.
func TestLoadPluginBlamesTheConfigurationUnderWhichTheSmokeDecisionFaults(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *setupOptions) { o.plugins = true })
	ctx := ctxFor(t)
	load := func(name string, wasm []byte, config any) error {
		return b.c.Do(ctx, `mutation($n: String!, $w: String!, $c: JSON) { loadPlugin(input: {name: $n, wasmBase64: $w, config: $c}) { name } }`,
			map[string]any{"n": name, "w": base64.StdEncoding.EncodeToString(wasm), "c": config}, nil)
	}
	names := func() []string {
		var out struct{ Plugins []struct{ Name string } }
		require.NoError(t, b.c.Do(ctx, `{ plugins { name } }`, nil, &out))
		var n []string
		for _, p := range out.Plugins {
			n = append(n, p.Name)
		}
		return n
	}

	err := load("spinner", plugintest.SpinOnConfig(), map[string]any{"spin": true})
	e := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", e.Code(), "the configuration is at fault, not the module: %v", err)
	require.Equal(t, "input.config", e.Extensions["field"])
	require.Contains(t, e.Message, "under this configuration the plugin's smoke decision faults (fuel: ran out of fuel")
	require.NotContains(t, names(), "spinner", "nothing is loaded")

	require.NoError(t, load("spinner", plugintest.SpinOnConfig(), map[string]any{"quiet": true}), "the module loads under another configuration")
	err = b.c.Do(ctx, `mutation { configurePlugin(name: "spinner", config: {spin: true}) { name } }`, nil, nil)
	ce := gqlErr(t, err)
	require.Equal(t, "INVALID_INPUT", ce.Code(), "configurePlugin answers the same")
	require.Equal(t, "config", ce.Extensions["field"])
	require.Contains(t, ce.Message, "under this configuration the plugin's smoke decision faults (fuel: ran out of fuel")

	for _, config := range []any{map[string]any{"quiet": true}, nil} {
		err = load("always", plugintest.SpinAlways(), config)
		e = gqlErr(t, err)
		require.Equal(t, "PLUGIN_INVALID", e.Code(), "a module that faults under no configuration is at fault itself (config %v): %v", config, err)
		require.Equal(t, "input.wasmBase64", e.Extensions["field"])
		require.Contains(t, e.Message, "smoke decision: fuel: ran out of fuel")
	}
	require.NotContains(t, names(), "always")
}
