// Package monitoring holds the Grafana dashboard and the Prometheus alert
// rules for a Gantry gateway's /metrics, embedded so that a test can check
// that every series they query is one the gateway exports.
package monitoring

import _ "embed"

// Dashboard is a Grafana dashboard (JSON model, import it with its
// Prometheus data source): invocations, latency quantiles against the SLO,
// SLO misses, replicas, queue, cold starts, refusals.
//
//go:embed grafana-dashboard.json
var Dashboard []byte

// Rules are Prometheus recording and alerting rules for SLO burn.
//
//go:embed prometheus-rules.yaml
var Rules []byte
