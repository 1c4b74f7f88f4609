package heartbeat_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/clock"
	"github.com/switchyard/switchyard/heartbeat"
	"github.com/switchyard/switchyard/internal/netguard"
	"github.com/switchyard/switchyard/internal/waitfor"
)

// settings is an in-memory heartbeat.Settings.
type settings struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *settings) SaveSetting(_ context.Context, key string, value []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	if value == nil {
		delete(s.m, key)
	} else {
		s.m[key] = value
	}
	return nil
}

func (s *settings) Settings(prefix string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

type fixedResolver map[string]string

func (r fixedResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// loopbackOnly allows 127.0.0.1 (where the test targets listen) and nothing
// else that is not public.
func loopbackOnly() *netguard.Guard {
	return &netguard.Guard{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: fixedResolver{"metadata.example": "169.254.169.254", "local.example": "127.0.0.1"}}
}

func newChecker(t *testing.T, st *settings, g *netguard.Guard) *heartbeat.Checker {
	t.Helper()
	c := heartbeat.New(st, heartbeat.Options{Guard: g})
	require.NoError(t, c.Start(context.Background()))
	t.Cleanup(c.Stop)
	return c
}

func create(t *testing.T, c *heartbeat.Checker, spec heartbeat.Spec) *heartbeat.Check {
	t.Helper()
	if spec.Name == "" {
		spec.Name = "target"
	}
	ch, err := c.Create(context.Background(), spec)
	require.NoError(t, err)
	return ch
}

func probe(t *testing.T, c *heartbeat.Checker, id string) *heartbeat.Check {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := c.Probe(ctx, id)
	require.NoError(t, err)
	return ch
}

func last(ch *heartbeat.Check) heartbeat.Sample { return ch.History[len(ch.History)-1] }

// A target that goes down and comes back makes exactly two events, one per
// change; the probes in between announce nothing.
func TestDownAndUpAnnounceEachChangeOnce(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	c := newChecker(t, &settings{}, loopbackOnly())
	events, cancel := c.Subscribe(16)
	defer cancel()
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour})
	require.Equal(t, heartbeat.StateUnknown, ch.State)

	require.Equal(t, heartbeat.StateUp, probe(t, c, ch.ID).State)
	require.Equal(t, heartbeat.StateUp, probe(t, c, ch.ID).State)
	healthy.Store(false)
	down := probe(t, c, ch.ID)
	require.Equal(t, heartbeat.StateDown, down.State)
	require.Equal(t, "answered 503, expected 2xx", last(down).Error)
	require.Equal(t, 503, last(down).Status)
	require.Equal(t, heartbeat.StateDown, probe(t, c, ch.ID).State)
	healthy.Store(true)
	up := probe(t, c, ch.ID)
	require.Equal(t, heartbeat.StateUp, up.State)
	require.Len(t, up.History, 5, "a disabled check is probed only when asked")

	got := drain(events)
	require.Len(t, got, 2)
	require.Equal(t, [2]heartbeat.State{heartbeat.StateUp, heartbeat.StateDown}, [2]heartbeat.State{got[0].From, got[0].To})
	require.Equal(t, [2]heartbeat.State{heartbeat.StateDown, heartbeat.StateUp}, [2]heartbeat.State{got[1].From, got[1].To})
	require.Equal(t, ch.ID, got[1].CheckID)
}

// drain returns the events already delivered (they are sent before the probe
// that makes them returns).
func drain(ch <-chan heartbeat.Event) []heartbeat.Event {
	var out []heartbeat.Event
	for {
		select {
		case ev := <-ch:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// A target that accepts the connection and never answers is DOWN after the
// check's timeout, not later.
func TestHangingTargetIsDownAfterTheTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := newChecker(t, &settings{}, loopbackOnly())
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, Timeout: 200 * time.Millisecond})
	start := time.Now()
	got := probe(t, c, ch.ID)
	require.Less(t, time.Since(start), 20*time.Second, "bounded by the timeout (generously, for a busy machine)")
	require.Equal(t, heartbeat.StateDown, got.State)
	require.Equal(t, "no answer within the 200ms timeout", last(got).Error)
	require.GreaterOrEqual(t, last(got).Latency, 200*time.Millisecond)
}

// A slow answer within the timeout is UP, its latency recorded.
func TestSlowAnswerRecordsItsLatency(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(150 * time.Millisecond)
	}))
	defer srv.Close()
	c := newChecker(t, &settings{}, loopbackOnly())
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, Timeout: 30 * time.Second})
	got := probe(t, c, ch.ID)
	require.Equal(t, heartbeat.StateUp, got.State)
	require.True(t, last(got).OK)
	require.Equal(t, 200, last(got).Status)
	require.GreaterOrEqual(t, last(got).Latency, 150*time.Millisecond)
}

// A redirect to a private address is refused by the guard when followed, and
// judged as the 3xx it is when not.
func TestRedirectToAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	for _, to := range []string{"http://10.1.2.3/", "http://metadata.example/latest/meta-data/", "http://[::1]/"} {
		srv := httptest.NewServer(http.RedirectHandler(to, http.StatusFound))
		defer srv.Close()
		c := newChecker(t, &settings{}, loopbackOnly())
		ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, FollowRedirects: true})
		got := probe(t, c, ch.ID)
		require.Equal(t, heartbeat.StateDown, got.State, to)
		require.Contains(t, last(got).Error, "is not public", to)
		require.Zero(t, last(got).Status, to)

		ch = create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour})
		got = probe(t, c, ch.ID)
		require.Equal(t, heartbeat.StateDown, got.State, to)
		require.Equal(t, "answered 302, expected 2xx", last(got).Error)

		ch = create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, ExpectStatus: 302})
		require.Equal(t, heartbeat.StateUp, probe(t, c, ch.ID).State, "a 302 is what this check expects")
	}
}

// A target that answers bytes that are not HTTP is DOWN with a clear error.
func TestGarbageAnswerIsDown(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte("\x00\x01garbage that is not HTTP at all\r\n\r\n"))
			}()
		}
	}()
	c := newChecker(t, &settings{}, loopbackOnly())
	ch := create(t, c, heartbeat.Spec{URL: "http://" + ln.Addr().String() + "/", Interval: time.Hour, Timeout: 5 * time.Second})
	got := probe(t, c, ch.ID)
	require.Equal(t, heartbeat.StateDown, got.State)
	require.Contains(t, last(got).Error, "malformed HTTP")
}

// By default a check reaches public addresses only: a literal private
// address is refused when the check is made, a name that resolves to one
// when it is probed.
func TestDefaultGuardRefusesPrivateTargets(t *testing.T) {
	t.Parallel()
	c := newChecker(t, &settings{}, &netguard.Guard{Resolver: fixedResolver{"local.example": "127.0.0.1"}, Settings: "heartbeats.allowPrivate"})
	for _, u := range []string{"http://127.0.0.1:8080/", "http://169.254.169.254/latest/", "http://[::1]/", "http://10.0.0.1/"} {
		_, err := c.Create(context.Background(), heartbeat.Spec{Name: "x", URL: u})
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), u)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, u)
		require.Equal(t, "url", ee.Field, u)
		require.Contains(t, ee.Message, "heartbeats.allowPrivate", u)
	}
	require.Empty(t, c.List(context.Background()), "a refused check is not kept")

	ch := create(t, c, heartbeat.Spec{URL: "http://local.example:1/", Interval: time.Hour})
	got := probe(t, c, ch.ID)
	require.Equal(t, heartbeat.StateDown, got.State)
	require.Contains(t, last(got).Error, "heartbeat check address 127.0.0.1 of local.example is not public")
}

// Bad specs are refused with the field at fault, and change nothing.
func TestBadSpecsAreRefused(t *testing.T) {
	t.Parallel()
	c := newChecker(t, &settings{}, loopbackOnly())
	for field, spec := range map[string]heartbeat.Spec{
		"name":             {URL: "http://127.0.0.1/"},
		"url":              {Name: "x", URL: "ftp://example.com/"},
		"method":           {Name: "x", URL: "http://127.0.0.1/", Method: "POST"},
		"intervalMs":       {Name: "x", URL: "http://127.0.0.1/", Interval: time.Millisecond},
		"timeoutMs":        {Name: "x", URL: "http://127.0.0.1/", Interval: 2 * time.Second, Timeout: 3 * time.Second},
		"expectStatus":     {Name: "x", URL: "http://127.0.0.1/", ExpectStatus: 1000},
		"failureThreshold": {Name: "x", URL: "http://127.0.0.1/", FailureThreshold: -1},
		"historyLength":    {Name: "x", URL: "http://127.0.0.1/", HistoryLength: heartbeat.MaxHistoryLength + 1},
		"webhookUrl":       {Name: "x", URL: "http://127.0.0.1/", WebhookURL: "http://127.0.0.1/hook"},
	} {
		_, err := c.Create(context.Background(), spec)
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), field)
		require.Equal(t, engine.CodeInvalidInput, ee.Code, field)
		require.Equal(t, field, ee.Field)
	}
	for field, spec := range map[string]heartbeat.Spec{
		"url":        {Name: "x", URL: "http://user:secret@127.0.0.1/health"},
		"webhookUrl": {Name: "x", URL: "http://127.0.0.1/", WebhookURL: "https://user:secret@hooks.example/"},
	} {
		_, err := heartbeat.New(&settings{}, heartbeat.Options{Guard: loopbackOnly(), Webhooks: &recorder{}}).Create(context.Background(), spec)
		var ee *engine.Error
		require.True(t, errors.As(err, &ee), field)
		require.Equal(t, field, ee.Field)
		require.Contains(t, ee.Message, "credentials")
	}
	require.Empty(t, c.List(context.Background()))
}

// guardedSender is a Sender with the webhook deliverer's address check.
type guardedSender struct {
	recorder
	guard netguard.Guard
}

func (g *guardedSender) CheckURL(raw string) error { return g.guard.CheckURL(raw) }

// A webhook URL whose address the webhook deliverer will not call is
// refused when the check is created, as its probe URL would be.
func TestAWebhookURLTheDelivererRefusesIsRefusedAtCreation(t *testing.T) {
	t.Parallel()
	c := heartbeat.New(&settings{}, heartbeat.Options{Guard: loopbackOnly(), Webhooks: &guardedSender{guard: netguard.Guard{What: "webhook"}}})
	_, err := c.Create(context.Background(), heartbeat.Spec{Name: "x", URL: "http://127.0.0.1/", WebhookURL: "http://169.254.169.254/latest"})
	var ee *engine.Error
	require.True(t, errors.As(err, &ee), "%v", err)
	require.Equal(t, engine.CodeInvalidInput, ee.Code)
	require.Equal(t, "webhookUrl", ee.Field)
	require.Contains(t, ee.Message, "webhook address 169.254.169.254")
	require.Empty(t, c.List(context.Background()))
	_, err = c.Create(context.Background(), heartbeat.Spec{Name: "x", URL: "http://127.0.0.1/", WebhookURL: "https://hooks.example/hb"})
	require.NoError(t, err, "a name is checked when it is called")
}

// Enabled checks run on their interval, on the checker's clock; their
// state and history survive a restart.
func TestChecksRunOnTheirIntervalAndSurviveARestart(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &settings{}
	c := heartbeat.New(st, heartbeat.Options{Guard: loopbackOnly(), Clock: clk})
	require.NoError(t, c.Start(context.Background()))
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: 10 * time.Second, Enabled: true, FailureThreshold: 2})
	waitHistory := func(c *heartbeat.Checker, n int) {
		waitfor.Eventually(t, fmt.Sprintf("%d probes, and the next one armed", n), func() bool {
			got, err := c.Get(context.Background(), ch.ID)
			return err == nil && len(got.History) >= n && !got.NextProbeAt.IsZero() && got.NextProbeAt.After(got.LastProbeAt)
		})
	}
	clk.Advance(0)    // the fake clock runs what is due at its next move
	waitHistory(c, 1) // the probe made at creation
	clk.Advance(10 * time.Second)
	waitHistory(c, 2)
	got, err := c.Get(context.Background(), ch.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateUp, got.State)
	require.Equal(t, clk.Now().Add(10*time.Second), got.NextProbeAt)
	c.Stop()

	again := heartbeat.New(st, heartbeat.Options{Guard: loopbackOnly(), Clock: clk})
	require.NoError(t, again.Start(context.Background()))
	defer again.Stop()
	back, err := again.Get(context.Background(), ch.ID)
	require.NoError(t, err)
	require.Equal(t, heartbeat.StateUp, back.State)
	require.Len(t, back.History, 2)
	require.Equal(t, 2, back.Spec.FailureThreshold)
	clk.Advance(10 * time.Second)
	waitHistory(again, 3)
	require.EqualValues(t, 3, hits.Load())

	require.NoError(t, again.Delete(context.Background(), ch.ID))
	require.Empty(t, st.Settings("heartbeat/"), "a deleted check leaves nothing stored")
}

// recorder is a webhook sender that records what it is asked to send.
type recorder struct {
	mu     sync.Mutex
	bodies []string
	fail   int // fail this many sends first
}

func (r *recorder) Send(_ context.Context, _, event, id string, body []byte, _ time.Time) (int, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return 503, false, errors.New("the receiver answered 503")
	}
	r.bodies = append(r.bodies, event+" "+id+" "+string(body))
	return 200, false, nil
}

// A state change is offered to the check's webhook until it is taken.
func TestStateChangesGoToTheWebhook(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	rec := &recorder{fail: 1}
	st := &settings{}
	c := heartbeat.New(st, heartbeat.Options{Guard: loopbackOnly(), Webhooks: rec, WebhookBackoff: time.Millisecond})
	require.NoError(t, c.Start(context.Background()))
	defer c.Stop()
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, WebhookURL: "https://hooks.example/hb"})
	require.Equal(t, heartbeat.StateDown, probe(t, c, ch.ID).State, "UNKNOWN → DOWN is announced")
	waitfor.Eventually(t, "the second delivery attempt to succeed", func() bool {
		got, _ := c.Get(context.Background(), ch.ID)
		return len(got.Webhooks) == 2 && got.Webhooks[1].Delivered
	})
	got, _ := c.Get(context.Background(), ch.ID)
	require.False(t, got.Webhooks[0].Delivered)
	require.Equal(t, 503, got.Webhooks[0].HTTPStatus)
	rec.mu.Lock()
	require.Len(t, rec.bodies, 1)
	require.Contains(t, rec.bodies[0], `heartbeat.state `+ch.ID+`.1 {"event":"heartbeat.state"`)
	require.Contains(t, rec.bodies[0], `"state":"DOWN","previousState":"UNKNOWN"`)
	rec.mu.Unlock()

	// The deliveries are recorded on the check after its state was saved:
	// they are written at the latest when the checker stops.
	c.Stop()
	again := heartbeat.New(st, heartbeat.Options{Guard: loopbackOnly(), Webhooks: rec})
	require.NoError(t, again.Start(context.Background()))
	defer again.Stop()
	back, err := again.Get(context.Background(), ch.ID)
	require.NoError(t, err)
	require.Len(t, back.Webhooks, 2, "both delivery attempts survive a restart")
	require.True(t, back.Webhooks[1].Delivered)
}

// With a failure threshold, a new check of a target that is down stays
// UNKNOWN until enough probes have failed in a row, then is DOWN, announced
// once.
func TestFailureThresholdDecidesDownAfterThatManyFailures(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer srv.Close()
	c := newChecker(t, &settings{}, loopbackOnly())
	events, cancel := c.Subscribe(16)
	defer cancel()
	ch := create(t, c, heartbeat.Spec{URL: srv.URL, Interval: time.Hour, FailureThreshold: 3})
	for i := 1; i <= 2; i++ {
		got := probe(t, c, ch.ID)
		require.Equal(t, heartbeat.StateUnknown, got.State)
		require.Equal(t, i, got.ConsecutiveFailures)
	}
	require.Empty(t, drain(events))
	require.Equal(t, heartbeat.StateDown, probe(t, c, ch.ID).State)
	require.Equal(t, heartbeat.StateDown, probe(t, c, ch.ID).State)
	got := drain(events)
	require.Len(t, got, 1)
	require.Equal(t, [2]heartbeat.State{heartbeat.StateUnknown, heartbeat.StateDown}, [2]heartbeat.State{got[0].From, got[0].To})
}
