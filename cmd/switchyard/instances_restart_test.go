package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/graph/client"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// serveOn runs `switchyard serve` on the SQLite file db (with more
// arguments, if given) until the returned stop is called; it returns the
// server's base URL and stop, which waits for a clean exit and returns what
// it logged.
func serveOn(t *testing.T, db string, args ...string) (string, func() string) {
	t.Helper()
	s := startServe(t, append([]string{"--listen", "127.0.0.1:0", "--db", db, "--no-local-instance", "--log-level", "debug", "--shutdown-grace", "100ms"}, args...)...)
	return strings.TrimSuffix(s.URL, "/graphql"), func() string {
		require.Equal(t, 0, s.Stop(t), s.Logs.String())
		return s.Logs.String()
	}
}

// A newcomer registers instances through the API on one node with the
// default SQLite store; a restart on the same file brings back the ones
// registered (with their changes and their token), and not the removed one.
func TestInstancesRegisteredThroughTheAPISurviveARestartOnSQLite(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-instance-token"
	browser := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(browser.Close)
	db := filepath.Join(t.TempDir(), "switchyard.db")

	server, stop := serveOn(t, db)
	token := writeFile(t, "token", secret+"\n")
	res := sw(t, server, "instance", "register", "kept", browser.URL, "--capacity", "2", "--label", "zone=a", "--token-file", token)
	require.Equal(t, 0, res.code, res.stderr)
	res = sw(t, server, "instance", "register", "gone", browser.URL)
	require.Equal(t, 0, res.code, res.stderr)
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(context.Background(),
		`mutation { updateInstance(id: "kept", input: {capacity: 3, labels: [{key: "zone", value: "b"}]}) { id } }`, nil, nil))
	res = sw(t, server, "instance", "remove", "gone")
	require.Equal(t, 0, res.code, res.stderr)
	logs := stop()

	server, stop = serveOn(t, db)
	c = client.New(server + "/graphql")
	type instance struct {
		ID       string
		URL      string
		Capacity int
		HasToken bool
		Health   string
		Labels   []struct{ Key, Value string }
	}
	var list struct{ Instances []instance }
	// The browser answers only with the token: HEALTHY shows the token came back.
	waitfor.CheckForWithin(t, serveStartTimeout, func() error {
		require.NoError(t, c.Do(context.Background(), `{ instances { id url capacity hasToken health labels { key value } } }`, nil, &list))
		require.Len(t, list.Instances, 1, "the removed instance stays removed: %+v", list.Instances)
		if list.Instances[0].Health != "HEALTHY" {
			return fmt.Errorf("the restored instance is not healthy: %+v", list.Instances[0])
		}
		return nil
	})
	in := list.Instances[0]
	require.Equal(t, "kept", in.ID)
	require.Equal(t, browser.URL, in.URL)
	require.Equal(t, 3, in.Capacity, "the update is kept too")
	require.True(t, in.HasToken)
	require.Equal(t, []struct{ Key, Value string }{{"zone", "b"}}, in.Labels)
	raw, err := json.Marshal(list)
	require.NoError(t, err)
	require.NotContains(t, string(raw), secret)
	logs += stop()
	require.NotContains(t, logs, secret, "the token is never logged")
	require.True(t, strings.Contains(logs, "kept"), "the logs name the instance")
}

// The same after kill -9: registerInstance and removeInstance answer once
// the change is committed to the SQLite file.
func TestAnInstanceChangeThroughTheAPISurvivesKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "switchyard.yaml")
	require.NoError(t, os.WriteFile(config, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
store: {driver: sqlite, path: %q}
localInstance: {enabled: false}
log: {level: error}
`, filepath.Join(dir, "switchyard.db"))), 0o644))
	ids := func(url string) []string {
		var out struct{ Instances []struct{ ID string } }
		require.NoError(t, client.New(url).Do(context.Background(), `{ instances { id } }`, nil, &out))
		var ids []string
		for _, in := range out.Instances {
			ids = append(ids, in.ID)
		}
		return ids
	}
	killNine := func(cmd *exec.Cmd) {
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
	}

	cmd, url := startProcess(t, bin, config)
	require.NoError(t, client.New(url).Do(context.Background(),
		`mutation { registerInstance(input: {id: "solo", url: "http://127.0.0.1:1", token: "t", capacity: 2}) { id } }`, nil, nil))
	killNine(cmd)

	cmd, url = startProcess(t, bin, config)
	require.Equal(t, []string{"solo"}, ids(url), "registered, then kill -9")
	require.NoError(t, client.New(url).Do(context.Background(), `mutation { removeInstance(id: "solo") { id } }`, nil, nil))
	killNine(cmd)

	cmd, url = startProcess(t, bin, config)
	t.Cleanup(func() { killNine(cmd) })
	require.Empty(t, ids(url), "removed, then kill -9")
}
