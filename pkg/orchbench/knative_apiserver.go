package orchbench

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
)

// The API server's own metrics over each case's iterations say where a
// write spends its time inside it: APF's queues, admission (plugins,
// webhooks, ValidatingAdmissionPolicies), etcd, the request as a whole
// and its SLI part (without webhooks), and what the watch cache sent.
// Each arm's control plane is its own, so the difference of two scrapes
// around an iteration is that arm's alone.

// apiserverFamilies are the histograms (their _sum and _count) and
// counters the stats keep.
var apiserverFamilies = []string{
	"apiserver_request_duration_seconds",
	"apiserver_request_sli_duration_seconds",
	"apiserver_admission_step_admission_duration_seconds",
	"apiserver_admission_controller_admission_duration_seconds",
	"apiserver_admission_webhook_admission_duration_seconds",
	"apiserver_validating_admission_policy_check_duration_seconds",
	"apiserver_flowcontrol_request_wait_duration_seconds",
	"apiserver_flowcontrol_request_execution_seconds",
	"apiserver_flowcontrol_rejected_requests_total",
	"apiserver_request_body_size_bytes",
	"apiserver_response_sizes",
	"apiserver_watch_events_sizes",
	"apiserver_watch_events_total",
	"apiserver_watch_cache_events_dispatched_total",
	"apiserver_watch_cache_events_received_total",
	"apiserver_terminated_watchers_total",
	"apiserver_cel_evaluation_duration_seconds",
	"etcd_request_duration_seconds",
}

// APIServerSeries is one series' change over a case: Count observations
// (or a counter's increase) and their mean, in ms for a _seconds
// histogram and in the metric's unit (bytes) otherwise.
type APIServerSeries struct {
	Controller string            `json:"controller"`
	Mode       string            `json:"mode"`
	Burst      int               `json:"burst"`
	Metric     string            `json:"metric"`
	Labels     map[string]string `json:"labels,omitempty"`
	Count      float64           `json:"count"`
	Mean       float64           `json:"mean,omitempty"`
}

// metricPoint is one series in one scrape.
type metricPoint struct {
	family string
	labels map[string]string
	sum    float64
	count  float64
}

// metricDelta accumulates one series' change over a case's iterations.
type metricDelta struct {
	family     string
	labels     map[string]string
	sum, count float64
}

// apiserverSample is one scrape, by series key.
type apiserverSample map[string]*metricPoint

// apiserverScrape reads the API server's /metrics with the benchmark's
// admin client, nil when it cannot (logged) or on a --kubeconfig
// cluster, whose API server other work shares.
func (k *knRun) apiserverScrape(ctx context.Context) apiserverSample {
	if k.audit == nil || k.kube == nil {
		return nil
	}
	rc, err := k.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").Stream(ctx)
	if err != nil {
		k.logf("API server metrics: %v", err)
		return nil
	}
	defer rc.Close()
	s, err := parseAPIServerMetrics(io.LimitReader(rc, maxMetricsBytes))
	if err != nil {
		k.logf("API server metrics: %v", err)
		return nil
	}
	return s
}

// parseAPIServerMetrics keeps apiserverFamilies' sums and counts (a
// counter's value as its count), keyed by family and labels without le.
func parseAPIServerMetrics(r io.Reader) (apiserverSample, error) {
	out := apiserverSample{}
	err := eachSeries(r, func(name string, labels map[string]string, value float64) {
		family, part := name, ""
		for _, suf := range []string{"_sum", "_count"} {
			if base, found := strings.CutSuffix(name, suf); found && slices.Contains(apiserverFamilies, base) {
				family, part = base, suf
			}
		}
		if !slices.Contains(apiserverFamilies, family) || (part == "" && !strings.HasSuffix(family, "_total")) {
			return
		}
		key := seriesKey(family, labels)
		p := out[key]
		if p == nil {
			p = &metricPoint{family: family, labels: labels}
			out[key] = p
		}
		if part == "_sum" {
			p.sum = value
		} else {
			p.count = value
		}
	})
	return out, err
}

func seriesKey(family string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(family)
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString("," + k + "=" + labels[k])
	}
	return b.String()
}

// addAPIServer adds the difference of two scrapes to the case's series.
func (k *knRun) addAPIServer(ctl string, c Case, before, after apiserverSample) {
	if before == nil || after == nil {
		return
	}
	key := churnKey{ctl, c}
	m := k.apiserver[key]
	if m == nil {
		m = map[string]*metricDelta{}
		k.apiserver[key] = m
	}
	for sk, a := range after {
		var sum, count float64
		if b := before[sk]; b != nil {
			sum, count = b.sum, b.count
		}
		if a.count-count <= 0 {
			continue
		}
		d := m[sk]
		if d == nil {
			d = &metricDelta{family: a.family, labels: a.labels}
			m[sk] = d
		}
		d.sum += a.sum - sum
		d.count += a.count - count
	}
}

// apiserverList gives every series that changed, in report order.
func (k *knRun) apiserverList() []APIServerSeries {
	out := []APIServerSeries{}
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			m := k.apiserver[churnKey{ctl, c}]
			for _, sk := range slices.Sorted(maps.Keys(m)) {
				d := m[sk]
				s := APIServerSeries{Controller: ctl, Mode: c.Mode, Burst: c.Burst, Metric: d.family, Count: d.count}
				if len(d.labels) > 0 {
					s.Labels = d.labels
				}
				if !strings.HasSuffix(d.family, "_total") {
					s.Mean = d.sum / d.count
					if strings.HasSuffix(d.family, "_seconds") {
						s.Mean *= 1000
					}
				}
				out = append(out, s)
			}
		}
	}
	return out
}
