// The instance registry: the fleet the engine places work on. Instances come
// from the config file or are registered, updated and removed at run time;
// each is health-checked on an interval, and every change reaches the engine
// (through engine.InstanceSink) and the subscribers of instance events.

package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor/pinchtab"
)

// Errors of the registry.
var (
	ErrUnknownInstance   = errors.New("unknown instance")
	ErrDuplicateInstance = errors.New("instance already registered")
	// ErrNotRemovable is wrapped by Remove's error for an instance the
	// server itself runs (see Registry.KeepRegistered).
	ErrNotRemovable = errors.New("instance cannot be removed through the API")
)

// Health is what the registry knows of an instance's health.
type Health string

// Health states.
const (
	HealthUnknown   Health = "UNKNOWN"   // not checked yet; receives no work
	HealthHealthy   Health = "HEALTHY"   // answered its last check
	HealthUnhealthy Health = "UNHEALTHY" // failed UnhealthyAfter checks in a row (or its first)
)

// Instance is a snapshot of a registered instance, safe to keep and to show:
// it has no token.
type Instance struct {
	ID           string
	URL          string
	Kind         Kind
	Dialect      Dialect // of a chat instance
	Capacity     int
	Labels       map[string]string
	HasToken     bool
	Health       Health
	Latency      time.Duration // of the last successful health check
	LastCheck    time.Time     // when the last check ended
	LastError    string        // of the last failed check, cleared on success
	Failures     int           // consecutive failed checks
	Tabs         int           // open tabs, as the instance last reported
	InFlight     int           // attempts the executor is running there
	RegisteredAt time.Time
}

// RegistryOptions configures a Registry. Zero values mean the defaults.
type RegistryOptions struct {
	Logger         hclog.Logger
	HealthInterval time.Duration // between checks; default 5s
	HealthTimeout  time.Duration // for one check; default 2s
	UnhealthyAfter int           // consecutive failures that make a healthy instance unhealthy; default 3
	RecheckAfter   time.Duration // delay of the next check after a failure, while still healthy; default min(1s, HealthInterval)
	TabListTimeout time.Duration // for one tab listing on a cache miss; default 3s
	HTTPClient     *http.Client  // shared by the instance clients; default pinchtab.DefaultHTTPClient()
}

func (o *RegistryOptions) defaults() {
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 5 * time.Second
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 2 * time.Second
	}
	if o.UnhealthyAfter <= 0 {
		o.UnhealthyAfter = 3
	}
	if o.RecheckAfter <= 0 {
		o.RecheckAfter = min(time.Second, o.HealthInterval)
	}
	if o.TabListTimeout <= 0 {
		o.TabListTimeout = 3 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = pinchtab.DefaultHTTPClient()
	}
}

// Registry holds the instances. It is safe for concurrent use.
type Registry struct {
	opts RegistryOptions
	log  hclog.Logger

	// changeMu serialises changes, so that the sink and the subscribers see
	// them in the order they happened. It is taken before mu.
	changeMu sync.Mutex
	mu       sync.RWMutex
	insts    map[string]*instance
	kept     map[string]string // instances Remove refuses, and why (KeepRegistered)
	sink     engine.InstanceSink
	tabs     tabCache

	events broadcaster
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// instance is the registry's record of one instance. cfg, client and st are
// guarded by Registry.mu.
type instance struct {
	cfg    InstanceConfig
	client *pinchtab.Client
	st     Instance
	kick   chan struct{}
	stop   context.CancelFunc
	// notReady is set while the instance answers that it cannot work
	// (starting, stopping, refusing the token): it is checked again after
	// RecheckAfter rather than HealthInterval, so that it is back soon after
	// it is ready.
	notReady bool
}

// NewRegistry returns an empty registry. Call Close to stop its health checks.
func NewRegistry(opts RegistryOptions) *Registry {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		opts:   opts,
		log:    opts.Logger.Named("instances"),
		insts:  make(map[string]*instance),
		kept:   make(map[string]string),
		tabs:   newTabCache(),
		ctx:    ctx,
		cancel: cancel,
	}
}

// Close stops the health checks and ends every event subscription.
func (r *Registry) Close() {
	r.mu.Lock()
	r.cancel()
	r.mu.Unlock()
	r.wg.Wait()
	r.events.closeAll()
}

// SetSink makes sink receive the registry's view of the fleet from now on,
// starting with every instance registered so far. The Engine is the sink.
func (r *Registry) SetSink(sink engine.InstanceSink) {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.Lock()
	r.sink = sink
	infos := make([]engine.InstanceInfo, 0, len(r.insts))
	for _, in := range r.insts {
		infos = append(infos, in.info())
	}
	r.mu.Unlock()
	if sink == nil {
		return
	}
	for _, info := range infos {
		sink.SetInstance(info)
	}
}

func (in *instance) info() engine.InstanceInfo {
	return engine.InstanceInfo{ID: in.cfg.ID, Capacity: in.cfg.Capacity, Healthy: in.st.Health == HealthHealthy,
		Chat: in.cfg.Kind == KindChat}
}

// snapshot returns the instance's public view. Call with Registry.mu held.
func (in *instance) snapshot() Instance {
	s := in.st
	s.ID, s.URL, s.Kind, s.Capacity, s.Dialect = in.cfg.ID, in.cfg.URL, in.cfg.Kind, in.cfg.Capacity, in.cfg.Dialect
	s.Labels = maps.Clone(in.cfg.Labels)
	s.HasToken = in.cfg.Token != ""
	return s
}

// Register adds an instance and starts checking its health at once. Until its
// first check passes it receives no work.
//
// It never waits on the caller: ctx completes the signature that the
// cluster's forwarding view shares.
func (r *Registry) Register(_ context.Context, cfg InstanceConfig) (Instance, error) {
	cfg = cfg.clone()
	if err := cfg.Validate(); err != nil {
		return Instance{}, fmt.Errorf("register instance: %w", err)
	}
	client, err := pinchtab.New(cfg.URL, cfg.Token, pinchtab.WithHTTPClient(r.opts.HTTPClient))
	if err != nil {
		return Instance{}, fmt.Errorf("register instance %s: %w", cfg.ID, err)
	}
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.Lock()
	if _, ok := r.insts[cfg.ID]; ok {
		r.mu.Unlock()
		return Instance{}, fmt.Errorf("register instance %s: %w", cfg.ID, ErrDuplicateInstance)
	}
	if r.ctx.Err() != nil {
		r.mu.Unlock()
		return Instance{}, errors.New("register instance: registry closed")
	}
	ctx, stop := context.WithCancel(r.ctx)
	in := &instance{
		cfg:    cfg,
		client: client,
		st:     Instance{Health: HealthUnknown, RegisteredAt: time.Now()},
		kick:   make(chan struct{}, 1),
		stop:   stop,
	}
	r.insts[cfg.ID] = in
	r.wg.Add(1) // under mu, so that Close cannot miss it
	snap, info, sink := in.snapshot(), in.info(), r.sink
	r.mu.Unlock()

	r.log.Info("instance registered", "instance", cfg.ID, "url", cfg.URL, "kind", cfg.Kind, "capacity", cfg.Capacity)
	if sink != nil {
		sink.SetInstance(info)
	}
	r.events.publish(InstanceEvent{Type: EventRegistered, Instance: snap, At: time.Now()})
	go r.healthLoop(ctx, in)
	return snap, nil
}

// Update changes a registered instance. A new URL or token takes effect for
// the next request, and a health check follows at once.
func (r *Registry) Update(ctx context.Context, id string, u InstanceUpdate) (Instance, error) {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.RLock()
	in, ok := r.insts[id]
	var cfg InstanceConfig
	if ok {
		cfg = in.cfg.clone()
	}
	r.mu.RUnlock()
	if !ok {
		return Instance{}, fmt.Errorf("update instance %s: %w", id, ErrUnknownInstance)
	}
	if u.URL != nil {
		cfg.URL = *u.URL
	}
	if u.Token != nil {
		cfg.Token = *u.Token
	}
	if u.Kind != nil {
		cfg.Kind = *u.Kind
	}
	if u.Capacity != nil {
		cfg.Capacity = *u.Capacity
	}
	if u.Labels != nil {
		cfg.Labels = maps.Clone(*u.Labels)
	}
	if u.Dialect != nil {
		cfg.Dialect = *u.Dialect
	}
	if err := cfg.Validate(); err != nil {
		return Instance{}, fmt.Errorf("update instance %s: %w", id, err)
	}
	client, err := pinchtab.New(cfg.URL, cfg.Token, pinchtab.WithHTTPClient(r.opts.HTTPClient))
	if err != nil {
		return Instance{}, fmt.Errorf("update instance %s: %w", id, err)
	}
	r.mu.Lock()
	moved := in.cfg.URL != cfg.URL
	in.cfg, in.client = cfg, client
	if moved {
		// Another address may be another browser: its tabs and health are
		// unknown until checked.
		in.st.Health = HealthUnknown
		in.st.Failures = 0
	}
	snap, info, sink := in.snapshot(), in.info(), r.sink
	r.mu.Unlock()
	if moved {
		r.tabs.forgetInstance(id)
	}
	r.log.Info("instance updated", "instance", id, "url", cfg.URL, "kind", cfg.Kind, "capacity", cfg.Capacity)
	if sink != nil {
		sink.SetInstance(info)
	}
	r.events.publish(InstanceEvent{Type: EventUpdated, Instance: snap, At: time.Now()})
	r.Kick(id)
	return snap, nil
}

// KeepRegistered makes Remove refuse instance id with ErrNotRemovable and
// why (say, the setting that runs the server without it): the server runs
// that instance itself, and removing it would leave its browser running,
// unused, at every start.
func (r *Registry) KeepRegistered(id, why string) {
	r.mu.Lock()
	r.kept[id] = why
	r.mu.Unlock()
}

// Remove forgets an instance: its health checks stop, the engine re-places
// the work bound to it, and its tabs can no longer be resolved (a task naming
// one fails with a clear error). An instance kept with KeepRegistered is not
// removed: the error wraps ErrNotRemovable.
func (r *Registry) Remove(ctx context.Context, id string) error {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.Lock()
	in, ok := r.insts[id]
	if !ok {
		r.mu.Unlock()
		return fmt.Errorf("remove instance %s: %w", id, ErrUnknownInstance)
	}
	if why, kept := r.kept[id]; kept {
		r.mu.Unlock()
		return fmt.Errorf("remove instance %s: %w: %s", id, ErrNotRemovable, why)
	}
	delete(r.insts, id)
	snap, sink := in.snapshot(), r.sink
	r.mu.Unlock()
	in.stop()
	r.tabs.orphanInstance(id, time.Now())
	r.log.Info("instance removed", "instance", id)
	if sink != nil {
		sink.RemoveInstance(id)
	}
	r.events.publish(InstanceEvent{Type: EventRemoved, Instance: snap, At: time.Now()})
	return nil
}

// Get returns an instance.
func (r *Registry) Get(ctx context.Context, id string) (Instance, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	in, ok := r.insts[id]
	if !ok {
		return Instance{}, false
	}
	return in.snapshot(), true
}

// Config returns the configuration an instance is registered with (its token
// included).
func (r *Registry) Config(id string) (InstanceConfig, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	in, ok := r.insts[id]
	if !ok {
		return InstanceConfig{}, false
	}
	return in.cfg.clone(), true
}

// List returns every instance, sorted by id.
func (r *Registry) List(ctx context.Context) []Instance {
	r.mu.RLock()
	out := make([]Instance, 0, len(r.insts))
	for _, in := range r.insts {
		out = append(out, in.snapshot())
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b Instance) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}

// Subscribe returns a channel of instance events, buffered to hold buffer of
// them, and a func that ends the subscription and closes the channel. A
// subscriber that falls behind loses events, never blocks the registry: the
// next event it gets says how many it lost (InstanceEvent.Lagged).
func (r *Registry) Subscribe(buffer int) (<-chan InstanceEvent, func()) {
	return r.events.subscribe(buffer)
}

// Kick asks for a health check of an instance now, without waiting for it.
func (r *Registry) Kick(id string) {
	r.mu.RLock()
	in, ok := r.insts[id]
	r.mu.RUnlock()
	if !ok {
		return
	}
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

// CheckNow runs a health check of an instance and waits for it.
func (r *Registry) CheckNow(ctx context.Context, id string) (Instance, error) {
	r.mu.RLock()
	in, ok := r.insts[id]
	r.mu.RUnlock()
	if !ok {
		return Instance{}, fmt.Errorf("check instance %s: %w", id, ErrUnknownInstance)
	}
	r.check(ctx, in)
	snap, _ := r.Get(ctx, id)
	return snap, nil
}

// healthLoop checks an instance on the interval, at once when kicked, and
// sooner after a failure, so that a dead instance is marked unhealthy within
// UnhealthyAfter × RecheckAfter rather than UnhealthyAfter intervals, and an
// instance that says it is not ready yet is back within RecheckAfter of being
// ready.
func (r *Registry) healthLoop(ctx context.Context, in *instance) {
	defer r.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-in.kick:
			t.Stop()
		}
		delay := r.opts.HealthInterval
		st := r.check(ctx, in)
		r.mu.RLock()
		notReady := in.notReady
		r.mu.RUnlock()
		if st.Failures > 0 && (st.Health == HealthHealthy || notReady) {
			delay = r.opts.RecheckAfter
		}
		t.Reset(delay)
	}
}

// check runs one health check, records its outcome and returns the state after
// it.
func (r *Registry) check(ctx context.Context, in *instance) Instance {
	r.mu.RLock()
	client, id, kind := in.client, in.cfg.ID, in.cfg.Kind
	r.mu.RUnlock()
	cctx, cancel := context.WithTimeout(ctx, r.opts.HealthTimeout)
	start := time.Now()
	tabs, definite, err := probe(cctx, client, kind)
	latency := time.Since(start)
	cancel()
	if ctx.Err() != nil {
		return Instance{} // the instance was removed or the registry closed meanwhile
	}
	return r.record(in, id, err, definite, latency, tabs)
}

// probe asks an instance whether it can run an action now, and how many tabs
// it has. /health alone does not say: a PinchTab server answers "ok" while
// its default browser is still starting, or while it shuts down, and the
// built-in Chromium answers it without a token. So, after /health, browser
// instances are asked for their tab list with the registered token (GET /tabs on an instance;
// GET /instances, which must show a running browser, and GET
// /instances/tabs?fresh=1 on a server), which also gives the tab count.
// definite is set when the instance itself said it cannot work (an answer,
// not a network failure): the registry believes it at once.
func probe(ctx context.Context, client *pinchtab.Client, kind Kind) (tabs int, definite bool, err error) {
	h, err := client.Health(ctx)
	if err != nil {
		return 0, !isNetwork(err), err
	}
	if h.Status != "" && h.Status != "ok" {
		return 0, true, fmt.Errorf("health: status %q %s", h.Status, h.Reason)
	}
	if d := h.DefaultInstance; d != nil && d.Status != "" && d.Status != "running" {
		return 0, true, fmt.Errorf("health: default browser %s is %s", d.ID, d.Status)
	}
	switch kind {
	case KindServer:
		browsers, err := client.Instances(ctx)
		if err != nil {
			return 0, !isNetwork(err), err
		}
		running := map[string]bool{}
		for _, b := range browsers {
			if b.Status == "" || b.Status == "running" {
				running[b.ID] = true
			}
		}
		if len(running) == 0 {
			return 0, true, fmt.Errorf("PinchTab server has no running browser (%d listed)", len(browsers))
		}
		all, err := client.AllTabs(ctx)
		if err != nil {
			return 0, !isNetwork(err), err
		}
		for _, t := range all {
			if t.InstanceID == "" || running[t.InstanceID] {
				tabs++
			}
		}
		return tabs, false, nil
	case KindInstance:
		list, err := client.Tabs(ctx)
		if err != nil {
			return 0, !isNetwork(err), err
		}
		return len(list), false, nil
	}
	return h.Tabs, false, nil
}

// isNetwork reports whether err got no answer from the instance.
func isNetwork(err error) bool {
	var pe *pinchtab.Error
	return !errors.As(err, &pe) || pe.Network()
}

// record applies the outcome of a check (err nil: passed) or of a fault seen
// by an attempt, and tells the sink and the subscribers when the health
// changed. A definite failure — the instance answered that it cannot work,
// or an attempt met an instance fault — makes it unhealthy at once; a
// network failure of a check does so only after UnhealthyAfter in a row.
func (r *Registry) record(in *instance, id string, err error, definite bool, latency time.Duration, tabs int) Instance {
	r.changeMu.Lock()
	defer r.changeMu.Unlock()
	r.mu.Lock()
	if r.insts[id] != in {
		r.mu.Unlock()
		return Instance{}
	}
	prev := in.st.Health
	in.st.LastCheck = time.Now()
	in.notReady = err != nil && definite
	if err == nil {
		in.st.Health = HealthHealthy
		in.st.Failures = 0
		in.st.LastError = ""
		in.st.Latency = latency
		in.st.Tabs = tabs
	} else {
		in.st.Failures++
		in.st.LastError = err.Error()
		if definite || prev != HealthHealthy || in.st.Failures >= r.opts.UnhealthyAfter {
			in.st.Health = HealthUnhealthy
		}
	}
	now := in.st.Health
	snap, info, sink := in.snapshot(), in.info(), r.sink
	r.mu.Unlock()
	if now == prev {
		return snap
	}
	var ev InstanceEvent
	switch now {
	case HealthHealthy:
		r.log.Info("instance healthy", "instance", id, "latency", latency)
		ev = InstanceEvent{Type: EventHealthy, Instance: snap, At: time.Now(), Reason: "recovered"}
		if prev == HealthUnknown {
			ev.Reason = "first check passed"
		}
	case HealthUnhealthy:
		r.log.Warn("instance unhealthy", "instance", id, "failures", snap.Failures, "error", err)
		ev = InstanceEvent{Type: EventUnhealthy, Instance: snap, At: time.Now(), Reason: err.Error()}
	}
	if sink != nil {
		sink.SetInstance(info)
	}
	r.events.publish(ev)
	return snap
}

// reportFault records that an attempt met an instance fault (unreachable,
// unauthorized, unavailable, shutting down): the instance is unhealthy at
// once, receives no new work, and comes back only when a check finds it able
// to run an action. A check follows at once.
func (r *Registry) reportFault(id string, cause error) {
	r.mu.RLock()
	in, ok := r.insts[id]
	r.mu.RUnlock()
	if !ok {
		return
	}
	r.record(in, id, cause, true, 0, 0)
	r.Kick(id)
}

// lookup returns what a request to an instance needs.
func (r *Registry) lookup(id string) (*pinchtab.Client, Instance, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	in, ok := r.insts[id]
	if !ok {
		return nil, Instance{}, false
	}
	return in.client, in.snapshot(), true
}

// acquire and release count the attempts running on an instance.
func (r *Registry) acquire(id string) {
	r.mu.Lock()
	if in, ok := r.insts[id]; ok {
		in.st.InFlight++
	}
	r.mu.Unlock()
}

func (r *Registry) release(id string) {
	r.mu.Lock()
	if in, ok := r.insts[id]; ok && in.st.InFlight > 0 {
		in.st.InFlight--
	}
	r.mu.Unlock()
}

// pick returns the healthy instance of one of kinds with the lowest load (in
// flight over capacity) that has room, or "" when there is none. The engine
// places work itself; the executor picks only when the engine placed nothing,
// or placed work on an instance that cannot do it.
func (r *Registry) pick(kinds ...Kind) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	best, bestLoad := "", 0.0
	for id, in := range r.insts {
		if in.st.Health != HealthHealthy || !slices.Contains(kinds, in.cfg.Kind) {
			continue
		}
		load := float64(in.st.InFlight)
		if c := in.cfg.Capacity; c > 0 {
			if in.st.InFlight >= c {
				continue
			}
			load /= float64(c)
		}
		if best == "" || load < bestLoad || (load == bestLoad && id < best) {
			best, bestLoad = id, load
		}
	}
	return best
}

// hasKind reports whether any instance of kind is registered, healthy or not.
func (r *Registry) hasKind(kind Kind) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, in := range r.insts {
		if in.cfg.Kind == kind {
			return true
		}
	}
	return false
}

func (r *Registry) currentSink() engine.InstanceSink {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sink
}
