package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
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
