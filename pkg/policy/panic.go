package policy

import (
	"math"
	"time"
)

// The panic rule: when arrivals run above the rate the window was sized
// for, gantry scales every function's target up at once instead of at the
// next window. docs/simulator.md ("The panic rule") has each rule and its
// measured effect. Three rules keep it from reacting to noise and from
// churning:
//
//   - Span: the rate is measured over at least the nominal tick
//     (Spec.Tick), however soon after the previous call Plan comes, so an
//     early or late tick never compares a handful of arrivals with a
//     tiny expected count.
//   - False alarms: a single measurement fires only above panicZ standard
//     deviations of its Poisson count (gantry: 3, a one-sided false-alarm
//     probability of 0.13% per tick in the normal approximation, about
//     1.6 a 10-minute run at 500 ms ticks, against 2.3% and 27 at the old
//     2), and a one-sided CUSUM over the per-tick standardised excess
//     catches a smaller rise that persists (drift cusumK = 0.5, threshold
//     cusumH = 5: about 940 ticks between false alarms on a constant rate
//     by Siegmund's approximation, 1.3 a 10-minute run).
//   - Hold: the containers a panic asks for are held for panicHold, so a
//     burst's containers are not retired by idling detection and started
//     again a window later.
const (
	panicRing = 16
	cusumK    = 0.5
	cusumH    = 5
)

// panicState is the panic rule's memory.
type panicState struct {
	// cum is the running count of first-function arrivals; ring holds it
	// at the last panicRing calls, so the rate can be measured over any
	// span the ring covers.
	cum  float64
	ring [panicRing]struct {
		cum float64
		at  time.Time
	}
	next int
	// CUSUM statistic and the arrivals and expected arrivals of the run
	// it has accumulated over (since it was last 0).
	s, sN, sWant float64
	// Until holdUntil, a function's target is at least held[f].
	holdUntil time.Time
}

// surge is the factor every target is scaled by at this call: above 1 when
// the arrival rate runs above the one the current targets were sized for.
// It also records the call's arrivals.
func (c *core) surge(now time.Time) float64 {
	ps := &c.panic
	prev := ps.ring[(ps.next+panicRing-1)%panicRing]
	ps.ring[ps.next].cum, ps.ring[ps.next].at = ps.cum, now
	ps.next = (ps.next + 1) % panicRing
	if !c.p.panic || !c.targetOK || c.rate <= 0 || prev.at.IsZero() {
		return 1
	}
	// The newest earlier call at least minSpan ago (or the oldest kept).
	minSpan := time.Duration(0)
	if c.p.panicMinSpan {
		minSpan = c.spec.Tick
		if minSpan <= 0 {
			minSpan = DefaultTick
		}
	}
	from := prev
	for k := 1; k < panicRing; k++ {
		r := ps.ring[(ps.next+panicRing-1-k)%panicRing]
		if r.at.IsZero() {
			break
		}
		from = r
		if now.Sub(r.at) >= minSpan {
			break
		}
	}
	span := now.Sub(from.at).Seconds()
	if span <= 0 {
		return 1
	}
	n := ps.cum - from.cum
	want := c.rate * span
	if n > want+c.p.panicZ*math.Sqrt(want) {
		return n / want
	}
	if !c.p.panicCUSUM {
		return 1
	}
	// CUSUM on the increment since the previous call.
	dt := now.Sub(prev.at).Seconds()
	inc, incWant := ps.cum-prev.cum, c.rate*dt
	if incWant <= 0 {
		return 1
	}
	ps.s += (inc-incWant)/math.Sqrt(incWant) - cusumK
	ps.sN += inc
	ps.sWant += incWant
	if ps.s <= 0 {
		ps.s, ps.sN, ps.sWant = 0, 0, 0
		return 1
	}
	if ps.s > cusumH {
		f := ps.sN / ps.sWant
		ps.s, ps.sN, ps.sWant = 0, 0, 0
		return max(1, f)
	}
	return 1
}

// heldTarget is function f's target at this call: the window's target
// scaled by the surge, and, under the hold rule, no less than what a panic
// asked for within the last panicHold.
func (c *core) heldTarget(f int, now time.Time, surge float64) int {
	t := int(math.Ceil(float64(c.fns[f].target) * surge))
	if c.p.panicHold <= 0 {
		return t
	}
	fs := &c.fns[f]
	if surge > 1 {
		if now.After(c.panic.holdUntil) {
			for i := range c.fns {
				c.fns[i].held = 0
			}
		}
		fs.held = max(fs.held, t)
		c.panic.holdUntil = now.Add(c.p.panicHold)
	}
	if now.Before(c.panic.holdUntil) {
		return max(t, fs.held)
	}
	return t
}
