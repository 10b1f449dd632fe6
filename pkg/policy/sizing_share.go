package policy

// Time-shared rounding of a small target (docs/simulator.md, "Sizing
// from the SLO target", the rounding at low load).
//
// The SLO sizing holds the fewest whole containers n whose predicted
// miss share p(n) is at most ε. Where a function's load is a fraction of
// one container that rounding over-delivers by a wide margin: at 1
// request/s on document-summary each function's load is about 0.23, the
// model predicts p(2) ≈ 0.3-0.7% and p(3) ≈ 0.01-0.05% for ε = 0.1%, and
// n = 3 is held all hour (one end-to-end miss in 3629 requests) while
// `commercial`, whose keep-alive holds the recent peak concurrency,
// averages 2.96 per function at 99.2%. Every window is a whole
// container too many for 10-30% of the time ε allows.
//
// ε is a share over the run, not a bound per window, so the target may
// alternate: holding n - 1 for a fraction w of the windows and n for the
// rest misses w·p(n-1) + (1 - w)·p(n), which is at most the budget b at
// w = (b - p(n)) / (p(n-1) - p(n)). The rule keeps that balance as a
// budget of expected misses: each window sized at n banks its arrivals
// times b - p(n); a window at n - 1 spends its arrivals times
// p(n-1) - b, and the cold start of the container that comes back after
// it as well (the window counts as W + cold start long). b is ε over the
// chain's length k: each function is sized for all of ε (the union bound
// over the chain then allows k·ε, loose because each function's p(n)
// sits well below ε), but a budget each function spends up to the full
// ε makes the bound tight: with b = ε, email-categorization at 1/s,
// seed 2, held 99.831% (6 misses, 2 before). It steps down only when the
// budget pays for shareMinWindows windows at n - 1, and stays down while
// it pays for the next one, because each step down and back up costs a
// retirement and a cold start (the container-seconds of a start and the
// idle age the retirement waits): blocks of several windows spend those
// once per block. The budget is
// capped at shareMaxWindows windows at n - 1, so that a long stretch at n
// does not buy a long stretch of misses later. It is deterministic: the
// same predictions give the same targets, in both drivers.
//
// It applies only to targets of at most shareMaxTarget containers, where
// one container is a quarter or more of the target. Above it the window's
// target already moves with the rate's noise by more than a container
// (at 250 requests/s on image-compression with heavy sizes, between 98
// and 109), which averages the rounding away, and each step down and back
// would add spawns to the stable cells, where gantry must stay below
// cypress's. A burst's target (burstResize) and the periodic pre-warm are
// sized without it.
const (
	shareMaxTarget  = 4
	shareMinWindows = 3
	shareMaxWindows = 6
)

// shareState is one function's budget for the time-shared rounding.
type shareState struct {
	// credit is the expected misses the windows sized so far left unused
	// under ε (their arrivals times ε - p), less those spent below.
	credit float64
	// down: the latest window held n - 1.
	down bool
	// sized: a window has sized the function (before it, the arrivals
	// that wait are charged to credit as misses: chargeStartup).
	sized bool
}

// chargeStartup charges an arrival at function f that has to wait before
// the function's first window is sized as one miss against its budget.
// Those waits are cold starts and the prewarm's queue, which no window's
// p(n) predicts and no window at n banked for: at 1 request/s on the
// single-function apps they were 1-2 of the 4 misses that took
// image-compression (seeds 1 and 3) and sentiment-analysis (seed 2) to
// 99.888-99.890%, under the 99.9% ε aims at, while the budget spent its
// whole allowance on windows at n - 1 as if they had not happened. The
// debt is repaid only by windows at n, so a function that has already
// spent its allowance does not step down until it has earned it back.
func (c *core) chargeStartup(f int, n Counts) {
	s := &c.fns[f].share
	if !c.p.shareRound || s.sized || n.Queued == 0 {
		return
	}
	// A request that waits at several functions of a chain misses once:
	// each function carries 1/k of it, as each banks ε/k.
	s.credit -= 1 / float64(len(c.fns))
}

// windowSize is the window's SLO sizing of function f at this rate, with
// a small target's rounding time-shared when the policy does it.
func (c *core) windowSize(f int, rate float64) (int, bool) {
	n, mix, ok := c.sloSizeMix(f, rate)
	if !ok || !c.p.shareRound {
		return n, ok
	}
	return c.shareRounding(&c.fns[f].share, n, rate, mix), true
}

// shareRounding is the target for a window that the sizing put at n:
// n - 1 when the budget pays for it, else n (the rule above).
func (c *core) shareRounding(s *shareState, n int, rate float64, mix ServiceMix) int {
	s.sized = true
	if n < 2 || n > shareMaxTarget || rate <= 0 {
		s.reset()
		return n
	}
	eps := (1 - c.sloTarget()) / float64(len(c.fns))
	sd := c.predictionSD(c.rate)
	win := c.spec.Window.Seconds()
	arrivals := rate * win
	under := arrivals * (eps - missSpread(n, rate, sd, mix))
	over := arrivals * (1 + c.coldStart.Seconds()/win) * (missSpread(n-1, rate, sd, mix) - eps)
	if over <= 0 || under < 0 {
		// n - 1 meets ε (or n does not): nothing to share.
		s.reset()
		return n
	}
	need := over
	if !s.down {
		need = shareMinWindows * over
	}
	if s.credit >= need {
		s.down = true
		s.credit -= over
		return n - 1
	}
	s.down = false
	s.credit = min(s.credit+under, shareMaxWindows*over)
	return n
}

// reset forgets the budget banked at a target the rule does not share,
// but keeps a debt: misses already spent stay spent.
func (s *shareState) reset() {
	s.credit = min(s.credit, 0)
	s.down = false
}
