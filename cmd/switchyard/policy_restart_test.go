package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ncruces/go-sqlite3"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/cli"
	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/plugintest"
	"github.com/switchyard/switchyard/internal/waitfor"
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

// After kill -9, the stored policy choices decide from the first decision
// on: the attempt the crash interrupted is decided by the lane's retry
// plugin (which is given the code `restart`), not by the built-in before
// the plugin is back, and a task the fairness plugin held stays held,
// not dispatched in the native order while the plugins load.
func TestStoredPolicyChoicesDecideFromTheFirstDecisionAfterKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	inst := newFleetInstance(t, time.Hour) // an attempt runs until its server dies
	dir := t.TempDir()
	config := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: sqlite, path: %q}
localInstance: {enabled: false}
log: {level: error}
engine:
  lanes:
    - {name: main, maxInFlight: 4, retry: {maxAttempts: 5, backoff: 10ms, maxBackoff: 100ms}}
instances:
  - {id: fake, url: %q, capacity: 4}
`, filepath.Join(dir, "switchyard.db"), inst.srv.URL+"/node")), 0o644))
	holder := filepath.Join(dir, "holder.wasm")
	require.NoError(t, os.WriteFile(holder, plugintest.HoldAlways(), 0o644))
	type task struct {
		State    string
		Reason   *string
		Hold     *struct{ Policy string }
		Attempts []struct{ ErrorCode *string }
	}
	get := func(url, id string) task {
		var out struct{ Task *task }
		require.NoError(t, client.New(url).Do(context.Background(),
			`query($id: ID!) { task(id: $id) { state reason hold { policy } attempts { errorCode } } }`, map[string]any{"id": id}, &out))
		require.NotNil(t, out.Task, id)
		return *out.Task
	}
	submit := func(url, agent string) string {
		var out struct{ SubmitTask struct{ ID string } }
		require.NoError(t, client.New(url).Do(context.Background(), `mutation($in: SubmitTaskInput!) { submitTask(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"agentId": agent, "lane": "main", "action": map[string]any{"kind": "click", "selector": "css:#go"}}}, &out))
		return out.SubmitTask.ID
	}

	cmd, url := startProcess(t, bin, config)
	server := strings.TrimSuffix(url, "/graphql")
	// The lane's retry plugin fails a task whose attempt a restart
	// interrupted, and backs any other failure off.
	res := sw(t, server, "plugin", "load", "codes", filepath.Join("..", "..", "examples", "plugins", "errcode.wasm"), "--config", `{"fail": ["restart"]}`)
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "plugin", "set", "retry", "codes", "--lane", "main")
	require.Equal(t, 0, res.code, res.stderr)
	running := submit(url, "runner")
	waitfor.Eventually(t, "the first task runs on the instance", func() bool { return inst.count(running) == 1 })
	res = sw(t, server, "plugin", "load", "holder", holder)
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "plugin", "set", "fairness", "holder")
	require.Equal(t, 0, res.code, res.stderr)
	held := submit(url, "waiter")
	waitfor.Eventually(t, "the second task is held", func() bool { return get(url, held).Hold != nil })
	require.NoError(t, cmd.Process.Kill(), "kill -9")
	_ = cmd.Wait()

	cmd, url = startProcess(t, bin, config)
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	got := get(url, running)
	require.Equal(t, "FAILED", got.State, "%+v", got)
	require.NotNil(t, got.Reason)
	require.Equal(t, "failed by retry policy codes: interrupted: the server stopped while it ran", *got.Reason, "the lane's plugin decided")
	require.Len(t, got.Attempts, 1)
	require.NotNil(t, got.Attempts[0].ErrorCode)
	require.Equal(t, "restart", *got.Attempts[0].ErrorCode)
	waitfor.Eventually(t, "the held task is held again after the restart", func() bool {
		got := get(url, held)
		require.Equal(t, "QUEUED", got.State, "the held task was dispatched: %+v", got)
		return got.Hold != nil && got.Hold.Policy == "holder"
	})
	require.Zero(t, inst.count(held), "the held task never ran")
	require.Equal(t, 1, inst.count(running), "the interrupted task did not run again")
}

// `plugin set SLOT --default` drops a global choice: naming the built-in
// (`plugin set fairness fair-share`) stores a choice that pins its
// WebAssembly build over a later --native-policies start; --default puts
// the server's default back, and no later start finds a choice there.
func TestPluginSetDefaultDropsAGlobalChoice(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "switchyard.db")
	fairness := func(server string) string {
		var out struct{ Policies []struct{ Slot, Name string } }
		require.NoError(t, client.New(server+"/graphql").Do(context.Background(), `{ policies { slot name } }`, nil, &out))
		for _, a := range out.Policies {
			if a.Slot == "FAIRNESS" {
				return a.Name
			}
		}
		return ""
	}
	server, stop := serveOn(t, db)
	res := sw(t, server, "plugin", "set", "fairness", "fair-share")
	require.Equal(t, 0, res.code, res.stderr)
	stop()

	server, stop = serveOn(t, db, "--native-policies")
	require.Equal(t, "fair-share", fairness(server), "a choice outlives the start's defaults")
	res = sw(t, server, "plugin", "set", "fairness")
	require.Equal(t, cli.ExitUsage, res.code, res.stdout)
	require.Contains(t, res.stderr, "--default")
	res = sw(t, server, "plugin", "set", "fairness", "fair-share", "--default")
	require.Equal(t, cli.ExitUsage, res.code, res.stdout)
	res = sw(t, server, "plugin", "set", "fairness", "--default")
	require.Equal(t, 0, res.code, res.stderr)
	require.Regexp(t, `(?m)^FAIRNESS  +global  +native:fair-share$`, res.stdout)
	stop()

	server, stop = serveOn(t, db, "--native-policies")
	require.Equal(t, "native:fair-share", fairness(server), "nothing stored: this start's default")
	logs := stop()
	require.NotContains(t, logs, "policy choice restored")
}
