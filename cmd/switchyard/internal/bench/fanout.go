// The fanout mode: many WebSocket subscribers follow the whole task event
// stream while a generator submits tasks at a steady rate. The subscribers
// parse as little as they can (they count events and keep the last seq), so
// that the client's own cost stays small next to the server's.

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/switchyard/switchyard/graph/client"
)

// FanoutResult is what the fanout mode measured.
type FanoutResult struct {
	Subscribers     int     `json:"subscribers"`
	Connected       int     `json:"connected"`
	Protocol        string  `json:"protocol"`
	Subscription    string  `json:"subscription"`
	TargetEventsSec int     `json:"targetEventsPerSec"`
	EventsPerTask   float64 `json:"eventsPerTask"`

	// During the fan-out phase.
	Events         uint64   `json:"events"` // committed by the engine
	EventsPerSec   float64  `json:"eventsPerSec"`
	Deliveries     uint64   `json:"deliveries"`
	DeliveriesSec  float64  `json:"deliveriesPerSec"`
	Completeness   float64  `json:"completeness"` // deliveries / events in the seq range each subscriber saw
	Messages       uint64   `json:"messages"`
	LaggedNotices  uint64   `json:"laggedNotices"`
	SkippedEvents  uint64   `json:"skippedEvents"`
	Dropped        int      `json:"droppedSubscribers"`
	DeliveryMs     *Summary `json:"deliveryLatencyMs,omitempty"`
	PerSubscriber  *Summary `json:"eventsPerSubscriber,omitempty"` // counts, not ms
	FanoutSubmitMs *Summary `json:"submitLatencyMs,omitempty"`
	FanoutDispatch float64  `json:"dispatchP99Ms"`

	// The same generator without subscribers, first.
	BaselineEventsPerSec float64  `json:"baselineEventsPerSec"`
	BaselineSubmitMs     *Summary `json:"baselineSubmitLatencyMs,omitempty"`
	BaselineDispatch     float64  `json:"baselineDispatchP99Ms"`
}

func (f *FanoutResult) print(w io.Writer) {
	fmt.Fprintf(w, "  subscribers %d connected of %d (%s, %s), %d dropped\n", f.Connected, f.Subscribers, f.Protocol, f.Subscription, f.Dropped)
	fmt.Fprintf(w, "  engine events  %d (%.0f/s; target %d/s, %.1f per task)\n", f.Events, f.EventsPerSec, f.TargetEventsSec, f.EventsPerTask)
	fmt.Fprintf(w, "  deliveries     %d (%.0f/s) in %d messages; completeness %.4f; LAGGED notices %d (%d events skipped)\n",
		f.Deliveries, f.DeliveriesSec, f.Messages, f.Completeness, f.LaggedNotices, f.SkippedEvents)
	if s := f.DeliveryMs; s != nil {
		fmt.Fprintf(w, "  delivery latency ms (commit → client) p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", s.P50, s.P90, s.P99, s.Max)
	}
	if s := f.PerSubscriber; s != nil {
		fmt.Fprintf(w, "  events per subscriber min %.0f  p50 %.0f  max %.0f\n", s.Min, s.P50, s.Max)
	}
	fmt.Fprintf(w, "  engine without subscribers: %.0f events/s, submit p50 %.2f ms p99 %.2f ms, dispatch p99 ≤ %.3f ms\n",
		f.BaselineEventsPerSec, pct(f.BaselineSubmitMs, 50), pct(f.BaselineSubmitMs, 99), f.BaselineDispatch)
	fmt.Fprintf(w, "  engine with subscribers:    %.0f events/s, submit p50 %.2f ms p99 %.2f ms, dispatch p99 ≤ %.3f ms\n",
		f.EventsPerSec, pct(f.FanoutSubmitMs, 50), pct(f.FanoutSubmitMs, 99), f.FanoutDispatch)
}

func pct(s *Summary, p int) float64 {
	if s == nil {
		return math.NaN()
	}
	if p == 50 {
		return s.P50
	}
	return s.P99
}

// statsView is what fanout reads of the server's stats.
type statsView = DispatchLatencyStats

func readStats(ctx context.Context, hc *http.Client, endpoint string) (statsView, error) {
	gql := client.New(endpoint)
	gql.HTTP = hc
	res, err := DispatchLatency(ctx, gql)
	if err != nil {
		return statsView{}, err
	}
	return res.Stats, nil
}

// dispatchP99 estimates the p99 dispatch latency between two stats reads.
func dispatchP99(a, b statsView) float64 {
	counts := map[float64]uint64{}
	key := func(le *float64) float64 {
		if le == nil {
			return math.Inf(1)
		}
		return *le
	}
	for _, x := range b.DispatchLatency.Buckets {
		counts[key(x.LeMs)] += uint64(x.Count)
	}
	for _, x := range a.DispatchLatency.Buckets {
		counts[key(x.LeMs)] -= uint64(x.Count)
	}
	var bounds []float64
	var total uint64
	for le, n := range counts {
		if n > 0 {
			bounds = append(bounds, le)
			total += n
		}
	}
	if total == 0 {
		return 0
	}
	sortFloats(bounds)
	rank := uint64(math.Ceil(0.99 * float64(total)))
	var seen uint64
	for _, le := range bounds {
		seen += counts[le]
		if seen >= rank {
			return le
		}
	}
	return bounds[len(bounds)-1]
}

func sortFloats(f []float64) {
	for i := 1; i < len(f); i++ {
		for j := i; j > 0 && f[j] < f[j-1]; j-- {
			f[j], f[j-1] = f[j-1], f[j]
		}
	}
}

// generator submits tasks at a steady rate: every 10 ms, a batch of the
// tasks owed since it started, so that a slow answer makes the next batch
// larger instead of lowering the rate.
type generator struct {
	hc       *http.Client
	endpoint string
	perSec   float64 // tasks per second
	mu       sync.Mutex
	lat      []time.Duration
	errs     atomic.Uint64
	firstErr atomic.Pointer[string]
}

func (g *generator) run(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	sent := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n := min(int(time.Since(start).Seconds()*g.perSec)-sent, 100)
		if n <= 0 {
			continue
		}
		sent += n
		body, _ := requestBody(0, true, n)
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := g.hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				g.fail(err.Error())
			}
			continue
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"errors"`)) {
			g.fail(firstLine(string(data)))
			continue
		}
		g.mu.Lock()
		g.lat = append(g.lat, time.Since(start))
		g.mu.Unlock()
	}
}

func (g *generator) fail(msg string) {
	g.errs.Add(1)
	g.firstErr.CompareAndSwap(nil, &msg)
}

func (g *generator) take() []time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.lat
	g.lat = nil
	return l
}

// phase runs the generator for d and returns the events committed, the
// dispatch p99 and the submit latencies of the window.
func (g *generator) phase(ctx context.Context, d time.Duration) (events uint64, p99 float64, lat []time.Duration, err error) {
	before, err := readStats(ctx, g.hc, g.endpoint)
	if err != nil {
		return 0, 0, nil, err
	}
	g.take()
	sleep(ctx, d)
	after, err := readStats(ctx, g.hc, g.endpoint)
	if err != nil {
		return 0, 0, nil, err
	}
	return uint64(after.LastSeq - before.LastSeq), dispatchP99(before, after), g.take(), nil
}

func runFanout(ctx context.Context, endpoint string, o Options, stderr io.Writer) (*Result, error) {
	hc := httpClient(8, o.Token)
	f := &FanoutResult{Subscribers: o.Subscribers, Protocol: o.Protocol, TargetEventsSec: o.Rate, Subscription: "taskEvents"}
	if o.Feed {
		f.Subscription = "taskEventFeed"
	}
	// Calibrate: how many events does a task make?
	before, err := readStats(ctx, hc, endpoint)
	if err != nil {
		return nil, fmt.Errorf("stats: %w", err)
	}
	body, _ := requestBody(0, true, 100)
	if _, err := hc.Post(endpoint, "application/json", bytes.NewReader(body)); err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond)
	after, err := readStats(ctx, hc, endpoint)
	if err != nil {
		return nil, err
	}
	f.EventsPerTask = float64(after.LastSeq-before.LastSeq) / 100
	if f.EventsPerTask <= 0 {
		return nil, errors.New("calibration: the engine recorded no events")
	}
	g := &generator{hc: hc, endpoint: endpoint, perSec: float64(o.Rate) / f.EventsPerTask}
	gctx, stopGen := context.WithCancel(ctx)
	defer stopGen()
	go g.run(gctx)

	// Baseline: the generator alone.
	sleep(ctx, o.Warmup)
	base := max(o.Duration/2, 2*time.Second)
	events, p99, lat, err := g.phase(ctx, base)
	if err != nil {
		return nil, err
	}
	f.BaselineEventsPerSec = float64(events) / base.Seconds()
	f.BaselineDispatch, f.BaselineSubmitMs = p99, summarize(lat)

	// Connect the subscribers.
	subs := make([]*subscriber, o.Subscribers)
	var wg sync.WaitGroup
	sctx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	dialer := httpClient(o.Subscribers+8, o.Token)
	sem := make(chan struct{}, 64)
	var dialErr atomic.Pointer[string]
	for i := range subs {
		s := &subscriber{}
		subs[i] = s
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			err := s.connect(sctx, dialer, endpoint, o.Protocol, o.Feed)
			<-sem
			if err != nil {
				msg := err.Error()
				dialErr.CompareAndSwap(nil, &msg)
				return
			}
			s.read(sctx)
		}()
	}
	for i := 0; i < cap(sem); i++ {
		sem <- struct{}{}
	}
	for _, s := range subs {
		if s.connected.Load() {
			f.Connected++
		}
	}
	if f.Connected == 0 {
		msg := "no subscriber connected"
		if p := dialErr.Load(); p != nil {
			msg += ": " + *p
		}
		return nil, errors.New(msg)
	}
	if !o.JSON {
		fmt.Fprintf(stderr, "%d subscribers connected; measuring\n", f.Connected)
	}
	sleep(ctx, time.Second) // every subscription started, backlog cleared

	// Fan-out: the same generator, with the subscribers.
	for _, s := range subs {
		s.reset()
	}
	start := time.Now()
	events, p99, lat, err = g.phase(ctx, o.Duration)
	if err != nil {
		return nil, err
	}
	window := time.Since(start)
	// Let deliveries of the window's last events arrive.
	sleep(ctx, 500*time.Millisecond)
	stopSubs()
	stopGen()
	wg.Wait()

	f.Events, f.EventsPerSec = events, float64(events)/window.Seconds()
	f.FanoutDispatch, f.FanoutSubmitMs = p99, summarize(lat)
	var delivery, perSub []time.Duration
	var expected uint64
	for _, s := range subs {
		if !s.connected.Load() {
			continue
		}
		if s.dropped.Load() {
			f.Dropped++
		}
		n := s.events.Load()
		f.Deliveries += n
		s.mu.Lock()
		if s.lastSeq >= s.firstSeq && s.firstSeq > 0 {
			expected += s.lastSeq - s.firstSeq + 1
		}
		s.mu.Unlock()
		f.Messages += s.messages.Load()
		f.LaggedNotices += s.lagged.Load()
		f.SkippedEvents += s.skipped.Load()
		perSub = append(perSub, time.Duration(n)*time.Millisecond) // counts, as "ms" in the summary
		delivery = append(delivery, s.latencies()...)
	}
	f.DeliveriesSec = float64(f.Deliveries) / window.Seconds()
	if expected > 0 {
		// Every event between the first and the last a subscriber saw
		// should have reached it (LAGGED notices stand for skipped ones).
		f.Completeness = float64(f.Deliveries) / float64(expected)
	}
	f.DeliveryMs, f.PerSubscriber = summarize(delivery), summarize(perSub)
	r := &Result{Seconds: window.Seconds(), Fanout: f, Errors: g.errs.Load()}
	if p := g.firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	return r, nil
}

// subscriber is one WebSocket subscription, parsed lightly.
type subscriber struct {
	conn      *websocket.Conn
	connected atomic.Bool
	dropped   atomic.Bool
	counting  atomic.Bool
	events    atomic.Uint64
	messages  atomic.Uint64
	lagged    atomic.Uint64
	skipped   atomic.Uint64
	mu        sync.Mutex
	lat       []time.Duration
	firstSeq  uint64 // of the window, guarded by mu
	lastSeq   uint64
}

func (s *subscriber) reset() {
	s.events.Store(0)
	s.messages.Store(0)
	s.lagged.Store(0)
	s.skipped.Store(0)
	s.mu.Lock()
	s.lat = s.lat[:0]
	s.firstSeq, s.lastSeq = 0, 0
	s.mu.Unlock()
	s.counting.Store(true)
}

func (s *subscriber) latencies() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lat
}

func (s *subscriber) connect(ctx context.Context, hc *http.Client, endpoint, protocol string, feed bool) error {
	u := "ws" + strings.TrimPrefix(endpoint, "http")
	c, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: hc, Subprotocols: []string{protocol}})
	if err != nil {
		return err
	}
	c.SetReadLimit(64 << 20)
	s.conn = c
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"type":"connection_init","payload":{}}`)); err != nil {
		return err
	}
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(`"connection_ack"`)) {
			break
		}
	}
	query := FollowEvents_Operation
	if feed {
		query = FollowFeed_Operation
	}
	typ := "subscribe"
	if protocol == "graphql-ws" {
		typ = "start"
	}
	msg, _ := json.Marshal(map[string]any{"id": "1", "type": typ, "payload": map[string]any{"query": query}})
	if err := c.Write(ctx, websocket.MessageText, msg); err != nil {
		return err
	}
	s.connected.Store(true)
	return nil
}

var (
	seqKey     = []byte(`"seq":`)
	atKey      = []byte(`"at":"`)
	laggedKey  = []byte(`"kind":"LAGGED"`)
	skippedKey = []byte(`"skipped":`)
	pingMsg    = []byte(`"type":"ping"`)
)

func (s *subscriber) read(ctx context.Context) {
	defer s.conn.CloseNow()
	n := 0
	buf := make([]byte, 0, 64<<10)
	for {
		data, err := readMessage(ctx, s.conn, buf[:0])
		buf = data[:0]
		if err != nil {
			if ctx.Err() == nil {
				s.dropped.Store(true)
			}
			return
		}
		if len(data) < 64 && bytes.Contains(data, pingMsg) {
			_ = s.conn.Write(ctx, websocket.MessageText, []byte(`{"type":"pong"}`))
			continue
		}
		if !s.counting.Load() {
			continue
		}
		events := uint64(bytes.Count(data, seqKey))
		if events == 0 {
			continue
		}
		s.messages.Add(1)
		if l := uint64(bytes.Count(data, laggedKey)); l > 0 {
			s.lagged.Add(l)
			events -= l
			rest := data
			for {
				i := bytes.Index(rest, skippedKey)
				if i < 0 {
					break
				}
				rest = rest[i+len(skippedKey):]
				j := bytes.IndexAny(rest, ",}")
				if v, err := strconv.ParseUint(string(rest[:j]), 10, 64); err == nil {
					s.skipped.Add(v)
				}
			}
		}
		s.events.Add(events)
		first, last := seqAt(data, bytes.Index(data, seqKey)), seqAt(data, bytes.LastIndex(data, seqKey))
		s.mu.Lock()
		if s.firstSeq == 0 {
			s.firstSeq = first
		}
		s.lastSeq = last
		s.mu.Unlock()
		// Sample the delivery latency: the last event's commit time.
		if n++; n%16 == 1 {
			if i := bytes.LastIndex(data, atKey); i >= 0 {
				rest := data[i+len(atKey):]
				if j := bytes.IndexByte(rest, '"'); j > 0 {
					if at, err := time.Parse(time.RFC3339Nano, string(rest[:j])); err == nil {
						s.mu.Lock()
						s.lat = append(s.lat, time.Since(at))
						s.mu.Unlock()
					}
				}
			}
		}
	}
}

// seqAt parses the number after the "seq": key at i.
func seqAt(data []byte, i int) uint64 {
	if i < 0 {
		return 0
	}
	rest := data[i+len(seqKey):]
	j := bytes.IndexAny(rest, ",}")
	if j < 0 {
		return 0
	}
	v, _ := strconv.ParseUint(string(rest[:j]), 10, 64)
	return v
}

// readMessage reads one message into buf, reusing its memory.
func readMessage(ctx context.Context, c *websocket.Conn, buf []byte) ([]byte, error) {
	_, r, err := c.Reader(ctx)
	if err != nil {
		return buf, err
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
