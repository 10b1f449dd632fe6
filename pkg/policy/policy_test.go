package policy

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const ms = time.Millisecond

func spec(fns ...FunctionSpec) Spec {
	return Spec{App: "test", Functions: fns, AppSLO: time.Second, MinSize: 1, MaxSize: 100,
		ColdStart: 1500 * ms, Window: 10 * time.Second, Start: t0, Seed: 1}
}

func mustNew(t *testing.T, name string, s Spec) Policy {
	t.Helper()
	p, err := New(name, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// feed drives a policy through windows of steady load: rate requests per
// second with sizes from size(), each completing with exec(size).
func feed(t *testing.T, p Policy, windows int, rate int, size func(*rand.Rand) float64,
	exec func(float64) time.Duration, views []View) []Decision {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	out := make([]Decision, len(views))
	now := t0
	p.Plan(now, views, out)
	for w := range windows {
		for i := range rate * 10 {
			s := size(rng)
			p.Arrive(now.Add(time.Duration(i)*10*time.Second/time.Duration(rate*10)), 0, s, views[0].Counts)
			for fn := range views {
				if err := p.Complete(fn, s, exec(s), s); err != nil {
					t.Fatal(err)
				}
			}
		}
		now = t0.Add(time.Duration(w+1) * 10 * time.Second)
		p.Plan(now, views, out)
	}
	return out
}

// Cypress section 2: with execution times that do not depend on input
// size, IS batching sizes exactly the containers static batching does.
func TestConstantExecutionTimeMakesISBatchEqualStaticBatch(t *testing.T) {
	for _, exec := range []time.Duration{90 * ms, 200 * ms, 450 * ms, 700 * ms} {
		s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
		flat := func(float64) time.Duration { return exec }
		uniform := func(r *rand.Rand) float64 { return 1 + 99*r.Float64() }
		is := feed(t, mustNew(t, "isbatch", s), 4, 100, uniform, flat, make([]View, 1))
		st := feed(t, mustNew(t, "kraken", s), 4, 100, uniform, flat, make([]View, 1))
		if is[0].Add == 0 || is[0] != st[0] {
			t.Errorf("exec %v: IS batching decided %+v, static batching %+v", exec, is[0], st[0])
		}
	}
}

// Kraken and Fifer batch on the mean: floor(SLO / mean) requests per
// container, for the requests arriving within one SLO.
func TestStaticBatchingUsesTheMeanExecutionTime(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	linear := func(x float64) time.Duration { return time.Duration(x) * 4 * ms } // 4-400 ms, mean ~202
	uniform := func(r *rand.Rand) float64 { return 1 + 99*r.Float64() }
	d := feed(t, mustNew(t, "kraken", s), 4, 100, uniform, linear, make([]View, 1))
	// 100 rps x 1 s SLO = 100 requests; batch floor(1000/202) = 4 → 25.
	if d[0].Add < 24 || d[0].Add > 26 {
		t.Fatalf("kraken added %d containers, want about 25", d[0].Add)
	}
}

// Cypress section 4: heavy and light mixes of the same load need different
// containers under IS batching; static batching cannot tell them apart
// when their mean is equal.
func TestISBatchingFollowsTheInputSizeMix(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	exec := func(x float64) time.Duration { return time.Duration(x) * 8 * ms } // 8-800 ms
	heavy := func(r *rand.Rand) float64 { return 70 + 30*r.Float64() }
	light := func(r *rand.Rand) float64 { return 1 + 30*r.Float64() }
	h := feed(t, mustNew(t, "cypress", s), 5, 100, heavy, exec, make([]View, 1))
	l := feed(t, mustNew(t, "cypress", s), 5, 100, light, exec, make([]View, 1))
	// Heavy requests (560-800 ms) fit one per container; light ones
	// (8-248 ms) pack at least four.
	if h[0].Add < 95 || l[0].Add > h[0].Add/3 {
		t.Fatalf("heavy mix %d containers, light mix %d", h[0].Add, l[0].Add)
	}
}

// Cypress's overload detection: a queued request whose wait would exceed
// the cold start gets a new container; one that can still meet its SLO
// on a live container does not.
func TestOverloadDetectionAddsContainersForLateRequests(t *testing.T) {
	p := mustNew(t, "isbatch", spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true}))
	out := make([]Decision, 1)
	busy := []time.Duration{3 * time.Second}
	v := []View{{Counts: Counts{Live: 1, Queued: 3}, Free: busy,
		Queue: []Item{{Exec: 100 * ms}, {Exec: 100 * ms}, {Exec: 100 * ms}}}}
	p.Plan(t0, v, out)
	// Behind 3 s each request would wait longer than a cold start; a new
	// container serves one within the cold start, the next would wait
	// 1.6 s on it, so each needs its own.
	if out[0].Add != 3 {
		t.Fatalf("added %d containers for three short requests stuck behind 3 s, want 3", out[0].Add)
	}
	v[0].Free = []time.Duration{1200 * ms}
	p.Plan(t0.Add(ms), v, out)
	if out[0].Add != 0 {
		t.Fatalf("added %d containers though waiting beats a cold start", out[0].Add)
	}
	v[0].Free = []time.Duration{200 * ms}
	p.Plan(t0.Add(ms), v, out)
	if out[0].Add != 0 {
		t.Fatalf("added %d containers though the live one serves all within the SLO", out[0].Add)
	}
}

// Cypress's Look-Ahead Scaler: requests still at the first function make
// the second function scale before they reach it.
func TestLookAheadScalesDownstreamBeforeRequestsArrive(t *testing.T) {
	s := spec(FunctionSpec{Name: "a", SLO: 500 * ms, SizeSensitive: true}, FunctionSpec{Name: "b", SLO: 500 * ms, SizeSensitive: true})
	queue := make([]Item, 20)
	for i := range queue {
		queue[i] = Item{Size: 50, Exec: 300 * ms}
	}
	views := []View{{Counts: Counts{Live: 20, Queued: 20}, Free: make([]time.Duration, 20), Queue: queue}, {}}
	out := make([]Decision, 2)
	mustNew(t, "cypress", s).Plan(t0, views, out)
	if out[1].Add == 0 {
		t.Fatal("cypress did not scale the downstream function ahead of time")
	}
	mustNew(t, "isbatch", s).Plan(t0, views, out)
	if out[1].Add != 0 {
		t.Fatalf("isbatch (no look-ahead) added %d downstream containers", out[1].Add)
	}
}

func TestAtollStartsOneContainerPerWaitingRequest(t *testing.T) {
	p := mustNew(t, "atoll", spec(FunctionSpec{Name: "f", SLO: time.Second}))
	if n := p.Arrive(t0, 0, 5, Counts{Live: 3, Starting: 1, Queued: 4}); n != 3 {
		t.Fatalf("atoll started %d, want 3 (4 waiting, 1 already starting)", n)
	}
}

// Gantry packs the predicted window as a stream of Poisson arrivals with
// their own deadlines: it lands near the offered load (rate x mean
// execution time) plus headroom for bursts.
func TestGantryStreamSizingTracksOfferedLoad(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	exec := func(x float64) time.Duration { return time.Duration(x) * 7 * ms } // 7-700 ms
	uniform := func(r *rand.Rand) float64 { return 1 + 99*r.Float64() }
	g := feed(t, mustNew(t, "gantry", s), 5, 200, uniform, exec, make([]View, 1))
	offered := 200 * 0.3535 // requests/s x mean seconds
	if float64(g[0].Add) < offered || float64(g[0].Add) > 1.5*offered {
		t.Fatalf("gantry sized %d containers for an offered load of %.0f", g[0].Add, offered)
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	good := spec(FunctionSpec{Name: "f", SLO: time.Second})
	if _, err := New("lambda", good); !errors.Is(err, ErrUnknownPolicy) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := New("oracle", good); !errors.Is(err, ErrBadSpec) {
		t.Errorf("oracle without truth: %v", err)
	}
	bad := good
	bad.Functions = []FunctionSpec{{Name: "f"}}
	if _, err := New("cypress", bad); !errors.Is(err, ErrBadSpec) {
		t.Errorf("zero function SLO: %v", err)
	}
	for _, n := range Names() {
		if n == "oracle" {
			continue
		}
		p := mustNew(t, n, good)
		if err := p.Complete(0, -1, ms, 1); err == nil {
			t.Errorf("%s accepted a negative size", n)
		}
		if err := p.Complete(3, 1, ms, 1); err == nil {
			t.Errorf("%s accepted an unknown function", n)
		}
	}
}

func TestEstimateFallsBackToTheSLORuleThenLearns(t *testing.T) {
	p := mustNew(t, "cypress", spec(FunctionSpec{Name: "f", SLO: 1200 * ms, SizeSensitive: true}))
	if e := p.Estimate(0, 10); e != time.Second {
		t.Fatalf("unprofiled estimate %v, want SLO/1.2 = 1s", e)
	}
	for i := range 200 {
		x := float64(1 + i%100)
		_ = p.Complete(0, x, time.Duration(x)*5*ms, x)
	}
	p.Plan(t0, make([]View, 1), make([]Decision, 1))
	if e := p.Estimate(0, 40); math.Abs(float64(e-200*ms)) > float64(5*ms) {
		t.Fatalf("profiled estimate at 40 = %v, want ~200ms", e)
	}
}

// Each ablation undoes exactly one of gantry's changes over Cypress.
func TestAblationsUndoOneChangeEach(t *testing.T) {
	g := catalog["gantry"]
	for _, name := range Ablations() {
		p, err := New(name, spec(FunctionSpec{Name: "f", SLO: time.Second}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Name() != name || p.(*core).p == g {
			t.Errorf("%s is gantry itself", name)
		}
	}
	for _, n := range Names() {
		if _, ok := ablations[n]; ok {
			t.Errorf("Names lists the ablation %s", n)
		}
	}
}

// Gantry's panic rule: a burst well beyond Poisson noise scales the
// targets up at the next tick; ordinary noise does not.
func TestPanicScalesUpOnABurstButNotOnNoise(t *testing.T) {
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	exec := func(x float64) time.Duration { return time.Duration(x) * 5 * ms }
	uniform := func(r *rand.Rand) float64 { return 1 + 99*r.Float64() }
	for _, tc := range []struct {
		perTick int
		burst   bool
	}{{55, false}, {150, true}} {
		p := mustNew(t, "gantry-stream", s)
		views := make([]View, 1)
		base := feed(t, p, 5, 100, uniform, exec, views)[0].Add
		views[0].Live = base // the driver applied the window's target
		now := t0.Add(50 * time.Second)
		out := make([]Decision, 1)
		p.Plan(now.Add(250*ms), views, out)
		for range tc.perTick { // arrivals within the next 500 ms tick
			p.Arrive(now, 0, 50, views[0].Counts)
		}
		p.Plan(now.Add(750*ms), views, out)
		if got := out[0].Add > 0; got != tc.burst {
			t.Errorf("%d arrivals in a 500 ms tick at 100 rps: added %d containers", tc.perTick, out[0].Add)
		}
	}
}

// Cypress section 3 (chained prediction): the downstream function is sized
// for the input sizes the upstream function's output-size model predicts,
// not for the first function's sizes.
func TestChainedPredictionSizesDownstreamFromPredictedOutputs(t *testing.T) {
	target := func(outFactor float64) int {
		s := spec(FunctionSpec{Name: "a", SLO: 500 * ms, SizeSensitive: true},
			FunctionSpec{Name: "b", SLO: 500 * ms, SizeSensitive: true})
		p := mustNew(t, "isbatch", s)
		rng := rand.New(rand.NewPCG(2, 2))
		views := make([]View, 2)
		out := make([]Decision, 2)
		p.Plan(t0, views, out)
		for w := range 5 {
			for range 1000 {
				x := 1 + 99*rng.Float64()
				p.Arrive(t0, 0, x, Counts{})
				y := outFactor * x
				_ = p.Complete(0, x, 50*ms, y)
				_ = p.Complete(1, y, time.Duration(y*float64(ms)), 1)
			}
			p.Plan(t0.Add(time.Duration(w+1)*10*time.Second), views, out)
		}
		return out[1].Add
	}
	small, large := target(0.5), target(4)
	if large <= 2*small {
		t.Fatalf("downstream sized %d when outputs are 4x inputs, %d when 0.5x", large, small)
	}
}

// Cypress figure 2: without chained prediction ("No CP") the downstream
// function is sized by static batching on its mean execution time, which
// under-provisions a mix of a few heavy and many light requests; with it
// ("CP") IS batching gives each heavy request the room it needs. The first
// function is sized the same way by both.
func TestNoChainedPredictionFallsBackToStaticBatchingDownstream(t *testing.T) {
	targets := func(name string) []Decision {
		s := spec(FunctionSpec{Name: "a", SLO: 500 * ms, SizeSensitive: true},
			FunctionSpec{Name: "b", SLO: 500 * ms, SizeSensitive: true})
		p := mustNew(t, name, s)
		rng := rand.New(rand.NewPCG(3, 3))
		views := make([]View, 2)
		out := make([]Decision, 2)
		p.Plan(t0, views, out)
		for w := range 5 {
			for range 10000 {
				x := 1.0
				if rng.Float64() < 0.1 {
					x = 100
				}
				p.Arrive(t0, 0, x, Counts{})
				y := 4 * x
				_ = p.Complete(0, x, time.Duration(x*float64(ms)/4), y)
				_ = p.Complete(1, y, time.Duration(y*float64(ms)), 1)
			}
			p.Plan(t0.Add(time.Duration(w+1)*10*time.Second), views, out)
		}
		return out
	}
	noCP, cp := targets("cypress-no-cp"), targets("cypress-cp")
	if noCP[0] != cp[0] {
		t.Fatalf("first function sized %+v without CP, %+v with it", noCP[0], cp[0])
	}
	if cp[1].Add <= noCP[1].Add {
		t.Fatalf("downstream sized %d with CP, %d without: static batching on the mean should need fewer", cp[1].Add, noCP[1].Add)
	}
}

// The figure-2 schemes are Cypress minus one mechanism each and stay out
// of the list of named policies.
func TestChainAblationsAreCypressVariants(t *testing.T) {
	for _, name := range ChainAblations() {
		p := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: time.Second}))
		if p.Order() != HeaviestFirst || p.Name() != name {
			t.Errorf("%s: order %v, name %q", name, p.Order(), p.Name())
		}
	}
	if noCP, cp := chainAblations["cypress-no-cp"], chainAblations["cypress-cp"]; noCP == nil || cp == nil {
		t.Fatal("missing figure-2 scheme")
	}
	for _, n := range Names() {
		if _, ok := chainAblations[n]; ok {
			t.Errorf("Names lists the ablation %s", n)
		}
	}
}

// sizeOver drives a policy through one window per entry of rates, each
// with a Poisson count of requests at that mean rate, and returns the
// containers it asks for (from none) after each window.
func sizeOver(t *testing.T, name string, rates []float64) []int {
	t.Helper()
	s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
	var sized []int
	for _, d := range drive(t, mustNew(t, name, s), rates, nil) {
		sized = append(sized, d.Add)
	}
	return sized
}

// drive is sizeOver on a given policy; the last window ends on last's
// view of the function when it is set, else on an empty one.
func drive(t *testing.T, p Policy, rates []float64, last *View) []Decision {
	t.Helper()
	exec := func(x float64) time.Duration { return time.Duration(x) * 7 * ms } // 7-700 ms
	rng := rand.New(rand.NewPCG(3, 3))
	views, out := make([]View, 1), make([]Decision, 1)
	p.Plan(t0, views, out)
	var got []Decision
	for w, rate := range rates {
		start := t0.Add(time.Duration(w) * 10 * time.Second)
		n := int(poissonCount(rng, rate, 10*time.Second))
		for i := range n {
			x := 1 + 99*rng.Float64()
			p.Arrive(start.Add(time.Duration(i)*10*time.Second/time.Duration(n)), 0, x, views[0].Counts)
			if err := p.Complete(0, x, exec(x), x); err != nil {
				t.Fatal(err)
			}
		}
		if last != nil && w == len(rates)-1 {
			views[0] = *last
		}
		p.Plan(start.Add(10*time.Second), views, out)
		got = append(got, out[0])
	}
	return got
}

// The load-quantile rule: on a steady Poisson load gantry sizes near the
// offered load plus about one standard deviation of the busy containers,
// well under the stream's count; on a load whose window counts swing far
// beyond Poisson noise the rule widens until it leaves the stream's count
// alone.
func TestLoadQuantileCutsHeadroomOnlyWhereTheLoadIsSteady(t *testing.T) {
	steady := make([]float64, 12)
	for i := range steady {
		steady[i] = 200
	}
	g, off := sizeOver(t, "gantry-stream", steady), sizeOver(t, "gantry-no-load-quantile", steady)
	offered := 200 * 0.3535 // requests/s x mean seconds
	last := len(steady) - 1
	if float64(g[last]) > offered+2*math.Sqrt(offered) || g[last] < int(offered) || g[last] >= off[last] {
		t.Fatalf("steady load (offered %.0f): gantry sized %d, without the rule %d", offered, g[last], off[last])
	}
	bursty := make([]float64, 12)
	for i := range bursty {
		bursty[i] = 200
		if i%2 == 1 {
			bursty[i] = 400
		}
	}
	g, off = sizeOver(t, "gantry-stream", bursty), sizeOver(t, "gantry-no-load-quantile", bursty)
	for i := 6; i < len(bursty); i++ {
		if g[i] != off[i] {
			t.Fatalf("bursty load, window %d: gantry sized %d, without the rule %d", i, g[i], off[i])
		}
	}
}

// The steady-retire rule: on a steady load idling detection retires half
// the idle excess over the current target at a window, where without the
// rule it retires a quarter of the excess over the largest target of the
// last three windows; on a bursty load the rule stays out of the way.
func TestSteadyRetireShedsIdleContainersFasterOnlyOnASteadyLoad(t *testing.T) {
	retired := func(name string, rates []float64) (int, int) {
		s := spec(FunctionSpec{Name: "f", SLO: time.Second, SizeSensitive: true})
		target := sizeOver(t, name, rates[:len(rates)-1])[len(rates)-2]
		// The same run again, its last window ending on 40 idle
		// containers over the target the window before sized.
		last := &View{Counts: Counts{Live: target + 40, Idle: 60}}
		d := drive(t, mustNew(t, name, s), rates, last)
		return d[len(d)-1].Retire, target
	}
	steady := make([]float64, 12)
	bursty := make([]float64, 12)
	for i := range steady {
		steady[i], bursty[i] = 200, 200
		if i%2 == 1 {
			bursty[i] = 400
		}
	}
	got, target := retired("gantry-stream", steady)
	without, _ := retired("gantry-no-steady-retire", steady)
	if got < 20 || got <= without {
		t.Fatalf("steady load, target %d, 40 idle over it: retired %d, without the rule %d", target, got, without)
	}
	got, _ = retired("gantry-stream", bursty)
	without, _ = retired("gantry-no-steady-retire", bursty)
	if got != without {
		t.Fatalf("bursty load: retired %d, without the rule %d", got, without)
	}
}
