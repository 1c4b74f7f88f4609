// Package heartbeat runs Aleph-style heartbeat checks: the server calls an
// external URL on an interval, with a timeout, records how long it took and
// whether it answered as expected, and announces each change of the check's
// state (UP, DOWN) once — on its event feed and, when the check has one, to
// its webhook — never once per failing probe.
//
// Checks are a consumer of the engine, not part of it: they are stored as
// engine settings (heartbeat/<id>: the spec, the state and the latency
// history), so every store driver keeps them and a restart resumes them.
// Probes are made by the server with a plain HTTP client, not by a browser,
// and every address they reach passes the same SSRF guard as webhooks
// (internal/netguard): public addresses only unless the configuration
// allows more, checked at dial time on every hop, redirects included.
package heartbeat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/internal/netguard"
)

// State is what a check's latest probes say about its target.
type State string

// States.
const (
	// StateUnknown: not decided yet — no probe has succeeded and fewer
	// than FailureThreshold have failed (with the default threshold of 1:
	// not probed yet). A new URL or method starts a check over.
	StateUnknown State = "UNKNOWN"
	// StateUp: the latest probe answered as expected.
	StateUp State = "UP"
	// StateDown: the latest FailureThreshold probes in a row failed.
	StateDown State = "DOWN"
)

// Limits and defaults of a Spec.
const (
	MinInterval          = time.Second
	MaxInterval          = 24 * time.Hour
	DefaultInterval      = 60 * time.Second
	DefaultTimeout       = 10 * time.Second
	MaxTimeout           = 60 * time.Second
	DefaultHistoryLength = 100
	MaxHistoryLength     = 1000
	MaxFailureThreshold  = 100
	MaxRedirects         = 5
	// maxBody is how much of an answer's body a probe reads (and discards).
	maxBody = 64 << 10
)

// Spec is what an operator defines.
type Spec struct {
	Name string
	// URL is called with Method (GET or HEAD, default GET); http or https.
	URL    string
	Method string
	// Interval between the starts of two probes (≥ 1 s, default 60 s).
	Interval time.Duration
	// Timeout bounds one probe, redirects and reading the body included
	// (default 10 s, at most 60 s and at most the interval).
	Timeout time.Duration
	// ExpectStatus is the status a healthy target answers; 0 means any 2xx.
	ExpectStatus int
	// FailureThreshold is how many failed probes in a row make the check
	// DOWN (default 1). One good probe makes it UP again.
	FailureThreshold int
	// FollowRedirects follows up to MaxRedirects redirects (each hop
	// guarded); off, a 3xx answer is judged as it is.
	FollowRedirects bool
	// WebhookURL, when set, is told of every state change.
	WebhookURL string
	// Enabled checks are probed; a disabled one keeps its state and history.
	Enabled bool
	// HistoryLength is how many recent probes it keeps (0 means
	// DefaultHistoryLength; at most MaxHistoryLength).
	HistoryLength int
}

// Sample is one probe.
type Sample struct {
	At      time.Time     // when it started
	Latency time.Duration // until the answer's headers (or the failure)
	OK      bool
	Status  int    // the HTTP status, 0 when none came
	Error   string // why it failed
}

// Delivery is one attempt to announce a state change to the webhook.
type Delivery struct {
	ID         string // "<check>.<event seq>"
	Attempt    int
	At         time.Time
	HTTPStatus int
	Delivered  bool
	Error      string
}

// Check is a check and its state.
type Check struct {
	ID        string
	Spec      Spec
	CreatedAt time.Time
	UpdatedAt time.Time
	State     State
	// Since is when it entered State.
	Since time.Time
	// ConsecutiveFailures counts the failed probes since the last good one.
	ConsecutiveFailures int
	LastProbeAt         time.Time
	NextProbeAt         time.Time // zero when disabled
	History             []Sample  // the latest Spec.HistoryLength probes, oldest first
	Webhooks            []Delivery
}

// EventKind is what a heartbeat event records.
type EventKind string

// Event kinds.
const (
	// EventStateChanged: the check went From → To (UNKNOWN → UP is not
	// announced: a check that starts healthy is quiet).
	EventStateChanged EventKind = "STATE_CHANGED"
)

// Event is one announced change. Seq increases by one per event of this
// server run.
type Event struct {
	Seq     uint64
	At      time.Time
	Kind    EventKind
	CheckID string
	Name    string
	URL     string
	From    State
	To      State
	Sample  Sample // the probe that changed it
	// Lagged counts the events this subscriber lost, before this one,
	// because it did not keep up.
	Lagged uint64
}

// Sender posts a signed body to a webhook URL (*webhook.Deliverer).
type Sender interface {
	Send(ctx context.Context, url, event, deliveryID string, body []byte, now time.Time) (status int, permanent bool, err error)
}

// Settings is where checks are stored (*engine.Engine).
type Settings interface {
	SaveSetting(ctx context.Context, key string, value []byte) error
	Settings(prefix string) map[string][]byte
}

// Options configure a Checker.
type Options struct {
	// Guard decides which addresses probes may reach; nil is the default
	// guard (public addresses only).
	Guard *netguard.Guard
	// Webhooks sends state changes to checks' webhook URLs; nil refuses
	// checks with a webhook URL. When it has a CheckURL(string) error
	// method (*webhook.Deliverer), a check whose webhook URL it refuses (an
	// address webhooks may not call) is refused at creation.
	Webhooks Sender
	// MaxChecks caps how many checks exist (default 1,000).
	MaxChecks int
	// Concurrency caps the probes in flight at once (default 8).
	Concurrency int
	// SaveEvery bounds how often a check's history is written when its
	// state does not change (default 30 s); a state change is written at
	// once.
	SaveEvery time.Duration
	// WebhookAttempts is how many times a state change is offered to a
	// webhook that fails (default 5), with a doubling WebhookBackoff
	// (default 1 s) between attempts.
	WebhookAttempts int
	WebhookBackoff  time.Duration
	Clock           clock.Clock
	Logger          hclog.Logger
}

// Checker runs the checks of one server.
type Checker struct {
	st     Settings
	opts   Options
	log    hclog.Logger
	client *http.Client
	sem    chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	entries map[string]*entry
	idSeq   uint64
	evSeq   uint64
	subs    map[chan Event]*uint64 // each subscriber's count of events lost since its last delivered one
	stopped bool
}

type entry struct {
	c       Check
	timer   clock.Timer
	probing chan struct{} // closed when the probe in flight ends; nil when none is
	savedAt time.Time
	dirty   bool   // probes recorded since it was last saved
	gen     uint64 // bumped by every update, so a probe of an older spec is not recorded
}

const settingPrefix = "heartbeat/"

// New returns a checker over st. Start loads and arms the stored checks.
func New(st Settings, opts Options) *Checker {
	if opts.Guard == nil {
		opts.Guard = &netguard.Guard{}
	}
	if opts.MaxChecks <= 0 {
		opts.MaxChecks = 1000
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.SaveEvery <= 0 {
		opts.SaveEvery = 30 * time.Second
	}
	if opts.WebhookAttempts <= 0 {
		opts.WebhookAttempts = 5
	}
	if opts.WebhookBackoff <= 0 {
		opts.WebhookBackoff = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	g := *opts.Guard
	if g.What == "" {
		g.What = "heartbeat check"
	}
	opts.Guard = &g
	c := &Checker{st: st, opts: opts, log: opts.Logger.Named("heartbeat"), sem: make(chan struct{}, opts.Concurrency),
		entries: map[string]*entry{}, subs: map[chan Event]*uint64{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.client = &http.Client{
		Transport: &http.Transport{
			DialContext:         g.DialContext,
			Proxy:               nil, // a proxy would dial on our behalf, past the address check
			TLSHandshakeTimeout: MaxTimeout,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
			DisableKeepAlives:   true, // each probe measures a fresh connection, as a visitor would
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if follow, _ := req.Context().Value(followKey{}).(bool); !follow {
				return http.ErrUseLastResponse
			}
			if len(via) > MaxRedirects {
				return fmt.Errorf("more than %d redirects", MaxRedirects)
			}
			return nil
		},
	}
	return c
}

type followKey struct{}

// Start loads the stored checks and arms the enabled ones.
func (c *Checker) Start(context.Context) error {
	stored := c.st.Settings(settingPrefix)
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(stored)) {
		var ch Check
		if err := json.Unmarshal(stored[k], &ch); err != nil {
			return fmt.Errorf("heartbeat: stored %s does not parse: %w", k, err)
		}
		en := &entry{c: ch, savedAt: now}
		c.entries[ch.ID] = en
		if ch.Spec.Enabled {
			// Resume on the check's own rhythm; one that was due while the
			// server was down is probed at once.
			c.armLocked(en, max(ch.NextProbeAt.Sub(now), 0))
		}
	}
	return nil
}

// Stop stops probing, waits for the probes in flight and writes every
// check's latest history.
func (c *Checker) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	for _, en := range c.entries {
		if en.timer != nil {
			en.timer.Stop()
			en.timer = nil
		}
	}
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, en := range c.entries {
		if !en.dirty {
			continue
		}
		if err := c.saveLocked(context.Background(), en); err != nil {
			c.log.Warn("saving a check's history at stop", "check", en.c.ID, "error", err)
		}
	}
	for ch := range c.subs {
		close(ch)
		delete(c.subs, ch)
	}
}

// Create adds a check; an enabled one is probed at once.
func (c *Checker) Create(ctx context.Context, spec Spec) (*Check, error) {
	spec, err := c.validate(spec)
	if err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, unavailable()
	}
	if len(c.entries) >= c.opts.MaxChecks {
		return nil, &engine.Error{Code: engine.CodeLimit, Message: fmt.Sprintf("at most %d heartbeat checks", c.opts.MaxChecks)}
	}
	c.idSeq++
	id := fmt.Sprintf("hb-%s-%d", now.UTC().Format("20060102T150405"), c.idSeq)
	for c.entries[id] != nil {
		c.idSeq++
		id = fmt.Sprintf("hb-%s-%d", now.UTC().Format("20060102T150405"), c.idSeq)
	}
	en := &entry{c: Check{ID: id, Spec: spec, CreatedAt: now, UpdatedAt: now, State: StateUnknown, Since: now}}
	if spec.Enabled {
		en.c.NextProbeAt = now
	}
	if err := c.saveLocked(ctx, en); err != nil {
		return nil, err
	}
	c.entries[id] = en
	if spec.Enabled {
		c.armLocked(en, 0)
	}
	return en.snapshot(), nil
}

// Update replaces a check's spec; its state and history stay (a new URL
// starts over from UNKNOWN, as what was known was about another target).
func (c *Checker) Update(ctx context.Context, id string, spec Spec) (*Check, error) {
	spec, err := c.validate(spec)
	if err != nil {
		return nil, err
	}
	now := c.opts.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	en := c.entries[id]
	if en == nil {
		return nil, notFound(id)
	}
	if c.stopped {
		return nil, unavailable()
	}
	prev := en.c
	next := en.c
	next.Spec, next.UpdatedAt = spec, now
	if spec.URL != prev.Spec.URL || spec.Method != prev.Spec.Method {
		next.State, next.Since, next.ConsecutiveFailures, next.History = StateUnknown, now, 0, nil
	}
	if n := spec.HistoryLength; len(next.History) > n {
		next.History = slices.Clone(next.History[len(next.History)-n:])
	}
	next.NextProbeAt = time.Time{}
	if spec.Enabled {
		next.NextProbeAt = now
	}
	en.c = next
	if err := c.saveLocked(ctx, en); err != nil {
		en.c = prev
		return nil, err
	}
	en.gen++
	if en.timer != nil {
		en.timer.Stop()
		en.timer = nil
	}
	if spec.Enabled && en.probing == nil {
		c.armLocked(en, 0)
	}
	return en.snapshot(), nil
}

// Delete removes a check.
func (c *Checker) Delete(ctx context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	en := c.entries[id]
	if en == nil {
		return notFound(id)
	}
	if err := c.st.SaveSetting(ctx, settingPrefix+id, nil); err != nil {
		return fmt.Errorf("heartbeat %s: %w", id, err)
	}
	if en.timer != nil {
		en.timer.Stop()
	}
	en.gen++
	delete(c.entries, id)
	return nil
}

// Get returns a check.
func (c *Checker) Get(ctx context.Context, id string) (*Check, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	en := c.entries[id]
	if en == nil {
		return nil, notFound(id)
	}
	return en.snapshot(), nil
}

// List returns every check, by id.
func (c *Checker) List(ctx context.Context) []*Check {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Check, 0, len(c.entries))
	for _, id := range slices.Sorted(maps.Keys(c.entries)) {
		out = append(out, c.entries[id].snapshot())
	}
	return out
}

// Probe runs a check now, whether or not it is enabled, records the probe
// like any other and returns the check after it. A probe of the check
// already in flight is waited for rather than doubled.
func (c *Checker) Probe(ctx context.Context, id string) (*Check, error) {
	c.mu.Lock()
	en := c.entries[id]
	if en == nil {
		c.mu.Unlock()
		return nil, notFound(id)
	}
	if c.stopped {
		c.mu.Unlock()
		return nil, unavailable()
	}
	c.mu.Unlock()
	if err := c.run(ctx, id); err != nil {
		return nil, err
	}
	return c.Get(ctx, id)
}

// Subscribe streams the events from now on. A subscriber that does not keep
// up loses events (never blocks the checker); cancel ends the stream.
func (c *Checker) Subscribe(buffer int) (<-chan Event, func()) {
	ch := make(chan Event, max(buffer, 1))
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	c.subs[ch] = new(uint64)
	c.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			c.mu.Lock()
			if _, ok := c.subs[ch]; ok {
				delete(c.subs, ch)
				close(ch)
			}
			c.mu.Unlock()
		})
	}
}

// validate fills the defaults and refuses what cannot work, naming the field.
func (c *Checker) validate(s Spec) (Spec, error) {
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" || len(s.Name) > 200 {
		return s, invalid("name", "is required, at most 200 characters")
	}
	if err := c.checkURL("url", s.URL); err != nil {
		return s, err
	}
	switch s.Method = strings.ToUpper(s.Method); s.Method {
	case "":
		s.Method = http.MethodGet
	case http.MethodGet, http.MethodHead:
	default:
		return s, invalid("method", "must be GET or HEAD, not %q", s.Method)
	}
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.Interval < MinInterval || s.Interval > MaxInterval {
		return s, invalid("intervalMs", "must be between %d and %d ms", MinInterval.Milliseconds(), MaxInterval.Milliseconds())
	}
	if s.Timeout == 0 {
		s.Timeout = min(DefaultTimeout, s.Interval)
	}
	if s.Timeout < 0 || s.Timeout > MaxTimeout || s.Timeout > s.Interval {
		return s, invalid("timeoutMs", "must be positive, at most %d ms and at most the interval", MaxTimeout.Milliseconds())
	}
	if s.ExpectStatus != 0 && (s.ExpectStatus < 100 || s.ExpectStatus > 599) {
		return s, invalid("expectStatus", "must be an HTTP status (100-599), not %d", s.ExpectStatus)
	}
	if s.FailureThreshold == 0 {
		s.FailureThreshold = 1
	}
	if s.FailureThreshold < 1 || s.FailureThreshold > MaxFailureThreshold {
		return s, invalid("failureThreshold", "must be between 1 and %d", MaxFailureThreshold)
	}
	if s.HistoryLength == 0 {
		s.HistoryLength = DefaultHistoryLength
	}
	if s.HistoryLength < 1 || s.HistoryLength > MaxHistoryLength {
		return s, invalid("historyLength", "must be between 1 and %d", MaxHistoryLength)
	}
	if s.WebhookURL != "" {
		if c.opts.Webhooks == nil {
			return s, invalid("webhookUrl", "webhooks are not enabled on this server")
		}
		if err := checkHTTPURL("webhookUrl", s.WebhookURL); err != nil {
			return s, err
		}
		if g, ok := c.opts.Webhooks.(interface{ CheckURL(string) error }); ok {
			if err := g.CheckURL(s.WebhookURL); err != nil {
				return s, invalid("webhookUrl", "%s", err.Error())
			}
		}
	}
	return s, nil
}

// checkURL refuses a URL that is not http(s), and one whose host is an
// address the guard refuses (a name is checked when it is called: what it
// resolves to may change).
func (c *Checker) checkURL(field, raw string) error {
	if err := checkHTTPURL(field, raw); err != nil {
		return err
	}
	if err := c.opts.Guard.CheckURL(raw); err != nil {
		return invalid(field, "%s", err.Error())
	}
	return nil
}

func checkHTTPURL(field, raw string) error {
	if len(raw) > 2048 {
		return invalid(field, "is longer than 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return invalid(field, "must be an absolute http or https URL")
	}
	if u.User != nil {
		// The URL is shown to every reader of the API: no secrets in it.
		return invalid(field, "must not carry credentials (user:password@)")
	}
	return nil
}

// armLocked schedules the check's next probe after d.
func (c *Checker) armLocked(en *entry, d time.Duration) {
	if c.stopped {
		return
	}
	id, gen := en.c.ID, en.gen
	en.c.NextProbeAt = c.opts.Clock.Now().Add(d)
	en.timer = c.opts.Clock.AfterFunc(d, func() {
		c.mu.Lock()
		cur := c.entries[id]
		if cur == nil || cur.gen != gen || c.stopped {
			c.mu.Unlock()
			return
		}
		cur.timer = nil
		c.wg.Add(1)
		c.mu.Unlock()
		go func() {
			defer c.wg.Done()
			if err := c.run(c.ctx, id); err != nil && c.ctx.Err() == nil {
				c.log.Debug("probe not recorded", "check", id, "error", err)
			}
		}()
	})
}

// run makes one probe of a check and records it, then arms the next one.
// A probe of the check already in flight is waited for, not doubled.
func (c *Checker) run(ctx context.Context, id string) error {
	c.mu.Lock()
	en := c.entries[id]
	for en != nil && en.probing != nil {
		wait := en.probing
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
		c.mu.Lock()
		en = c.entries[id]
	}
	if en == nil {
		c.mu.Unlock()
		return notFound(id)
	}
	if en.timer != nil {
		en.timer.Stop()
		en.timer = nil
	}
	done := make(chan struct{})
	en.probing = done
	spec, gen := en.c.Spec, en.gen
	c.mu.Unlock()

	var s Sample
	select {
	case c.sem <- struct{}{}:
		s = c.probe(ctx, spec)
		<-c.sem
	case <-ctx.Done():
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	en.probing = nil
	close(done)
	if c.entries[id] != en {
		return notFound(id)
	}
	if ctx.Err() == nil && en.gen == gen {
		c.recordLocked(ctx, en, s)
	}
	if en.c.Spec.Enabled {
		next := en.c.Spec.Interval
		if !s.At.IsZero() {
			next -= c.opts.Clock.Now().Sub(s.At)
		}
		c.armLocked(en, max(next, 0))
	} else {
		en.c.NextProbeAt = time.Time{}
	}
	return ctx.Err()
}

// probe calls the target once, within the spec's timeout.
func (c *Checker) probe(ctx context.Context, spec Spec) Sample {
	s := Sample{At: c.opts.Clock.Now()}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, followKey{}, spec.FollowRedirects), spec.Timeout)
	defer cancel()
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, spec.Method, spec.URL, nil)
	if err != nil {
		s.Error = err.Error()
		return s
	}
	req.Header.Set("User-Agent", "Switchyard-Heartbeat/1")
	resp, err := c.client.Do(req)
	s.Latency = time.Since(start)
	if err != nil {
		s.Error = describe(err, spec.Timeout)
		return s
	}
	defer resp.Body.Close()
	s.Status = resp.StatusCode
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody)); err != nil {
		s.Error = "reading the answer: " + describe(err, spec.Timeout)
		return s
	}
	switch {
	case spec.ExpectStatus != 0 && resp.StatusCode != spec.ExpectStatus:
		s.Error = fmt.Sprintf("answered %d, expected %d", resp.StatusCode, spec.ExpectStatus)
	case spec.ExpectStatus == 0 && (resp.StatusCode < 200 || resp.StatusCode > 299):
		s.Error = fmt.Sprintf("answered %d, expected 2xx", resp.StatusCode)
	default:
		s.OK = true
	}
	return s
}

// describe says why a call failed, without Go's "Get \"url\":" prefix.
func describe(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within the %s timeout", timeout)
	}
	var refused *netguard.RefusedError
	if errors.As(err, &refused) {
		return refused.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no answer within the %s timeout", timeout)
		}
		return ue.Err.Error()
	}
	return err.Error()
}

// recordLocked adds a probe to the check's history, moves its state and
// announces a change.
func (c *Checker) recordLocked(ctx context.Context, en *entry, s Sample) {
	ch := &en.c
	ch.History = append(ch.History, s)
	if n := ch.Spec.HistoryLength; len(ch.History) > n {
		ch.History = slices.Clone(ch.History[len(ch.History)-n:])
	}
	ch.LastProbeAt = s.At
	from := ch.State
	to := from
	if s.OK {
		ch.ConsecutiveFailures = 0
		to = StateUp
	} else {
		ch.ConsecutiveFailures++
		if ch.ConsecutiveFailures >= ch.Spec.FailureThreshold {
			to = StateDown
		}
	}
	changed := to != from
	if changed {
		ch.State, ch.Since = to, s.At
	}
	en.dirty = true
	if changed || c.opts.Clock.Now().Sub(en.savedAt) >= c.opts.SaveEvery {
		if err := c.saveLocked(ctx, en); err != nil {
			c.log.Warn("saving a check", "check", ch.ID, "error", err)
		}
	}
	if !changed || from == StateUnknown && to == StateUp {
		return
	}
	c.evSeq++
	ev := Event{Seq: c.evSeq, At: s.At, Kind: EventStateChanged, CheckID: ch.ID, Name: ch.Spec.Name, URL: ch.Spec.URL, From: from, To: to, Sample: s}
	c.log.Info("heartbeat check changed state", "check", ch.ID, "name", ch.Spec.Name, "from", from, "to", to, "error", s.Error)
	for sub, lost := range c.subs {
		e := ev
		e.Lagged = *lost
		select {
		case sub <- e:
			*lost = 0
		default: // a subscriber that does not keep up loses events, and is told
			*lost++
		}
	}
	if ch.Spec.WebhookURL != "" && c.opts.Webhooks != nil && !c.stopped {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.announce(ch.ID, ch.Spec.WebhookURL, ev)
		}()
	}
}

// Payload is the body of a heartbeat webhook delivery.
type Payload struct {
	Event      string       `json:"event"` // "heartbeat.state"
	DeliveryID string       `json:"deliveryId"`
	SentAt     time.Time    `json:"sentAt"`
	Check      CheckPayload `json:"check"`
}

// CheckPayload describes the check and its change in a delivery.
type CheckPayload struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	State     State     `json:"state"`
	Previous  State     `json:"previousState"`
	Since     time.Time `json:"since"`
	LatencyMs int64     `json:"latencyMs"`
	Status    int       `json:"httpStatus,omitempty"`
	Error     string    `json:"error,omitempty"`
}

// announce offers an event to the check's webhook, retrying with a doubling
// backoff, and records every attempt on the check.
func (c *Checker) announce(id, hook string, ev Event) {
	delivery := id + "." + strconv.FormatUint(ev.Seq, 10)
	wait := c.opts.WebhookBackoff
	for attempt := 1; attempt <= c.opts.WebhookAttempts; attempt++ {
		now := c.opts.Clock.Now()
		body, _ := json.Marshal(Payload{Event: "heartbeat.state", DeliveryID: delivery, SentAt: now.UTC(), Check: CheckPayload{
			ID: id, Name: ev.Name, URL: ev.URL, State: ev.To, Previous: ev.From, Since: ev.At, LatencyMs: ev.Sample.Latency.Milliseconds(),
			Status: ev.Sample.Status, Error: ev.Sample.Error}})
		status, permanent, err := c.opts.Webhooks.Send(c.ctx, hook, "heartbeat.state", delivery, body, now)
		d := Delivery{ID: delivery, Attempt: attempt, At: now, HTTPStatus: status, Delivered: err == nil}
		if err != nil {
			d.Error = err.Error()
		}
		c.mu.Lock()
		if en := c.entries[id]; en != nil {
			en.c.Webhooks = append(en.c.Webhooks, d)
			if len(en.c.Webhooks) > 20 {
				en.c.Webhooks = slices.Clone(en.c.Webhooks[len(en.c.Webhooks)-20:])
			}
			en.dirty = true // written with the next save, at the latest at Stop
		}
		c.mu.Unlock()
		if err == nil || permanent || c.ctx.Err() != nil {
			return
		}
		fired := make(chan struct{})
		t := c.opts.Clock.AfterFunc(wait, func() { close(fired) })
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-fired:
		}
		wait *= 2
	}
}

func (c *Checker) saveLocked(ctx context.Context, en *entry) error {
	raw, err := json.Marshal(en.c)
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", en.c.ID, err)
	}
	if err := c.st.SaveSetting(ctx, settingPrefix+en.c.ID, raw); err != nil {
		return fmt.Errorf("heartbeat %s: %w", en.c.ID, err)
	}
	en.savedAt, en.dirty = c.opts.Clock.Now(), false
	return nil
}

func (en *entry) snapshot() *Check {
	c := en.c
	c.History = slices.Clone(c.History)
	c.Webhooks = slices.Clone(c.Webhooks)
	return &c
}

func invalid(field, format string, args ...any) error {
	return &engine.Error{Code: engine.CodeInvalidInput, Field: field, Message: fmt.Sprintf(format, args...)}
}

func notFound(id string) error {
	return &engine.Error{Code: engine.CodeNotFound, Message: "no heartbeat check " + id}
}

func unavailable() error {
	return &engine.Error{Code: engine.CodeUnavailable, Retryable: true, Message: "heartbeat checks are stopping"}
}
