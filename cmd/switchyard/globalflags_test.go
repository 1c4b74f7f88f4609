package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakePlugins is a GraphQL endpoint that answers plugin list's two queries:
// the built-in policies, and plugins in each breaker state. It records the
// operations it was asked.
func fakePlugins(t *testing.T) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var ops []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ OperationName string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		ops = append(ops, req.OperationName)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch req.OperationName {
		case "Policies":
			_, _ = w.Write([]byte(`{"data":{"policies":[{"slot":"SELECTION","lane":null,"name":"priority"}]}}`))
		case "Plugins":
			plugin := func(name, state, reason, until string) string {
				return `{"name":"` + name + `","slot":"FAIRNESS","builtin":false,"native":false,"sha256":"ab","size":10,"config":null,` +
					`"state":"` + state + `","disabledReason":` + reason + `,"quarantinedUntil":` + until + `,"loadedAt":null,` +
					`"activeIn":["global"],"calls":9,"faults":3,"fallbacks":4,"holds":0,"p50Us":1.5,"p99Us":2.5}`
			}
			_, _ = w.Write([]byte(`{"data":{"plugins":[` +
				plugin("fine", "ACTIVE", "null", "null") + "," +
				plugin("back", "PROBATION", "null", "null") + "," +
				plugin("slow", "QUARANTINED", `"deadline: ran past its deadline of 10ms"`, `"2026-11-26T20:00:00.882Z"`) + "," +
				plugin("broken", "DISABLED", `"cannot rebuild an instance: boom"`, "null") + `]}}`))
		default:
			http.Error(w, "unexpected operation "+req.OperationName, http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), ops...)
	}
}

// plugin list shows each plugin's breaker state as the host has it, with
// when a quarantine ends (to the millisecond: cut to the second it would
// read as before the real end) and why.
func TestPluginListShowsQuarantineProbationAndTheReason(t *testing.T) {
	t.Parallel()
	url, _ := fakePlugins(t)
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"plugin", "list", "--server", url}, &out, &errOut), errOut.String())
	require.Regexp(t, `(?m)^POLICY\s+SLOT\s+KIND\s+STATE\s+UNTIL\s+IN USE\s.*\sREASON$`, out.String())
	require.Regexp(t, `(?m)^fine\s+FAIRNESS\s+wasm\s+ACTIVE\s+-\s+global\s.*\s-$`, out.String())
	require.Regexp(t, `(?m)^back\s+FAIRNESS\s+wasm\s+PROBATION\s+-\s+global\s`, out.String())
	require.Regexp(t, `(?m)^slow\s+FAIRNESS\s+wasm\s+QUARANTINED\s+2026-11-26T20:00:00\.882Z\s+global\s.*\sdeadline: ran past its deadline of 10ms$`, out.String())
	require.Regexp(t, `(?m)^broken\s+FAIRNESS\s+wasm\s+DISABLED\s+-\s+global\s.*\scannot rebuild an instance: boom$`, out.String())
}

// The client verbs' global flags may come before the command, as well as
// after its verb; any other flag there is a usage error that says where
// flags go.
func TestGlobalFlagsGoBeforeTheCommandOrAfterTheVerb(t *testing.T) {
	t.Parallel()
	url, ops := fakePlugins(t)
	for _, args := range [][]string{
		{"--server", url, "plugin", "list"},
		{"--server=" + url, "--request-timeout", "5s", "plugin", "list"},
		{"-server", url, "--json", "plugin", "list"},
		{"--json", "plugin", "list", "--server", url},
		{"plugin", "list", "--server", url, "--json"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(context.Background(), args, &out, &errOut), "%q: %s", args, errOut.String())
		require.Contains(t, out.String(), "slow", "%q", args)
	}
	require.Len(t, ops(), 10, "each run asked the fake server, not the default one")

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--json", "--server", url, "plugin", "list"}, &out, &errOut), errOut.String())
	var listed struct {
		Plugins []struct{ Name, State string }
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &listed), "--json before the command still prints JSON: %s", out.String())
	require.Equal(t, "QUARANTINED", listed.Plugins[2].State)

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--decisions", "5", "plugin", "bench", "x.wasm"}, "unknown global flag --decisions"},
		{[]string{"--server"}, "global flag --server needs a value"},
		{[]string{"--json", "version"}, "flag provided but not defined: -json"},
		{[]string{"version", "--server", url}, "flag provided but not defined: -server"},
	} {
		out.Reset()
		errOut.Reset()
		require.Equal(t, 2, run(context.Background(), c.args, &out, &errOut), "%q", c.args)
		require.Contains(t, errOut.String(), c.want, "%q", c.args)
	}
}

// Before a command that talks to no server, --server and --request-timeout
// are left out (a shell alias that puts them before every command works for
// every command), while --json still reaches the command; bench keeps its
// own --server.
func TestClientFlagsBeforeALocalCommandAreLeftOut(t *testing.T) {
	t.Parallel()
	url, ops := fakePlugins(t)
	for _, args := range [][]string{
		{"--server", url, "version"},
		{"--server=" + url, "--request-timeout", "5s", "version"},
		{"--request-timeout=5s", "-server", url, "token", "new", "--name", "ci", "--role", "admin"},
		{"--server", url, "--json", "token", "new", "--name", "ci", "--role", "admin"},
		{"--server", url, "plugin", "new", "fairness", t.TempDir() + "/p"},
	} {
		var out, errOut bytes.Buffer
		require.Equal(t, 0, run(context.Background(), args, &out, &errOut), "%q: %s", args, errOut.String())
	}
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--server", url, "--json", "token", "new", "--name", "ci", "--role", "admin"}, &out, &errOut), errOut.String())
	var made struct{ Token, Hash string }
	require.NoError(t, json.Unmarshal(out.Bytes(), &made), "--json before the command still reaches it: %s", out.String())
	require.NotEmpty(t, made.Hash)
	require.Empty(t, ops(), "no local command asked the server")

	hoisted, err := hoistGlobalFlags([]string{"--server", url, "--request-timeout", "5s", "--json", "bench", "--mode", "submit"}, commands())
	require.NoError(t, err)
	require.Equal(t, []string{"bench", "--server", url, "--json", "--mode", "submit"}, hoisted, "bench keeps its own --server and --json")
}
