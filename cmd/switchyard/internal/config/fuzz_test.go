package config_test

import (
	"strings"
	"testing"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/config"
)

// FuzzConfig feeds arbitrary YAML documents and environments through
// LoadYAML, ApplyEnv and Validate. Whatever they hold, nothing panics, and a
// configuration that validates yields everything serve builds from it
// without an error: the engine's configuration, the authenticator, the
// instances and the webhook networks.
func FuzzConfig(f *testing.F) {
	for _, seed := range []struct{ doc, env string }{
		{"listen: 127.0.0.1:8080\n", ""},
		{"listen: 0.0.0.0:8080\ninsecure: true\n", "SWITCHYARD_LOG_LEVEL=debug"},
		{"auth:\n  tokens:\n    - {name: a, hash: \"hmac-sha256:AAAAAAAAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\", role: agent, agentId: x}\n", ""},
		{"engine:\n  lanes:\n    - {name: bulk, maxInFlight: 2, dropPolicy: drop-oldest, retry: {maxAttempts: 2, backoff: 1s}}\n", "SWITCHYARD_LANE_BULK=inflight=3,queue=9"},
		{"instances:\n  - {id: fleet, url: \"http://127.0.0.1:9867\", token: t, kind: pinchtab}\n", "SWITCHYARD_ENGINE_MAX_IN_FLIGHT=5"},
		{"webhooks: {allowNetworks: [10.0.0.0/8], endpoints: [{prefix: \"https://h/\", secret: s}]}\n", ""},
		{"api: {allowedOrigins: [\"*.example.com\"], introspection: false}\nlimits: {mutationsPerSecond: -1}\n", "SWITCHYARD_AUTH_ADMIN_TOKEN_HASH=x"},
		{"agents: {vip: {weight: 3}}\nshutdownGrace: 5s\n", "SWITCHYARD_KEEP_ALIVE=1ms"},
		{"- a\n- b\n", ""}, {"{{{", ""}, {"listen: [1, 2]\n", "SWITCHYARD_LIMITS_MAX_DEPTH=-5"},
		{"&a [*a]\n", ""}, {"engine: {lanes: [{name: \"\"}]}\n", "SWITCHYARD_LANE_=1"},
	} {
		f.Add(seed.doc, seed.env)
	}
	f.Fuzz(func(t *testing.T, doc, env string) {
		if len(doc) > 64<<10 {
			return
		}
		c := config.Default()
		if err := c.LoadYAML([]byte(doc), "fuzz.yaml"); err != nil {
			if !strings.HasPrefix(err.Error(), "config file fuzz.yaml: ") {
				t.Fatalf("an error that does not name the file: %v", err)
			}
			return
		}
		if _, err := c.ApplyEnv(strings.Split(env, "\n")); err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			return
		}
		if _, err := c.EngineConfig(); err != nil {
			t.Fatalf("valid, yet the engine configuration fails: %v", err)
		}
		if _, err := c.Authenticator(); err != nil {
			t.Fatalf("valid, yet the authenticator fails: %v", err)
		}
		if _, err := c.InstanceConfigs(); err != nil {
			t.Fatalf("valid, yet the instances fail: %v", err)
		}
		if _, err := c.WebhookNetworks(); err != nil {
			t.Fatalf("valid, yet the webhook networks fail: %v", err)
		}
		l := c.APILimits()
		if l.MaxComplexity <= 0 || l.MaxDepth <= 0 || l.MaxBodyBytes <= 0 || l.MutationBurst <= 0 {
			t.Fatalf("valid, yet a limit is not positive: %+v", l)
		}
	})
}
