package orchbench

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// kcmQueues are the workqueues a vanilla scale-up passes: the deployment
// controller writes the Revision's ReplicaSet, the replicaset controller
// creates its pods.
var kcmQueues = []string{"deployment", "replicaset"}

// ControllerManagerStats is where vanilla's kube-controller-manager spent
// one case's time, from its own metrics (the difference over the case's
// iterations): how long keys waited in each workqueue before a worker took
// them, how long a sync took, and how long its clients waited for their
// client-side rate limiter (20 requests/s, burst 30 per controller by
// default). It answers whether the interference queues vanilla's
// scale-ups, and where.
type ControllerManagerStats struct {
	Controller string       `json:"controller"`
	Mode       string       `json:"mode"`
	Burst      int          `json:"burst"`
	Queues     []QueueStats `json:"queues"`
	// Requests is how many requests KCM's clients sent; LimiterMeanMs
	// their mean wait for the client-side limiter; LimiterOver100ms and
	// LimiterOver1s how many waited longer than that.
	Requests         int     `json:"requests"`
	LimiterMeanMs    float64 `json:"limiter_mean_ms"`
	LimiterOver100ms int     `json:"limiter_over_100ms"`
	LimiterOver1s    int     `json:"limiter_over_1s"`
}

// QueueStats is one workqueue's keys over a case.
type QueueStats struct {
	Name string `json:"name"`
	// Items is how many keys workers took; QueueMeanMs their mean wait
	// in the queue, QueueOver100ms how many waited longer than 100 ms;
	// WorkMeanMs the mean sync.
	Items          int     `json:"items"`
	QueueMeanMs    float64 `json:"queue_mean_ms"`
	QueueOver100ms int     `json:"queue_over_100ms"`
	WorkMeanMs     float64 `json:"work_mean_ms"`
}

// kcmSample is one scrape: the series the stats need, by name and labels.
type kcmSample map[string]float64

// maxMetricsBytes bounds one scrape of KCM's /metrics (about 1 MB).
const maxMetricsBytes = 64 << 20

// kcmScrape reads kube-controller-manager's metrics, nil if there is no
// local control plane's to read or it did not answer (logged).
func (k *knRun) kcmScrape(ctx context.Context) kcmSample {
	if k.kcmURL == "" {
		return nil
	}
	s, err := scrapeKCM(ctx, k.cfg, k.kcmURL)
	if err != nil {
		k.logf("kube-controller-manager metrics: %v", err)
		return nil
	}
	return s
}

func scrapeKCM(ctx context.Context, cfg *rest.Config, base string) (kcmSample, error) {
	tc, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	if tc == nil {
		tc = &tls.Config{}
	}
	// KCM's serving certificate is self-signed (its --cert-dir); it is
	// our own process on loopback. The admin's client certificate is what
	// its delegated authorization checks.
	tc.RootCAs, tc.InsecureSkipVerify = nil, true //nolint:gosec // loopback, our own KCM
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", base, resp.Status)
	}
	return parseKCMMetrics(io.LimitReader(resp.Body, maxMetricsBytes))
}

// parseKCMMetrics keeps the series of Prometheus's text format that the
// stats read: the workqueues' queue and work durations and the clients'
// rate-limiter durations (summed over their labels), keyed as
// "name{queue}" or "name{le}".
func parseKCMMetrics(r io.Reader) (kcmSample, error) {
	out := kcmSample{}
	err := eachSeries(r, func(name string, labels map[string]string, value float64) {
		switch {
		case strings.HasPrefix(name, "workqueue_queue_duration_seconds") || strings.HasPrefix(name, "workqueue_work_duration_seconds"):
			q := labels["name"]
			if !isKCMQueue(q) {
				return
			}
			key := name + "{" + q
			if le, ok := labels["le"]; ok {
				key += "," + normLE(le)
			}
			out[key+"}"] += value
		case strings.HasPrefix(name, "rest_client_rate_limiter_duration_seconds"):
			key := name + "{"
			if le, ok := labels["le"]; ok {
				key += normLE(le)
			}
			out[key+"}"] += value
		}
	})
	return out, err
}

// eachSeries calls fn with every series of a scrape in Prometheus's text
// format as its sample lines name it: a histogram's name_bucket (with le),
// name_sum and name_count, a summary's quantiles, name_sum and name_count,
// a counter's, gauge's or untyped value under its own name. A scrape that
// does not parse is an error; the reader is bounded by its caller.
func eachSeries(r io.Reader, fn func(name string, labels map[string]string, value float64)) error {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			eachSample(name, m, fn)
		}
	}
	return nil
}

// eachSample calls fn with the sample lines of one metric of family name.
func eachSample(name string, m *dto.Metric, fn func(name string, labels map[string]string, value float64)) {
	labels := func(extra ...string) map[string]string {
		out := make(map[string]string, len(m.GetLabel())+1)
		for _, l := range m.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(extra); i += 2 {
			out[extra[i]] = extra[i+1]
		}
		return out
	}
	switch {
	case m.Histogram != nil:
		h := m.GetHistogram()
		for _, b := range h.GetBucket() {
			fn(name+"_bucket", labels("le", formatBound(b.GetUpperBound())), orFloat(b.GetCumulativeCount(), b.CumulativeCountFloat))
		}
		fn(name+"_sum", labels(), h.GetSampleSum())
		fn(name+"_count", labels(), orFloat(h.GetSampleCount(), h.SampleCountFloat))
	case m.Summary != nil:
		s := m.GetSummary()
		for _, q := range s.GetQuantile() {
			fn(name, labels("quantile", formatBound(q.GetQuantile())), q.GetValue())
		}
		fn(name+"_sum", labels(), s.GetSampleSum())
		fn(name+"_count", labels(), float64(s.GetSampleCount()))
	case m.Counter != nil:
		fn(name, labels(), m.GetCounter().GetValue())
	case m.Gauge != nil:
		fn(name, labels(), m.GetGauge().GetValue())
	case m.Untyped != nil:
		fn(name, labels(), m.GetUntyped().GetValue())
	}
}

// orFloat is a count the parser kept as an integer, or as a float when
// the scrape wrote one.
func orFloat(n uint64, f *float64) float64 {
	if f != nil {
		return *f
	}
	return float64(n)
}

// formatBound writes a bucket's bound or a quantile as the text format does.
func formatBound(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// normLE writes a bucket's bound with 6 significant digits, so that an
// exponential bucket printed as 0.09999999999999999 is found as 0.1.
func normLE(le string) string {
	f, err := strconv.ParseFloat(le, 64)
	if err != nil {
		return le
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}

func isKCMQueue(q string) bool {
	for _, n := range kcmQueues {
		if q == n {
			return true
		}
	}
	return false
}

// addKCM adds the difference between two scrapes to the case's stats.
func (k *knRun) addKCM(ctl string, c Case, before, after kcmSample) {
	if before == nil || after == nil {
		return
	}
	d := func(key string) float64 { return after[key] - before[key] }
	key := churnKey{ctl, c}
	st := k.kcm[key]
	if st == nil {
		st = &ControllerManagerStats{Controller: ctl, Mode: c.Mode, Burst: c.Burst}
		for _, q := range kcmQueues {
			st.Queues = append(st.Queues, QueueStats{Name: q})
		}
		k.kcm[key] = st
	}
	for i := range st.Queues {
		q := &st.Queues[i]
		n := q.Name
		items := d("workqueue_queue_duration_seconds_count{" + n + "}")
		q.QueueMeanMs = addMean(q.QueueMeanMs, q.Items, d("workqueue_queue_duration_seconds_sum{"+n+"}"), items)
		q.QueueOver100ms += int(items - d("workqueue_queue_duration_seconds_bucket{"+n+",0.1}"))
		works := d("workqueue_work_duration_seconds_count{" + n + "}")
		q.WorkMeanMs = addMean(q.WorkMeanMs, q.Items, d("workqueue_work_duration_seconds_sum{"+n+"}"), works)
		q.Items += int(items)
	}
	reqs := d("rest_client_rate_limiter_duration_seconds_count{}")
	st.LimiterMeanMs = addMean(st.LimiterMeanMs, st.Requests, d("rest_client_rate_limiter_duration_seconds_sum{}"), reqs)
	st.LimiterOver100ms += int(reqs - d("rest_client_rate_limiter_duration_seconds_bucket{0.1}"))
	st.LimiterOver1s += int(reqs - d("rest_client_rate_limiter_duration_seconds_bucket{1}"))
	st.Requests += int(reqs)
}

// addMean folds a new batch (sum in seconds over n) into a mean in ms
// over had earlier samples.
func addMean(meanMs float64, had int, sumS, n float64) float64 {
	if n <= 0 {
		return meanMs
	}
	return (meanMs*float64(had) + sumS*1000) / (float64(had) + n)
}

// kcmList is the stats in report order.
func (k *knRun) kcmList() []ControllerManagerStats {
	var out []ControllerManagerStats
	for _, c := range k.opts.Cases {
		for _, ctl := range k.opts.Controllers {
			if st := k.kcm[churnKey{ctl, c}]; st != nil {
				out = append(out, *st)
			}
		}
	}
	return out
}
