package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/plugintest"
)

// The global policy choices an operator makes come back after a restart on
// the same SQLite file, as the lane ones do; the built-in defaults a server
// starts with are not stored as choices.
func TestGlobalPolicyChoicesSurviveARestartOnSQLite(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "switchyard.db")
	type assignment struct {
		Slot string
		Lane *string
		Name string
	}
	policies := func(server string) map[string]string {
		var out struct{ Policies []assignment }
		require.NoError(t, client.New(server+"/graphql").Do(context.Background(), `{ policies { slot lane name } }`, nil, &out))
		m := map[string]string{}
		for _, a := range out.Policies {
			key := a.Slot
			if a.Lane != nil {
				key += "/" + *a.Lane
			}
			m[key] = a.Name
		}
		return m
	}

	server, stop := serveOn(t, db)
	defaults := policies(server)
	res := sw(t, server, "plugin", "load", "capper", filepath.Join("..", "..", "examples", "plugins", "ratecap.wasm"), "--request-timeout", serveStartTimeout.String())
	require.Equal(t, 0, res.code, res.stderr)
	for _, args := range [][]string{{"fairness", "capper"}, {"retry", "native:exponential"}, {"selection", "native:priority", "--lane", "main"}} {
		res = sw(t, server, append([]string{"plugin", "set"}, args...)...)
		require.Equal(t, 0, res.code, res.stderr)
	}
	chosen := policies(server)
	require.Equal(t, "capper", chosen["FAIRNESS"])
	require.Equal(t, "native:exponential", chosen["RETRY"])
	require.Equal(t, "native:priority", chosen["SELECTION/main"])
	stop()

	server, stop = serveOn(t, db)
	require.Equal(t, chosen, policies(server), "every choice comes back, global and per lane")
	logs := stop()
	require.Contains(t, logs, "policy choice restored")
	require.Regexp(t, `policy choice restored: slot=selection lane=main policy=native:priority`, logs, "the lane field names the lane once")
	require.Regexp(t, `policy choice restored: slot=retry lane="every lane" policy=native:exponential`, logs)

	// Defaults are not choices: a restart with the native built-ins uses
	// them wherever the operator chose nothing.
	server, stop = serveOn(t, db, "--native-policies")
	after := policies(server)
	stop()
	require.Equal(t, "capper", after["FAIRNESS"])
	require.Equal(t, "native:exponential", after["RETRY"])
	require.Equal(t, "native:"+defaults["SELECTION"], after["SELECTION"], "the unchosen global selection follows this start's defaults")
}

// loadPlugin and configurePlugin refuse a configuration under which the
// plugin's smoke decision faults (configurePlugin as its load at the next
// start would), and change nothing. A stored plugin whose smoke decision faults at start all the
// same (its configuration was stored by an older server, say) is restored
// DISABLED, with its configuration, its policy choice and the reason, in
// plugins and as a DISABLED plugin event; configured and enabled, it
// decides again, and stays so across the next restart.
func TestAConfigurationThatBreaksTheSmokeDecisionNeitherIsAcceptedNorDropsThePluginAtRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "switchyard.db")
	module := filepath.Join(t.TempDir(), "spinner.wasm")
	require.NoError(t, os.WriteFile(module, plugintest.SpinOnConfig(), 0o644))
	type plugin struct {
		Name           string
		Config         json.RawMessage
		State          string
		DisabledReason *string
		ActiveIn       []string
	}
	spinner := func(server string) plugin {
		var out struct{ Plugins []plugin }
		require.NoError(t, client.New(server+"/graphql").Do(context.Background(), `{ plugins { name config state disabledReason activeIn } }`, nil, &out))
		for _, p := range out.Plugins {
			if p.Name == "spinner" {
				return p
			}
		}
		t.Fatalf("no plugin spinner in %+v", out.Plugins)
		return plugin{}
	}

	server, stop := serveOn(t, db)
	// A load under such a configuration is refused as the configuration's
	// fault (the module decides under another), as configurePlugin refuses it.
	res := sw(t, server, "plugin", "load", "spinner", module, "--config", `{"spin": true}`)
	require.NotEqual(t, 0, res.code, res.stdout)
	require.Contains(t, res.stderr, "load spinner")
	require.Contains(t, res.stderr, "under this configuration the plugin's smoke decision faults (fuel: ran out of fuel")
	require.Contains(t, res.stderr, "INVALID_INPUT")
	res = sw(t, server, "plugin", "load", "spinner", module, "--config", `{"quiet": true}`)
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "plugin", "set", "fairness", "spinner")
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "plugin", "configure", "spinner", "--config", `{"spin": true}`)
	require.NotEqual(t, 0, res.code, res.stdout)
	require.Contains(t, res.stderr, "configure spinner")
	require.Contains(t, res.stderr, "under this configuration the plugin's smoke decision faults (fuel: ran out of fuel")
	got := spinner(server)
	require.JSONEq(t, `{"quiet": true}`, string(got.Config), "the old configuration stays")
	require.Equal(t, "ACTIVE", got.State)
	stop()

	// The store holds a configuration under which the smoke decision
	// faults, as one an older server accepted would.
	c, err := sqlite3.Open(db)
	require.NoError(t, err)
	require.NoError(t, c.Exec(`UPDATE settings SET value = json_set(CAST(value AS TEXT), '$.config', json('{"spin":true}')) WHERE key = 'plugin/spinner'`))
	require.Equal(t, int64(1), c.Changes())
	require.NoError(t, c.Close())

	server, stop = serveOn(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), serveStartTimeout)
	defer cancel()
	stream, err := client.New(server+"/graphql").SubscribeSSE(ctx, `subscription { pluginEvents { kind plugin slot reason } }`, nil)
	require.NoError(t, err)
	defer stream.Close()
	m, err := stream.Next()
	require.NoError(t, err)
	require.Empty(t, m.Errors)
	var ev struct {
		PluginEvents struct{ Kind, Plugin, Slot, Reason string }
	}
	require.NoError(t, json.Unmarshal(m.Data, &ev))
	require.Equal(t, "DISABLED", ev.PluginEvents.Kind)
	require.Equal(t, "spinner", ev.PluginEvents.Plugin)
	require.Equal(t, "FAIRNESS", ev.PluginEvents.Slot)
	require.Contains(t, ev.PluginEvents.Reason, "its smoke decision at start faulted under its stored configuration: fuel: ran out of fuel")
	got = spinner(server)
	require.Equal(t, "DISABLED", got.State, "restored, out of service")
	require.JSONEq(t, `{"spin": true}`, string(got.Config))
	require.NotNil(t, got.DisabledReason)
	require.Equal(t, ev.PluginEvents.Reason, *got.DisabledReason)
	require.Equal(t, []string{"global"}, got.ActiveIn, "the fairness choice is restored")
	res = sw(t, server, "plugin", "list")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `spinner +FAIRNESS +\S+ +DISABLED`, res.stdout)

	res = sw(t, server, "plugin", "configure", "spinner", "--config", `{"quiet": true}`)
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "DISABLED", spinner(server).State, "configuring does not enable")
	res = sw(t, server, "plugin", "enable", "spinner")
	require.Equal(t, 0, res.code, res.stderr)
	require.Equal(t, "ACTIVE", spinner(server).State)
	logs := stop()
	require.Contains(t, logs, "a stored plugin was restored disabled")
	require.NotContains(t, logs, "a stored plugin failed to load")

	server, stop = serveOn(t, db)
	got = spinner(server)
	stop()
	require.Equal(t, "ACTIVE", got.State)
	require.JSONEq(t, `{"quiet": true}`, string(got.Config))
	require.Equal(t, []string{"global"}, got.ActiveIn)
}
