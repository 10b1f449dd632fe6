package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/stack"
)

// metrics keeps OpenFaaS's gateway metric names and labels, so its
// dashboards and alert rules carry over, and adds Gantry's queue and
// outcome metrics. Every function_name is NAME.NAMESPACE, as OpenFaaS
// labels them (an app's is its bare name: apps have no namespace), and a
// removed function's series go with it (forget).
type metrics struct {
	invocations *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	started     *prometheus.CounterVec
	misses      *prometheus.CounterVec
	outcomes    *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	retries     *prometheus.CounterVec

	// byName holds each name's series bound once, so a request does not
	// hash its labels into the vectors every time; at most maxBound names.
	byName sync.Map // string -> *bound
	nBound atomic.Int64
}

// maxBound bounds the names whose series are kept bound: every function
// and app a gateway can serve, with room for names reused after removal.
const maxBound = 4 * stack.MaxFunctions

// bound is one function's or app's series.
type bound struct {
	// queueWait and retries bind their series on first use, so a name
	// gets only the series it uses.
	queueWait func() prometheus.Observer
	retries   func() prometheus.Counter
	started   func() prometheus.Counter
	misses    func() prometheus.Counter
	codes     [600]atomic.Pointer[codeSeries] // by HTTP status
	outcomes  sync.Map                        // reason -> prometheus.Counter
	m         *metrics
	name      string
	// answered counts the invocations answered, whoever answered them
	// (the function, or the gateway with an error): OpenFaaS's
	// invocationCount, which sums gateway_function_invocation_total over
	// every status code.
	answered atomic.Int64
}

// answeredCount is how many invocations of the function labelled label
// were answered, by it or by the gateway (bound.answered); 0 for a name
// with no series.
func (m *metrics) answeredCount(label string) int64 {
	if b, ok := m.byName.Load(label); ok {
		return b.(*bound).answered.Load()
	}
	return 0
}

type codeSeries struct {
	invocations prometheus.Counter
	seconds     prometheus.Observer
}

// forName returns name's series, bound on first use.
func (m *metrics) forName(name string) *bound {
	if b, ok := m.byName.Load(name); ok {
		return b.(*bound)
	}
	b := &bound{m: m, name: name,
		queueWait: sync.OnceValue(func() prometheus.Observer { return m.queueWait.WithLabelValues(name) }),
		retries:   sync.OnceValue(func() prometheus.Counter { return m.retries.WithLabelValues(name) }),
		// A function's first invocation binds its miss and retry counters
		// at zero, so SLO ratios and dashboards find them before the first
		// miss.
		started: sync.OnceValue(func() prometheus.Counter {
			m.misses.WithLabelValues(name)
			m.retries.WithLabelValues(name)
			return m.started.WithLabelValues(name)
		}),
		misses: sync.OnceValue(func() prometheus.Counter { return m.misses.WithLabelValues(name) })}
	if m.nBound.Load() >= maxBound {
		return b // past the bound: used once, not kept
	}
	if old, loaded := m.byName.LoadOrStore(name, b); loaded {
		return old.(*bound)
	}
	m.nBound.Add(1)
	return b
}

func (b *bound) code(status int) *codeSeries {
	if status < 0 || status >= len(b.codes) {
		status = 0
	}
	if c := b.codes[status].Load(); c != nil {
		return c
	}
	code := strconv.Itoa(status)
	c := &codeSeries{invocations: b.m.invocations.WithLabelValues(b.name, code), seconds: b.m.seconds.WithLabelValues(b.name, code)}
	b.codes[status].CompareAndSwap(nil, c)
	return b.codes[status].Load()
}

func (b *bound) outcome(reason string) prometheus.Counter {
	if c, ok := b.outcomes.Load(reason); ok {
		return c.(prometheus.Counter)
	}
	c, _ := b.outcomes.LoadOrStore(reason, b.m.outcomes.WithLabelValues(b.name, reason))
	return c.(prometheus.Counter)
}

func newMetrics(reg *prometheus.Registry, d *dispatch.Dispatcher) *metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16)
	m := &metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_function_invocation_total",
			Help: "Invocations answered by a function, by status code."}, []string{"function_name", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_functions_seconds",
			Help: "End-to-end time of invocations answered by a function.", Buckets: buckets}, []string{"function_name", "code"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_function_invocation_started",
			Help: "Invocations of a deployed function the gateway began to serve."}, []string{"function_name"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_function_slo_misses_total",
			Help: "Invocations that missed their SLO: answered after it, answered with a 5xx, or refused with 429 or 5xx by the gateway."},
			[]string{"function_name"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_request_failures_total",
			Help: "Requests the gateway answered itself, by reason."}, []string{"function_name", "reason"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gantry_queue_wait_seconds",
			Help: "Time requests waited for an instance's slot.", Buckets: buckets}, []string{"function_name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_instance_retries_total",
			Help: "Requests retried on another instance after one failed to answer."}, []string{"function_name"}),
	}
	reg.MustRegister(m.invocations, m.seconds, m.started, m.misses, m.outcomes, m.queueWait, m.retries, &stateCollector{d: d})
	return m
}

// forget deletes every series of a removed function, so /metrics shows
// only what is deployed, as OpenFaaS's does. A request still finishing for
// it may add a series back; the next removal of that name takes it too.
func (m *metrics) forget(label string) {
	if _, ok := m.byName.LoadAndDelete(label); ok {
		m.nBound.Add(-1)
	}
	match := prometheus.Labels{"function_name": label}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.invocations, m.seconds, m.started, m.misses, m.outcomes, m.queueWait, m.retries} {
		v.DeletePartialMatch(match)
	}
}

func (b *bound) observe(status int, took, slo time.Duration) {
	b.answered.Add(1)
	c := b.code(status)
	c.invocations.Inc()
	c.seconds.Observe(took.Seconds())
	if took > slo || status >= 500 {
		b.misses().Inc()
	}
}

// refused counts a request the gateway answered itself: a 429 or a 5xx
// misses the SLO whatever the time (the caller got no answer), a 4xx is
// the caller's own error and a 499 a caller that left.
func (b *bound) refused(status int) {
	b.answered.Add(1)
	if status == 429 || status >= 500 {
		b.misses().Inc()
	}
}

// stateCollector reads the dispatcher's live state at scrape time.
type stateCollector struct{ d *dispatch.Dispatcher }

var (
	replicasDesc = prometheus.NewDesc("gantry_function_replicas", "Instances of a function, by state.",
		[]string{"function_name", "state"}, nil)
	queuedDesc = prometheus.NewDesc("gantry_function_queued", "Requests waiting for an instance.",
		[]string{"function_name"}, nil)
	// serviceCountDesc is OpenFaaS's replica gauge.
	serviceCountDesc = prometheus.NewDesc("gateway_service_count", "Replicas of a function, serving or starting.",
		[]string{"function_name"}, nil)
	coldStartDesc = prometheus.NewDesc("gantry_function_cold_start_seconds", "A function's latest measured cold start.",
		[]string{"function_name"}, nil)
	sloDesc = prometheus.NewDesc("gantry_function_slo_seconds", "A function's declared SLO.",
		[]string{"function_name"}, nil)
	spawnedDesc = prometheus.NewDesc("gantry_function_instances_started_total", "Instances asked for.",
		[]string{"function_name"}, nil)
	restartsDesc = prometheus.NewDesc("gantry_function_restarts_total", "Starts that failed and instances that crashed (a crash loop's restart count).",
		[]string{"function_name"}, nil)
	stateDesc = prometheus.NewDesc("gantry_function_state", "1 for the function's state: ready, starting, backoff (crash-looping), failed or idle.",
		[]string{"function_name", "state"}, nil)
	backOffDesc = prometheus.NewDesc("gantry_function_backoff_seconds", "How long a crash-looping function's back-off still lasts.",
		[]string{"function_name"}, nil)
	acceptedDesc = prometheus.NewDesc("gantry_function_requests_total", "Requests accepted into a function's queue, by how they ended.",
		[]string{"function_name", "outcome"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicasDesc
	ch <- queuedDesc
	ch <- serviceCountDesc
	ch <- coldStartDesc
	ch <- sloDesc
	ch <- spawnedDesc
	ch <- acceptedDesc
	ch <- restartsDesc
	ch <- stateDesc
	ch <- backOffDesc
}

var states = []string{dispatch.StateReady, dispatch.StateStarting, dispatch.StateBackOff, dispatch.StateFailed, dispatch.StateIdle}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.d.Functions() {
		n := s.Decl.Qualified()
		ch <- prometheus.MustNewConstMetric(serviceCountDesc, prometheus.GaugeValue, float64(s.Replicas), n)
		ch <- prometheus.MustNewConstMetric(coldStartDesc, prometheus.GaugeValue, s.ColdStart.Seconds(), n)
		ch <- prometheus.MustNewConstMetric(sloDesc, prometheus.GaugeValue, s.Decl.SLO.Seconds(), n)
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Available), n, "ready")
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Starting), n, "starting")
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(s.Queued), n)
		ch <- prometheus.MustNewConstMetric(spawnedDesc, prometheus.CounterValue, float64(s.Stats.Spawned), n)
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(s.Restarts), n)
		for _, state := range states {
			v := 0.0
			if state == s.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, v, n, state)
		}
		left := 0.0
		if !s.BackOffUntil.IsZero() {
			left = max(0, time.Until(s.BackOffUntil).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(backOffDesc, prometheus.GaugeValue, left, n)
		for outcome, v := range map[string]int64{"accepted": s.Stats.Accepted, "completed": s.Stats.Completed,
			"abandoned": s.Stats.Abandoned, "canceled": s.Stats.Canceled, "rejected": s.Stats.Rejected} {
			ch <- prometheus.MustNewConstMetric(acceptedDesc, prometheus.CounterValue, float64(v), n, outcome)
		}
	}
}
