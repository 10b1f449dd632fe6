package policy

import (
	"math"
	"testing"
	"time"
)

// poissonTail is the chance that a Poisson count of mean mu reaches k.
func TestPoissonTail(t *testing.T) {
	for _, c := range []struct{ mu, k, want float64 }{
		{2.4, 0, 1},
		{2.4, 1, 1 - math.Exp(-2.4)},
		{0.3, 2, 1 - math.Exp(-0.3)*(1+0.3)},
		{2.4, 6.2, 1 - math.Exp(-2.4)*(1+2.4+2.4*2.4/2+math.Pow(2.4, 3)/6+math.Pow(2.4, 4)/24+math.Pow(2.4, 5)/120+math.Pow(2.4, 6)/720)},
		{1, 1000, 0},
	} {
		if got := poissonTail(c.mu, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("poissonTail(%v, %v) = %v, want %v", c.mu, c.k, got, c.want)
		}
	}
}

// The sizing's ε is tightened only when the misses over the span exceed
// what ε allows by more than chance, by the burn rate, and relaxes back
// to the target within a few spans once the misses stop; gantry itself
// never tightens.
func TestMissBudgetTightensOnABurnAndRelaxes(t *testing.T) {
	c := mustNew(t, "gantry-miss-budget", spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
	base := 1 - c.baseSLOTarget()
	now := t0
	c.reviewBudget(now) // the first window opens the account
	// 20 requests/s for a minute, one miss: 1200 served, 1.2 allowed.
	serve := func(secs int, missEvery int) {
		for i := range secs * 20 {
			now = now.Add(50 * time.Millisecond)
			c.Outcome(now, 0, missEvery > 0 && i%missEvery == 0, false)
		}
	}
	serve(60, 1200)
	c.reviewBudget(now)
	if got := 1 - c.sloTarget(); got != base {
		t.Fatalf("one miss in 1200 requests: ε %.6f, want the target's %.6f", got, base)
	}
	// Then a cluster: 8 misses in 40 requests, far beyond chance.
	serve(2, 5)
	c.reviewBudget(now)
	b := c.budget
	burn := b.missed / (b.served * base)
	if eps := 1 - c.sloTarget(); burn <= 1 || math.Abs(eps-base/burn) > 1e-12 {
		t.Fatalf("after a cluster (burn %.2f): ε %.6f, want %.6f", burn, eps, base/burn)
	}
	// No misses for five spans: ε is back at the target.
	for range 5 * int(budgetSpan/c.spec.Window) {
		serve(int(c.spec.Window/time.Second), 0)
		c.reviewBudget(now)
	}
	if got := 1 - c.sloTarget(); math.Abs(got-base) > 1e-12 {
		t.Errorf("five spans without a miss: ε %.6f, want %.6f", got, base)
	}
	g := mustNew(t, "gantry", spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
	g.reviewBudget(t0)
	for i := range 100 {
		g.Outcome(t0.Add(time.Duration(i)*time.Millisecond), 0, true, false)
	}
	g.reviewBudget(t0.Add(time.Second))
	if got := 1 - g.sloTarget(); got != base {
		t.Errorf("gantry after 100 misses: ε %.6f, want %.6f", got, base)
	}
}

// Outcomes before the first window, and at a chain's inner functions,
// are not counted; a refusal anywhere is.
func TestMissBudgetCountsWhatLeavesTheChain(t *testing.T) {
	c := mustNew(t, "gantry-miss-budget", chainSpec()).(*core)
	c.Outcome(t0, 2, true, false)
	if c.budget.served != 0 {
		t.Fatalf("before the first window: %v served, want 0", c.budget.served)
	}
	c.reviewBudget(t0)
	c.Outcome(t0, 0, true, false)
	c.Outcome(t0, 1, true, false)
	c.Outcome(t0, 2, false, false)
	c.Outcome(t0, 1, true, true)
	if b := c.budget; b.served != 2 || b.missed != 1 {
		t.Errorf("served %v, missed %v; want 2 (the tail and the refusal) and 1", b.served, b.missed)
	}
}
