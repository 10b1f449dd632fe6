package sim

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histograms record microseconds from 1 µs to 24 h at 3 significant
// digits: a fixed ~0.4 MB each, however many requests are recorded.
const (
	histMaxMicros = int64(24 * time.Hour / time.Microsecond)
	histDigits    = 3
)

// latency accumulates response times against an SLO.
type latency struct {
	hist                    *hdrhistogram.Histogram
	slo                     int64
	n, within, coldStarts   int64
	rejected                int64 // requests turned away at a full queue
	queueNs, coldNs, execNs float64
}

func newLatency(slo time.Duration) latency {
	return latency{hist: hdrhistogram.New(1, histMaxMicros, histDigits), slo: int64(slo)}
}

func (l *latency) record(resp, queue, cold, exec int64) {
	l.n++
	if resp <= l.slo {
		l.within++
	}
	if cold > 0 {
		l.coldStarts++
	}
	l.queueNs += float64(queue)
	l.coldNs += float64(cold)
	l.execNs += float64(exec)
	us := min(max(resp/1000, 1), histMaxMicros)
	_ = l.hist.RecordValue(us) // cannot fail: us is clamped to the range
}

func (l *latency) summary() Latency {
	return Latency{
		SLOCompliance: l.compliance(),
		P50:           l.percentile(0.50), P95: l.percentile(0.95), P99: l.percentile(0.99), P999: l.percentile(0.999),
		MeanQueue: l.mean(l.queueNs), MeanColdStart: l.mean(l.coldNs), MeanExec: l.mean(l.execNs),
	}
}

func (l *latency) percentile(q float64) time.Duration {
	return time.Duration(l.hist.ValueAtQuantile(q*100)) * time.Microsecond
}

func (l *latency) mean(sum float64) time.Duration {
	if l.n == 0 {
		return 0
	}
	return time.Duration(sum / float64(l.n))
}

// compliance counts a rejected request as one that missed its SLO.
func (l *latency) compliance() float64 {
	if l.n+l.rejected == 0 {
		return 0
	}
	return float64(l.within) / float64(l.n+l.rejected)
}

// cdf samples the latency CDF at fixed quantiles, denser in the tail.
func (l *latency) cdf() []CDFPoint {
	if l.n == 0 {
		return nil
	}
	var out []CDFPoint
	add := func(q float64) {
		out = append(out, CDFPoint{Millis: float64(l.hist.ValueAtQuantile(q*100)) / 1000, Fraction: q})
	}
	for i := 1; i <= 98; i++ {
		add(float64(i) / 100)
	}
	for _, q := range []float64{0.99, 0.995, 0.999, 0.9995, 0.9999, 1} {
		add(q)
	}
	return out
}

// fnMetrics is what the engine tracks per function besides latency.
type fnMetrics struct {
	spawned, jobs        int64
	live, busy, starting int
	// bound counts starting containers that hold a request (dedicated
	// policies): SimFaaS counts them as running.
	bound              int
	peak               int
	liveArea, busyArea float64 // container·ns
	boundArea          float64
	lastT              int64
	// runningTime, when not nil, accumulates the time (ns) spent with k
	// instances running (busy or bound) at index k: the time-averaged
	// distribution a test compares with M/G/∞.
	runningTime []float64
}

func (m *fnMetrics) advance(t int64) {
	dt := float64(t - m.lastT)
	m.liveArea += float64(m.live) * dt
	m.busyArea += float64(m.busy) * dt
	m.boundArea += float64(m.bound) * dt
	if m.runningTime != nil {
		k := m.busy + m.bound
		for len(m.runningTime) <= k {
			m.runningTime = append(m.runningTime, 0)
		}
		m.runningTime[k] += dt
	}
	m.lastT = t
}
