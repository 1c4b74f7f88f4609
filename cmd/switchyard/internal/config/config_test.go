package config_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/config"
	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/auth"
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
localInstance: {enabled: false, capacity: 2, dialogAutoAccept: true}
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
	require.True(t, c.LocalInstance.DialogAutoAccept)
	require.Equal(t, 1024, c.APILimits().MaxBodyBytes)
	require.Equal(t, 99, c.APILimits().MaxComplexity)

	ec, err := c.EngineConfig()
	require.NoError(t, err)
	require.Equal(t, 40, ec.MaxInFlight)
	require.Equal(t, 3, ec.AgentMaxInFlight)
	require.Equal(t, 2*time.Hour, ec.Retention)
	require.Len(t, ec.Lanes, 5, "the file's lanes merge with the four default lanes")
	bulk := ec.Lanes[4]
	require.Equal(t, "bulk", bulk.Name)
	require.Equal(t, engine.DropOldest, bulk.DropPolicy)
	require.Equal(t, 45*time.Second, bulk.Timeout)
	require.Equal(t, 2, bulk.Retry.MaxAttempts)
	require.Equal(t, 500*time.Millisecond, bulk.Retry.Backoff)
	require.Equal(t, 2.0, bulk.Retry.Multiplier, "a partial retry takes the defaults for the rest")
	require.Equal(t, time.Minute, bulk.Retry.MaxBackoff)
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
	require.ErrorContains(t, err, `line 1: shutdownGrace: "soon" is not a valid duration`)
}

func TestValidationNamesTheBadKey(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mutate func(*config.Config)
		want   string
	}{
		"log level":      {func(c *config.Config) { c.Log.Level = "loud" }, "log.level"},
		"log format":     {func(c *config.Config) { c.Log.Format = "xml" }, "log.format"},
		"listen":         {func(c *config.Config) { c.Listen = "8080" }, "listen"},
		"remote":         {func(c *config.Config) { c.Listen = "0.0.0.0:8080" }, "--insecure"},
		"instance creds": {func(c *config.Config) { c.Instances = []config.Instance{{ID: "i", URL: "http://u:p@x"}} }, "instances[0].url"},
		"origin pattern": {func(c *config.Config) { c.API.AllowedOrigins = []string{"[oops"} }, "api.allowedOrigins[0]"},
		"token role":     {func(c *config.Config) { c.Auth.Tokens = []config.Token{{Name: "t", Hash: hashOf(t), Role: "god"}} }, "auth.tokens[0].role"},
		"token hash":     {func(c *config.Config) { c.Auth.Tokens = []config.Token{{Name: "t", Hash: "plain", Role: "admin"}} }, "auth.tokens[0].hash"},
		"token agent":    {func(c *config.Config) { c.Auth.Tokens = []config.Token{{Name: "t", Hash: hashOf(t), Role: "agent"}} }, "auth.tokens[0].agentId"},
		"token name":     {func(c *config.Config) { c.Auth.Tokens = []config.Token{{Name: "a b", Hash: hashOf(t), Role: "reader"}} }, "auth.tokens[0].name"},
		"admin hash":     {func(c *config.Config) { c.Auth.AdminTokenHash = "sha1:x" }, "auth.adminTokenHash"},
		"admin name taken": {func(c *config.Config) {
			c.Auth.AdminTokenHash = hashOf(t)
			c.Auth.Tokens = []config.Token{{Name: "admin", Hash: hashOf(t), Role: "reader"}}
		}, "auth.tokens[0].name"},
		"store":              {func(c *config.Config) { c.Store.Driver = "mongo" }, "store.driver"},
		"lane drop policy":   {func(c *config.Config) { c.Engine.Lanes = []config.Lane{{Name: "x", DropPolicy: "shrug"}} }, "engine.lanes[0].dropPolicy"},
		"engine limit":       {func(c *config.Config) { c.Engine.MaxInFlight = -1 }, "engine.maxInFlight"},
		"instance url":       {func(c *config.Config) { c.Instances = []config.Instance{{ID: "i", URL: "nope"}} }, "instances[0].url"},
		"instance kind":      {func(c *config.Config) { c.Instances = []config.Instance{{ID: "i", URL: "http://x", Kind: "robot"}} }, "instances[0].kind"},
		"local instance id":  {func(c *config.Config) { c.Instances = []config.Instance{{ID: "local", URL: "http://x"}} }, "instances[0].id"},
		"negative limit":     {func(c *config.Config) { c.Limits.MaxDepth = -2 }, "limits.maxDepth"},
		"keepalive too tiny": {func(c *config.Config) { c.KeepAlive = config.Duration(time.Millisecond) }, "keepAlive"},
		"mcp lane":           {func(c *config.Config) { c.MCP.Lane = "nowhere" }, "mcp.lane"},
		"mcp max sessions":   {func(c *config.Config) { c.MCP.MaxSessions = -1 }, "mcp.maxSessions"},
		"negative cpu limit": {func(c *config.Config) { c.Plugins.DecisionCPU = config.Duration(-time.Millisecond) }, "plugins.decisionCPU: must not be negative"},
		"tiny cpu limit":     {func(c *config.Config) { c.Plugins.DecisionCPU = config.Duration(time.Nanosecond) }, "plugins.decisionCPU: must be at least 100µs"},
		"negative breaker":   {func(c *config.Config) { c.Plugins.BreakerStall = config.Duration(-time.Second) }, "plugins.breakerStall: must not be negative"},
		"tiny deadline":      {func(c *config.Config) { c.Plugins.Deadline = config.Duration(time.Microsecond) }, "plugins.deadline: must be at least 1ms"},
		"abort grace past the lease grace": {func(c *config.Config) {
			c.Executor.AbortGrace = config.Duration(30 * time.Second)
		}, "executor.abortGrace (30s) must be shorter than engine.leaseGrace (10s)"},
		"default abort grace past a short lease grace": {func(c *config.Config) {
			c.Engine.LeaseGrace = config.Duration(5 * time.Second)
		}, "executor.abortGrace (5s) must be shorter than engine.leaseGrace (5s)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := config.Default()
			tc.mutate(&c)
			require.ErrorContains(t, c.Validate(), tc.want)
		})
	}
	c := config.Default()
	c.Listen, c.Insecure = "0.0.0.0:8080", true
	require.NoError(t, c.Validate(), "--insecure lets the server listen beyond loopback without tokens")
	c = config.Default()
	c.Listen = "0.0.0.0:8080"
	c.Auth.Tokens = []config.Token{{Name: "ops", Hash: hashOf(t), Role: "operator"}}
	require.NoError(t, c.Validate(), "with tokens, the server may listen anywhere")
	c = config.Default()
	c.Engine.LeaseGrace, c.Executor.AbortGrace = config.Duration(5*time.Second), config.Duration(-1)
	require.NoError(t, c.Validate(), "a negative abort grace (disconnect at once) fits any lease grace")
	c.Executor.AbortGrace = config.Duration(4 * time.Second)
	require.NoError(t, c.Validate(), "an abort grace below the lease grace is fine")
}

func hashOf(t *testing.T) string {
	t.Helper()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	h, err := auth.HashToken(tok)
	require.NoError(t, err)
	return h
}

func TestTokensFromTheFileAndTheEnvironmentAuthenticate(t *testing.T) {
	t.Parallel()
	agentTok, err := auth.NewToken()
	require.NoError(t, err)
	agentHash, err := auth.HashToken(agentTok)
	require.NoError(t, err)
	adminTok, err := auth.NewToken()
	require.NoError(t, err)
	adminHash, err := auth.HashToken(adminTok)
	require.NoError(t, err)

	c := config.Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
listen: 0.0.0.0:8080
auth:
  tokens:
    - {name: bot-7, hash: "`+agentHash+`", role: agent, agentId: agent-7}
api: {allowedOrigins: ["dash.example.com"], introspection: false}
limits: {mutationsPerSecond: 5, mutationBurst: 10, maxSubscriptionsPerConnection: 3}
`)))
	_, err = c.ApplyEnv([]string{"SWITCHYARD_AUTH_ADMIN_TOKEN_HASH=" + adminHash})
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	authn, err := c.Authenticator()
	require.NoError(t, err)
	id, err := authn.AuthenticateHeader("Bearer " + agentTok)
	require.NoError(t, err)
	require.Equal(t, auth.Identity{Name: "bot-7", Role: auth.RoleAgent, AgentID: "agent-7"}, *id)
	id, err = authn.AuthenticateHeader("Bearer " + adminTok)
	require.NoError(t, err)
	require.Equal(t, auth.Identity{Name: config.AdminTokenName, Role: auth.RoleAdmin}, *id)
	_, err = authn.AuthenticateHeader("Bearer " + agentHash)
	require.ErrorIs(t, err, auth.ErrUnauthenticated, "the hash is not the token")

	require.False(t, c.API.Introspection)
	require.Equal(t, []string{"dash.example.com"}, c.API.AllowedOrigins)
	l := c.APILimits()
	require.Equal(t, 5.0, l.MutationsPerSecond)
	require.Equal(t, 10, l.MutationBurst)
	require.Equal(t, 3, l.MaxSubscriptionsPerConnection)
}

func TestTheRemovedAllowRemoteKeySaysWhatReplacedIt(t *testing.T) {
	t.Parallel()
	c := config.Default()
	err := c.LoadFile(writeFile(t, "allowRemote: true\n"))
	require.ErrorContains(t, err, "auth.tokens")
	require.ErrorContains(t, err, "insecure: true")
}

// A lane's keys that the GraphQL LaneInput and RetryPolicyInput spell
// otherwise (retryPolicy, timeoutMs, …) are unknown keys of the file, and
// the error says what the file calls them.
func TestALanesKeyInItsGraphQLSpellingSaysTheFilesSpelling(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, want string }{
		{"engine:\n  lanes:\n    - name: bulk\n      retryPolicy: {maxAttempts: 2}\n",
			`line 4: unknown key "retryPolicy" (in lane): the file spells it retry (retryPolicy is the GraphQL LaneInput's name)`},
		{"engine:\n  lanes:\n    - name: bulk\n      timeoutMs: 30000\n",
			`line 4: unknown key "timeoutMs" (in lane): the file spells it timeout (a duration: 30s)`},
		{"engine:\n  lanes:\n    - name: bulk\n      debounceMs: 800\n",
			`line 4: unknown key "debounceMs" (in lane): the file spells it debounce`},
		{"engine:\n  lanes:\n    - name: bulk\n      retry:\n        maxAttempts: 2\n        backoffMs: 500\n",
			`line 6: unknown key "backoffMs" (in retry): the file spells it backoff (a duration: 1s) (backoffMs is the GraphQL RetryPolicyInput's name)`},
		{"engine:\n  lanes:\n    - name: bulk\n      retry: {maxBackoffMs: 500}\n",
			`line 4: unknown key "maxBackoffMs" (in retry): the file spells it maxBackoff`},
	} {
		cfg := config.Default()
		err := cfg.LoadFile(writeFile(t, c.yaml))
		require.ErrorContains(t, err, c.want, c.yaml)
	}

	// Set beside retry, retryPolicy is refused all the same: the file is
	// not read with one of the two ignored.
	cfg := config.Default()
	err := cfg.LoadFile(writeFile(t, "engine:\n  lanes:\n    - name: bulk\n      retry: {maxAttempts: 2}\n      retryPolicy: {maxAttempts: 5}\n"))
	require.ErrorContains(t, err, `line 5: unknown key "retryPolicy" (in lane): the file spells it retry`)

	// Another key unknown in a lane gets no hint.
	path := writeFile(t, "engine:\n  lanes:\n    - name: bulk\n      maxInFlite: 3\n")
	cfg = config.Default()
	err = cfg.LoadFile(path)
	require.EqualError(t, err, "config file "+path+`: line 4: unknown key "maxInFlite" (in lane)`)
}

func TestSecretsNeverAppearInADumpOfTheConfiguration(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
instances:
  - {id: fleet, url: "http://127.0.0.1:9867", token: instance-s3cret}
store: {url: "postgres://u:db-s3cret@db/switchyard"}
webhooks:
  secret: webhook-s3cret
  endpoints: [{prefix: "https://hooks.example.com/", secret: endpoint-s3cret}]
`)))
	_, err := c.ApplyEnv([]string{"OTHER_PROGRAM_PASSWORD=x", "SWITCHYARD_LANE_MAIN=4"})
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	yml, err := yaml.Marshal(c)
	require.NoError(t, err)
	js, err := json.Marshal(c)
	require.NoError(t, err)
	for _, dump := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), string(yml), string(js)} {
		for _, secret := range []string{"instance-s3cret", "webhook-s3cret", "endpoint-s3cret", "db-s3cret", "OTHER_PROGRAM"} {
			require.NotContains(t, dump, secret)
		}
		require.Contains(t, dump, "[redacted]")
	}
	ics, err := c.InstanceConfigs()
	require.NoError(t, err)
	require.Equal(t, "instance-s3cret", ics[0].Token, "the component that needs the secret gets it")
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

	require.True(t, config.Default().Cluster.WarmStandby, "warm standby is on by default")
	_, err = c.ApplyEnv([]string{"SWITCHYARD_CLUSTER_WARM_STANDBY=false"})
	require.NoError(t, err)
	require.False(t, c.Cluster.WarmStandby)

	_, err = c.ApplyEnv([]string{"SWITCHYARD_ENGINE_MAX_IN_FLIGHT=lots"})
	require.ErrorContains(t, err, "SWITCHYARD_ENGINE_MAX_IN_FLIGHT (engine.maxInFlight)")
	_, err = c.ApplyEnv([]string{"SWITCHYARD_LANE_MAIN=speed=9"})
	require.NoError(t, err)
	_, err = c.EngineConfig()
	require.ErrorContains(t, err, "SWITCHYARD_LANE_MAIN")

	// A lane setting's bad value says what it should be, not strconv's words.
	for val, want := range map[string]string{
		"inflight=abc":               `inflight: "abc" is not an integer`,
		"queue=1e3":                  `queue: "1e3" is not an integer`,
		"paused=maybe":               `paused: "maybe" is not true or false`,
		"multiplier=x2":              `multiplier: "x2" is not a number`,
		"timeout=forever":            `timeout: "forever" is not a duration (e.g. 30s, 5m)`,
		"depth=99999999999999999999": `depth: "99999999999999999999" is out of range`,
	} {
		_, err = c.ApplyEnv([]string{"SWITCHYARD_LANE_MAIN=" + val})
		require.NoError(t, err)
		_, err = c.EngineConfig()
		require.EqualError(t, err, "SWITCHYARD_LANE_MAIN: "+want, val)
	}
}

func TestEveryScalarKeyHasAVariable(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for _, v := range config.EnvVariables() {
		vars[v[0]] = v[1]
	}
	for name, key := range map[string]string{
		"SWITCHYARD_LISTEN": "listen", "SWITCHYARD_INSECURE": "insecure", "SWITCHYARD_LOG_LEVEL": "log.level",
		"SWITCHYARD_AUTH_ADMIN_TOKEN_HASH": "auth.adminTokenHash", "SWITCHYARD_API_INTROSPECTION": "api.introspection",
		"SWITCHYARD_LIMITS_MUTATIONS_PER_SECOND": "limits.mutationsPerSecond",
		"SWITCHYARD_STORE_DRIVER":                "store.driver", "SWITCHYARD_ARTIFACTS_DIR": "artifacts.dir",
		"SWITCHYARD_HEALTH_INTERVAL": "health.interval", "SWITCHYARD_ENGINE_EVENT_BUFFER": "engine.eventBuffer",
		"SWITCHYARD_LIMITS_MAX_WEB_SOCKET_PAYLOAD_BYTES": "limits.maxWebSocketPayloadBytes",
	} {
		require.Equal(t, key, vars[name], name)
	}

	// Every scalar leaf of the configuration, whatever its Go type (an
	// int64 such as plugins.decisionFuel was once left out), has one.
	keys := map[string]bool{}
	for _, key := range vars {
		keys[key] = true
	}
	var walk func(t reflect.Type, path string)
	walk = func(rt reflect.Type, path string) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			p := tag
			if path != "" {
				p = path + "." + tag
			}
			switch k := f.Type.Kind(); {
			case f.Type == reflect.TypeOf(config.Duration(0)):
				require.True(t, keys[p], "%s has no variable", p)
			case k == reflect.Struct:
				walk(f.Type, p)
			case k != reflect.Slice && k != reflect.Map && k != reflect.Pointer && k != reflect.Interface:
				require.True(t, keys[p], "%s (%s) has no variable", p, k)
			}
		}
	}
	walk(reflect.TypeOf(config.Default()), "")

	c := config.Default()
	warnings, err := c.ApplyEnv([]string{"SWITCHYARD_PLUGINS_DECISION_FUEL=20000"})
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, int64(20000), c.Plugins.DecisionFuel)
	_, err = c.ApplyEnv([]string{"SWITCHYARD_PLUGINS_DECISION_FUEL=lots"})
	require.ErrorContains(t, err, "SWITCHYARD_PLUGINS_DECISION_FUEL (plugins.decisionFuel)")
}

func TestAValueOfTheWrongTypeNamesItsKey(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{
		"listen: 127.0.0.1:8080\nengine:\n  maxInFlight: lots\n": `line 3: engine.maxInFlight: "lots" is not a valid integer`,
		"engine:\n  lanes:\n    - {name: a, maxInFlight: x}\n":   `line 3: engine.lanes[0].maxInFlight: "x" is not a valid integer`,
		"localInstance:\n  enabled: sometimes\n":                 `line 2: localInstance.enabled: "sometimes" is not a valid boolean (true or false)`,
		"limits: {maxDepth: 3, mutationsPerSecond: fast}\n":      `line 1: limits.mutationsPerSecond: "fast" is not a valid number`,
		"engine:\n  maxInFlight: lots\n  maxQueued: many\n":      `line 2: engine.maxInFlight: "lots" is not a valid integer; line 3: engine.maxQueued: "many" is not a valid integer`,
		"shutdownGrace: soon\n":                                  `line 1: shutdownGrace: "soon" is not a valid duration (e.g. 30s, 5m, 1h)`,
		"engine: {commitTimeout: 10}\n":                          `line 1: engine.commitTimeout: "10" is not a valid duration (e.g. 30s, 5m, 1h)`,
		"engine:\n  lanes:\n    - {name: a, timeout: forever}\n": `line 3: engine.lanes[0].timeout: "forever" is not a valid duration (e.g. 30s, 5m, 1h)`,
		"shutdownGrace: soon\nengine:\n  maxInFlight: lots\n":    `line 1: shutdownGrace: "soon" is not a valid duration (e.g. 30s, 5m, 1h); line 3: engine.maxInFlight: "lots" is not a valid integer`,
	} {
		c := config.Default()
		err := c.LoadYAML([]byte(doc), "f.yaml")
		require.EqualError(t, err, "config file f.yaml: "+want, doc)
	}
}

func TestStringsThatAreNotUTF8AreRefusedInTheFileAndTheEnvironment(t *testing.T) {
	t.Parallel()
	c := config.Default()
	err := c.LoadYAML([]byte("log:\n  level: info\nagents:\n  \"a\xffb\": {weight: 2}\n"), "f.yaml")
	require.ErrorContains(t, err, "config file f.yaml: line 4, column 5: not valid UTF-8")
	c = config.Default()
	_, err = c.ApplyEnv([]string{"SWITCHYARD_STORE_PATH=/tmp/a\xfe.db"})
	require.EqualError(t, err, "SWITCHYARD_STORE_PATH (store.path): the value is not valid UTF-8")
	require.Equal(t, config.Default().Store.Path, c.Store.Path, "nothing changed")
}

func TestVariablesOfKeysWithAcronymsKeepThemWholeAndTheOldSpellingWarns(t *testing.T) {
	t.Parallel()
	vars := map[string]string{}
	for _, v := range config.EnvVariables() {
		vars[v[0]] = v[1]
	}
	require.Equal(t, "cluster.leaseTTL", vars["SWITCHYARD_CLUSTER_LEASE_TTL"])
	for name := range vars {
		require.NotContains(t, name, "_T_T_L", "the documented names keep acronyms whole")
	}

	c := config.Default()
	warnings, err := c.ApplyEnv([]string{"SWITCHYARD_CLUSTER_LEASE_TTL=30s"})
	require.NoError(t, err)
	require.Empty(t, warnings)
	require.Equal(t, 30*time.Second, c.Cluster.LeaseTTL.Std())

	c = config.Default()
	warnings, err = c.ApplyEnv([]string{"SWITCHYARD_CLUSTER_LEASE_T_T_L=20s"})
	require.NoError(t, err)
	require.Equal(t, 20*time.Second, c.Cluster.LeaseTTL.Std(), "the old spelling still works")
	require.Equal(t, []string{"SWITCHYARD_CLUSTER_LEASE_T_T_L is deprecated: it is spelt SWITCHYARD_CLUSTER_LEASE_TTL now (read as cluster.leaseTTL for now)"}, warnings)
}

func TestLanesInTheFileMergeWithTheDefaultsByName(t *testing.T) {
	t.Parallel()
	c := config.Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
engine:
  lanes:
    - {name: main, maxInFlight: 8, retry: {maxAttempts: 3, backoff: 200ms}}
    - {name: team, remove: true}
    - {name: bulk, exhausted: fail}
    - {name: cron, paused: true, retry: {backoff: 0s}}
`)))
	require.NoError(t, c.Validate())
	ec, err := c.EngineConfig()
	require.NoError(t, err)
	byName := map[string]engine.LaneConfig{}
	var names []string
	for _, l := range ec.Lanes {
		byName[l.Name] = l
		names = append(names, l.Name)
	}
	require.Equal(t, []string{"main", "subagent", "cron", "bulk"}, names, "team is removed, bulk added, the rest kept")
	main := byName["main"]
	require.Equal(t, 8, main.MaxInFlight)
	require.Equal(t, engine.RetryPolicy{MaxAttempts: 3, Backoff: 200 * time.Millisecond, Multiplier: 2, MaxBackoff: time.Minute}, main.Retry,
		"unset retry keys keep the defaults: the delay grows")
	require.Equal(t, 100_000, main.MaxQueued, "unset keys keep the default lane's")
	require.Equal(t, 50, byName["subagent"].MaxInFlight)
	bulk := byName["bulk"]
	require.Equal(t, 30, bulk.MaxInFlight, "a new lane takes a new lane's defaults")
	require.Equal(t, engine.DefaultRetryPolicy(), bulk.Retry)
	require.Equal(t, engine.ExhaustedFail, bulk.Exhausted)
	require.True(t, byName["cron"].Paused)
	require.Equal(t, time.Duration(0), byName["cron"].Retry.Backoff, "an explicit 0s backoff retries at once")
	require.Equal(t, 30, byName["cron"].MaxInFlight)

	for yml, want := range map[string]string{
		"engine: {lanes: [{name: bogus, remove: true}]}":          `engine.lanes[0].remove: there is no lane "bogus" to remove`,
		"engine: {lanes: [{name: main}, {name: main}]}":           `engine.lanes[1].name: lane "main" is given twice`,
		"engine: {lanes: [{name: x}, {name: y, exhausted: nap}]}": "engine.lanes[1].exhausted",
		`engine: {lanes: [{name: main, remove: true}, {name: subagent, remove: true}, {name: team, remove: true}, {name: cron, remove: true}]}`: "keep at least one",
	} {
		c := config.Default()
		require.NoError(t, c.LoadFile(writeFile(t, yml)))
		_, err := c.EngineConfig()
		require.ErrorContains(t, err, want, yml)
	}
}

func TestAPartialLaneRetryFromTheEnvironmentKeepsTheDefaults(t *testing.T) {
	t.Parallel()
	c := config.Default()
	_, err := c.ApplyEnv([]string{"SWITCHYARD_LANE_BULK=attempts=3", "SWITCHYARD_LANE_MAIN=backoff=200ms,maxbackoff=2s,exhausted=fail"})
	require.NoError(t, err)
	ec, err := c.EngineConfig()
	require.NoError(t, err)
	lanes := map[string]engine.LaneConfig{}
	for _, l := range ec.Lanes {
		lanes[l.Name] = l
	}
	require.Equal(t, engine.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, Multiplier: 2, MaxBackoff: time.Minute}, lanes["bulk"].Retry)
	require.Equal(t, engine.RetryPolicy{MaxAttempts: 4, Backoff: 200 * time.Millisecond, Multiplier: 2, MaxBackoff: 2 * time.Second}, lanes["main"].Retry)
	require.Equal(t, engine.ExhaustedFail, lanes["main"].Exhausted)

	_, err = c.ApplyEnv([]string{"SWITCHYARD_LANE_MAIN=drop=shrug"})
	require.NoError(t, err)
	_, err = c.EngineConfig()
	require.ErrorContains(t, err, "SWITCHYARD_LANE_MAIN", "a bad value from the environment names its variable")
}

// The SWITCHYARD_ variables that other commands read (the client verbs'
// SWITCHYARD_SERVER and SWITCHYARD_TOKEN, …) are skipped without a warning:
// every one the repository's Go code reads with Getenv, or its README
// names, is either a key or known.
func TestVariablesOfOtherCommandsAreNotWarnedAbout(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..", "..")
	name := regexp.MustCompile(`SWITCHYARD_[A-Z0-9_]+`)
	getenv := regexp.MustCompile(`Getenv\("(SWITCHYARD_[A-Z0-9_]+)"\)`)
	found := map[string]string{}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	for _, n := range name.FindAllString(string(readme), -1) {
		if !strings.HasSuffix(n, "_") { // not a prefix: SWITCHYARD_LANE_<NAME>, SWITCHYARD_*
			found[n] = "README.md"
		}
	}
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range getenv.FindAllStringSubmatch(string(src), -1) {
			found[m[1]] = path
		}
		return nil
	}))
	for _, want := range []string{"SWITCHYARD_SERVER", "SWITCHYARD_TOKEN", "SWITCHYARD_AGENT", "SWITCHYARD_INSTANCE_TOKEN", "SWITCHYARD_CONFIG"} {
		require.Contains(t, found, want, "the scan finds the documented variables")
	}
	for n, where := range found {
		c := config.Default()
		warnings, _ := c.ApplyEnv([]string{n + "=x"}) // a key's bad value is an error, not a warning
		for _, w := range warnings {
			require.NotContains(t, w, "sets no configuration key", "%s (%s) is read by another command: skip it without a warning", n, where)
		}
	}
}

func TestAPullLaneAndAWorkerTokenFromTheFile(t *testing.T) {
	t.Parallel()
	tok, err := auth.NewToken()
	require.NoError(t, err)
	hash, err := auth.HashToken(tok)
	require.NoError(t, err)
	c := config.Default()
	require.NoError(t, c.LoadFile(writeFile(t, `
engine:
  lanes:
    - {name: jobs, pull: true, maxInFlight: 8}
auth:
  tokens:
    - {name: crawler, hash: "`+hash+`", role: worker, lanes: [jobs]}
`)))
	require.NoError(t, c.Validate())
	ec, err := c.EngineConfig()
	require.NoError(t, err)
	var jobs engine.LaneConfig
	for _, l := range ec.Lanes {
		if l.Name == "jobs" {
			jobs = l
		}
		if l.Name == "main" {
			require.False(t, l.Pull, "the default lanes stay lanes of instances")
		}
	}
	require.True(t, jobs.Pull)
	require.Equal(t, 8, jobs.MaxInFlight)
	authn, err := c.Authenticator()
	require.NoError(t, err)
	id, err := authn.AuthenticateHeader("Bearer " + tok)
	require.NoError(t, err)
	require.Equal(t, auth.Identity{Name: "crawler", Role: auth.RoleWorker, Lanes: []string{"jobs"}}, *id)

	for yml, want := range map[string]string{
		`auth: {tokens: [{name: w, hash: "` + hash + `", role: worker}]}`:                   "auth.tokens[0].lanes: a worker token leases from named pull lanes",
		`auth: {tokens: [{name: r, hash: "` + hash + `", role: reader, lanes: [jobs]}]}`:    "auth.tokens[0].lanes: only worker tokens are limited to lanes",
		`auth: {tokens: [{name: w, hash: "` + hash + `", role: worker, lanes: [" jobs"]}]}`: "auth.tokens[0].lanes[0]",
	} {
		c := config.Default()
		require.NoError(t, c.LoadFile(writeFile(t, yml)))
		_, err := c.Authenticator()
		require.ErrorContains(t, err, want, yml)
	}
}

// TestEveryKeyOfTheConfigurationIsHonouredFromItsVariable walks every key
// of the configuration: each scalar, and each list of scalars
// (api.allowedOrigins, comma-separated), is set by SWITCHYARD_ and its path
// in upper snake case, acronyms whole; each list or map of objects
// (instances, auth.tokens, …) is the file's only, and its variable says so.
func TestEveryKeyOfTheConfigurationIsHonouredFromItsVariable(t *testing.T) {
	t.Parallel()
	snake := func(s string) string {
		rs := []rune(s)
		var b strings.Builder
		for i, r := range rs {
			if i > 0 && r >= 'A' && r <= 'Z' {
				prevUpper := rs[i-1] >= 'A' && rs[i-1] <= 'Z'
				nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
				if !prevUpper || nextLower {
					b.WriteByte('_')
				}
			}
			b.WriteString(strings.ToUpper(string(r)))
		}
		return b.String()
	}
	durType := reflect.TypeOf(config.Duration(0))
	def := config.Default()
	var leaves, fileOnly int
	var walk func(v reflect.Value, path []string)
	walk = func(v reflect.Value, path []string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" || !f.IsExported() {
				continue
			}
			p := append(append([]string(nil), path...), tag)
			key := strings.Join(p, ".")
			var parts []string
			for _, seg := range p {
				parts = append(parts, snake(seg))
			}
			name := "SWITCHYARD_" + strings.Join(parts, "_")
			fv := v.Field(i)
			var val string
			var want any
			switch k := f.Type.Kind(); {
			case f.Type == durType:
				d := time.Duration(fv.Int()) + 7*time.Second
				val, want = d.String(), config.Duration(d)
			case k == reflect.Struct:
				walk(fv, p)
				continue
			case k == reflect.String:
				val = "env-" + key
				want = reflect.ValueOf(val).Convert(f.Type).Interface()
			case k == reflect.Bool:
				val, want = fmt.Sprint(!fv.Bool()), !fv.Bool()
			case fv.CanInt():
				n := fv.Int() + 7
				val, want = fmt.Sprint(n), reflect.ValueOf(n).Convert(f.Type).Interface()
			case fv.CanUint():
				n := fv.Uint() + 7
				val, want = fmt.Sprint(n), reflect.ValueOf(n).Convert(f.Type).Interface()
			case fv.CanFloat():
				n := fv.Float() + 0.5
				val, want = fmt.Sprint(n), reflect.ValueOf(n).Convert(f.Type).Interface()
			case k == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
				val, want = " a.example ,b.example,", reflect.ValueOf([]string{"a.example", "b.example"}).Convert(f.Type).Interface()
			case k == reflect.Slice || k == reflect.Map:
				fileOnly++
				c := config.Default()
				warnings, err := c.ApplyEnv([]string{name + "=x"})
				require.NoError(t, err, name)
				require.Len(t, warnings, 1, name)
				require.Contains(t, warnings[0], key+" is a list or map of objects, set in the configuration file only", name)
				continue
			default:
				t.Fatalf("%s: a key of kind %s that this test does not know", key, k)
			}
			leaves++
			c := config.Default()
			warnings, err := c.ApplyEnv([]string{name + "=" + val})
			require.NoError(t, err, "%s=%s", name, val)
			require.Empty(t, warnings, "%s sets %s", name, key)
			got := reflect.ValueOf(&c).Elem()
			for _, seg := range p {
				got = fieldByTag(got, seg)
			}
			require.Equal(t, want, got.Interface(), "%s=%s sets %s", name, val, key)
		}
	}
	walk(reflect.ValueOf(&def).Elem(), nil)
	require.Greater(t, leaves, 70, "the walk reaches the keys")
	require.Equal(t, 5, fileOnly, "auth.tokens, instances, agents, webhooks.endpoints, engine.lanes")

	c := config.Default()
	_, err := c.ApplyEnv([]string{"SWITCHYARD_API_ALLOWED_ORIGINS=localhost:6274, *.example.com"})
	require.NoError(t, err)
	require.Equal(t, []string{"localhost:6274", "*.example.com"}, c.API.AllowedOrigins)
	_, err = c.ApplyEnv([]string{"SWITCHYARD_API_ALLOWED_ORIGINS="})
	require.NoError(t, err)
	require.Empty(t, c.API.AllowedOrigins, "an empty value empties the list")
}

// fieldByTag is the field of a struct value with that YAML name.
func fieldByTag(v reflect.Value, tag string) reflect.Value {
	for i := range v.NumField() {
		if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] == tag {
			return v.Field(i)
		}
	}
	panic("no field " + tag)
}
