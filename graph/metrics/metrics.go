// Package metrics exposes Switchyard to Prometheus. The engine and the
// instance registry keep their own counters; the Collector reads them when
// Prometheus scrapes, so that nothing on the hot path touches a Prometheus
// metric. The GraphQL layer's own numbers (subscriptions, lagged events)
// are kept by a Subscriptions observer.
package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/executor"
	"github.com/switchyard/switchyard/plugins/host"
	"github.com/switchyard/switchyard/plugins/manager"
)

const ns = "switchyard"

// Source is what the collector reads: an engine's stats and lanes and,
// when Instances is not nil, the fleet, when Plugins is not nil, the
// policy plugins.
type Source struct {
	Stats     func() engine.Stats
	Lanes     func() []engine.LaneStatus
	Instances func() []executor.Instance
	Plugins   func() []manager.Info
}

// Collector reads its source on every scrape.
type Collector struct {
	src Source

	tasks, ended, inflight, maxInflight, pending, counters, latency, lastSeq, draining       *prometheus.Desc
	commitErrs, failing                                                                      *prometheus.Desc
	laneQueued, laneInflight, laneMax, lanePaused                                            *prometheus.Desc
	instUp, instLatency, instInflight, instTabs, instCapacity, instFailures                  *prometheus.Desc
	plugCalls, plugLatency, plugFaults, plugFallbacks, plugHolds, plugQuarantines, plugState *prometheus.Desc
	plugLogDropped, plugFuel, plugGraces, plugDryFaults                                      *prometheus.Desc
}

// NewCollector returns a collector of src.
func NewCollector(src Source) *Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(ns+"_"+name, help, labels, nil)
	}
	return &Collector{
		src:          src,
		tasks:        d("tasks", "Live tasks by state.", "state"),
		ended:        d("tasks_ended_total", "Tasks that reached a terminal state (or PARKED) since start.", "state"),
		inflight:     d("in_flight", "Tasks running now (ASSIGNED or RUNNING)."),
		maxInflight:  d("max_in_flight", "The global concurrency ceiling."),
		pending:      d("queue_depth", "Tasks QUEUED, WAITING or in RETRY_WAIT, over all lanes."),
		counters:     d("engine_events_total", "Engine counters since start, by kind.", "kind"),
		latency:      d("dispatch_latency_seconds", "How long tasks waited from QUEUED to dispatch."),
		lastSeq:      d("event_seq", "The seq of the latest event."),
		draining:     d("draining", "1 while the engine refuses new work."),
		commitErrs:   d("store_commit_failures_total", "Commit attempts the store failed since start (each is retried until it succeeds)."),
		failing:      d("store_commit_failing", "1 while the store fails commits, or one has run longer than engine.commitTimeout: nothing new becomes durable and /readyz is not ready."),
		laneQueued:   d("lane_queue_depth", "Tasks QUEUED, WAITING or in RETRY_WAIT, by lane.", "lane"),
		laneInflight: d("lane_in_flight", "Tasks running, by lane.", "lane"),
		laneMax:      d("lane_max_in_flight", "The concurrency ceiling, by lane.", "lane"),
		lanePaused:   d("lane_paused", "1 while a lane is paused.", "lane"),
		instUp:       d("instance_healthy", "1 when an instance passed its last health check.", "instance", "kind"),
		instLatency:  d("instance_health_latency_seconds", "The latency of an instance's last successful health check.", "instance"),
		instInflight: d("instance_in_flight", "Attempts running on an instance.", "instance"),
		instTabs:     d("instance_tabs", "Open tabs of an instance, as it last reported.", "instance"),
		instCapacity: d("instance_capacity", "Concurrent attempts an instance accepts (0: unlimited).", "instance"),
		instFailures: d("instance_health_failures", "Consecutive failed health checks of an instance.", "instance"),

		plugCalls:       d("plugin_calls_total", "Decisions the engine asked of a WebAssembly policy plugin, those its native fallback answered included (plugin_fallbacks_total counts them).", "plugin", "slot"),
		plugLatency:     d("plugin_decision_seconds", "How long a plugin's decisions took, guard included.", "plugin"),
		plugFaults:      d("plugin_faults_total", "A plugin's faulted decisions, by kind (fuel, deadline, trap, invalid, refused).", "plugin", "kind"),
		plugHolds:       d("plugin_holds_total", "A fairness plugin's decisions that held: nothing dispatched from the candidates until it is asked again.", "plugin"),
		plugFallbacks:   d("plugin_fallbacks_total", "A plugin's decisions made by its native fallback, by cause (fault, breaker: quarantined or disabled, closed, rebuilding, too-large).", "plugin", "cause"),
		plugQuarantines: d("plugin_quarantines_total", "Times a plugin's breaker quarantined it.", "plugin"),
		plugState:       d("plugin_state", "1 for a plugin's current state (active, probation, quarantined, disabled), 0 for the others.", "plugin", "state"),
		plugLogDropped:  d("plugin_log_dropped_total", "A plugin's switchyard.log lines dropped by its rate limit.", "plugin"),
		plugFuel:        d("plugin_fuel_max", "The most fuel one decision of a plugin has burnt.", "plugin"),
		plugDryFaults:   d("plugin_dry_run_faults_total", "A fairness plugin's faulted dry-run decisions (DRY_RUN: plan previews); they are not in plugin_faults_total and do not feed its breaker.", "plugin"),
		plugGraces:      d("plugin_deadline_graces_total", "A plugin's calls let run on past their deadline in wall time because they waited for a core (the process was starved, or they burnt no fuel since the watchdog's last look).", "plugin"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.tasks, c.ended, c.inflight, c.maxInflight, c.pending, c.counters, c.latency,
		c.lastSeq, c.draining, c.commitErrs, c.failing, c.laneQueued, c.laneInflight, c.laneMax, c.lanePaused,
		c.instUp, c.instLatency, c.instInflight, c.instTabs, c.instCapacity, c.instFailures,
		c.plugCalls, c.plugLatency, c.plugFaults, c.plugFallbacks, c.plugHolds, c.plugQuarantines, c.plugState, c.plugLogDropped, c.plugFuel, c.plugGraces, c.plugDryFaults} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	s := c.src.Stats()
	var plugins []manager.Info
	if c.src.Plugins != nil {
		plugins = c.src.Plugins()
		for _, p := range plugins { // the plugin host refuses invalid answers before the engine sees them
			s.PolicyInvalid += p.Stats.Faults[host.FaultInvalid]
		}
	}
	for st := engine.StateQueued; st <= engine.StateExpired; st++ {
		if !st.Terminal() {
			gauge(c.tasks, float64(s.ByState[st]), st.String())
		} else {
			counter(c.ended, float64(s.Ended[st]), st.String())
		}
	}
	counter(c.ended, float64(s.Ended[engine.StateParked]), engine.StateParked.String())
	gauge(c.inflight, float64(s.InFlight))
	gauge(c.maxInflight, float64(s.MaxInFlight))
	gauge(c.pending, float64(s.Pending))
	for kind, v := range map[string]uint64{
		"submitted": s.Submitted, "dispatched": s.Dispatched, "rejected": s.Rejected, "dropped": s.Dropped,
		"lease_expired": s.LeaseExpiry, "stale": s.Stale, "policy_invalid": s.PolicyInvalid,
		"commit_errors": s.CommitErrors, "purged": s.Purged,
	} {
		counter(c.counters, float64(v), kind)
	}
	gauge(c.lastSeq, float64(s.LastSeq))
	gauge(c.draining, b2f(s.Draining))
	counter(c.commitErrs, float64(s.CommitErrors))
	gauge(c.failing, b2f(s.CommitFailing))
	ch <- histogram(c.latency, &s.DispatchLatency)

	for _, l := range c.src.Lanes() {
		gauge(c.laneQueued, float64(l.Pending), l.Config.Name)
		gauge(c.laneInflight, float64(l.InFlight), l.Config.Name)
		gauge(c.laneMax, float64(l.Config.MaxInFlight), l.Config.Name)
		gauge(c.lanePaused, b2f(l.Config.Paused), l.Config.Name)
	}
	c.collectPlugins(ch, plugins)
	if c.src.Instances == nil {
		return
	}
	for _, in := range c.src.Instances() {
		gauge(c.instUp, b2f(in.Health == executor.HealthHealthy), in.ID, string(in.Kind))
		gauge(c.instLatency, in.Latency.Seconds(), in.ID)
		gauge(c.instInflight, float64(in.InFlight), in.ID)
		gauge(c.instTabs, float64(in.Tabs), in.ID)
		gauge(c.instCapacity, float64(in.Capacity), in.ID)
		gauge(c.instFailures, float64(in.Failures), in.ID)
	}
}

// collectPlugins reports every WebAssembly policy plugin.
func (c *Collector) collectPlugins(ch chan<- prometheus.Metric, plugins []manager.Info) {
	for _, p := range plugins {
		if p.Native {
			continue
		}
		s := p.Stats
		ch <- prometheus.MustNewConstMetric(c.plugCalls, prometheus.CounterValue, float64(s.Calls), p.Name, p.Slot.String())
		for _, k := range host.FaultKinds {
			ch <- prometheus.MustNewConstMetric(c.plugFaults, prometheus.CounterValue, float64(s.Faults[k]), p.Name, k.String())
		}
		for _, cause := range host.FallbackCauses {
			ch <- prometheus.MustNewConstMetric(c.plugFallbacks, prometheus.CounterValue, float64(s.FallbacksBy[cause]), p.Name, cause.String())
		}
		ch <- prometheus.MustNewConstMetric(c.plugHolds, prometheus.CounterValue, float64(s.Holds), p.Name)
		ch <- prometheus.MustNewConstMetric(c.plugDryFaults, prometheus.CounterValue, float64(s.DryRunFaults), p.Name)
		ch <- prometheus.MustNewConstMetric(c.plugQuarantines, prometheus.CounterValue, float64(s.Quarantines), p.Name)
		ch <- prometheus.MustNewConstMetric(c.plugLogDropped, prometheus.CounterValue, float64(s.LogDropped), p.Name)
		ch <- prometheus.MustNewConstMetric(c.plugFuel, prometheus.GaugeValue, float64(s.FuelMax), p.Name)
		ch <- prometheus.MustNewConstMetric(c.plugGraces, prometheus.CounterValue, float64(s.DeadlineGraces), p.Name)
		for st := host.StateActive; st <= host.StateDisabled; st++ {
			ch <- prometheus.MustNewConstMetric(c.plugState, prometheus.GaugeValue, b2f(s.State == st), p.Name, st.String())
		}
		buckets := make(map[float64]uint64, len(s.Latency.Bounds))
		for i, b := range s.Latency.Bounds {
			buckets[b.Seconds()] = s.Latency.Counts[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.plugLatency, s.Latency.Count, s.Latency.Sum.Seconds(), buckets, p.Name)
	}
}

// histogram turns the engine's exponential histogram into a Prometheus one
// (cumulative buckets, in seconds).
func histogram(d *prometheus.Desc, h *engine.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, engine.HistogramBuckets-1)
	var cum uint64
	for i := 0; i < engine.HistogramBuckets-1; i++ {
		cum += h.Counts[i]
		buckets[h.UpperBound(i).Seconds()] = cum
	}
	count := cum + h.Counts[engine.HistogramBuckets-1]
	return prometheus.MustNewConstHistogram(d, count, time.Duration(h.SumNs).Seconds(), buckets)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Subscriptions counts the GraphQL layer's subscriptions and the events
// their subscribers missed. It implements resolvers.Observer.
type Subscriptions struct {
	active *prometheus.GaugeVec
	lagged *prometheus.CounterVec
	total  atomic.Uint64
}

// NewSubscriptions returns the observer, registered with reg.
func NewSubscriptions(reg prometheus.Registerer) *Subscriptions {
	s := &Subscriptions{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "graphql_subscriptions",
			Help: "Open GraphQL subscriptions, by field."}, []string{"subscription"}),
		lagged: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "graphql_subscription_lagged_events_total",
			Help: "Events subscribers missed because they fell behind (each reported to them in a LAGGED event)."}, []string{"subscription"}),
	}
	reg.MustRegister(s.active, s.lagged)
	return s
}

// SubscriptionStarted implements resolvers.Observer.
func (s *Subscriptions) SubscriptionStarted(kind string) func() {
	g := s.active.WithLabelValues(kind)
	g.Inc()
	s.total.Add(1)
	return g.Dec
}

// Lagged implements resolvers.Observer.
func (s *Subscriptions) Lagged(kind string, n uint64) {
	s.lagged.WithLabelValues(kind).Add(float64(n))
}
