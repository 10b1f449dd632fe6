package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// At a load of a quarter of a container the sizing holds n = 3 where
// n - 1 = 2 misses a few times ε: the time-shared rounding holds 2 in
// blocks of at least shareMinWindows windows, and the expected misses it
// runs up (cold starts charged) stay within the budget, ε over the
// chain's length.
func TestShareRoundingKeepsTheMissBudget(t *testing.T) {
	c := mustNew(t, "gantry", chainSpec()).(*core)
	const rate = 1.0
	mix := ServiceMix{Mean: 0.25, SCV: 0.2, Slacks: []float64{0.2, 0.3, 0.4, 0.5}}
	eps := 1 - c.sloTarget()
	budget := eps / float64(len(c.fns))
	n := sizeForSpread(rate, 0, mix, eps, maxSizing)
	pn, pdown := MissProb(n, rate, mix), MissProb(n-1, rate, mix)
	if n < 2 || n > shareMaxTarget || pdown <= budget || pn >= budget {
		t.Fatalf("setup: n = %d, p(n-1) = %.5f, p(n) = %.5f, budget %.5f: want n in [2, %d] and the budget between", n, pdown, pn, budget, shareMaxTarget)
	}
	win := c.spec.Window.Seconds()
	charge := 1 + c.coldStart.Seconds()/win
	var s shareState
	var spent, allowed float64
	down, run := 0, 0
	const windows = 720
	for w := range windows {
		got := c.shareRounding(&s, n, rate, mix)
		allowed += rate * win * budget
		switch got {
		case n:
			spent += rate * win * pn
			if run > 0 && run < shareMinWindows {
				t.Fatalf("window %d: a block of %d windows at n - 1, want at least %d", w, run, shareMinWindows)
			}
			run = 0
		case n - 1:
			spent += rate * win * (budget + charge*(pdown-budget))
			down++
			run++
		default:
			t.Fatalf("window %d: target %d, want %d or %d", w, got, n-1, n)
		}
		if spent > allowed+1e-9 {
			t.Fatalf("window %d: %.4f expected misses, the budget allows %.4f", w, spent, allowed)
		}
	}
	if down == 0 || down == windows {
		t.Fatalf("%d of %d windows at n - 1, want some and not all", down, windows)
	}
	// The rounding is worth most of the budget: at least half of the
	// share w of windows that would spend it exactly.
	w := (budget - pn) / (budget - pn + charge*(pdown-budget))
	if share := float64(down) / windows; share < w/2 {
		t.Errorf("%.3f of the windows at n - 1, the budget pays for %.3f", share, w)
	}
}

// Above shareMaxTarget, or where n - 1 meets the budget, the target is the
// sizing's, and the budget starts again from nothing.
func TestShareRoundingLeavesLargeTargetsAlone(t *testing.T) {
	c := mustNew(t, "gantry", spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
	mix := ServiceMix{Mean: 0.25, SCV: 0.2, Slacks: []float64{0.5, 0.6, 0.7}}
	s := shareState{credit: 100, down: true}
	if got := c.shareRounding(&s, shareMaxTarget+1, 20, mix); got != shareMaxTarget+1 || s != (shareState{sized: true}) {
		t.Errorf("target %d with state %+v, want %d and a cleared budget", got, s, shareMaxTarget+1)
	}
	s = shareState{credit: 100}
	if got := c.shareRounding(&s, 3, 0.001, mix); got != 3 {
		t.Errorf("at a load where 2 containers meet ε: target %d, want the sizing's 3", got)
	}
}

// Driven through Plan at 1 request/s, gantry's target of a function whose
// load is a quarter of a container averages below the sizing's whole
// containers; its ablation holds them.
func TestShareRoundingAblation(t *testing.T) {
	mean := func(name string) float64 {
		p := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: 600 * ms}))
		c := p.(*core)
		rng := rand.New(rand.NewPCG(5, 6))
		views, out := make([]View, 1), make([]Decision, 1)
		var sum float64
		var n int
		now := t0
		p.Plan(now, views, out)
		for w := range 180 {
			at := now
			for {
				at = at.Add(time.Duration(rng.ExpFloat64() * float64(time.Second)))
				if at.Sub(now) >= 10*time.Second {
					break
				}
				s := 1 + 9*rng.Float64()
				p.Arrive(at, 0, s, views[0].Counts)
				if err := p.Complete(0, s, time.Duration(s*40)*ms, s); err != nil {
					t.Fatal(err)
				}
			}
			now = t0.Add(time.Duration(w+1) * 10 * time.Second)
			p.Plan(now, views, out)
			if w >= 30 && c.targetOK {
				sum += float64(c.fns[0].target)
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%s: no target in 180 windows", name)
		}
		return sum / float64(n)
	}
	on, off := mean("gantry"), mean("gantry-no-share-round")
	if off != float64(int(off)) || off < 2 {
		t.Fatalf("gantry-no-share-round: mean target %.3f, want the same whole target of at least 2 every window", off)
	}
	if !(on < off && on > off-1) {
		t.Errorf("gantry: mean target %.3f, want between %.0f and %.0f", on, off-1, off)
	}
}

// A wait before the first sizing is a miss the budget owes: charged as
// one miss over the chain's length, never once a window has sized the
// function, and kept where a large target clears the banked credit.
func TestShareRoundingChargesStartupWaits(t *testing.T) {
	c := mustNew(t, "gantry", spec(
		FunctionSpec{Name: "a", SLO: time.Second},
		FunctionSpec{Name: "b", SLO: time.Second})).(*core)
	c.chargeStartup(0, Counts{Live: 1, Queued: 0})
	if got := c.fns[0].share.credit; got != 0 {
		t.Fatalf("an arrival that did not wait charged %v", got)
	}
	c.chargeStartup(0, Counts{Live: 1, Queued: 1})
	c.chargeStartup(1, Counts{Live: 1, Starting: 1, Queued: 2})
	for f := range 2 {
		if got := c.fns[f].share.credit; got != -0.5 {
			t.Errorf("function %d: credit %v after one wait, want -1/k = -0.5", f, got)
		}
	}
	mix := ServiceMix{Mean: 0.25, SCV: 0.2, Slacks: []float64{0.5, 0.6, 0.7}}
	s := &c.fns[0].share
	if got := c.shareRounding(s, shareMaxTarget+1, 20, mix); got != shareMaxTarget+1 || s.credit != -0.5 {
		t.Errorf("target %d, credit %v: a large target must keep the debt of -0.5", got, s.credit)
	}
	c.chargeStartup(0, Counts{Live: 1, Queued: 1})
	if s.credit != -0.5 {
		t.Errorf("credit %v: a wait after the first sizing is the model's to predict, not charged", s.credit)
	}
	off := mustNew(t, "gantry-no-share-round", spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
	off.chargeStartup(0, Counts{Live: 1, Queued: 1})
	if got := off.fns[0].share.credit; got != 0 {
		t.Errorf("gantry-no-share-round charged %v", got)
	}
}
