package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// detector is a gantry (or ablation) core whose window was sized for rate.
func detector(t *testing.T, name string, rate float64) *core {
	t.Helper()
	c := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
	c.targetOK, c.rate = true, rate
	c.fns[0].target = 10
	return c
}

// poissonCount draws the arrivals of a Poisson process at rate over d.
func poissonCount(rng *rand.Rand, rate float64, d time.Duration) float64 {
	n := 0.0
	for t := rng.ExpFloat64() / rate; t < d.Seconds(); t += rng.ExpFloat64() / rate {
		n++
	}
	return n
}

// On a constant rate the panic rule's alarms are rare: its threshold and
// CUSUM are set for about three false alarms in 1200 ticks, where the old
// two-sigma rule fires about 27 times.
func TestPanicRarelyFiresOnAConstantRate(t *testing.T) {
	const ticks = 1200
	alarms := func(name string, seed uint64) int {
		c := detector(t, name, 100)
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 0
		for k := range ticks {
			c.panic.cum += poissonCount(rng, 100, 500*ms)
			if c.surge(t0.Add(time.Duration(k)*500*ms)) > 1 {
				n++
			}
		}
		return n
	}
	var ours, old int
	for seed := range uint64(5) {
		ours += alarms("gantry-stream", seed)
		old += alarms("gantry-panic-2sigma", seed)
	}
	t.Logf("alarms in 5 x %d ticks: gantry %d, two-sigma %d", ticks, ours, old)
	if ours > 5*8 || old < 5*15 {
		t.Errorf("alarms in 5 x %d ticks at a constant rate: gantry %d (want at most 40), two-sigma %d (want at least 75)", ticks, ours, old)
	}
}

// A tick that comes 10 ms after the previous one measures the rate over
// the nominal tick, not over 10 ms: a few arrivals in those 10 ms are not
// a burst. The old rule measured over the 10 ms and panicked.
func TestALateTickDoesNotPanicOnATinySpan(t *testing.T) {
	for _, tc := range []struct {
		name  string
		panic bool
	}{{"gantry-stream", false}, {"gantry-panic-2sigma", true}} {
		c := detector(t, tc.name, 100)
		for k := range 4 {
			c.panic.cum += 50
			c.surge(t0.Add(time.Duration(k) * 500 * ms))
		}
		c.panic.cum += 5 // one expected in 10 ms
		if got := c.surge(t0.Add(1510*ms)) > 1; got != tc.panic {
			t.Errorf("%s: panicked %v on 5 arrivals 10 ms after a tick", tc.name, got)
		}
	}
}

// A burst fires at once; a smaller rise that persists fires through the
// CUSUM within a few ticks, where the single-tick threshold alone never
// does.
func TestPanicCatchesABurstAtOnceAndAPersistentRiseSoon(t *testing.T) {
	c := detector(t, "gantry-stream", 100)
	for k := range 4 {
		c.panic.cum += 50
		c.surge(t0.Add(time.Duration(k) * 500 * ms))
	}
	c.panic.cum += 150
	if s := c.surge(t0.Add(2 * time.Second)); s < 2.9 {
		t.Fatalf("a tick of 150 arrivals against 50 expected scaled by %.2f", s)
	}
	for _, name := range []string{"gantry-stream", "gantry-no-cusum"} {
		c := detector(t, name, 100)
		fired := -1
		for k := range 20 {
			c.panic.cum += 62 // +24%: 1.7 sigma a tick
			if c.surge(t0.Add(time.Duration(k)*500*ms)) > 1 && fired < 0 {
				fired = k
			}
		}
		if name == "gantry-stream" && (fired < 0 || fired > 6) {
			t.Errorf("gantry: a lasting 24%% rise fired at tick %d", fired)
		}
		if name == "gantry-no-cusum" && fired >= 0 {
			t.Errorf("without the CUSUM a 1.7-sigma rise fired at tick %d", fired)
		}
	}
}

// The containers a panic asks for are held for the hold time, then the
// window's target applies again.
func TestPanicHoldsItsContainers(t *testing.T) {
	c := detector(t, "gantry-stream", 100)
	if got := c.heldTarget(0, t0, 2); got != 20 {
		t.Fatalf("a surge of 2 on a target of 10 gave %d", got)
	}
	if got := c.heldTarget(0, t0.Add(10*time.Second), 1); got != 20 {
		t.Errorf("10 s after the panic the target is %d, want the held 20", got)
	}
	if got := c.heldTarget(0, t0.Add(21*time.Second), 1); got != 10 {
		t.Errorf("after the hold the target is %d, want 10", got)
	}
	c = detector(t, "gantry-no-hold", 100)
	c.heldTarget(0, t0, 2)
	if got := c.heldTarget(0, t0.Add(time.Second), 1); got != 10 {
		t.Errorf("without the hold the target is %d a second later, want 10", got)
	}
}

// Atoll as the paper reads it (No Batch): one container for every request
// predicted within a function SLO, the same for a heavy and a light mix.
func TestAtollSizesForTheLoadWhateverTheInputMix(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	exec := func(x float64) time.Duration { return time.Duration(x) * 5 * ms }
	var got []int
	for _, size := range []func(*rand.Rand) float64{
		func(r *rand.Rand) float64 { return 90 + 10*r.Float64() }, // heavy
		func(r *rand.Rand) float64 { return 1 + 10*r.Float64() },  // light
	} {
		got = append(got, feed(t, mustNew(t, "atoll", s), 5, 100, size, exec, make([]View, 1))[0].Add)
	}
	if got[0] != 100 || got[1] != 100 {
		t.Errorf("atoll sized %d (heavy) and %d (light) containers for 100 rps and a 1 s SLO, want 100 and 100", got[0], got[1])
	}
}
