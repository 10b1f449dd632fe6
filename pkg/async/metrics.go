package async

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the queue's series, on the gateway's /metrics.
type Metrics struct {
	// published counts jobs accepted (202); refused those refused, by
	// reason (full, too_large, unavailable).
	published prometheus.Counter
	refused   *prometheus.CounterVec
	// completed counts jobs run, by the function's status; callbacks the
	// callback attempts' outcomes (delivered, retried, given_up).
	completed *prometheus.CounterVec
	callbacks *prometheus.CounterVec
	// redelivered counts jobs delivered more than once (a worker that
	// died, or one handed back); requeued those a worker handed back;
	// dropped the unreadable ones.
	redelivered, requeued, dropped prometheus.Counter
}

// NewMetrics registers the queue's series with reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_async_published_total",
			Help: "Async invocations accepted: stored by JetStream and answered 202."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_async_refused_total",
			Help: "Async invocations refused, by reason: full (429), too_large (413), unavailable (503)."}, []string{"reason"}),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_async_completed_total",
			Help: "Async invocations run, by the function's HTTP status."}, []string{"code"}),
		callbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_async_callbacks_total",
			Help: "Callback attempts by outcome: delivered, retried, given_up (the retry bound reached, or refused with a 4xx)."}, []string{"outcome"}),
		redelivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_async_redelivered_total",
			Help: "Async invocations delivered more than once (at least once delivery; duplicates carry the same X-Call-Id)."}),
		requeued: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_async_requeued_total",
			Help: "Async invocations handed back to the queue: the function's queue was full, or the gateway was stopping."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_async_dropped_total",
			Help: "Queued messages no gateway can read, dropped."}),
	}
	if reg != nil {
		reg.MustRegister(m.published, m.refused, m.completed, m.callbacks, m.redelivered, m.requeued, m.dropped)
	}
	return m
}

// Published counts an accepted job.
func (m *Metrics) Published() { m.published.Inc() }

// Refused counts a refused job by reason.
func (m *Metrics) Refused(reason string) { m.refused.WithLabelValues(reason).Inc() }
