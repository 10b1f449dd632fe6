package scaleout

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics show a scaled-out gateway's health on every replica's /metrics:
// whether it leads, how many replicas it syncs with, and how the syncs go.
type metrics struct {
	leader   prometheus.Gauge
	peers    prometheus.Gauge
	syncs    *prometheus.CounterVec
	syncTime prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_gateway_leader",
			Help: "1 while this gateway replica holds the Lease and scales for every replica"}),
		peers: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_gateway_peers",
			Help: "Other gateway replicas the leader syncs with"}),
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_gateway_peer_syncs_total",
			Help: "Syncs of the leader with another replica, by result (ok or error)"}, []string{"result"}),
		syncTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gantry_gateway_peer_sync_seconds",
			Help:    "Round trip of one sync, grant out and report in",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
	}
	if reg != nil {
		reg.MustRegister(m.leader, m.peers, m.syncs, m.syncTime)
	}
	return m
}
