// Package config is the configuration of `switchyard serve`: one YAML file,
// SWITCHYARD_* environment variables over it, flags over both; validated at
// start, with errors that name the key at fault.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/resolvers"
	"github.com/switchyard/switchyard/webhook"
)

// Config is everything `switchyard serve` reads. The YAML keys are the
// yaml tags; the environment variable of a key is SWITCHYARD_ followed by
// its path in upper snake case (log.format → SWITCHYARD_LOG_FORMAT,
// engine.maxInFlight → SWITCHYARD_ENGINE_MAX_IN_FLIGHT).
type Config struct {
	// Listen is the HTTP address (default 127.0.0.1:8080).
	Listen string `yaml:"listen"`
	// Insecure allows listening beyond loopback without authentication
	// (no auth.tokens): anyone who reaches the port then controls the
	// scheduler. Without tokens and without it, a non-loopback listen is
	// refused.
	Insecure bool `yaml:"insecure"`
	// ShutdownGrace is how long running tasks get to finish at shutdown
	// before they are cancelled (default 30s).
	ShutdownGrace Duration `yaml:"shutdownGrace"`
	// KeepAlive is the WebSocket and SSE keepalive interval (default 15s).
	KeepAlive Duration `yaml:"keepAlive"`

	Auth          Auth             `yaml:"auth"`
	API           API              `yaml:"api"`
	Log           Log              `yaml:"log"`
	Store         Store            `yaml:"store"`
	LocalInstance LocalInstance    `yaml:"localInstance"`
	Artifacts     Artifacts        `yaml:"artifacts"`
	Limits        Limits           `yaml:"limits"`
	Health        Health           `yaml:"health"`
	Engine        Engine           `yaml:"engine"`
	Executor      Executor         `yaml:"executor"`
	Instances     []Instance       `yaml:"instances"`
	Agents        map[string]Agent `yaml:"agents"`
	Plugins       Plugins          `yaml:"plugins"`
	Webhooks      Webhooks         `yaml:"webhooks"`
	Heartbeats    Heartbeats       `yaml:"heartbeats"`
	Cluster       Cluster          `yaml:"cluster"`
	MCP           MCP              `yaml:"mcp"`

	// environ is the environment ApplyEnv read: the engine's lane
	// variables (SWITCHYARD_LANE_<NAME>) come from it too.
	environ []string
}

// Auth configures authentication: bearer tokens, stored as hashes
// (`switchyard token new` makes a token and its hash). Without any token,
// authentication is off and the server listens on loopback only.
type Auth struct {
	// Tokens are the API's tokens.
	Tokens []Token `yaml:"tokens"`
	// AdminTokenHash adds a token named "admin" with the admin role: one
	// secret from the environment (SWITCHYARD_AUTH_ADMIN_TOKEN_HASH), for
	// deployments that keep the file free of them.
	AdminTokenHash string `yaml:"adminTokenHash"`
}

// AdminTokenName is the name of the token of Auth.AdminTokenHash.
const AdminTokenName = "admin"

// Token is one API token.
type Token struct {
	// Name identifies the token in the audit log (never the token itself).
	Name string `yaml:"name"`
	// Hash is the stored form printed by `switchyard token new` or
	// `switchyard token hash`: hmac-sha256:SALT:DIGEST.
	Hash string `yaml:"hash"`
	// Role is admin, operator, agent, reader or worker.
	Role string `yaml:"role"`
	// AgentID binds an agent token to its agent (required for agent tokens
	// only).
	AgentID string `yaml:"agentId"`
	// Lanes are the pull lanes a worker token leases from (required for
	// worker tokens only).
	Lanes []string `yaml:"lanes"`
}

// API configures the API's exposure to browsers and tools.
type API struct {
	// AllowedOrigins are browser origins besides the server's own that may
	// open WebSockets: host patterns such as "dash.example.com",
	// "*.example.com" or "https://tools.example.com".
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// Introspection answers __schema and __type queries (default true; the
	// playground's documentation needs it).
	Introspection bool `yaml:"introspection"`
}

// MCP configures the Model Context Protocol endpoint, /mcp.
type MCP struct {
	// Enabled serves /mcp (default true).
	Enabled bool `yaml:"enabled"`
	// Lane is the lane of the tasks MCP calls submit without naming one
	// (default main).
	Lane string `yaml:"lane"`
	// MaxSessions caps the live MCP sessions (default 1000): a new one
	// evicts the least recently used idle session, or is refused when every
	// session has a call in progress.
	MaxSessions int `yaml:"maxSessions"`
}

// Secret is a string that is never printed: fmt, YAML and JSON write it as
// "[redacted]", so that a dump of the configuration carries no secret.
type Secret string

const redacted = "[redacted]"

// String hides the secret.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString hides the secret from %#v.
func (s Secret) GoString() string { return strconvQuote(s.String()) }

// MarshalYAML hides the secret from YAML dumps.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalJSON hides the secret from JSON dumps.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconvQuote(s.String())), nil }

// Reveal returns the secret, for the component that uses it.
func (s Secret) Reveal() string { return string(s) }

func strconvQuote(s string) string { return `"` + s + `"` }

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // trace, debug, info (default), warn, error
	Format string `yaml:"format"` // text (default) or json
}

// Store chooses the store.
type Store struct {
	// Driver is the store: sqlite (default: one file, durable), memory
	// (ephemeral) or postgres (several nodes).
	Driver string `yaml:"driver"`
	// Path is the SQLite file (default ./switchyard.db).
	Path string `yaml:"path"`
	// Sync is SQLite's durability: full (default: survives a machine crash)
	// or normal (survives a process crash; faster).
	Sync string `yaml:"sync"`
	// URL is the PostgreSQL connection string (a secret: it may carry a
	// password).
	URL Secret `yaml:"url"`
	// Schema is the PostgreSQL schema of the store's tables (default
	// switchyard): clusters may share a database under different schemas.
	Schema string `yaml:"schema"`
}

// Cluster configures a node of a cluster: several `serve` processes over one
// PostgreSQL store (store.driver postgres), one of which leads.
type Cluster struct {
	// NodeID names this node, unique in the cluster (default: the host name
	// and the listen port).
	NodeID string `yaml:"nodeId"`
	// Advertise is where this node's API is reached, as the nodes query
	// shows it (default: the listen address).
	Advertise string `yaml:"advertise"`
	// LeaseTTL is how long the leader lease lasts after each renewal (default
	// 10s): a leader that dies is replaced within LeaseTTL + RenewEvery, and
	// one cut off from the database stops leading before LeaseTTL passes.
	LeaseTTL Duration `yaml:"leaseTTL"`
	// RenewEvery is how often the leader renews the lease and the others
	// campaign (default 2s).
	RenewEvery Duration `yaml:"renewEvery"`
	// WarmStandby keeps a plugin host across the node's leaderships, and
	// has a follower compile the built-in policies while it follows, so
	// that a takeover does not wait for them (default true). It costs a
	// follower the compiled code's memory, about 65 MB.
	WarmStandby bool `yaml:"warmStandby"`
}

// Plugins configures the policy plugins.
type Plugins struct {
	// Native makes the native built-in policies the defaults instead of
	// their WebAssembly builds.
	Native bool `yaml:"native"`
	// CacheDir holds compiled modules (default: the user cache directory).
	CacheDir string `yaml:"cacheDir"`
	// MaxWasmBytes caps an uploaded module (default 16 MiB).
	MaxWasmBytes int `yaml:"maxWasmBytes"`
	// MemoryPages caps each plugin instance's memory in 64 KiB pages
	// (default 128).
	MemoryPages int `yaml:"memoryPages"`
	// The guards of every decision and the breaker (plugins/ABI.md, "Guards
	// and faults"); zero means the host's default.
	DecisionFuel      int64    `yaml:"decisionFuel"`      // fuel per decision (default 5,000,000)
	DecisionCPU       Duration `yaml:"decisionCPU"`       // CPU time per decision, on Linux (default 2.5ms)
	Deadline          Duration `yaml:"deadline"`          // wall-clock backstop per decision (default 10ms)
	BreakerThreshold  int      `yaml:"breakerThreshold"`  // faults that quarantine (default 5)
	BreakerStall      Duration `yaml:"breakerStall"`      // faulted time that quarantines (default 20ms)
	QuarantineBase    Duration `yaml:"quarantineBase"`    // the first quarantine (default 1s), doubling
	QuarantineMax     Duration `yaml:"quarantineMax"`     // the longest quarantine (default 10m)
	Probation         int      `yaml:"probation"`         // good decisions that end a probation (default 100)
	LogLinesPerSecond int      `yaml:"logLinesPerSecond"` // switchyard.log lines per plugin (default 20)
}

// Webhooks configures webhook deliveries.
type Webhooks struct {
	// Secret signs deliveries to URLs that no endpoint matches.
	Secret Secret `yaml:"secret"`
	// Endpoints give per-endpoint secrets by URL prefix.
	Endpoints []WebhookEndpoint `yaml:"endpoints"`
	// AllowPrivate lets webhooks reach loopback, private and link-local
	// addresses (refused by default).
	AllowPrivate bool `yaml:"allowPrivate"`
	// AllowNetworks lets webhooks reach these CIDRs even so.
	AllowNetworks []string `yaml:"allowNetworks"`
	// Timeout bounds each attempt (default 10s).
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts per delivery (default 5).
	MaxAttempts int `yaml:"maxAttempts"`
}

// Heartbeats configures heartbeat checks: what their probes may reach.
type Heartbeats struct {
	// AllowPrivate lets checks reach loopback, private and link-local
	// addresses (refused by default, as for webhooks).
	AllowPrivate bool `yaml:"allowPrivate"`
	// AllowNetworks lets checks reach these CIDRs even so.
	AllowNetworks []string `yaml:"allowNetworks"`
	// MaxChecks caps how many checks exist (default 1000).
	MaxChecks int `yaml:"maxChecks"`
	// Concurrency caps the probes in flight at once (default 8).
	Concurrency int `yaml:"concurrency"`
}

// WebhookEndpoint is a receiver's secret and body format.
type WebhookEndpoint struct {
	Prefix string `yaml:"prefix"`
	Secret Secret `yaml:"secret"` // default: webhooks.secret
	// Format is the body's shape: switchyard (default) or browseros (the
	// flat {taskId, state, result|error, executionTimeMs} of BrowserOS).
	Format string `yaml:"format"`
}

// LocalInstance configures the built-in Chromium instance.
type LocalInstance struct {
	// Enabled starts it when Chromium is found (default true).
	Enabled bool `yaml:"enabled"`
	// Capacity is how many tasks it runs at once (default 4).
	Capacity int `yaml:"capacity"`
	// Chromium is the browser's path (default: found on the system).
	Chromium string `yaml:"chromium"`
	// DialogAutoAccept accepts every JavaScript dialog a page opens
	// (default false: an open dialog holds up its tab's tasks until a
	// "dialog" task or an action's dialogAction answers it).
	DialogAutoAccept bool `yaml:"dialogAutoAccept"`
}

// Artifacts configures where screenshots, PDFs and large results go.
type Artifacts struct {
	// Dir keeps them in a directory; empty keeps them in memory.
	Dir string `yaml:"dir"`
}

// Limits are the API's request limits; 0 means the default.
type Limits struct {
	MaxComplexity                 int `yaml:"maxComplexity"`
	MaxDepth                      int `yaml:"maxDepth"`
	MaxBodyBytes                  int `yaml:"maxBodyBytes"`
	MaxWebSocketPayloadBytes      int `yaml:"maxWebSocketPayloadBytes"`
	MaxSubscriberLag              int `yaml:"maxSubscriberLag"`
	MaxSubscriptionsPerConnection int `yaml:"maxSubscriptionsPerConnection"`
	// MutationsPerSecond is each token's sustained rate of mutations
	// (default 100; negative: no limit); MutationBurst the most at once
	// (default 200). Without tokens, every caller's together.
	MutationsPerSecond float64 `yaml:"mutationsPerSecond"`
	MutationBurst      int     `yaml:"mutationBurst"`
	// BodyTimeout is how long an HTTP request's body may take to arrive
	// (default 30s).
	BodyTimeout Duration `yaml:"bodyTimeout"`
}

// Health configures the instances' health checks.
type Health struct {
	Interval       Duration `yaml:"interval"`       // default 5s
	Timeout        Duration `yaml:"timeout"`        // default 2s
	UnhealthyAfter int      `yaml:"unhealthyAfter"` // default 3
}

// Executor configures how attempts reach the instances (executor.Options);
// 0 means the default.
type Executor struct {
	// IdleTabTimeout closes the tabs the executor opened once unused this long
	// (default 5m; negative: never).
	IdleTabTimeout Duration `yaml:"idleTabTimeout"`
	// MaxIdleTabs bounds the unused tabs kept per instance for tab-less tasks
	// (default 4; negative: none).
	MaxIdleTabs int `yaml:"maxIdleTabs"`
	// AbortGrace is how long a cancelled attempt waits for the instance to
	// confirm the end of its action before disconnecting (default 5s;
	// negative: disconnect at once).
	AbortGrace Duration `yaml:"abortGrace"`
	// MaxReplayActions bounds the actions kept per session that asked for
	// replay (sessionReplay); a session that does more cannot be replayed
	// (default 64).
	MaxReplayActions int `yaml:"maxReplayActions"`
	// MaxReplayBytes bounds the bytes those actions take (a fill's text in
	// full); a session whose log would grow past it cannot be replayed
	// (default 1 MiB).
	MaxReplayBytes int `yaml:"maxReplayBytes"`
}

// Engine is the engine's configuration (engine.Config); 0 means the
// default.
type Engine struct {
	MaxInFlight         int      `yaml:"maxInFlight"`
	MaxQueued           int      `yaml:"maxQueued"`
	MaxQueuedPerAgent   int      `yaml:"maxQueuedPerAgent"`
	MaxQueuedPerSession int      `yaml:"maxQueuedPerSession"`
	AgentMaxInFlight    int      `yaml:"agentMaxInFlight"`
	SessionMaxInFlight  int      `yaml:"sessionMaxInFlight"`
	AgingThreshold      Duration `yaml:"agingThreshold"`
	LeaseGrace          Duration `yaml:"leaseGrace"`
	Retention           Duration `yaml:"retention"`
	EventBuffer         int      `yaml:"eventBuffer"`
	FairnessCandidates  int      `yaml:"fairnessCandidates"`
	MaxBatch            int      `yaml:"maxBatch"`
	InstanceFaultBudget int      `yaml:"instanceFaultBudget"`
	InstanceFaultDelay  Duration `yaml:"instanceFaultDelay"`
	// CommitTimeout bounds a call's wait for the store to commit its
	// changes; past it the call answers UNAVAILABLE (default 10s).
	CommitTimeout Duration `yaml:"commitTimeout"`
	// ChatTimeout is the attempt timeout of chat tasks that set none, when
	// their lane's is shorter (default 120s); ChatMaxTimeout caps what a
	// chat task may ask for (default 600s).
	ChatTimeout    Duration `yaml:"chatTimeout"`
	ChatMaxTimeout Duration `yaml:"chatMaxTimeout"`
	// Lanes merge with the default lanes (main, subagent, team, cron) by
	// name: see Lane.
	Lanes []Lane `yaml:"lanes"`
}

// Lane is one lane. A lane named like a default lane (main, subagent, team,
// cron) changes only the keys it sets; another name adds a lane, whose unset
// keys take the defaults of a new lane (maxInFlight 30, maxQueued 100000,
// dropPolicy reject, maxDepth 5, timeout 60s, the default retry, exhausted
// park, not a pull lane). remove: true drops the lane of that name instead.
type Lane struct {
	Name        string   `yaml:"name"`
	Remove      bool     `yaml:"remove"`
	MaxInFlight *int     `yaml:"maxInFlight"` // 0 dispatches nothing
	MaxQueued   int      `yaml:"maxQueued"`
	DropPolicy  string   `yaml:"dropPolicy"` // reject (default) or drop-oldest
	Paused      *bool    `yaml:"paused"`
	MaxDepth    int      `yaml:"maxDepth"`
	Timeout     Duration `yaml:"timeout"`
	Retry       *Retry   `yaml:"retry"`
	// Exhausted is what a task whose retries are spent becomes: park
	// (default) or fail.
	Exhausted string `yaml:"exhausted"`
	// SessionMaxQueued caps one session's queued tasks in the lane (0: the
	// engine's maxQueuedPerSession); SessionDropPolicy is what a full
	// session does (default: the lane's dropPolicy).
	SessionMaxQueued  int    `yaml:"sessionMaxQueued"`
	SessionDropPolicy string `yaml:"sessionDropPolicy"`
	// Debounce holds each task of a session this long and lets a newer task
	// of the same session supersede it (GoClaw's debounce: 800ms); 0 (the
	// default) queues tasks at once.
	Debounce Duration `yaml:"debounce"`
	// Pull makes a pull lane: external workers lease its tasks.
	Pull *bool `yaml:"pull"`
}

// Retry is a retry policy. Unset keys keep the lane's (for a new lane, the
// defaults: 4 attempts, backoff 1s, multiplier 2, maxBackoff 60s).
type Retry struct {
	MaxAttempts int       `yaml:"maxAttempts"`
	Backoff     *Duration `yaml:"backoff"` // 0s retries at once
	Multiplier  float64   `yaml:"multiplier"`
	MaxBackoff  Duration  `yaml:"maxBackoff"`
	Jitter      *bool     `yaml:"jitter"`
}

// apply sets the keys l sets on lc.
func (l *Lane) apply(lc *engine.LaneConfig) {
	if l.MaxInFlight != nil {
		lc.MaxInFlight = *l.MaxInFlight
	}
	if l.MaxQueued != 0 {
		lc.MaxQueued = l.MaxQueued
	}
	if l.DropPolicy != "" {
		lc.DropPolicy = engine.DropPolicy(l.DropPolicy)
	}
	if l.Paused != nil {
		lc.Paused = *l.Paused
	}
	if l.MaxDepth != 0 {
		lc.MaxDepth = l.MaxDepth
	}
	if l.Timeout != 0 {
		lc.Timeout = l.Timeout.Std()
	}
	if l.Exhausted != "" {
		lc.Exhausted = engine.Exhausted(l.Exhausted)
	}
	if l.SessionMaxQueued != 0 {
		lc.SessionMaxQueued = l.SessionMaxQueued
	}
	if l.SessionDropPolicy != "" {
		lc.SessionDropPolicy = engine.DropPolicy(l.SessionDropPolicy)
	}
	if l.Debounce != 0 {
		lc.Debounce = l.Debounce.Std()
	}
	if l.Pull != nil {
		lc.Pull = *l.Pull
	}
	if r := l.Retry; r != nil {
		if r.MaxAttempts != 0 {
			lc.Retry.MaxAttempts = r.MaxAttempts
		}
		if r.Backoff != nil {
			lc.Retry.Backoff = r.Backoff.Std()
		}
		if r.Multiplier != 0 {
			lc.Retry.Multiplier = r.Multiplier
		}
		if r.MaxBackoff != 0 {
			lc.Retry.MaxBackoff = r.MaxBackoff.Std()
		}
		if r.Jitter != nil {
			lc.Retry.Jitter = *r.Jitter
		}
	}
}

// Agent overrides the defaults for one agent.
type Agent struct {
	Weight      int               `yaml:"weight"`
	MaxInFlight int               `yaml:"maxInFlight"`
	Labels      map[string]string `yaml:"labels"` // seen by policies (plugins/ABI.md, details)
}

// Instance is a browser instance to register at start.
type Instance struct {
	ID       string            `yaml:"id"`
	URL      string            `yaml:"url"`
	Token    Secret            `yaml:"token"`
	Kind     string            `yaml:"kind"` // instance (default), pinchtab or chat
	Capacity int               `yaml:"capacity"`
	Labels   map[string]string `yaml:"labels"`
	Dialect  string            `yaml:"dialect"` // a chat instance's /chat body: generic (default) or browseros
}

// Duration is a time.Duration written as "30s", "5m", "1h30m".
type Duration time.Duration

// UnmarshalYAML reads a duration string. A value that is not one is a
// yaml.TypeError, as yaml's own for the other types, so that LoadYAML names
// its key (and reports it with the file's other type errors).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into duration", n.Line, n.ShortTag())}}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s `%s` into duration", n.Line, n.ShortTag(), n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes a duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Default returns the configuration with every default filled in.
func Default() Config {
	return Config{
		Listen:        "127.0.0.1:8080",
		ShutdownGrace: Duration(30 * time.Second),
		KeepAlive:     Duration(15 * time.Second),
		Log:           Log{Level: "info", Format: "text"},
		Store:         Store{Driver: "sqlite", Path: "./switchyard.db", Sync: "full", Schema: "switchyard"},
		Cluster:       Cluster{LeaseTTL: Duration(10 * time.Second), RenewEvery: Duration(2 * time.Second), WarmStandby: true},
		LocalInstance: LocalInstance{Enabled: true, Capacity: 4},
		API:           API{Introspection: true},
		MCP:           MCP{Enabled: true},
		Health:        Health{Interval: Duration(5 * time.Second), Timeout: Duration(2 * time.Second), UnhealthyAfter: 3},
	}
}

var unknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)

// LoadFile reads a YAML file over c. Unknown keys are errors that name the
// key and its line.
func (c *Config) LoadFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	return c.LoadYAML(data, path)
}

// LoadYAML reads a YAML document over c; source names it in errors.
// Unknown keys are errors that name the key and its line.
func (c *Config) LoadYAML(data []byte, source string) error {
	path := source
	if line, col, ok := invalidUTF8(data); !ok {
		return fmt.Errorf("config file %s: line %d, column %d: not valid UTF-8 (strings must be UTF-8; invalid bytes are refused, not replaced)", path, line, col)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) && unknownField.FindStringIndex(err.Error()) == nil {
			return fmt.Errorf("config file %s: %s", path, strings.Join(keyedTypeErrors(data, te.Errors), "; "))
		}
		msg := err.Error()
		if m := unknownField.FindAllStringSubmatch(msg, -1); m != nil {
			var keys []string
			for _, x := range m {
				line, key, section := x[1], x[2], sectionOf(x[3])
				keys = append(keys, fmt.Sprintf("line %s: unknown key %q (in %s)", line, key, section)+unknownKeyHint(key, section))
			}
			return fmt.Errorf("config file %s: %s", path, strings.Join(keys, "; "))
		}
		return fmt.Errorf("config file %s: %s", path, strings.TrimPrefix(msg, "yaml: "))
	}
	return nil
}

// graphQLSpellings are the keys of a lane and of its retry policy that the
// GraphQL API's LaneInput and RetryPolicyInput spell otherwise: the
// API's name, in its section, and the file's.
var graphQLSpellings = map[string]string{
	"lane.retryPolicy":   "retry",
	"lane.timeoutMs":     "timeout (a duration: 30s)",
	"lane.debounceMs":    "debounce (a duration: 800ms)",
	"retry.backoffMs":    "backoff (a duration: 1s)",
	"retry.maxBackoffMs": "maxBackoff (a duration: 60s)",
}

// unknownKeyHint says, for an unknown key that was once a key of the file or
// is a key of the GraphQL API, what the file calls that setting.
func unknownKeyHint(key, section string) string {
	if key == "allowRemote" {
		return ": it was replaced by auth.tokens (or, to expose the API without authentication, insecure: true)"
	}
	if name, ok := graphQLSpellings[section+"."+key]; ok {
		input := "LaneInput"
		if section == "retry" {
			input = "RetryPolicyInput"
		}
		return fmt.Sprintf(": the file spells it %s (%s is the GraphQL %s's name)", name, key, input)
	}
	return ""
}

// invalidUTF8 reports whether data is UTF-8, and if not, the line and
// column (1-based, in bytes) of the first byte that is not.
func invalidUTF8(data []byte) (line, col int, ok bool) {
	if utf8.Valid(data) {
		return 0, 0, true
	}
	line, start := 1, 0
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return line, i - start + 1, false
		}
		if r == '\n' {
			line, start = line+1, i+1
		}
		i += n
	}
	return line, 1, false
}

var typeErrorLine = regexp.MustCompile(`^line (\d+): cannot unmarshal !!\w+ ` + "`" + `(.*)` + "`" + ` into (\S+)$`)

// keyedTypeErrors names the key of each of yaml's "line 3: cannot unmarshal
// !!str `lots` into int": the key whose value is on that line.
func keyedTypeErrors(data []byte, errs []string) []string {
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e
		m := typeErrorLine.FindStringSubmatch(e)
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[1])
		if key := keyAt(&root, "", line, m[2]); key != "" {
			out[i] = fmt.Sprintf("line %s: %s: %q is not a valid %s", m[1], key, m[2], yamlTypeName(m[3]))
		}
	}
	return out
}

// keyAt returns the path of the scalar value on line whose text is value.
func keyAt(n *yaml.Node, path string, line int, value string) string {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if k := keyAt(c, path, line, value); k != "" {
				return k
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := keyAt(n.Content[i+1], joinPath(path, n.Content[i].Value), line, value); k != "" {
				return k
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if k := keyAt(c, path+"["+strconv.Itoa(i)+"]", line, value); k != "" {
				return k
			}
		}
	case yaml.ScalarNode:
		if n.Line == line && n.Value == value {
			return path
		}
	}
	return ""
}

// yamlTypeName says what a Go type of the configuration expects.
func yamlTypeName(goType string) string {
	switch goType {
	case "int", "int64", "uint64":
		return "integer"
	case "float64":
		return "number"
	case "bool":
		return "boolean (true or false)"
	case "string":
		return "string"
	case "duration":
		return "duration (e.g. 30s, 5m, 1h)"
	}
	if strings.HasPrefix(goType, "map[") {
		return "map"
	}
	if strings.HasPrefix(goType, "[]") {
		return "list"
	}
	return "value for " + goType
}

// sectionOf names the section of a Go type in the YAML file.
func sectionOf(goType string) string {
	name := goType[strings.LastIndex(goType, ".")+1:]
	switch name {
	case "Config":
		return "the top level"
	case "LocalInstance":
		return "localInstance"
	}
	return strings.ToLower(name[:1]) + name[1:]
}

// Validate checks every key and names the first one at fault.
func (c *Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen: %q is not host:port: %v", c.Listen, err)
	}
	if port == "" {
		return fmt.Errorf("listen: %q has no port", c.Listen)
	}
	authn, err := c.Authenticator()
	if err != nil {
		return err
	}
	if !authn.Enabled() && !c.Insecure && !loopback(host) {
		return fmt.Errorf("listen: %q is not a loopback address and no token is configured (auth.tokens); "+
			"configure tokens (switchyard token new), or pass --insecure (insecure: true, SWITCHYARD_INSECURE=true) to let anyone who reaches it use the API", c.Listen)
	}
	for i, o := range c.API.AllowedOrigins {
		if _, err := path.Match(o, ""); err != nil || strings.TrimSpace(o) == "" {
			return fmt.Errorf("api.allowedOrigins[%d]: %q is not a host pattern (dash.example.com, *.example.com, https://tools.example.com)", i, o)
		}
	}
	if c.ShutdownGrace < 0 {
		return errors.New("shutdownGrace: must not be negative")
	}
	if c.Limits.BodyTimeout < 0 {
		return errors.New("limits.bodyTimeout: must not be negative")
	}
	if c.KeepAlive < Duration(time.Second) {
		return fmt.Errorf("keepAlive: must be at least 1s, got %s", c.KeepAlive.Std())
	}
	switch c.Log.Level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("log.level: %q is not one of trace, debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("log.format: %q is neither text nor json", c.Log.Format)
	}
	switch c.Store.Driver {
	case "memory":
	case "sqlite":
		if c.Store.Path == "" {
			return errors.New("store.path: the SQLite file is required")
		}
		if c.Store.Sync != "full" && c.Store.Sync != "normal" {
			return fmt.Errorf("store.sync: %q is neither full nor normal", c.Store.Sync)
		}
	case "postgres":
		if c.Store.URL == "" {
			return errors.New("store.url: the PostgreSQL connection string is required")
		}
		if c.Store.Schema == "" {
			return errors.New("store.schema: the PostgreSQL schema is required")
		}
		if c.Cluster.RenewEvery <= 0 || c.Cluster.LeaseTTL < 3*c.Cluster.RenewEvery {
			return fmt.Errorf("cluster.leaseTTL (%s) must be at least three times cluster.renewEvery (%s), which must be positive",
				c.Cluster.LeaseTTL.Std(), c.Cluster.RenewEvery.Std())
		}
	default:
		return fmt.Errorf("store.driver: %q is not a store (sqlite, memory or postgres)", c.Store.Driver)
	}
	if c.Plugins.MaxWasmBytes < 0 || c.Plugins.MemoryPages < 0 {
		return errors.New("plugins.maxWasmBytes and plugins.memoryPages: must not be negative")
	}
	p := c.Plugins
	for _, k := range []struct {
		key      string
		negative bool
	}{
		{"decisionFuel", p.DecisionFuel < 0}, {"decisionCPU", p.DecisionCPU < 0}, {"deadline", p.Deadline < 0},
		{"breakerThreshold", p.BreakerThreshold < 0}, {"breakerStall", p.BreakerStall < 0},
		{"quarantineBase", p.QuarantineBase < 0}, {"quarantineMax", p.QuarantineMax < 0},
		{"probation", p.Probation < 0}, {"logLinesPerSecond", p.LogLinesPerSecond < 0},
	} {
		if k.negative {
			return fmt.Errorf("plugins.%s: must not be negative (0 means the default)", k.key)
		}
	}
	if p.DecisionCPU != 0 && p.DecisionCPU.Std() < 100*time.Microsecond {
		return fmt.Errorf("plugins.decisionCPU: must be at least 100µs (0 means the default, 2.5ms), got %s", p.DecisionCPU.Std())
	}
	if p.Deadline != 0 && p.Deadline.Std() < time.Millisecond {
		return fmt.Errorf("plugins.deadline: must be at least 1ms (0 means the default, 10ms), got %s", p.Deadline.Std())
	}
	if c.Plugins.MemoryPages != 0 && (c.Plugins.MemoryPages < 64 || c.Plugins.MemoryPages > 65536) {
		return fmt.Errorf("plugins.memoryPages: must be within 64..65536 (a Go guest needs about 40 pages to start), got %d", c.Plugins.MemoryPages)
	}
	if _, err := c.WebhookNetworks(); err != nil {
		return err
	}
	if _, err := c.HeartbeatNetworks(); err != nil {
		return err
	}
	if c.Heartbeats.MaxChecks < 0 || c.Heartbeats.Concurrency < 0 {
		return errors.New("heartbeats.maxChecks and heartbeats.concurrency: must not be negative")
	}
	if c.Webhooks.Timeout < 0 || c.Webhooks.MaxAttempts < 0 {
		return errors.New("webhooks.timeout and webhooks.maxAttempts: must not be negative")
	}
	for i, ep := range c.Webhooks.Endpoints {
		if ep.Prefix == "" || engine.ValidateWebhookURL(ep.Prefix) != nil {
			return fmt.Errorf("webhooks.endpoints[%d].prefix: %q is not an http(s) URL prefix", i, ep.Prefix)
		}
		if ep.Secret == "" && ep.Format == "" {
			return fmt.Errorf("webhooks.endpoints[%d].secret: is required (unless the endpoint sets a format)", i)
		}
		if f := webhook.Format(ep.Format); f != "" && f != webhook.FormatSwitchyard && f != webhook.FormatBrowserOS {
			return fmt.Errorf("webhooks.endpoints[%d].format: %q is neither %q nor %q", i, ep.Format, webhook.FormatSwitchyard, webhook.FormatBrowserOS)
		}
	}
	if c.LocalInstance.Capacity < 1 {
		return fmt.Errorf("localInstance.capacity: must be at least 1, got %d", c.LocalInstance.Capacity)
	}
	for name, v := range map[string]int{
		"limits.maxComplexity": c.Limits.MaxComplexity, "limits.maxDepth": c.Limits.MaxDepth,
		"limits.maxBodyBytes": c.Limits.MaxBodyBytes, "limits.maxWebSocketPayloadBytes": c.Limits.MaxWebSocketPayloadBytes,
		"limits.maxSubscriberLag": c.Limits.MaxSubscriberLag, "health.unhealthyAfter": c.Health.UnhealthyAfter,
		"limits.maxSubscriptionsPerConnection": c.Limits.MaxSubscriptionsPerConnection, "limits.mutationBurst": c.Limits.MutationBurst,
	} {
		if v < 0 {
			return fmt.Errorf("%s: must not be negative, got %d", name, v)
		}
	}
	if c.Health.Interval < Duration(100*time.Millisecond) || c.Health.Timeout <= 0 {
		return errors.New("health.interval and health.timeout: the interval must be at least 100ms and the timeout positive")
	}
	ec, err := c.EngineConfig()
	if err != nil {
		return err
	}
	grace := c.Executor.AbortGrace.Std()
	if grace == 0 {
		grace = executor.DefaultAbortGrace
	}
	if grace >= ec.LeaseGrace {
		// A cancelled attempt holds its slot for up to the abort grace; the
		// engine frees the slot when the lease ends, leaseGrace after the
		// cancel, and would start the task again while the instance runs it.
		return fmt.Errorf("executor.abortGrace (%s) must be shorter than engine.leaseGrace (%s): a cancelled attempt could outlive its lease, and the task run twice at once",
			grace, ec.LeaseGrace)
	}
	if c.MCP.MaxSessions < 0 {
		return fmt.Errorf("mcp.maxSessions: %d is negative (0: the default, 1000)", c.MCP.MaxSessions)
	}
	if c.MCP.Lane != "" && !slices.ContainsFunc(ec.Lanes, func(l engine.LaneConfig) bool { return l.Name == c.MCP.Lane }) {
		return fmt.Errorf("mcp.lane: %q is not a lane (engine.lanes)", c.MCP.Lane)
	}
	seen := map[string]bool{}
	for i, in := range c.Instances {
		ic, err := in.executorConfig()
		if err == nil {
			err = ic.Validate()
		}
		if err != nil {
			field, msg, ok := strings.Cut(strings.SplitN(err.Error(), "\n", 2)[0], ": ")
			if !ok {
				return fmt.Errorf("instances[%d]: %v", i, err)
			}
			return fmt.Errorf("instances[%d].%s: %s", i, field, msg)
		}
		if u, err := url.Parse(in.URL); err == nil && u.User != nil {
			return fmt.Errorf("instances[%d].url: must not carry credentials (user:password@): put them in token", i)
		}
		if seen[in.ID] {
			return fmt.Errorf("instances[%d].id: %q is used twice", i, in.ID)
		}
		if in.ID == LocalInstanceID && c.LocalInstance.Enabled {
			return fmt.Errorf("instances[%d].id: %q is the local instance's id", i, in.ID)
		}
		seen[in.ID] = true
	}
	return nil
}

// LocalInstanceID is the id of the built-in instance `serve` starts.
const LocalInstanceID = "local"

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EngineConfig returns the engine's configuration, validated (defaults
// filled in), with errors that name the key under engine.
func (c *Config) EngineConfig() (engine.Config, error) {
	e := c.Engine
	if e.Retention == 0 && c.Store.Driver != "memory" {
		e.Retention = Duration(30 * 24 * time.Hour) // with a database, terminal tasks are kept a month
	}
	ec := engine.Config{
		MaxInFlight: e.MaxInFlight, MaxQueued: e.MaxQueued, MaxQueuedPerAgent: e.MaxQueuedPerAgent,
		MaxQueuedPerSession: e.MaxQueuedPerSession, AgentMaxInFlight: e.AgentMaxInFlight, SessionMaxInFlight: e.SessionMaxInFlight,
		AgingThreshold: e.AgingThreshold.Std(), LeaseGrace: e.LeaseGrace.Std(), Retention: e.Retention.Std(),
		EventBuffer: e.EventBuffer, FairnessCandidates: e.FairnessCandidates, MaxBatch: e.MaxBatch,
		InstanceFaultBudget: e.InstanceFaultBudget, InstanceFaultDelay: e.InstanceFaultDelay.Std(), CommitTimeout: e.CommitTimeout.Std(),
		ChatTimeout: e.ChatTimeout.Std(), ChatMaxTimeout: e.ChatMaxTimeout.Std(),
	}
	lanes, err := mergeLanes(e.Lanes)
	if err != nil {
		return ec, err
	}
	ec.Lanes = lanes
	lanes, err = engine.ApplyLaneEnv(ec.Lanes, c.environ)
	if err != nil {
		return ec, err // names the variable
	}
	ec.Lanes = lanes
	if len(c.Agents) > 0 {
		ec.Agents = make(map[string]engine.AgentConfig, len(c.Agents))
		for id, a := range c.Agents {
			ec.Agents[id] = engine.AgentConfig{Weight: a.Weight, MaxInFlight: a.MaxInFlight, Labels: a.Labels}
		}
	}
	if err := ec.Validate(); err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, "agents.") {
			return ec, errors.New(msg)
		}
		if strings.HasPrefix(msg, "lanes[") {
			// "lanes[1]: dropPolicy: …" names the key engine.lanes[1].dropPolicy,
			// with the index of the lane in the file (the merged list has
			// the default lanes first); a lane from the environment only is
			// named by its variable.
			if lane, rest, ok := strings.Cut(msg, ": "); ok {
				var i int
				if _, err := fmt.Sscanf(lane, "lanes[%d]", &i); err == nil && i < len(ec.Lanes) {
					name := ec.Lanes[i].Name
					if fi := slices.IndexFunc(e.Lanes, func(l Lane) bool { return l.Name == name }); fi >= 0 {
						lane = fmt.Sprintf("lanes[%d]", fi)
					} else {
						return ec, fmt.Errorf("%s%s: %s", engine.LaneEnvPrefix, strings.ToUpper(name), rest)
					}
				}
				if field, why, ok := strings.Cut(rest, ": "); ok && !strings.ContainsAny(field, " \"") {
					msg = lane + "." + field + ": " + why
				}
			}
		}
		return ec, errors.New("engine." + msg)
	}
	return ec, nil
}

// mergeLanes applies the file's lanes to the default lanes, by name.
func mergeLanes(file []Lane) ([]engine.LaneConfig, error) {
	lanes := engine.DefaultLanes()
	seen := map[string]bool{}
	for i := range file {
		l := &file[i]
		if seen[l.Name] {
			return nil, fmt.Errorf("engine.lanes[%d].name: lane %q is given twice", i, l.Name)
		}
		seen[l.Name] = true
		at := slices.IndexFunc(lanes, func(lc engine.LaneConfig) bool { return lc.Name == l.Name })
		switch {
		case l.Remove && at < 0:
			return nil, fmt.Errorf("engine.lanes[%d].remove: there is no lane %q to remove", i, l.Name)
		case l.Remove:
			lanes = slices.Delete(lanes, at, at+1)
		case at >= 0:
			l.apply(&lanes[at])
		default:
			lc := engine.NewLane(l.Name)
			l.apply(&lc)
			lanes = append(lanes, lc)
		}
	}
	if len(lanes) == 0 {
		return nil, errors.New("engine.lanes: every lane is removed; keep at least one")
	}
	return lanes, nil
}

// WebhookNetworks parses webhooks.allowNetworks.
func (c *Config) WebhookNetworks() ([]netip.Prefix, error) {
	return parseNetworks("webhooks.allowNetworks", c.Webhooks.AllowNetworks)
}

// HeartbeatNetworks parses heartbeats.allowNetworks.
func (c *Config) HeartbeatNetworks() ([]netip.Prefix, error) {
	return parseNetworks("heartbeats.allowNetworks", c.Heartbeats.AllowNetworks)
}

func parseNetworks(key string, cidrs []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %q is not a CIDR (e.g. 10.0.0.0/8): %v", key, i, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// APILimits returns the API's limits.
func (c *Config) APILimits() resolvers.Limits {
	l := c.Limits
	return resolvers.Limits{MaxComplexity: l.MaxComplexity, MaxDepth: l.MaxDepth, MaxBodyBytes: l.MaxBodyBytes,
		MaxWebSocketPayloadBytes: l.MaxWebSocketPayloadBytes, MaxSubscriberLag: l.MaxSubscriberLag,
		MaxSubscriptionsPerConnection: l.MaxSubscriptionsPerConnection, MutationsPerSecond: l.MutationsPerSecond,
		MutationBurst: l.MutationBurst, BodyTimeout: l.BodyTimeout.Std()}.WithDefaults()
}

// Authenticator returns the authenticator of auth.tokens and
// auth.adminTokenHash; without either, it is disabled. Errors name the key.
func (c *Config) Authenticator() (*auth.Authenticator, error) {
	var tokens []auth.Token
	for i, t := range c.Auth.Tokens {
		role, err := auth.ParseRole(t.Role)
		if err != nil {
			return nil, fmt.Errorf("auth.tokens[%d].role: %v", i, err)
		}
		if t.Name == AdminTokenName && c.Auth.AdminTokenHash != "" {
			return nil, fmt.Errorf("auth.tokens[%d].name: %q is the name of auth.adminTokenHash's token", i, t.Name)
		}
		tokens = append(tokens, auth.Token{Name: t.Name, Hash: t.Hash, Role: role, AgentID: t.AgentID, Lanes: t.Lanes})
	}
	if h := c.Auth.AdminTokenHash; h != "" {
		if _, err := auth.ParseHash(h); err != nil {
			return nil, fmt.Errorf("auth.adminTokenHash: %v", err)
		}
		tokens = append(tokens, auth.Token{Name: AdminTokenName, Hash: h, Role: auth.RoleAdmin})
	}
	a, err := auth.NewAuthenticator(tokens)
	if err != nil {
		return nil, fmt.Errorf("auth.%w", err)
	}
	return a, nil
}

// InstanceConfigs returns the instances to register at start.
func (c *Config) InstanceConfigs() ([]executor.InstanceConfig, error) {
	out := make([]executor.InstanceConfig, 0, len(c.Instances))
	for i, in := range c.Instances {
		ic, err := in.executorConfig()
		if err != nil {
			return nil, fmt.Errorf("instances[%d]: %w", i, err)
		}
		out = append(out, ic)
	}
	return out, nil
}

func (in Instance) executorConfig() (executor.InstanceConfig, error) {
	kind, err := executor.ParseKind(in.Kind)
	if err != nil {
		return executor.InstanceConfig{}, fmt.Errorf("kind: %w", err)
	}
	dialect, err := executor.ParseDialect(in.Dialect)
	if err != nil {
		return executor.InstanceConfig{}, fmt.Errorf("dialect: %w", err)
	}
	return executor.InstanceConfig{ID: in.ID, URL: in.URL, Token: in.Token.Reveal(), Kind: kind, Capacity: in.Capacity, Labels: in.Labels, Dialect: dialect}, nil
}
