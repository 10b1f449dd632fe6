package loadgen

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range and precision: microseconds from 1 µs to 1 h with three
// significant digits (0.1% error), which covers any timeout plus any lag.
const (
	histMinUs   = 1
	histMaxUs   = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

// secondAcc accumulates one second of the timeline.
type secondAcc struct {
	sent, ok, errors, measured int64
	sum, max                   time.Duration
}

// collector aggregates samples from every request goroutine under one lock;
// the critical section is a few counters and a histogram bucket, far
// shorter than a request.
type collector struct {
	mu        sync.Mutex
	closed    bool
	slo       time.Duration
	hist      *hdrhistogram.Histogram
	requests  int64
	ok        int64
	withinSLO int64
	kinds     map[string]int64
	measured  int64
	sum, max  time.Duration
	timeline  []secondAcc
	perSecond []int64
	onSample  func(Sample)
	// done mirrors requests for the progress reporter without the lock.
	done atomic.Int64
}

func newCollector(cfg Config) *collector {
	return &collector{
		slo:      cfg.SLO,
		hist:     hdrhistogram.New(histMinUs, histMaxUs, histSigFigs),
		kinds:    make(map[string]int64),
		timeline: make([]secondAcc, len(cfg.Trace.PerSecond)),
		onSample: cfg.OnSample,
	}
}

// add records one outcome. Samples that arrive after close are ignored:
// close has already counted them as canceled.
func (c *collector) add(s Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.requests++
	c.done.Add(1)
	sec := c.second(s.Offset)
	sec.sent++
	if s.Kind == KindOK {
		c.ok++
		sec.ok++
	} else {
		c.kinds[s.Kind]++
		sec.errors++
	}
	if s.Measured {
		c.addLatency(s, sec)
	}
	if c.onSample != nil {
		c.onSample(s)
	}
}

// second is the timeline entry of an intended send offset.
func (c *collector) second(offset time.Duration) *secondAcc {
	i := min(int(offset/time.Second), len(c.timeline)-1)
	return &c.timeline[max(i, 0)]
}

func (c *collector) addLatency(s Sample, sec *secondAcc) {
	us := min(max(int64(s.Latency/time.Microsecond), histMinUs), histMaxUs)
	_ = c.hist.RecordValue(us) // cannot fail: us is clamped to the range
	c.measured++
	c.sum += s.Latency
	c.max = max(c.max, s.Latency)
	sec.measured++
	sec.sum += s.Latency
	sec.max = max(sec.max, s.Latency)
	if s.Kind != KindOK {
		return
	}
	if s.Latency <= c.slo {
		c.withinSLO++
	}
	// An OK response completes at its intended time plus its latency: the
	// throughput series needs no extra clock reading.
	done := int((s.Offset + s.Latency) / time.Second)
	for len(c.perSecond) <= done {
		c.perSecond = append(c.perSecond, 0)
	}
	c.perSecond[done]++
}

// close stops accepting samples and counts missing requests that were sent
// but never reported (a Payload that hung past the abort) as canceled, so
// that Requests still equals everything sent.
func (c *collector) close(sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if missing := sent - c.requests; missing > 0 {
		c.requests += missing
		c.done.Add(missing)
		c.kinds[KindCanceled] += missing
	}
}

// result builds the Result once the collector is closed.
func (c *collector) result() *Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := &Result{
		Requests: c.requests, OK: c.ok, Errors: c.requests - c.ok,
		ErrorsByKind: c.kinds, SLO: c.slo, Max: c.max, Measured: c.measured,
		ThroughputSeries: c.perSecond, Timeline: c.timelineOut(),
	}
	if c.requests > 0 {
		r.SLOCompliance = float64(c.withinSLO) / float64(c.requests)
	}
	if c.measured > 0 {
		r.Mean = c.sum / time.Duration(c.measured)
		r.P50, r.P90, r.P95 = c.quantile(50), c.quantile(90), c.quantile(95)
		r.P99, r.P999 = c.quantile(99), c.quantile(99.9)
	}
	return r
}

func (c *collector) quantile(q float64) time.Duration {
	// The histogram reports the top of a bucket; never claim more than
	// the exact maximum.
	return min(time.Duration(c.hist.ValueAtQuantile(q))*time.Microsecond, c.max)
}

func (c *collector) timelineOut() []Second {
	out := make([]Second, len(c.timeline))
	for i, a := range c.timeline {
		out[i] = Second{Sent: a.sent, OK: a.ok, Errors: a.errors, MaxLatency: a.max}
		if a.measured > 0 {
			out[i].MeanLatency = a.sum / time.Duration(a.measured)
		}
	}
	return out
}
