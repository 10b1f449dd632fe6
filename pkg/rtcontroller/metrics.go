package rtcontroller

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Reconcile outcomes recorded in gantry_rtcontroller_reconcile_total.
const (
	outcomeSuccess = "success"
	outcomeError   = "error"
	outcomeRequeue = "requeue"
	outcomeWaiting = "waiting" // expectations not yet met; nothing was done
	outcomeGone    = "gone"    // the object no longer exists
)

type metrics struct {
	reconciles *prometheus.CounterVec
	duration   prometheus.Histogram
	podOps     *prometheus.CounterVec
	leader     prometheus.Gauge
	requests   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_rtcontroller_reconcile_total",
			Help: "RTResource reconciles by outcome.",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gantry_rtcontroller_reconcile_duration_seconds",
			Help:    "Time spent in one RTResource reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		podOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_rtcontroller_pod_operations_total",
			Help: "Pod creates and deletes issued, by result.",
		}, []string{"operation", "result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gantry_rtcontroller_leader",
			Help: "1 while this replica reconciles: it holds the leader lease, or leader election is off.",
		}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gantry_rtcontroller_api_requests_total",
			Help: "Reconcile client requests by connection: thread (critical, on the worker's own thread and connection) or shared (client-go's HTTP/2 connection).",
		}, []string{"connection"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.reconciles, m.duration, m.podOps, m.leader, m.requests} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
