package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/engine/enginetest"
	"github.com/switchyard/switchyard/internal/waitfor"
	"github.com/switchyard/switchyard/webhook"
)

// receiver is a local webhook endpoint that records what it gets and answers
// with the statuses it is told to, in order (then 200).
type receiver struct {
	mu       sync.Mutex
	bodies   [][]byte
	headers  []http.Header
	statuses []int
	srv      *httptest.Server
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	r := &receiver{statuses: statuses}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.headers = append(r.headers, req.Header.Clone())
		status := 200
		if len(r.statuses) > 0 {
			status, r.statuses = r.statuses[0], r.statuses[1:]
		}
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func loopback() []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")} }

func start(t *testing.T, h *enginetest.Harness, opts webhook.Options) *webhook.Deliverer {
	t.Helper()
	opts.Clock = h.Clock
	d := webhook.New(h.Engine, opts) // before any event: nothing is missed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

func deliveries(t *testing.T, h *enginetest.Harness, id string, n int) []engine.WebhookDelivery {
	t.Helper()
	var got []engine.WebhookDelivery
	waitfor.Eventually(t, fmt.Sprintf("task %s has %d deliveries", id, n), func() bool {
		tk, err := h.Engine.Task(context.Background(), id)
		require.NoError(t, err)
		got = tk.Webhooks
		return len(got) >= n
	})
	return got
}

func TestATaskWebhookIsSignedAndRecorded(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	r := newReceiver(t)
	start(t, h, webhook.Options{AllowNetworks: loopback(), Endpoints: []webhook.Endpoint{{Prefix: r.srv.URL, Secret: "s3cret"}}})
	task := h.Submit(enginetest.Spec("a").Obj())
	withHook := enginetest.Spec("a").Obj()
	withHook.WebhookURL = r.srv.URL + "/hook"
	hooked := h.Submit(withHook)
	require.NoError(t, h.Exec.Succeed(task.ID, `{}`))
	require.NoError(t, h.Exec.Finish(hooked.ID, engine.Outcome{Result: json.RawMessage(`{"title":"done"}`),
		TabTime: 1500 * time.Microsecond, ActionTime: 42 * time.Millisecond}))

	ds := deliveries(t, h, hooked.ID, 1)
	require.True(t, ds[0].Delivered)
	require.Equal(t, 200, ds[0].HTTPStatus)
	require.Equal(t, 1, r.count(), "one delivery, for the task that asked for it")

	r.mu.Lock()
	body, hdr := r.bodies[0], r.headers[0]
	r.mu.Unlock()
	require.NoError(t, webhook.Verify("s3cret", hdr.Get(webhook.HeaderSignature), body, time.Now(), 365*24*time.Hour))
	require.Error(t, webhook.Verify("wrong", hdr.Get(webhook.HeaderSignature), body, time.Now(), 365*24*time.Hour))
	require.Equal(t, ds[0].ID, hdr.Get(webhook.HeaderDelivery))
	var p webhook.Payload
	require.NoError(t, json.Unmarshal(body, &p))
	require.Equal(t, "task.ended", p.Event)
	require.Equal(t, "SUCCEEDED", p.Task.State)
	require.JSONEq(t, `{"title":"done"}`, string(p.Task.Result))
	require.InDelta(t, 1.5, p.Task.TabTimeMs, 1e-9, "the attempt's tab time, as the executor measured it")
	require.InDelta(t, 42, p.Task.ActionTimeMs, 1e-9, "and its action time")
}

func TestFailedDeliveriesAreRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	r := newReceiver(t, 500, 503)
	start(t, h, webhook.Options{AllowNetworks: loopback(), Backoff: time.Second})
	spec := enginetest.Spec("a").Obj()
	spec.WebhookURL = r.srv.URL
	task := h.Submit(spec)
	require.NoError(t, h.Exec.Fail(task.ID, engine.Permanent(errors.New("nope"))))
	ds := deliveries(t, h, task.ID, 1)
	require.Equal(t, 500, ds[0].HTTPStatus)
	require.False(t, ds[0].Final)
	h.Clock.Advance(time.Second)
	ds = deliveries(t, h, task.ID, 2)
	require.Equal(t, 503, ds[1].HTTPStatus)
	// The second retry waits twice as long: 1999 ms on, it is the next thing
	// the clock runs, 1 ms later (the fake clock runs what falls due inside
	// Advance, so nothing has been sent in between).
	h.Clock.Advance(1999 * time.Millisecond)
	due, ok := h.Clock.NextDue()
	require.True(t, ok, "the retry is scheduled")
	require.Equal(t, h.Clock.Now().Add(time.Millisecond), due, "the second retry waits twice as long")
	require.Equal(t, 2, r.count())
	h.Clock.Advance(time.Millisecond)
	ds = deliveries(t, h, task.ID, 3)
	require.True(t, ds[2].Delivered)
	require.Equal(t, ds[0].ID, ds[2].ID, "every attempt of a delivery shares its id")
}

func TestTheSSRFGuardRefusesNonPublicAddressesByDefault(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	r := newReceiver(t)
	start(t, h, webhook.Options{Resolver: fixedResolver{"internal.example": "10.1.2.3"}})
	for _, u := range []string{
		r.srv.URL, // 127.0.0.1
		"http://169.254.169.254/latest/meta-data/", // cloud metadata
		"http://internal.example/hook",             // a name that resolves into 10.0.0.0/8
		"http://[::1]:9/hook",
	} {
		spec := enginetest.Spec("a").Obj()
		spec.WebhookURL = u
		task := h.Submit(spec)
		require.NoError(t, h.Exec.Succeed(task.ID, `{}`))
		ds := deliveries(t, h, task.ID, 1)
		require.False(t, ds[0].Delivered, u)
		require.True(t, ds[0].Final, "%s: a refused address is not retried", u)
		require.Contains(t, ds[0].Error, "not public", u)
		require.Contains(t, ds[0].Error, "webhooks.allowPrivate", "the setting that allows it is named")
	}
	require.Zero(t, r.count(), "nothing reached the local receiver")
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	target := newReceiver(t)
	redirector := httptest.NewServer(http.RedirectHandler(target.srv.URL, http.StatusFound))
	t.Cleanup(redirector.Close)
	start(t, h, webhook.Options{AllowNetworks: loopback()})
	spec := enginetest.Spec("a").Obj()
	spec.WebhookURL = redirector.URL
	task := h.Submit(spec)
	require.NoError(t, h.Exec.Succeed(task.ID, `{}`))
	ds := deliveries(t, h, task.ID, 1)
	require.False(t, ds[0].Delivered)
	require.True(t, ds[0].Final)
	require.Zero(t, target.count())
}

func TestABatchWebhookFiresWhenItsLastTaskEnds(t *testing.T) {
	t.Parallel()
	h := enginetest.New(t, nil)
	r := newReceiver(t)
	d := start(t, h, webhook.Options{AllowNetworks: loopback()})
	res, err := h.SubmitBatch(context.Background(), engine.BatchSpec{WebhookURL: r.srv.URL, Items: []engine.BatchItem{
		{Spec: enginetest.Spec("a").Obj()}, {Spec: enginetest.Spec("b").Obj()},
	}})
	require.NoError(t, err)
	require.NoError(t, h.Exec.Succeed(res.Items[0].Task.ID, `{}`))
	last := h.Engine.Stats(context.Background()).LastSeq
	waitfor.Eventually(t, "the deliverer handles the first task's end", func() bool {
		handled, _ := d.Progress()
		return handled >= last
	})
	_, pending := d.Progress()
	require.Zero(t, pending, "no delivery before the last task ends")
	require.Zero(t, r.count(), "not before the last task ends")
	require.NoError(t, h.Exec.Fail(res.Items[1].Task.ID, engine.Permanent(errors.New("x"))))
	waitfor.Eventually(t, "the batch's webhook arrives", func() bool { return r.count() == 1 })
	var p webhook.Payload
	r.mu.Lock()
	require.NoError(t, json.Unmarshal(r.bodies[0], &p))
	r.mu.Unlock()
	require.Equal(t, "batch.ended", p.Event)
	require.Equal(t, map[string]int{"SUCCEEDED": 1, "FAILED": 1}, p.Batch.Counts)
	waitfor.Eventually(t, "the delivery is recorded on the batch", func() bool {
		bs, err := h.Batch(context.Background(), res.BatchID)
		return err == nil && len(bs.Info.Webhooks) == 1 && bs.Info.Webhooks[0].Delivered
	})
}

type fixedResolver map[string]string

func (r fixedResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.Addr{ip}, nil
	}
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, errors.New("no such host")
}
