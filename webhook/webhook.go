// Package webhook delivers the webhooks of tasks and batches. It follows the
// engine's committed event stream — never the dispatch path, so a slow or
// dead receiver cannot hold up scheduling — and for each task with a webhook
// URL that ends or is PARKED (its retries spent), and each batch whose last
// task ends or parks, it POSTs a JSON snapshot (doc/webhook.schema.json;
// an endpoint may ask for the BrowserOS-style flat body instead):
//
//   - signed: X-Switchyard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
//     "<t>.<body>"> with the endpoint's secret, so a receiver can check both
//     origin and freshness;
//   - guarded against server-side request forgery: the host is resolved and
//     every address it resolves to must be public unless the configuration
//     allows private networks; the connection is checked again at dial time,
//     so a DNS answer that changes between the check and the call (DNS
//     rebinding) cannot slip through; redirects are not followed;
//   - bounded: a 10 s timeout per attempt, retries with exponential backoff up
//     to a number of attempts;
//   - recorded: every attempt lands on the task or batch (webhookDeliveries).
//
// Delivery is at least once: after a restart the deliverer resumes from its
// persisted cursor and may send again what it sent just before; receivers
// deduplicate on the X-Switchyard-Delivery id.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/internal/netguard"
)

// Headers set on every delivery.
const (
	HeaderSignature = "X-Switchyard-Signature"
	HeaderDelivery  = "X-Switchyard-Delivery"
	HeaderEvent     = "X-Switchyard-Event"
)

// Endpoint gives the secret, and the body format, for the URLs that start
// with Prefix.
type Endpoint struct {
	Prefix string
	Secret string // "" means Options.Secret
	Format Format // "" means FormatSwitchyard
}

// Format is the shape of a delivery's body.
type Format string

// Body formats.
const (
	// FormatSwitchyard is the Payload: an envelope with the task or batch
	// snapshot nested (doc/webhook.schema.json).
	FormatSwitchyard Format = "switchyard"
	// FormatBrowserOS is the flat body BrowserOS Server Edition receivers
	// read: {taskId, state, result | error, executionTimeMs}, with state
	// "completed", "failed" or "cancelled" (BrowserPayload). Batch
	// deliveries keep the Switchyard envelope.
	FormatBrowserOS Format = "browseros"
)

// Options configure a Deliverer.
type Options struct {
	// Endpoints give per-endpoint secrets and formats; the longest matching
	// prefix wins.
	Endpoints []Endpoint
	// Secret signs deliveries to URLs no endpoint matches. A delivery with
	// no secret at all is sent unsigned.
	Secret string
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// other non-public addresses. Off by default.
	AllowPrivate bool
	// AllowNetworks lets webhooks reach these networks even when
	// AllowPrivate is off (e.g. one internal receiver).
	AllowNetworks []netip.Prefix
	Timeout       time.Duration // per attempt, default 10 s
	MaxAttempts   int           // default 5
	Backoff       time.Duration // before the second attempt, doubling; default 1 s
	MaxBackoff    time.Duration // default 5 min
	Workers       int           // concurrent deliveries, default 4
	Clock         clock.Clock
	Logger        hclog.Logger
	// Resolver resolves hosts (default net.DefaultResolver).
	Resolver netguard.Resolver
}

// Deliverer delivers webhooks for one engine.
type Deliverer struct {
	e      *engine.Engine
	opts   Options
	log    hclog.Logger
	client *http.Client
	guard  *netguard.Guard
	queue  chan job
	wg     sync.WaitGroup

	mu      sync.Mutex
	cursor  uint64 // the last event handled
	saved   uint64
	pending map[string]bool // deliveries queued or waiting for a retry
}

type job struct {
	id      string       // delivery id
	state   engine.State // the state the task delivery announces
	taskID  string
	batchID string
	url     string
	attempt int
}

const cursorKey = "webhook/cursor"

// Guard returns the guard that decides which addresses a deliverer with
// opts may call (AllowPrivate, AllowNetworks): the one it dials through,
// and the one the API checks a webhook URL against when a task or batch is
// submitted (netguard.Guard.CheckURL), so that a URL whose address would be
// refused at delivery is refused at submission.
func Guard(opts Options) *netguard.Guard {
	return &netguard.Guard{AllowPrivate: opts.AllowPrivate, AllowNetworks: opts.AllowNetworks, Resolver: opts.Resolver,
		DialTimeout: opts.Timeout, What: "webhook", Settings: "webhooks.allowPrivate or list its network in webhooks.allowNetworks"}
}

// CheckURL refuses a URL whose host is an address this deliverer will not
// call (netguard.Guard.CheckURL): for a component that accepts webhook URLs
// to deliver through it later, such as heartbeat checks.
func (d *Deliverer) CheckURL(raw string) error { return d.guard.CheckURL(raw) }

// New returns a deliverer, positioned after the last event handled by the
// previous run (or after the latest event, the first time). Run starts it.
func New(e *engine.Engine, opts Options) *Deliverer {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Minute
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	d := &Deliverer{e: e, opts: opts, log: opts.Logger.Named("webhook"), queue: make(chan job, 1024), pending: map[string]bool{}}
	d.guard = Guard(opts)
	// Resume where the last run stopped; the first run ever starts with the
	// events to come (create the deliverer right after the engine starts).
	if raw, ok := e.Setting(cursorKey); ok {
		d.cursor, _ = strconv.ParseUint(string(raw), 10, 64)
	} else {
		d.cursor = e.Events().Last()
	}
	d.saved = d.cursor
	d.client = &http.Client{
		Timeout:       opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect },
		Transport: &http.Transport{
			DialContext:           d.guard.DialContext,
			TLSHandshakeTimeout:   opts.Timeout,
			ResponseHeaderTimeout: opts.Timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
			Proxy:                 nil, // a proxy would dial on our behalf, past the address check
		},
	}
	return d
}

var errRedirect = errors.New("redirects are not followed")

// Run delivers until ctx ends. It resumes after the last event handled
// before a restart (at least once), reading older events from the store
// when the in-memory log no longer holds them.
func (d *Deliverer) Run(ctx context.Context) {
	for range d.opts.Workers {
		d.wg.Add(1)
		go d.worker(ctx)
	}
	defer d.wg.Wait()
	log := d.e.Events()
	var buf []engine.Event
	for ctx.Err() == nil {
		var missed uint64
		buf, missed = log.Read(d.cursor, 256, buf[:0])
		if missed > 0 {
			// Fell behind the in-memory log: read the gap from the store.
			older, err := d.e.StoredEvents(ctx, d.cursor, 256)
			if err != nil {
				d.log.Error("reading stored events", "error", err)
				d.sleep(ctx, time.Second)
				continue
			}
			if len(older) > 0 {
				buf = older
			}
		}
		if len(buf) == 0 {
			d.saveCursor(ctx, false)
			_ = log.Wait(ctx, d.cursor)
			continue
		}
		for _, ev := range buf {
			if ctx.Err() != nil {
				return
			}
			d.handle(ctx, ev)
			d.mu.Lock()
			d.cursor = ev.Seq
			d.mu.Unlock()
		}
		d.saveCursor(ctx, false)
	}
	d.saveCursor(context.Background(), true)
}

// Progress returns the seq of the last event the deliverer has handled
// (turned into a delivery or passed over) and how many deliveries are queued
// or waiting for a retry. A test waits until handled reaches an event, then
// reads what that event queued: no sleeping to show that nothing was sent.
func (d *Deliverer) Progress() (handled uint64, pending int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cursor, len(d.pending)
}

// saveCursor persists the cursor now and then (every 1,000 events or when
// idle), so a restart redelivers little.
func (d *Deliverer) saveCursor(ctx context.Context, force bool) {
	d.mu.Lock()
	cur := d.cursor
	due := force || cur-d.saved >= 1000 || cur != d.saved && len(d.queue) == 0
	d.mu.Unlock()
	if !due || cur == d.saved {
		return
	}
	if err := d.e.SaveSetting(ctx, cursorKey, []byte(strconv.FormatUint(cur, 10))); err == nil {
		d.mu.Lock()
		d.saved = cur
		d.mu.Unlock()
	}
}

// handle turns an event into a delivery job.
func (d *Deliverer) handle(ctx context.Context, ev engine.Event) {
	if !ev.Webhook {
		return
	}
	var j job
	switch {
	case ev.Type == engine.EventState && ev.To.Settled():
		t, err := d.e.Task(ctx, ev.TaskID)
		if err != nil {
			d.log.Warn("task of a webhook event is gone", "task", ev.TaskID, "error", err)
			return
		}
		id := ev.TaskID + "." + strconv.FormatUint(ev.Seq, 10)
		if delivered(t.Webhooks, id) {
			return // delivered before a restart
		}
		j = job{id: id, state: ev.To, taskID: ev.TaskID, url: t.Spec.WebhookURL, attempt: attempts(t.Webhooks, id) + 1}
	case ev.Type == engine.EventBatch:
		bs, err := d.e.Batch(ctx, ev.BatchID)
		if err != nil {
			d.log.Warn("batch of a webhook event is gone", "batch", ev.BatchID, "error", err)
			return
		}
		id := ev.BatchID + "." + strconv.FormatUint(ev.Seq, 10)
		if delivered(bs.Info.Webhooks, id) {
			return
		}
		j = job{id: id, batchID: ev.BatchID, url: bs.Info.WebhookURL, attempt: attempts(bs.Info.Webhooks, id) + 1}
	default:
		return
	}
	d.enqueue(ctx, j)
}

// delivered reports whether delivery id is settled (delivered, or given
// up): a task that parks and later ends has one delivery for each.
func delivered(ds []engine.WebhookDelivery, id string) bool {
	for _, d := range ds {
		if d.ID == id && (d.Delivered || d.Final) {
			return true
		}
	}
	return false
}

// attempts counts the attempts recorded for delivery id.
func attempts(ds []engine.WebhookDelivery, id string) int {
	n := 0
	for _, d := range ds {
		if d.ID == id {
			n++
		}
	}
	return n
}

func (d *Deliverer) enqueue(ctx context.Context, j job) {
	d.mu.Lock()
	if d.pending[j.id] {
		d.mu.Unlock()
		return
	}
	d.pending[j.id] = true
	d.mu.Unlock()
	select {
	case d.queue <- j:
	case <-ctx.Done():
	}
}

func (d *Deliverer) worker(ctx context.Context) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-d.queue:
			d.attempt(ctx, j)
		}
	}
}

// attempt makes one delivery attempt, records it and schedules the next.
func (d *Deliverer) attempt(ctx context.Context, j job) {
	start := d.opts.Clock.Now()
	rec := engine.WebhookDelivery{ID: j.id, Attempt: j.attempt, URL: redact(j.url), At: start}
	body, event, err := d.body(ctx, j)
	permanent := false
	if err == nil {
		rec.HTTPStatus, permanent, err = d.post(ctx, j, event, body, start)
	}
	rec.Duration = d.opts.Clock.Now().Sub(start)
	if err == nil {
		rec.Delivered, rec.Final = true, true
	} else {
		rec.Error = err.Error()
		rec.Final = permanent || j.attempt >= d.opts.MaxAttempts
	}
	d.record(ctx, j, rec)
	if rec.Final {
		d.mu.Lock()
		delete(d.pending, j.id)
		d.mu.Unlock()
		if !rec.Delivered {
			d.log.Warn("webhook delivery given up", "delivery", j.id, "attempts", j.attempt, "error", rec.Error)
		}
		return
	}
	wait := d.opts.Backoff
	for i := 1; i < j.attempt && wait < d.opts.MaxBackoff; i++ {
		wait *= 2
	}
	wait = min(wait, d.opts.MaxBackoff)
	next := j
	next.attempt++
	d.opts.Clock.AfterFunc(wait, func() {
		select {
		case d.queue <- next:
		case <-ctx.Done():
		}
	})
}

func (d *Deliverer) record(ctx context.Context, j job, rec engine.WebhookDelivery) {
	var err error
	if j.taskID != "" {
		err = d.e.RecordTaskWebhook(ctx, j.taskID, rec)
	} else {
		err = d.e.RecordBatchWebhook(ctx, j.batchID, rec)
	}
	if err != nil {
		d.log.Error("recording a webhook delivery", "delivery", j.id, "error", err)
	}
}

// Payload is the JSON body of a delivery (doc/webhook.schema.json).
type Payload struct {
	Event      string        `json:"event"` // "task.ended", "task.parked" or "batch.ended"
	DeliveryID string        `json:"deliveryId"`
	SentAt     time.Time     `json:"sentAt"`
	Task       *TaskPayload  `json:"task,omitempty"`
	Batch      *BatchPayload `json:"batch,omitempty"`
}

// TaskPayload is the task snapshot in a delivery.
type TaskPayload struct {
	ID         string          `json:"id"`
	AgentID    string          `json:"agentId"`
	Lane       string          `json:"lane"`
	SessionKey string          `json:"sessionKey,omitempty"`
	BatchID    string          `json:"batchId,omitempty"`
	State      string          `json:"state"` // the state the delivery announces
	Reason     string          `json:"reason"`
	Attempts   int             `json:"attempts"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	EndedAt    time.Time       `json:"endedAt"` // zero for a PARKED task
	// ExecutionTimeMs is the time its attempts spent running, summed: from
	// dispatch to the end of each attempt, in milliseconds.
	ExecutionTimeMs int64 `json:"executionTimeMs"`
	// TabTimeMs and ActionTimeMs are its attempts' two parts as the executor
	// measured them (engine.Attempt.TabTime, ActionTime), summed over the
	// attempts, in milliseconds.
	TabTimeMs    float64           `json:"tabTimeMs"`
	ActionTimeMs float64           `json:"actionTimeMs"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// BrowserPayload is the body of a task delivery in FormatBrowserOS.
type BrowserPayload struct {
	TaskID          string          `json:"taskId"`
	State           string          `json:"state"` // "completed", "failed" or "cancelled"
	Result          json.RawMessage `json:"result,omitempty"`
	Error           string          `json:"error,omitempty"`
	ExecutionTimeMs int64           `json:"executionTimeMs"`
	TabTimeMs       float64         `json:"tabTimeMs"`    // as in TaskPayload
	ActionTimeMs    float64         `json:"actionTimeMs"` // as in TaskPayload
	// SwitchyardState is the task's own state (SUCCEEDED, FAILED, PARKED,
	// EXPIRED, …), for receivers that want the detail.
	SwitchyardState string `json:"switchyardState"`
}

// ExecutionTime sums the durations of t's attempts (an attempt still
// running counts up to now).
func ExecutionTime(t *engine.Task, now time.Time) time.Duration {
	var d time.Duration
	for _, a := range t.Attempts {
		end := a.EndedAt
		if end.IsZero() {
			end = now
		}
		if end.After(a.AssignedAt) {
			d += end.Sub(a.AssignedAt)
		}
	}
	return d
}

// AttemptTimes sums the tab and action times of t's attempts, in
// milliseconds.
func AttemptTimes(t *engine.Task) (tabMs, actionMs float64) {
	var tab, action time.Duration
	for _, a := range t.Attempts {
		tab += a.TabTime
		action += a.ActionTime
	}
	return float64(tab) / float64(time.Millisecond), float64(action) / float64(time.Millisecond)
}

// browserState maps a state to BrowserOS's vocabulary.
func browserState(s engine.State) string {
	switch s {
	case engine.StateSucceeded:
		return "completed"
	case engine.StateCancelled:
		return "cancelled"
	}
	return "failed"
}

// BatchPayload is the batch summary in a delivery.
type BatchPayload struct {
	ID      string         `json:"id"`
	Total   int            `json:"total"`
	Counts  map[string]int `json:"counts"`
	EndedAt time.Time      `json:"endedAt"`
}

func (d *Deliverer) body(ctx context.Context, j job) ([]byte, string, error) {
	p := Payload{DeliveryID: j.id, SentAt: d.opts.Clock.Now().UTC()}
	if j.taskID != "" {
		t, err := d.e.Task(ctx, j.taskID)
		if err != nil {
			return nil, "", err
		}
		st := j.state
		if st == 0 {
			st = t.State
		}
		p.Event = "task.ended"
		if st == engine.StateParked {
			p.Event = "task.parked"
		}
		exec := ExecutionTime(t, p.SentAt).Milliseconds()
		tabMs, actionMs := AttemptTimes(t)
		if d.formatFor(j.url) == FormatBrowserOS {
			b, err := json.Marshal(BrowserPayload{TaskID: t.ID, State: browserState(st), Result: t.Result, Error: t.Error,
				ExecutionTimeMs: exec, TabTimeMs: tabMs, ActionTimeMs: actionMs, SwitchyardState: st.String()})
			return b, p.Event, err
		}
		p.Task = &TaskPayload{ID: t.ID, AgentID: t.Spec.AgentID, Lane: t.Spec.Lane, SessionKey: t.Spec.Session(), BatchID: t.Spec.BatchID,
			State: st.String(), Reason: t.Reason, Attempts: len(t.Attempts), Result: t.Result, Error: t.Error,
			CreatedAt: t.CreatedAt, EndedAt: t.EndedAt, ExecutionTimeMs: exec, TabTimeMs: tabMs, ActionTimeMs: actionMs, Labels: t.Spec.Labels}
	} else {
		bs, err := d.e.Batch(ctx, j.batchID)
		if err != nil {
			return nil, "", err
		}
		p.Event = "batch.ended"
		p.Batch = &BatchPayload{ID: j.batchID, Total: bs.Total, Counts: map[string]int{}, EndedAt: bs.Info.EndedAt}
		for s, n := range bs.Counts {
			p.Batch.Counts[s.String()] = n
		}
	}
	b, err := json.Marshal(p)
	return b, p.Event, err
}

// post sends one attempt of a task's or batch's delivery.
func (d *Deliverer) post(ctx context.Context, j job, event string, body []byte, now time.Time) (status int, permanent bool, err error) {
	return d.Send(ctx, j.url, event, j.id, body, now)
}

// Send makes one signed, SSRF-guarded POST of a JSON body to url, the way
// task and batch deliveries are sent (the endpoint's secret, the headers,
// the timeout, no redirects), for other components that announce through
// webhooks. It returns the receiver's status; permanent says retrying cannot
// help (a refused address, a redirect, a 4xx other than 408 and 429).
func (d *Deliverer) Send(ctx context.Context, url, event, deliveryID string, body []byte, now time.Time) (status int, permanent bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, true, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Switchyard-Webhook/1")
	req.Header.Set(HeaderDelivery, deliveryID)
	req.Header.Set(HeaderEvent, event)
	if secret := d.secretFor(url); secret != "" {
		req.Header.Set(HeaderSignature, Sign(secret, now, body))
	}
	resp, err := d.client.Do(req)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) || errors.Is(err, errRedirect) {
			return 0, true, unwrapURLError(err)
		}
		return 0, false, unwrapURLError(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, false, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, true, fmt.Errorf("the receiver answered %d; redirects are not followed", resp.StatusCode)
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return resp.StatusCode, false, fmt.Errorf("the receiver answered %d", resp.StatusCode)
	default:
		return resp.StatusCode, true, fmt.Errorf("the receiver refused the delivery with %d", resp.StatusCode)
	}
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// secretFor returns the secret of the longest endpoint prefix matching u.
func (d *Deliverer) secretFor(u string) string {
	if ep := d.endpointFor(u); ep != nil && ep.Secret != "" {
		return ep.Secret
	}
	return d.opts.Secret
}

// formatFor returns the body format of the longest endpoint prefix matching u.
func (d *Deliverer) formatFor(u string) Format {
	if ep := d.endpointFor(u); ep != nil && ep.Format != "" {
		return ep.Format
	}
	return FormatSwitchyard
}

func (d *Deliverer) endpointFor(u string) *Endpoint {
	var best *Endpoint
	for i := range d.opts.Endpoints {
		ep := &d.opts.Endpoints[i]
		if strings.HasPrefix(u, ep.Prefix) && (best == nil || len(ep.Prefix) > len(best.Prefix)) {
			best = ep
		}
	}
	return best
}

// Sign returns the signature header value for body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Verify checks a signature header against body: the receiver's side, for
// Go receivers and tests. tolerance bounds the age of the timestamp.
func Verify(secret, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || sig == "" {
		return errors.New("malformed signature header")
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("signature timestamp is %s off", age)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	if !hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(sig)) {
		return errors.New("signature mismatch")
	}
	return nil
}

// RefusedError says an address was refused by the SSRF guard.
type RefusedError = netguard.RefusedError

// Public reports whether ip is a public unicast address (netguard.Public).
func Public(ip netip.Addr) bool { return netguard.Public(ip) }

// redact drops credentials from a URL before it is recorded.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User = nil
	return u.String()
}

func (d *Deliverer) sleep(ctx context.Context, t time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(t):
	}
}
