package model

import (
	"net/url"
	"slices"
	"time"

	"github.com/switchyard/switchyard/heartbeat"
)

// HeartbeatCheck is a heartbeat check and its state.
type HeartbeatCheck struct{ C *heartbeat.Check }

// ID is its id.
func (h *HeartbeatCheck) ID() string { return h.C.ID }

// Name is its name.
func (h *HeartbeatCheck) Name() string { return h.C.Spec.Name }

// URL is what it calls.
func (h *HeartbeatCheck) URL() string { return h.C.Spec.URL }

// Method is GET or HEAD.
func (h *HeartbeatCheck) Method() string { return h.C.Spec.Method }

// IntervalMs is the time between the starts of two probes.
func (h *HeartbeatCheck) IntervalMs() int64 { return h.C.Spec.Interval.Milliseconds() }

// TimeoutMs bounds one probe.
func (h *HeartbeatCheck) TimeoutMs() int64 { return h.C.Spec.Timeout.Milliseconds() }

// ExpectStatus is the status a healthy target answers; nil for any 2xx.
func (h *HeartbeatCheck) ExpectStatus() *int { return optInt(h.C.Spec.ExpectStatus) }

// FailureThreshold is how many failed probes in a row make it DOWN.
func (h *HeartbeatCheck) FailureThreshold() int { return h.C.Spec.FailureThreshold }

// FollowRedirects says whether redirects are followed.
func (h *HeartbeatCheck) FollowRedirects() bool { return h.C.Spec.FollowRedirects }

// WebhookURL is told of every state change, without credentials.
func (h *HeartbeatCheck) WebhookURL() *string {
	u, err := url.Parse(h.C.Spec.WebhookURL)
	if err != nil || h.C.Spec.WebhookURL == "" {
		return nil
	}
	u.User = nil
	return optString(u.String())
}

// Enabled says whether it is probed on its interval.
func (h *HeartbeatCheck) Enabled() bool { return h.C.Spec.Enabled }

// HistoryLength is how many recent probes it keeps.
func (h *HeartbeatCheck) HistoryLength() int { return h.C.Spec.HistoryLength }

// State is what its latest probes say.
func (h *HeartbeatCheck) State() heartbeat.State { return h.C.State }

// Since is when it entered its state.
func (h *HeartbeatCheck) Since() time.Time { return h.C.Since }

// ConsecutiveFailures counts the failed probes since the last good one.
func (h *HeartbeatCheck) ConsecutiveFailures() int { return h.C.ConsecutiveFailures }

// LastProbeAt is when it was last probed.
func (h *HeartbeatCheck) LastProbeAt() *time.Time { return optTime(h.C.LastProbeAt) }

// NextProbeAt is when it will next be probed.
func (h *HeartbeatCheck) NextProbeAt() *time.Time { return optTime(h.C.NextProbeAt) }

// CreatedAt is when it was created.
func (h *HeartbeatCheck) CreatedAt() time.Time { return h.C.CreatedAt }

// UpdatedAt is when its definition last changed.
func (h *HeartbeatCheck) UpdatedAt() time.Time { return h.C.UpdatedAt }

// History returns its latest probes, oldest first; last keeps the newest.
func (h *HeartbeatCheck) History(last *int) []*HeartbeatSample {
	hs := h.C.History
	if last != nil && *last >= 0 && *last < len(hs) {
		hs = hs[len(hs)-*last:]
	}
	out := make([]*HeartbeatSample, len(hs))
	for i, s := range hs {
		out[i] = NewHeartbeatSample(s)
	}
	return out
}

// Uptime is the share of the probes in its history that succeeded.
func (h *HeartbeatCheck) Uptime() *float64 {
	if len(h.C.History) == 0 {
		return nil
	}
	ok := 0
	for _, s := range h.C.History {
		if s.OK {
			ok++
		}
	}
	u := float64(ok) / float64(len(h.C.History))
	return &u
}

// LatencyP50Ms is the median latency of its successful probes.
func (h *HeartbeatCheck) LatencyP50Ms() *float64 { return h.latencyQuantile(0.50) }

// LatencyP95Ms is the 95th percentile latency of its successful probes.
func (h *HeartbeatCheck) LatencyP95Ms() *float64 { return h.latencyQuantile(0.95) }

func (h *HeartbeatCheck) latencyQuantile(q float64) *float64 {
	var ls []time.Duration
	for _, s := range h.C.History {
		if s.OK {
			ls = append(ls, s.Latency)
		}
	}
	if len(ls) == 0 {
		return nil
	}
	slices.Sort(ls)
	i := min(int(q*float64(len(ls))), len(ls)-1) // nearest rank
	ms := millis(ls[i])
	return &ms
}

// WebhookDeliveries are the attempts to announce its state changes.
func (h *HeartbeatCheck) WebhookDeliveries() []*HeartbeatDelivery {
	out := make([]*HeartbeatDelivery, len(h.C.Webhooks))
	for i, d := range h.C.Webhooks {
		out[i] = &HeartbeatDelivery{ID: d.ID, Attempt: d.Attempt, At: d.At, HTTPStatus: optInt(d.HTTPStatus), Delivered: d.Delivered, Error: optString(d.Error)}
	}
	return out
}

// NewHeartbeatSample converts one probe.
func NewHeartbeatSample(s heartbeat.Sample) *HeartbeatSample {
	return &HeartbeatSample{At: s.At, LatencyMs: millis(s.Latency), Ok: s.OK, HTTPStatus: optInt(s.Status), Error: optString(s.Error)}
}

// NewHeartbeatEvent converts a state change.
func NewHeartbeatEvent(ev heartbeat.Event) *HeartbeatEvent {
	return &HeartbeatEvent{Seq: int64(ev.Seq), At: ev.At, CheckID: ev.CheckID, Name: ev.Name, URL: ev.URL, From: ev.From, To: ev.To,
		Sample: NewHeartbeatSample(ev.Sample)}
}

// millis is d in milliseconds, with the microseconds as a fraction.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func optInt(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}
