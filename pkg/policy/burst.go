package policy

import (
	"math"
	"slices"
	"time"
)

// Bursts detected on arrival (docs/simulator.md, "Bursts"). Two rules
// replace the panic rule's per-tick count test:
//
//   - Detection. Every arrival at the chain's head updates a CUSUM of the
//     log-likelihood ratio of its inter-arrival gap Δ under a rate κ·λ
//     against the rate λ the containers were sized for: S ← max(0, S +
//     ln κ − (κ−1)·λ·Δ). The alarm is S ≥ h. By Lorden's bound a CUSUM of
//     likelihood ratios runs at least e^h observations between false
//     alarms on the reference rate, which is e^h/λ seconds; h =
//     ln(λ/burstFalseAlarms) fixes the false alarms per second, whatever
//     the rate and however often the driver ticks. At an alarm the excess
//     rate is the CUSUM run's arrivals over its span less λ, and the
//     target grows by that excess times the mean execution time (the
//     extra offered load), held for one window.
//   - Warm buffer. A rise faster than a cold start cannot be met by
//     starting containers once it is seen. The arrivals are counted in
//     spans of one cold start; each span's rate minus the previous one's
//     is a sample of how much the rate rises within a cold start, and the
//     sizing adds the burstQuantile-quantile of the recent samples to the
//     predicted rate.
const (
	// burstFalseAlarms is the false alarms per second the detector is
	// allowed on a constant rate: one an hour.
	burstFalseAlarms = 1.0 / 3600.0
	// burstKappa is the rate ratio the CUSUM is tuned to detect.
	burstKappa = 2.0
	// burstQuantile of the rises within a cold start is the warm buffer.
	burstQuantile = 0.99
	// riseSamples bounds the rises kept (a ring): about 13 minutes of
	// 1.5 s spans.
	riseSamples = 512
	// minRiseSpan is the shortest span the rises are counted over, so a
	// millisecond cold start does not measure Poisson noise alone.
	minRiseSpan = time.Second
)

// burstState is the detector's and the warm buffer's memory.
type burstState struct {
	last  time.Time // the previous arrival
	s     float64   // CUSUM statistic
	runAt time.Time // when the CUSUM run began (s left 0)
	runN  float64   // arrivals in the run
	// excess is the rate (per second) the latest alarm measured above the
	// reference, in force until excessUntil.
	// h is the threshold at the reference rate hRef.
	h, hRef     float64
	excess      float64
	excessUntil time.Time
	alarms      int64
	// Rise spans: arrivals in the current span, its start, the previous
	// span's rate.
	spanAt   time.Time
	spanN    float64
	prevRate float64
	havePrev bool
	rises    []float64
	riseNext int
	sorted   []float64
}

// burstRef is the rate the detector compares arrivals with: what the
// current targets were sized for.
func (c *core) burstRef() float64 {
	return c.rate + c.burst.excessNow()
}

func (b *burstState) excessNow() float64 { return b.excess }

// burstArrive feeds one arrival at the chain's head to the detector and
// to the rise spans.
func (c *core) burstArrive(now time.Time) {
	b := &c.burst
	c.riseArrive(now)
	if !b.excessUntil.IsZero() && !now.Before(b.excessUntil) {
		b.excess, b.excessUntil = 0, time.Time{}
	}
	ref := c.burstRef()
	if b.last.IsZero() || !c.targetOK || ref <= 0 {
		b.last = now
		return
	}
	gap := now.Sub(b.last).Seconds()
	b.last = now
	if b.s == 0 {
		b.runAt, b.runN = now.Add(-time.Duration(gap*float64(time.Second))), 0
	}
	b.s = max(0, b.s+lnKappa-(burstKappa-1)*ref*gap)
	b.runN++
	if b.s == 0 {
		return
	}
	if ref != b.hRef {
		// The threshold changes only with the reference rate: a log per
		// arrival was a tenth of the simulator's cost per request.
		b.h, b.hRef = burstThreshold(ref), ref
	}
	if b.s >= b.h {
		span := now.Sub(b.runAt).Seconds()
		if span > 0 {
			if ex := b.runN/span - ref; ex > 0 {
				b.excess += ex
				b.excessUntil = now.Add(c.spec.Window)
			}
		}
		b.alarms++
		b.s = 0
	}
}

// lnKappa is ln burstKappa, the CUSUM's step per arrival.
var lnKappa = math.Log(burstKappa)

// burstThreshold is the CUSUM threshold h for reference rate ref:
// e^h/ref seconds between false alarms is 1/burstFalseAlarms.
func burstThreshold(ref float64) float64 {
	return max(math.Log(burstKappa), math.Log(ref/burstFalseAlarms))
}

// riseSpan is the span the rises are counted over.
func (c *core) riseSpan() time.Duration { return max(c.coldStart, minRiseSpan) }

// riseArrive counts an arrival into the current span, closing the spans
// that ended before it.
func (c *core) riseArrive(now time.Time) {
	b := &c.burst
	span := c.riseSpan()
	if b.spanAt.IsZero() {
		b.spanAt = now
	}
	for now.Sub(b.spanAt) >= span {
		rate := b.spanN / span.Seconds()
		if b.havePrev {
			b.addRise(rate - b.prevRate)
		}
		b.prevRate, b.havePrev = rate, true
		b.spanN = 0
		b.spanAt = b.spanAt.Add(span)
		if now.Sub(b.spanAt) > 100*span {
			// A long silence: restart the spans at now instead of
			// counting every empty one.
			b.spanAt, b.havePrev = now, false
		}
	}
	b.spanN++
}

func (b *burstState) addRise(r float64) {
	if len(b.rises) < riseSamples {
		b.rises = append(b.rises, r)
		return
	}
	b.rises[b.riseNext] = r
	b.riseNext = (b.riseNext + 1) % riseSamples
}

// warmBuffer is the rate the sizing adds for rises within a cold start:
// the burstQuantile of the recent rises less the same quantile of the
// rises Poisson noise alone makes at the predicted rate (the difference of
// two spans' rates has variance 2λ/span, already covered by the M/G/n
// sizing); 0 before a few rises are seen.
func (c *core) warmBuffer() float64 {
	b := &c.burst
	if len(b.rises) < 8 {
		return 0
	}
	b.sorted = append(b.sorted[:0], b.rises...)
	slices.Sort(b.sorted)
	q := b.sorted[int(burstQuantile*float64(len(b.sorted)-1))]
	noise := normalQuantile(burstQuantile) * math.Sqrt(2*c.rate/c.riseSpan().Seconds())
	return max(0, q-noise)
}

// normalQuantile is the standard normal's p-quantile.
func normalQuantile(p float64) float64 { return math.Sqrt2 * math.Erfinv(2*p-1) }

// BurstAlarms is how many bursts the detector has signalled: tests
// measure its false alarms on constant-rate traces with it.
func BurstAlarms(p Policy) int64 {
	if c, ok := p.(*core); ok {
		return c.burst.alarms
	}
	return 0
}
