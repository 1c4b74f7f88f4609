package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/graph/client"
)

// removeInstance refuses the built-in instance, which serve starts at every
// start, naming the setting that turns it off; it stays registered, with its
// configured capacity, and so it does after a restart.
func TestTheBuiltInInstanceIsNotRemovedThroughTheAPI(t *testing.T) {
	t.Parallel()
	if _, ok := chromium.Find(); !ok {
		t.Skip("chromium is not installed: skipping (apt-get install chromium)")
	}
	db := filepath.Join(t.TempDir(), "switchyard.db")
	type instance struct {
		ID       string
		Capacity int
	}
	list := func(c *client.Client) []instance {
		var out struct{ Instances []instance }
		require.NoError(t, c.Do(context.Background(), `{ instances { id capacity } }`, nil, &out))
		return out.Instances
	}
	// Without the built-in instance, "local" is any instance's id: this
	// one's removal is stored, as an earlier version stored the built-in
	// one's. It does not remove the built-in instance at the next start.
	server, stop := serveOn(t, db)
	c := client.New(server + "/graphql")
	require.NoError(t, c.Do(context.Background(),
		`mutation { registerInstance(input: {id: "local", url: "http://127.0.0.1:1", capacity: 1}) { id } }`, nil, nil))
	require.NoError(t, c.Do(context.Background(), `mutation { removeInstance(id: "local") { id } }`, nil, nil))
	require.Empty(t, list(c))
	stop()

	for restart := range 2 {
		s := startServe(t, "--listen", "127.0.0.1:0", "--db", db, "--shutdown-grace", "100ms")
		c := client.New(s.URL)
		err := c.Do(context.Background(), `mutation { removeInstance(id: "local") { id } }`, nil, nil)
		require.Error(t, err)
		require.ErrorContains(t, err, "CONFLICT")
		require.ErrorContains(t, err, "localInstance.enabled: false")
		require.ErrorContains(t, err, "--no-local-instance")
		res := sw(t, strings.TrimSuffix(s.URL, "/graphql"), "instance", "remove", "local")
		require.NotEqual(t, 0, res.code)
		require.Contains(t, res.stderr, "localInstance.enabled", "the CLI says it too")
		require.Equal(t, []instance{{ID: "local", Capacity: 4}}, list(c), "still there, restart %d", restart)
		require.Equal(t, 0, s.Stop(t), s.Logs.String())
		require.Contains(t, s.Logs.String(), "could not restore a saved instance", "the stored removal is not applied, and said so")
	}
}
