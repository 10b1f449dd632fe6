package policy

import (
	"math"
	"time"
)

// The SLO error budget fed back into the sizing (docs/simulator.md,
// "The miss budget fed back"; variant gantry-miss-budget).
//
// The sizing holds each function at the fewest containers whose
// predicted miss share is at most ε = 1 - the SLO target. The prediction
// is a model's: where the arrivals cluster more than Poisson or the rate
// prediction lags, the misses a driver measures can run above ε for a
// while, and nothing in the sizing sees them. This rule counts them. The
// driver tells the policy how each request ended (Contract.Finished and
// Contract.Refused: finished after its deadline, or refused); the policy
// keeps the requests that left the chain and those that missed over a
// trailing span (counts decayed with time constant budgetSpan), and at
// each window compares the misses with the budget the span allowed,
// served × ε. The burn rate is their ratio. When the misses exceed the
// budget by more than chance (a Poisson count of mean served × ε reaches
// them with probability under budgetAlpha: a lone miss at 1 request/s is
// not evidence), the sizing's ε is divided by the burn rate, so the
// model predicts for the window the share that would bring the span back
// on budget; between such windows the tightening relaxes with the same
// time constant, so a cluster of misses raises the target for about
// budgetSpan and no longer. Before the first window is sized the misses
// are cold starts no sizing predicts (chargeStartup holds their account
// for the time-shared rounding), and they are not counted.
const (
	// budgetSpan is the trailing span the burn rate is measured over.
	budgetSpan = 2 * time.Minute
	// budgetAlpha is the chance below which an excess of misses over the
	// budget counts as a burn.
	budgetAlpha = 0.05
	// budgetMaxTight bounds the factor ε is divided by.
	budgetMaxTight = 10
)

// missBudget is the policy's account of the misses against ε.
type missBudget struct {
	// served and missed are the requests that left the chain, and those
	// of them that missed, decayed to at with time constant budgetSpan.
	served, missed float64
	at             time.Time
	// tight divides ε for the sizing; 1 when on budget.
	tight float64
	// open: a window has been sized; outcomes count from then on.
	open bool
}

// Outcomer is the hook of a policy with Caps.Outcomes: Outcome records a
// request that left function fn at now, missed when it finished after
// its deadline there, refused when a full queue turned it away.
type Outcomer interface {
	Outcome(now time.Time, fn int, missed, refused bool)
}

// Finished tells the policy, when it reads outcomes, that a request
// finished at function fn at now; done is now on the clock of the
// request's Entry, whose deadline decides whether it missed.
func (c *Contract) Finished(now time.Time, fn int, done int64, e Entry) {
	if c.outcomes != nil {
		c.outcomes.Outcome(now, fn, done > e.Deadline, false)
	}
}

// Outcome records how a request ended (Outcomer). A request leaves the
// chain at its last function, or wherever it is refused.
func (c *core) Outcome(now time.Time, fn int, missed, refused bool) {
	b := &c.budget
	if !c.p.missBudget || !b.open || (!refused && fn != len(c.fns)-1) {
		return
	}
	b.decay(now)
	b.served++
	if missed || refused {
		b.missed++
	}
}

// decay ages the counts to now.
func (b *missBudget) decay(now time.Time) {
	if dt := now.Sub(b.at); dt > 0 && !b.at.IsZero() {
		k := math.Exp(-dt.Seconds() / budgetSpan.Seconds())
		b.served *= k
		b.missed *= k
	}
	if now.After(b.at) {
		b.at = now
	}
}

// reviewBudget sets the tightening for the window being sized at now.
func (c *core) reviewBudget(now time.Time) {
	b := &c.budget
	if !c.p.missBudget {
		return
	}
	if !b.open {
		b.open, b.at, b.tight = true, now, 1
		return
	}
	b.decay(now)
	allowed := b.served * (1 - c.baseSLOTarget())
	if burn := b.missed / allowed; allowed > 0 && burn > 1 && poissonTail(allowed, b.missed) < budgetAlpha {
		b.tight = min(budgetMaxTight, max(b.tight, burn))
		return
	}
	relax := math.Exp(-c.spec.Window.Seconds() / budgetSpan.Seconds())
	b.tight = max(1, b.tight*relax)
}

// budgetTight is the factor the sizing divides ε by.
func (c *core) budgetTight() float64 {
	if !c.p.missBudget || c.budget.tight < 1 {
		return 1
	}
	return c.budget.tight
}

// poissonTail is P(X ≥ k) for X Poisson of mean mu, k rounded up to a
// whole count: the chance that misses at the budget's rate reach k.
func poissonTail(mu, k float64) float64 {
	n := math.Ceil(k)
	if n <= 0 {
		return 1
	}
	if n > mu+12*math.Sqrt(mu)+12 {
		return 0 // far beyond the mean: below any alpha
	}
	// 1 - P(X < n), summed in log space.
	var below float64
	lmu := math.Log(mu)
	for i := 0.0; i < n; i++ {
		lg, _ := math.Lgamma(i + 1)
		below += math.Exp(-mu + i*lmu - lg)
	}
	return max(0, 1-below)
}
