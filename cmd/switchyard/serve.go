// `switchyard serve`: the scheduler, its GraphQL API and, by default, a
// local headless Chromium instance to run tasks on.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/cmd/switchyard/internal/config"
	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/engine/store/memory"
	"github.com/switchyard/switchyard/engine/store/postgres"
	"github.com/switchyard/switchyard/engine/store/sqlite"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/executor/artifact"
	"github.com/switchyard/switchyard/executor/chromium"
	"github.com/switchyard/switchyard/graph/auth"
	"github.com/switchyard/switchyard/graph/metrics"
	"github.com/switchyard/switchyard/graph/server"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/cluster"
	"github.com/switchyard/switchyard/internal/netguard"
	"github.com/switchyard/switchyard/internal/savedinstances"
	"github.com/switchyard/switchyard/plugins/builtin"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
	"github.com/switchyard/switchyard/pull"
	"github.com/switchyard/switchyard/schedule"
	"github.com/switchyard/switchyard/webhook"
)

// loadConfig reads the configuration: defaults, the file, the environment,
// then the flags that were given; and validates it.
func loadConfig(args []string, stderr io.Writer) (config.Config, []string, error) {
	cfg := config.Default()
	fs := newFlags("serve", "[flags]", stderr)
	file := fs.String("config", os.Getenv("SWITCHYARD_CONFIG"), "a YAML configuration file (default $SWITCHYARD_CONFIG)")
	listen := fs.String("listen", cfg.Listen, "the HTTP address of the API")
	logLevel := fs.String("log-level", cfg.Log.Level, "trace, debug, info, warn or error")
	logFormat := fs.String("log-format", cfg.Log.Format, "text or json")
	store := fs.String("store", cfg.Store.Driver, "the store: sqlite (durable, one file), memory (ephemeral) or postgres")
	dbPath := fs.String("db", cfg.Store.Path, "the SQLite file")
	nodeID := fs.String("node-id", cfg.Cluster.NodeID, "with --store postgres: this node's id in the cluster (default: host name and listen port)")
	dbURL := fs.String("database-url", "", "the PostgreSQL connection string (with --store postgres; default store.url)")
	nativePolicies := fs.Bool("native-policies", false, "run the built-in policies natively instead of as WebAssembly")
	noLocal := fs.Bool("no-local-instance", false, "do not start the built-in Chromium instance")
	artifacts := fs.String("artifacts-dir", "", "keep artifacts (screenshots, PDFs) in this directory (default: in memory)")
	grace := fs.Duration("shutdown-grace", cfg.ShutdownGrace.Std(), "how long running tasks get to finish at shutdown")
	insecure := fs.Bool("insecure", false, "allow listening beyond loopback without authentication (no auth.tokens): anyone who reaches the port controls the scheduler")
	if err := parseFlags(fs, args); err != nil {
		return cfg, nil, err
	}
	if *file != "" {
		if err := cfg.LoadFile(*file); err != nil {
			return cfg, nil, err
		}
	}
	warnings, err := cfg.ApplyEnv(os.Environ())
	if err != nil {
		return cfg, nil, err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "log-level":
			cfg.Log.Level = *logLevel
		case "log-format":
			cfg.Log.Format = *logFormat
		case "store":
			cfg.Store.Driver = *store
		case "db":
			cfg.Store.Path = *dbPath
		case "node-id":
			cfg.Cluster.NodeID = *nodeID
		case "database-url":
			cfg.Store.URL = config.Secret(*dbURL)
		case "native-policies":
			cfg.Plugins.Native = *nativePolicies
		case "no-local-instance":
			cfg.LocalInstance.Enabled = !*noLocal
		case "artifacts-dir":
			cfg.Artifacts.Dir = *artifacts
		case "shutdown-grace":
			cfg.ShutdownGrace = config.Duration(*grace)
		case "insecure":
			cfg.Insecure = *insecure
		}
	})
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, warnings, nil
}

// openStore opens the store the configuration names; owner says who holds a
// SQLite file, for a second process that is refused it.
func openStore(ctx context.Context, c config.Store, owner string) (engine.Store, error) {
	switch c.Driver {
	case "memory":
		return memory.New(memory.Options{}), nil
	case "sqlite":
		sync := sqlite.SyncFull
		if c.Sync == "normal" {
			sync = sqlite.SyncNormal
		}
		// The log written out at open: commits rewrite its blocks rather
		// than grow the file (doc/adr/0005-durable-write-path.md, finding 16).
		s, err := sqlite.Open(ctx, sqlite.Options{Path: c.Path, Sync: sync, Owner: owner, PreallocateWAL: true})
		if errors.Is(err, sqlite.ErrInUse) {
			return nil, fmt.Errorf("store (sqlite %s): %w, or give this server a database file of its own (--db)", c.Path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("store (sqlite %s): %w", c.Path, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("store.driver: %q is not available in this build", c.Driver)
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return serve(ctx, args, stdout, stderr, nil)
}

// serve runs `switchyard serve`. It listens first — a taken port fails at
// once, /healthz answers and /readyz says what is still starting — then
// opens the store (a SQLite file in use is refused before anything starts),
// starts the browser, the engine and the policies, and hands
// the port to the API. onStep, when set, is called as each slow step starts
// (for tests).
func serve(ctx context.Context, args []string, stdout, stderr io.Writer, onStep func(step string)) error {
	cfg, warnings, err := loadConfig(args, stderr)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log.Level, cfg.Log.Format, stderr)
	for _, w := range warnings {
		log.Warn(w)
	}
	engCfg, err := cfg.EngineConfig()
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another server using it? --listen chooses another address)", cfg.Listen, err)
	}
	url := "http://" + ln.Addr().String()
	st := newStartup(log, onStep)
	httpSrv := httpServer(st, log)
	defer httpSrv.Close() // on a failed start; a stop shuts it down first
	served := make(chan error, 1)
	go func() { served <- httpSrv.Serve(ln) }()
	log.Info("listening; starting up", "address", ln.Addr().String(), "healthz", url+"/healthz", "readyz", url+"/readyz")

	reg := executor.NewRegistry(executor.RegistryOptions{Logger: log, HealthInterval: cfg.Health.Interval.Std(),
		HealthTimeout: cfg.Health.Timeout.Std(), UnhealthyAfter: cfg.Health.UnhealthyAfter})
	defer reg.Close()

	// The store is opened (its file locked) before the browser starts, so
	// that a second server on a file in use is refused before it launches
	// anything; a cluster node opens its PostgreSQL store in startNode.
	var store engine.Store
	if cfg.Store.Driver != "postgres" {
		st.enter(stepStore)
		if store, err = openStore(ctx, cfg.Store, "switchyard serve "+Version()+", listening on "+ln.Addr().String()); err != nil {
			return err
		}
		defer store.Close()
		if owned, _ := store.(*sqlite.Store); owned != nil {
			for _, f := range owned.Repaired() {
				log.Warn("repaired the database at open", "file", owned.Path(), "problem", f.Problem, "change", f.Repair)
			}
		}
	}

	local, err := startLocalInstance(ctx, cfg.LocalInstance, cfg.Executor.IdleTabTimeout.Std(), reg, st, log)
	if err != nil {
		return err
	}
	if local != nil {
		defer local.Close()
	}
	instances, err := cfg.InstanceConfigs()
	if err != nil {
		return err
	}
	for _, ic := range instances {
		if _, err := reg.Register(ctx, ic); err != nil {
			return fmt.Errorf("instances: %w", err)
		}
	}

	var arts artifact.Store = artifact.NewMemory()
	if cfg.Artifacts.Dir != "" {
		if arts, err = artifact.NewDir(cfg.Artifacts.Dir); err != nil {
			return fmt.Errorf("artifacts.dir: %w", err)
		}
	}
	exec, err := executor.New(executor.Options{Registry: reg, Artifacts: arts, Logger: log,
		IdleTabTimeout: cfg.Executor.IdleTabTimeout.Std(), MaxIdleTabs: cfg.Executor.MaxIdleTabs, AbortGrace: cfg.Executor.AbortGrace.Std(),
		MaxReplayActions: cfg.Executor.MaxReplayActions, MaxReplayBytes: cfg.Executor.MaxReplayBytes})
	if err != nil {
		return err
	}
	defer exec.Close()

	var (
		backend server.Options // Engine, Registry, Plugins, Schedules, Cluster, Metrics
		// stopping is set as the server begins to stop: /readyz answers
		// 503 from then on.
		stopping atomic.Bool
		shutdown func(ctx context.Context)
		commits  func() error // nil while the scheduling engine's commits succeed
		// nodeReady, in a cluster, is nil while the node can serve (Node.Ready).
		nodeReady func() error
		lanes     func() int // how many lanes are live, stored ones included
	)
	if cfg.Store.Driver == "postgres" {
		st.enter(stepStore)
		node, stop, closeStore, err := startNode(cfg, engCfg, exec, reg, st, log)
		if err != nil {
			return err
		}
		// The store closes after the API: the requests still in flight
		// when the node stops (a call a follower passed to the leader,
		// waiting for its answer) finish with it open.
		defer closeStore()
		backend = server.Options{Engine: node.API(), Registry: node.Instances(), Plugins: node.Plugins(),
			Schedules: node.Schedules(), Pull: node.Pull(), Heartbeats: node.Heartbeats(), Cluster: node, Metrics: &metrics.Source{
				// A scrape carries no context: the sources are bound to the
				// server's. Each answers from what this node knows, without
				// asking the leader: a scrape must not wait through a
				// failover, or on a leader that does not answer (the
				// plugins are the leader's last report of them on a
				// follower: cluster.Node.KnownPlugins).
				Stats:     func() engine.Stats { return node.Engine().Stats(ctx) },
				Lanes:     func() []engine.LaneStatus { return node.Engine().Lanes(ctx) },
				Instances: func() []executor.Instance { return reg.List(ctx) },
				Plugins:   func() []manager.Info { return node.KnownPlugins(ctx) }}}
		shutdown = stop
		lanes = func() int { // a follower knows the configured lanes only
			if e := node.Engine(); e != nil {
				return len(e.Lanes(ctx))
			}
			return len(engCfg.Lanes)
		}
		commits = func() error { // a follower commits nothing: nil
			if e := node.Engine(); e != nil {
				return e.CommitError()
			}
			return nil
		}
		// A node is ready while it writes its heartbeats; a follower
		// while, besides, the cluster has a leader that commits to
		// answer its calls.
		nodeReady = node.Ready
	} else {
		eng, err := engine.New(engine.Options{Config: engCfg, Store: store, Executor: exec, Logger: log, TabLocator: reg, PlaceOnInstances: true})
		if err != nil {
			return err
		}
		// Opened, not started: the stored policy choices are in force
		// (startLeading's plugins) before the engine decides the attempts a
		// stop interrupted, dispatches or leases anything.
		if err := eng.Open(ctx); err != nil {
			return err
		}
		lead, err := startLeading(ctx, eng, func() error {
			if err := eng.Start(ctx); err != nil {
				return err
			}
			savedinstances.Restore(eng, reg, log.Warn) // those registered through the API before
			reg.SetSink(eng)
			return nil
		}, cfg, nil, st, log)
		if err != nil {
			return err
		}
		backend = server.Options{Engine: eng, Registry: savedinstances.Registry{Registry: reg, Settings: eng},
			Plugins: lead.Plugins, Schedules: lead.Schedules, Pull: lead.Pull, Heartbeats: lead.Heartbeats}
		commits = eng.CommitError
		lanes = func() int { return len(eng.Lanes(ctx)) }
		shutdown = func(ctx context.Context) {
			lead.Stop() // the components that act on the engine stop before it
			if err := eng.Shutdown(ctx); err != nil {
				log.Error("engine shutdown", "error", err)
			}
			lead.Release() // and the plugins it calls, after it
		}
	}

	st.enter(stepAPI)
	authn, err := cfg.Authenticator()
	if err != nil {
		return err
	}
	logSecurity(log, cfg, authn)
	hookNets, err := cfg.WebhookNetworks()
	if err != nil {
		return err
	}
	srv, err := server.New(server.Options{
		Engine: backend.Engine, Registry: backend.Registry, Plugins: backend.Plugins, Schedules: backend.Schedules, Heartbeats: backend.Heartbeats,
		Pull: backend.Pull, Cluster: backend.Cluster, Metrics: backend.Metrics, Address: advertised(cfg),
		Artifacts: arts, Logger: log, Version: Version(), Limits: cfg.APILimits(), KeepAlive: cfg.KeepAlive.Std(),
		Auth: authn, AllowedOrigins: cfg.API.AllowedOrigins, DisableIntrospection: !cfg.API.Introspection,
		MCP:          server.MCPOptions{Disabled: !cfg.MCP.Enabled, Lane: cfg.MCP.Lane, MaxSessions: cfg.MCP.MaxSessions},
		WebhookGuard: webhook.Guard(webhook.Options{AllowPrivate: cfg.Webhooks.AllowPrivate, AllowNetworks: hookNets}),
		Ready: func() error {
			if stopping.Load() {
				return errStopping
			}
			if err := commits(); err != nil {
				return fmt.Errorf("the store: %w", err)
			}
			if nodeReady != nil {
				if err := nodeReady(); err != nil {
					return err
				}
			}
			if local == nil {
				return nil
			}
			in, ok := reg.Get(ctx, config.LocalInstanceID)
			if !ok || in.Health != executor.HealthHealthy {
				return errors.New("the local browser instance is not healthy yet")
			}
			return nil
		},
	})
	if err != nil {
		return err
	}
	st.ready(srv.Handler())
	ready := []any{"version", Version(), "playground", url + "/", "dashboard", url + "/dashboard/", "graphql", url + "/graphql"}
	banner := fmt.Sprintf("Switchyard %s: playground at %s/ , dashboard at %s/dashboard/ , GraphQL at %s/graphql", Version(), url, url, url)
	if cfg.MCP.Enabled {
		ready = append(ready, "mcp", url+"/mcp")
		banner += fmt.Sprintf(" , MCP at %s/mcp", url)
	}
	log.Info("switchyard ready", append(ready, "store", cfg.Store.Driver, "lanes", lanes())...)
	fmt.Fprintln(stdout, banner)

	select {
	case err := <-served:
		stopping.Store(true)
		shutdown(context.Background())
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	// Not ready from now on (readyz answers 503 "stopping", on a leader as
	// on a follower), so that load balancers send nothing new here while
	// the rest runs. Drain: refuse new work, let running tasks finish
	// within the grace period, cancel the rest; then close the API, once
	// the requests in flight are answered. A cluster's leader resigns
	// last, so that another node takes over at once.
	stopping.Store(true)
	log.Info("shutting down: draining", "grace", cfg.ShutdownGrace.Std())
	gctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace.Std())
	defer cancel()
	shutdown(gctx)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) { // the streams, the resolvers
		log.Error("http shutdown", "error", err)
	}
	if err := httpSrv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("http shutdown", "error", err)
	}
	log.Info("stopped")
	return nil
}

// errStopping is /readyz's answer once the server has begun to stop.
var errStopping = errors.New("stopping: the server is shutting down")

// logSecurity says how the API is protected: loudly when it is not.
func logSecurity(log hclog.Logger, cfg config.Config, authn *auth.Authenticator) {
	if !authn.Enabled() {
		host, _, _ := net.SplitHostPort(cfg.Listen)
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			log.Warn("INSECURE: the API has no authentication and listens beyond loopback (--insecure): anyone who reaches " +
				cfg.Listen + " can submit and cancel work, change lanes, register instances and load plugins; configure auth.tokens")
			return
		}
		log.Info("authentication is off: no token is configured, so the API listens on loopback only (switchyard token new makes one)")
		return
	}
	counts := map[auth.Role]int{}
	for _, id := range authn.Identities() {
		counts[id.Role]++
	}
	var roles []string // "admin=1 agent=2": not Go's map syntax
	for _, r := range auth.Roles() {
		if n := counts[r]; n > 0 {
			roles = append(roles, fmt.Sprintf("%s=%d", r, n))
		}
	}
	log.Info("authentication is on", "tokens", len(authn.Identities()), "roles", strings.Join(roles, " "), "introspection", cfg.API.Introspection,
		"allowedOrigins", cfg.API.AllowedOrigins)
}

// startLeading starts what acts on the engine of the node that schedules:
// the policy plugins, with the choices the store keeps, on the opened
// engine; then start, which starts the engine (its recovery decides the
// attempts a stop or a leader change interrupted, under those policies);
// then the schedules, the webhooks and the pull lanes' leases.
func startLeading(ctx context.Context, eng *engine.Engine, start func() error, cfg config.Config, ph *policyHost, st *startup, log hclog.Logger) (*cluster.Leadership, error) {
	plugins, err := startPlugins(ctx, eng, cfg.Plugins, ph, st, log)
	if err != nil {
		return nil, err
	}
	if err := start(); err != nil {
		_ = plugins.Close(context.Background())
		return nil, err
	}
	sched := schedule.New(eng, clock.Real{}, log)
	if err := sched.Start(ctx); err != nil {
		_ = plugins.Close(context.Background())
		return nil, err
	}
	hooks, err := newWebhooks(eng, cfg, log)
	if err != nil {
		sched.Stop()
		_ = plugins.Close(context.Background())
		return nil, err
	}
	checks, err := newHeartbeats(eng, hooks, cfg, log)
	if err == nil {
		err = checks.Start(ctx)
	}
	if err != nil {
		sched.Stop()
		_ = plugins.Close(context.Background())
		return nil, err
	}
	workers, err := pull.New(ctx, pull.Options{Engine: eng, Logger: log})
	if err != nil {
		checks.Stop()
		sched.Stop()
		_ = plugins.Close(context.Background())
		return nil, err
	}
	hctx, stopHooks := context.WithCancel(context.Background())
	hooksDone := make(chan struct{})
	go func() { hooks.Run(hctx); close(hooksDone) }()
	var once sync.Once
	return &cluster.Leadership{Plugins: plugins, Schedules: sched, Pull: workers, Heartbeats: checks, Stop: func() {
		once.Do(func() {
			workers.Close() // waiting workers are answered at once
			sched.Stop()
			checks.Stop()
			stopHooks()
			<-hooksDone
		})
	}, Release: func() {
		// The engine calls its plugins until it stops: they close after it.
		_ = plugins.Close(context.Background())
	}}, nil
}

// newHeartbeats returns the heartbeat checker of the configuration: its
// probes pass the SSRF guard with the heartbeats section's allowances, and
// its state changes go out through the webhook deliverer.
func newHeartbeats(eng *engine.Engine, hooks *webhook.Deliverer, cfg config.Config, log hclog.Logger) (*heartbeat.Checker, error) {
	nets, err := cfg.HeartbeatNetworks()
	if err != nil {
		return nil, err
	}
	guard := &netguard.Guard{AllowPrivate: cfg.Heartbeats.AllowPrivate, AllowNetworks: nets, What: "heartbeat check",
		Settings: "heartbeats.allowPrivate or list its network in heartbeats.allowNetworks"}
	return heartbeat.New(eng, heartbeat.Options{Guard: guard, Webhooks: hooks, MaxChecks: cfg.Heartbeats.MaxChecks,
		Concurrency: cfg.Heartbeats.Concurrency, Logger: log}), nil
}

// startNode joins the cluster of the PostgreSQL store as a follower; it
// leads when elected. stop drains the node (a leader's running tasks get
// until its ctx ends) and resigns; closeStore, called after stop, closes
// the store. The node runs until stop, not until a signal: a leader drains
// before it lets another lead.
func startNode(cfg config.Config, engCfg engine.Config, exec *executor.Executor, reg *executor.Registry,
	st *startup, log hclog.Logger) (node *cluster.Node, stop func(context.Context), closeStore func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	store, err := postgres.Open(ctx, postgres.Options{URL: cfg.Store.URL.Reveal(), Schema: cfg.Store.Schema, Logger: log})
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("store (postgres): %w", err)
	}
	var ph *policyHost // nil: each leadership makes its own plugin host
	if cfg.Cluster.WarmStandby {
		if ph, err = newPolicyHost(cfg.Plugins, log); err != nil {
			cancel()
			_ = store.Close()
			return nil, nil, nil, err
		}
	}
	id := cfg.Cluster.NodeID
	if id == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(cfg.Listen)
		id = host + ":" + port
	}
	node, err = cluster.New(cluster.Options{
		Node: id, Address: advertised(cfg), Version: Version(), Store: store, Registry: reg, Logger: log,
		TTL: cfg.Cluster.LeaseTTL.Std(), RenewEvery: cfg.Cluster.RenewEvery.Std(), MaxWasmBytes: cfg.Plugins.MaxWasmBytes,
		NewEngine: func(events *engine.EventLog) (*engine.Engine, error) {
			return engine.New(engine.Options{Config: engCfg, Store: store, Executor: exec, Logger: log, TabLocator: reg, PlaceOnInstances: true, Events: events})
		},
		Lead: func(ctx context.Context, e *engine.Engine, start func() error) (*cluster.Leadership, error) {
			return startLeading(ctx, e, start, cfg, ph, st, log)
		},
	})
	if err == nil {
		err = node.Start(ctx)
	}
	if err != nil {
		ph.close()
		cancel()
		_ = store.Close()
		return nil, nil, nil, err
	}
	log.Info("cluster node started; campaigning for the lead", "node", id, "schema", cfg.Store.Schema)
	go ph.warm(ctx, log)
	return node, func(gctx context.Context) {
			node.Stop(gctx)
			cancel()
			ph.close()
		}, func() {
			cancel()
			_ = store.Close()
		}, nil
}

// advertised is where this server's API is reached.
func advertised(cfg config.Config) string {
	if cfg.Cluster.Advertise != "" {
		return cfg.Cluster.Advertise
	}
	return cfg.Listen
}

// hostConfig is the plugin host's configuration, its events going to
// onEvent.
func hostConfig(c config.Plugins, log hclog.Logger, onEvent func(host.Event)) host.Config {
	return host.Config{CacheDir: c.CacheDir, MemoryLimitPages: uint32(c.MemoryPages),
		DecisionFuel: c.DecisionFuel, DecisionCPU: c.DecisionCPU.Std(), Deadline: c.Deadline.Std(), BreakerThreshold: c.BreakerThreshold, BreakerStall: c.BreakerStall.Std(),
		FuelSetting: "plugins.decisionFuel (SWITCHYARD_PLUGINS_DECISION_FUEL)", CPUSetting: "plugins.decisionCPU (SWITCHYARD_PLUGINS_DECISION_CPU)",
		QuarantineBase: c.QuarantineBase.Std(), QuarantineMax: c.QuarantineMax.Std(), Probation: c.Probation, LogLines: c.LogLinesPerSecond,
		Logger: slog.New(hclogHandler{log.Named("plugin")}), OnEvent: onEvent}
}

// policyHost is a cluster node's plugin host, kept across its
// leaderships: while the node follows it compiles the built-in policies
// (warm), and it keeps compiled the modules of the node's last leadership,
// so that a takeover loads them without metering or compiling them again
// (which dominates a new leader's start). A server on its own has none:
// its one start makes its own host.
type policyHost struct {
	rt  *host.Runtime
	cur atomic.Pointer[manager.Manager] // the leadership's manager, which the host's events go to
}

// policyHostKeeps is how many modules a node's plugin host keeps compiled
// besides the built-ins: those of the plugins its last leadership loaded.
const policyHostKeeps = 4

// newPolicyHost returns a cluster node's plugin host. (With the native
// policies in force the WebAssembly built-ins are loaded all the same, to
// be chosen by name: the host serves them as well.)
func newPolicyHost(c config.Plugins, log hclog.Logger) (*policyHost, error) {
	ph := &policyHost{}
	cfg := hostConfig(c, log, func(ev host.Event) { ph.cur.Load().HostEvent(ev) })
	cfg.KeepCompiled = len(builtin.Modules()) + policyHostKeeps
	rt, err := host.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	ph.rt = rt
	return ph, nil
}

// warm compiles the built-in policies, for the node's next leadership.
func (ph *policyHost) warm(ctx context.Context, log hclog.Logger) {
	if ph == nil {
		return
	}
	start, compiles := time.Now(), ph.rt.Compiles()
	for _, mod := range builtin.Modules() {
		if err := ph.rt.Precompile(ctx, mod.Wasm); err != nil {
			if ctx.Err() == nil {
				log.Warn("could not compile a built-in policy ahead of a takeover; a takeover compiles it", "policy", mod.Name, "error", err)
			}
			return
		}
	}
	log.Info("built-in policies compiled for a takeover", "compiled", ph.rt.Compiles()-compiles, "took", time.Since(start).Round(time.Millisecond))
}

// close closes the host, once no leadership uses it.
func (ph *policyHost) close() {
	if ph != nil {
		_ = ph.rt.Close(context.Background())
	}
}

// startPlugins starts the plugin host (ph's, on a cluster node: nil makes
// one) and makes the built-in policies (and the plugins and choices
// persisted by earlier runs) active.
func startPlugins(ctx context.Context, eng *engine.Engine, c config.Plugins, ph *policyHost, st *startup, log hclog.Logger) (*manager.Manager, error) {
	if c.Native {
		st.enter(stepPolicy)
	} else {
		st.enter(stepPolicies)
	}
	var m *manager.Manager
	var rt *host.Runtime
	if ph != nil {
		rt = ph.rt
	} else {
		var err error
		if rt, err = host.New(hostConfig(c, log, func(ev host.Event) { m.HostEvent(ev) })); err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
	}
	m = manager.New(eng, rt, manager.Options{Native: c.Native, MaxWasmBytes: c.MaxWasmBytes, Logger: log, SharedRuntime: ph != nil})
	if ph != nil {
		ph.cur.Store(m)
	}
	start, compiles := time.Now(), rt.Compiles()
	if err := m.Start(ctx); err != nil {
		_ = m.Close(ctx)
		return nil, fmt.Errorf("plugins: %w", err)
	}
	kind := "WebAssembly"
	if c.Native {
		kind = "native"
	}
	log.Info("policies ready", "builtins", kind, "compiled", rt.Compiles()-compiles, "took", time.Since(start).Round(time.Millisecond))
	return m, nil
}

// newWebhooks returns the webhook deliverer of the configuration.
func newWebhooks(eng *engine.Engine, cfg config.Config, log hclog.Logger) (*webhook.Deliverer, error) {
	nets, err := cfg.WebhookNetworks()
	if err != nil {
		return nil, err
	}
	eps := make([]webhook.Endpoint, len(cfg.Webhooks.Endpoints))
	for i, ep := range cfg.Webhooks.Endpoints {
		eps[i] = webhook.Endpoint{Prefix: ep.Prefix, Secret: ep.Secret.Reveal(), Format: webhook.Format(ep.Format)}
	}
	return webhook.New(eng, webhook.Options{Secret: cfg.Webhooks.Secret.Reveal(), Endpoints: eps, AllowPrivate: cfg.Webhooks.AllowPrivate,
		AllowNetworks: nets, Timeout: cfg.Webhooks.Timeout.Std(), MaxAttempts: cfg.Webhooks.MaxAttempts, Logger: log}), nil
}

// startLocalInstance starts the built-in Chromium instance and registers it,
// when enabled and a browser is found. An agent's browser context there
// outlives the agent's last tab by idle, the executor's idle tab timeout
// (executor.idleTabTimeout): an agent's cookies last as long after its last
// tab as an unused tab lasts after its last task.
func startLocalInstance(ctx context.Context, c config.LocalInstance, idle time.Duration, reg *executor.Registry, st *startup, log hclog.Logger) (*chromium.Instance, error) {
	if !c.Enabled {
		log.Info("local browser instance disabled")
		return nil, nil
	}
	path := c.Chromium
	if path == "" {
		p, ok := chromium.Find()
		if !ok {
			log.Warn("no Chromium found: no local browser instance (install Debian's chromium, or register instances)")
			return nil, nil
		}
		path = p
	}
	st.enter(stepBrowser)
	local, err := chromium.Start(ctx, chromium.Options{ExecPath: path, Logger: log, AgentContextIdle: idle, DialogAutoAccept: c.DialogAutoAccept})
	if err != nil {
		return nil, fmt.Errorf("start the local browser instance (%s): %w (--no-local-instance runs without it)", path, err)
	}
	if _, err := reg.Register(ctx, executor.InstanceConfig{ID: config.LocalInstanceID, URL: local.URL(), Token: local.Token(),
		Capacity: c.Capacity}); err != nil {
		local.Close()
		return nil, err
	}
	// The server starts it at every start: removing it through the API
	// would leave it running, unused. The configuration turns it off.
	reg.KeepRegistered(config.LocalInstanceID, "it is the built-in Chromium, which serve starts at every start; "+
		"to run without it, set localInstance.enabled: false (SWITCHYARD_LOCAL_INSTANCE_ENABLED=false) or pass --no-local-instance, and restart")
	log.Info("local browser instance started", "instance", config.LocalInstanceID, "browser", path, "url", local.URL(), "capacity", c.Capacity)
	return local, nil
}
