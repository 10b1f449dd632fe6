package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// chainSpec is a chain of three in the shape of audio-translation: a long
// size-sensitive head, a shorter size-sensitive middle and a constant
// 45 ms tail, the app SLO 1.2 times the longest chain (1090 ms) split in
// proportion to each function's longest execution, as the simulator
// does (SplitSLO): the tail's share is 54 ms, 9 ms of slack.
func chainSpec() Spec {
	weights := []float64{800, 200, 45}
	share, _ := SplitSLO(1254*ms, weights)
	s := spec(FunctionSpec{Name: "head", SLO: share[0], SizeSensitive: true},
		FunctionSpec{Name: "middle", SLO: share[1], SizeSensitive: true},
		FunctionSpec{Name: "tail", SLO: share[2]})
	s.AppSLO = 1254 * ms
	return s
}

// chainExec is the chain's execution time at each function for a
// first-function size in [1, 100].
func chainExec(fn int, size float64) time.Duration {
	switch fn {
	case 0:
		return time.Duration(8 * size * float64(ms))
	case 1:
		return time.Duration(2 * size * float64(ms))
	}
	return 45 * ms
}

// feedChain drives a chain policy through windows of steady load at rate
// requests per second, sizes uniform on [1, 100], each request completing
// at every function, and returns the last plan's targets.
func feedChain(t *testing.T, p Policy, windows, rate int) []int {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	views := make([]View, 3)
	out := make([]Decision, 3)
	now := t0
	p.Plan(now, views, out)
	for w := range windows {
		for i := range rate * 10 {
			s := 1 + 99*rng.Float64()
			p.Arrive(now.Add(time.Duration(i)*time.Second/time.Duration(rate)), 0, s, views[0].Counts)
			for fn := range views {
				if err := p.Complete(fn, s, chainExec(fn, s), s); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = t0.Add(time.Duration(w+1) * 10 * time.Second)
		p.Plan(now, views, out)
	}
	c := p.(*core)
	targets := make([]int, len(c.fns))
	for f := range c.fns {
		targets[f] = c.fns[f].target
	}
	return targets
}

// Sized jointly (chain_sizing.go), the chain's tail gets a fraction of
// each request's end-to-end slack instead of the 9 ms its SLO share
// leaves it, the chain holds fewer containers in all than sized one
// function at a time (gantry-no-joint-chain), the fractions sum to 1,
// and each function's predicted miss share, as the sizing bounds it, is
// at most ε, so that their sum, the union bound on the end-to-end miss
// share, is at most k·ε (pkg/sim's TestChainSizingBoundsEndToEndMisses
// checks that the bound overstates the simulator's misses more than
// k-fold).
func TestJointChainSizingSplitsTheEndToEndSlack(t *testing.T) {
	const rate = 100
	joint := mustNew(t, "gantry", chainSpec())
	alone := mustNew(t, "gantry-no-joint-chain", chainSpec())
	tj, ta := feedChain(t, joint, 12, rate), feedChain(t, alone, 12, rate)
	c := joint.(*core)
	frac := c.chain.frac
	if len(frac) != 3 {
		t.Fatalf("no joint split: %v", frac)
	}
	var sum float64
	for _, f := range frac {
		sum += f
	}
	if sum < 0.999 || sum > 1.001 {
		t.Errorf("fractions %v sum to %v, want 1", frac, sum)
	}
	if !(frac[0] > frac[1] && frac[1] > frac[2]) {
		t.Errorf("fractions %v: want the longest function to get the most slack", frac)
	}
	var nj, na int
	for f := range tj {
		nj += tj[f]
		na += ta[f]
	}
	t.Logf("joint %v (fractions %v), one at a time %v", tj, frac, ta)
	if !(nj < na && tj[2] < ta[2]) {
		t.Errorf("joint targets %v, one at a time %v: want fewer in all and at the tail", tj, ta)
	}
	if ablated := alone.(*core); ablated.chain.frac != nil {
		t.Errorf("gantry-no-joint-chain split the chain: %v", ablated.chain.frac)
	}
	eps := 1 - c.sloTarget()
	var bound float64
	for f := range c.fns {
		mix, ok := c.chainMix(f)
		if !ok {
			t.Fatalf("function %d: no joint mix", f)
		}
		mix.Mean = c.fns[f].meanEWMA
		bound += sizingMiss(tj[f], c.rate, mix)
	}
	if k := float64(len(c.fns)); bound > k*eps {
		t.Errorf("the functions' miss shares sum to %.6f, above k·ε = %v", bound, k*eps)
	}
}

// A single function is never split: its sizing is the one-function
// sizing, with the whole ε and its own SLO.
func TestJointChainLeavesASingleFunctionAlone(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	one := mustNew(t, "gantry", s)
	ablated := mustNew(t, "gantry-no-joint-chain", s)
	views := make([]View, 1)
	exec := func(size float64) time.Duration { return time.Duration(5 * size * float64(ms)) }
	size := func(r *rand.Rand) float64 { return 1 + 99*r.Float64() }
	feed(t, one, 12, 50, size, exec, views)
	feed(t, ablated, 12, 50, size, exec, views)
	if c := one.(*core); c.chain.frac != nil {
		t.Errorf("one function split: fractions %v", c.chain.frac)
	}
	if a, b := one.(*core).fns[0].target, ablated.(*core).fns[0].target; a != b {
		t.Errorf("one function: target %d, %d without the joint split", a, b)
	}
}
