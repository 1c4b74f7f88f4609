package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/config"
	"github.com/switchyard/switchyard/engine"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "switchyard.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestAFileSetsEveryKindOfKey(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
listen: 127.0.0.1:9090
shutdownGrace: 5s
log: {level: debug, format: json}
localInstance: {enabled: false, capacity: 2}
limits: {maxBodyBytes: 1024, maxComplexity: 99}
engine:
  maxInFlight: 40
  agentMaxInFlight: 3
  retention: 2h
  lanes:
    - {name: main, maxInFlight: 8}
    - {name: bulk, maxInFlight: 2, maxQueued: 10, dropPolicy: drop-oldest, timeout: 45s, retry: {maxAttempts: 2, backoff: 500ms}}
agents:
  vip: {weight: 5}
instances:
  - {id: fleet, url: "http://127.0.0.1:9867", token: t0k3n, kind: pinchtab, capacity: 16, labels: {zone: a}}
`)))
	require.NoError(t, c.Validate())
	require.Equal(t, "127.0.0.1:9090", c.Listen)
	require.Equal(t, 5*time.Second, c.ShutdownGrace.Std())
	require.Equal(t, "json", c.Log.Format)
	require.False(t, c.LocalInstance.Enabled)
	require.Equal(t, 1024, c.APILimits().MaxBodyBytes)
	require.Equal(t, 99, c.APILimits().MaxComplexity)

	ec, err := c.EngineConfig()
	require.NoError(t, err)
	require.Equal(t, 40, ec.MaxInFlight)
	require.Equal(t, 3, ec.AgentMaxInFlight)
	require.Equal(t, 2*time.Hour, ec.Retention)
	require.Len(t, ec.Lanes, 2)
	bulk := ec.Lanes[1]
	require.Equal(t, "bulk", bulk.Name)
	require.Equal(t, engine.DropOldest, bulk.DropPolicy)
	require.Equal(t, 45*time.Second, bulk.Timeout)
	require.Equal(t, 2, bulk.Retry.MaxAttempts)
	require.Equal(t, 500*time.Millisecond, bulk.Retry.Backoff)
	require.Equal(t, 5, ec.Agents["vip"].Weight)

	ics, err := c.InstanceConfigs()
	require.NoError(t, err)
	require.Len(t, ics, 1)
	require.Equal(t, "pinchtab", string(ics[0].Kind))
	require.Equal(t, "t0k3n", ics[0].Token)
}

func TestAnUnknownKeyIsNamedWithItsLine(t *testing.T) {
	t.Parallel()
	c := config.Default()
	err := c.LoadFile(writeFile(t, "listen: 127.0.0.1:1\nengine:\n  maxInFlite: 3\n"))
	require.ErrorContains(t, err, `line 3: unknown key "maxInFlite" (in engine)`)
	err = c.LoadFile(writeFile(t, "shutdownGrace: soon\n"))
	require.ErrorContains(t, err, `"soon" is not a duration`)
}

func TestValidationNamesTheBadKey(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mutate func(*config.Config)
		want   string
	}{
		"log level":          {func(c *config.Config) { c.Log.Level = "loud" }, "log.level"},
		"log format":         {func(c *config.Config) { c.Log.Format = "xml" }, "log.format"},
		"listen":             {func(c *config.Config) { c.Listen = "8080" }, "listen"},
		"remote":             {func(c *config.Config) { c.Listen = "0.0.0.0:8080" }, "allowRemote"},
		"store":              {func(c *config.Config) { c.Store.Driver = "mongo" }, "store.driver"},
		"lane drop policy":   {func(c *config.Config) { c.Engine.Lanes = []config.Lane{{Name: "x", DropPolicy: "shrug"}} }, "engine.lanes[0].dropPolicy"},
		"engine limit":       {func(c *config.Config) { c.Engine.MaxInFlight = -1 }, "engine.maxInFlight"},
		"instance url":       {func(c *config.Config) { c.Instances = []config.Instance{{ID: "i", URL: "nope"}} }, "instances[0].url"},
		"instance kind":      {func(c *config.Config) { c.Instances = []config.Instance{{ID: "i", URL: "http://x", Kind: "robot"}} }, "instances[0].kind"},
		"local instance id":  {func(c *config.Config) { c.Instances = []config.Instance{{ID: "local", URL: "http://x"}} }, "instances[0].id"},
		"negative limit":     {func(c *config.Config) { c.Limits.MaxDepth = -2 }, "limits.maxDepth"},
		"keepalive too tiny": {func(c *config.Config) { c.KeepAlive = config.Duration(time.Millisecond) }, "keepAlive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config.Default()
			tc.mutate(&c)
			require.ErrorContains(t, c.Validate(), tc.want)
		})
	}
	c := config.Default()
	c.Listen, c.AllowRemote = "0.0.0.0:8080", true
	require.NoError(t, c.Validate(), "allowRemote lets the server listen beyond loopback")
}

func TestEnvironmentOverridesTheFileAndNamesBadValues(t *testing.T) {
	t.Parallel()
	c := config.Default()
	c.Engine.MaxInFlight = 10
	warnings, err := c.ApplyEnv([]string{
		"SWITCHYARD_ENGINE_MAX_IN_FLIGHT=12", "SWITCHYARD_LOG_FORMAT=json", "SWITCHYARD_SHUTDOWN_GRACE=5s",
		"SWITCHYARD_LOCAL_INSTANCE_ENABLED=false", "SWITCHYARD_LIMITS_MAX_BODY_BYTES=2048",
		"SWITCHYARD_LANE_BULK_JOBS=inflight=4,queue=100", "SWITCHYARD_CONFIG=/etc/x.yaml", "SWITCHYARD_TYPO=1", "HOME=/root",
	})
	require.NoError(t, err)
	require.Equal(t, []string{"SWITCHYARD_TYPO sets no configuration key; ignored"}, warnings)
	require.Equal(t, 12, c.Engine.MaxInFlight)
	require.Equal(t, "json", c.Log.Format)
	require.Equal(t, 5*time.Second, c.ShutdownGrace.Std())
	require.False(t, c.LocalInstance.Enabled)
	require.Equal(t, 2048, c.Limits.MaxBodyBytes)
	ec, err := c.EngineConfig()
	require.NoError(t, err)
	lane := ec.Lanes[len(ec.Lanes)-1]
	require.Equal(t, "bulk_jobs", lane.Name, "SWITCHYARD_LANE_<NAME> adds or changes a lane")
	require.Equal(t, 4, lane.MaxInFlight)
	require.Equal(t, 100, lane.MaxQueued)

	_, err = c.ApplyEnv([]string{"SWITCHYARD_ENGINE_MAX_IN_FLIGHT=lots"})
	require.ErrorContains(t, err, "SWITCHYARD_ENGINE_MAX_IN_FLIGHT (engine.maxInFlight)")
	_, err = c.ApplyEnv([]string{"SWITCHYARD_LANE_MAIN=speed=9"})
	require.NoError(t, err)
	_, err = c.EngineConfig()
	require.ErrorContains(t, err, "SWITCHYARD_LANE_MAIN")
}

func TestEveryScalarKeyHasAVariable(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for _, v := range config.EnvVariables() {
		vars[v[0]] = v[1]
	}
	for name, key := range map[string]string{
		"SWITCHYARD_LISTEN": "listen", "SWITCHYARD_ALLOW_REMOTE": "allowRemote", "SWITCHYARD_LOG_LEVEL": "log.level",
		"SWITCHYARD_STORE_DRIVER": "store.driver", "SWITCHYARD_ARTIFACTS_DIR": "artifacts.dir",
		"SWITCHYARD_HEALTH_INTERVAL": "health.interval", "SWITCHYARD_ENGINE_EVENT_BUFFER": "engine.eventBuffer",
		"SWITCHYARD_LIMITS_MAX_WEB_SOCKET_PAYLOAD_BYTES": "limits.maxWebSocketPayloadBytes",
	} {
		require.Equal(t, key, vars[name], name)
	}
}
