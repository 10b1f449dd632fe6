package gateway

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gantry.dev/gantry/pkg/dispatch"
)

// metrics keeps OpenFaaS's gateway metric names where they exist, so
// dashboards carry over, and adds Gantry's queue and outcome metrics.
type metrics struct {
	invocations *prometheus.CounterVec
	seconds     *prometheus.HistogramVec
	outcomes    *prometheus.CounterVec
	queueWait   *prometheus.HistogramVec
	retries     *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry, d *dispatch.Dispatcher) *metrics {
	buckets := prometheus.ExponentialBuckets(0.001, 2, 16)
	m := &metrics{
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_function_invocation_total",
			Help: "Invocations answered by a function, by status code."}, []string{"function_name", "code"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_functions_seconds",
			Help: "End-to-end time of invocations answered by a function.", Buckets: buckets}, []string{"function_name", "code"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_request_failures_total",
			Help: "Requests the gateway answered itself, by reason."}, []string{"function_name", "reason"}),
		queueWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gantry_queue_wait_seconds",
			Help: "Time requests waited for an instance's slot.", Buckets: buckets}, []string{"function_name"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_instance_retries_total",
			Help: "Requests retried on another instance after one failed to answer."}, []string{"function_name"}),
	}
	reg.MustRegister(m.invocations, m.seconds, m.outcomes, m.queueWait, m.retries, &stateCollector{d: d})
	return m
}

func (m *metrics) observe(name string, status int, took time.Duration) {
	code := strconv.Itoa(status)
	m.invocations.WithLabelValues(name, code).Inc()
	m.seconds.WithLabelValues(name, code).Observe(took.Seconds())
}

// stateCollector reads the dispatcher's live state at scrape time.
type stateCollector struct{ d *dispatch.Dispatcher }

var (
	replicasDesc = prometheus.NewDesc("gantry_function_replicas", "Instances of a function, by state.",
		[]string{"function_name", "state"}, nil)
	queuedDesc = prometheus.NewDesc("gantry_function_queued", "Requests waiting for an instance.",
		[]string{"function_name"}, nil)
	spawnedDesc = prometheus.NewDesc("gantry_function_instances_started_total", "Instances asked for.",
		[]string{"function_name"}, nil)
	acceptedDesc = prometheus.NewDesc("gantry_function_requests_total", "Requests accepted into a function's queue, by how they ended.",
		[]string{"function_name", "outcome"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicasDesc
	ch <- queuedDesc
	ch <- spawnedDesc
	ch <- acceptedDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.d.Functions() {
		n := s.Decl.Name
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Available), n, "ready")
		ch <- prometheus.MustNewConstMetric(replicasDesc, prometheus.GaugeValue, float64(s.Starting), n, "starting")
		ch <- prometheus.MustNewConstMetric(queuedDesc, prometheus.GaugeValue, float64(s.Queued), n)
		ch <- prometheus.MustNewConstMetric(spawnedDesc, prometheus.CounterValue, float64(s.Stats.Spawned), n)
		for outcome, v := range map[string]int64{"accepted": s.Stats.Accepted, "completed": s.Stats.Completed,
			"abandoned": s.Stats.Abandoned, "canceled": s.Stats.Canceled, "rejected": s.Stats.Rejected} {
			ch <- prometheus.MustNewConstMetric(acceptedDesc, prometheus.CounterValue, float64(v), n, outcome)
		}
	}
}
