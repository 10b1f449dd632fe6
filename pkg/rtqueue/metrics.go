package rtqueue

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

const metricsNamespace = "gantry_rtqueue"

// numBands groups the 100 priorities into four bands of 25 so the metric
// label set stays small; band i covers priorities [25i, 25i+24].
const numBands = 4

func bandOf(priority int) int { return priority / 25 }

func bandLabel(b int) string {
	return strconv.Itoa(b*25) + "-" + strconv.Itoa(b*25+24)
}

// latencyBuckets span 10µs..10s because the engine's point is the
// sub-millisecond end, which the default prometheus buckets do not resolve.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 4, 11)

type queueMetrics struct {
	depth   [numBands]prometheus.Gauge
	wait    [numBands]prometheus.Observer
	work    [numBands]prometheus.Observer
	adds    [numBands]prometheus.Counter
	retries prometheus.Counter
	ignored prometheus.Counter
}

func newQueueMetrics(name string, reg prometheus.Registerer) *queueMetrics {
	labels := prometheus.Labels{"name": name}
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "depth",
		Help: "Items waiting in the queue, per priority band.", ConstLabels: labels}, []string{"band"})
	wait := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "wait_seconds",
		Help: "Time from enqueue to a worker starting the item, per priority band.", ConstLabels: labels,
		Buckets: latencyBuckets}, []string{"band"})
	work := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNamespace, Name: "work_seconds",
		Help: "Time from a worker starting an item to Done, per priority band.", ConstLabels: labels,
		Buckets: latencyBuckets}, []string{"band"})
	adds := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "adds_total",
		Help: "Items newly queued, per priority band.", ConstLabels: labels}, []string{"band"})
	retries := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "retries_total",
		Help: "Delayed or rate-limited adds.", ConstLabels: labels})
	ignored := prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "ignored_after_shutdown_total",
		Help: "Adds refused because the queue was shutting down.", ConstLabels: labels})
	if reg != nil {
		depth = registerOrReuse(reg, depth)
		wait = registerOrReuse(reg, wait)
		work = registerOrReuse(reg, work)
		adds = registerOrReuse(reg, adds)
		retries = registerOrReuse(reg, retries)
		ignored = registerOrReuse(reg, ignored)
	}
	m := &queueMetrics{retries: retries, ignored: ignored}
	for b := range numBands {
		l := bandLabel(b)
		m.depth[b], m.wait[b], m.work[b], m.adds[b] = depth.WithLabelValues(l),
			wait.WithLabelValues(l), work.WithLabelValues(l), adds.WithLabelValues(l)
	}
	return m
}

// registerOrReuse lets two queues (or a restarted one) with the same name
// share collectors instead of failing, since New cannot return an error.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	// A clashing collector of another shape: keep ours unregistered so the
	// engine still works, and leave the conflict visible to the caller's
	// registry owner rather than panicking.
	return c
}

type poolMetrics struct {
	generalIdle, generalBusy prometheus.Gauge
	reserveIdle, reserveBusy prometheus.Gauge
	policy                   *prometheus.GaugeVec
}

func newPoolMetrics(name string, reg prometheus.Registerer) *poolMetrics {
	labels := prometheus.Labels{"name": name}
	workers := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "workers",
		Help: "Pool workers by class (general, reserve) and state (busy, idle).", ConstLabels: labels},
		[]string{"class", "state"})
	policy := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "sched_policy",
		Help:        "1 for the scheduling policy the workers run under (SCHED_FIFO, or SCHED_OTHER after a fallback or with real time off).",
		ConstLabels: labels}, []string{"policy"})
	if reg != nil {
		workers = registerOrReuse(reg, workers)
		policy = registerOrReuse(reg, policy)
	}
	// Resolved once: the workers update these on every item, and a label
	// lookup there would lengthen the pool lock they hold.
	return &poolMetrics{generalIdle: workers.WithLabelValues("general", "idle"),
		generalBusy: workers.WithLabelValues("general", "busy"),
		reserveIdle: workers.WithLabelValues("reserve", "idle"),
		reserveBusy: workers.WithLabelValues("reserve", "busy"), policy: policy}
}

func (m *poolMetrics) setPolicy(p Policy) {
	for _, q := range []Policy{PolicyFIFO, PolicyOther} {
		v := 0.0
		if q == p {
			v = 1
		}
		m.policy.WithLabelValues(q.String()).Set(v)
	}
}
