package sim

import (
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The clairvoyant bound is a lower bound: on several apps, traces and
// seeds, every policy that meets every request's SLO holds at least the
// bound's mean live containers, and the bound is at least the work floor.
// The constructive oracle is one of those policies whenever it reaches
// 100%.
func TestBoundIsBelowEveryPolicyThatMeetsEverySLO(t *testing.T) {
	cases := []struct {
		app, dist, trace string
		rate             float64
		seed             uint64
		coldBoot         bool
	}{
		{"image-compression", "heavy", "poisson", 120, 1, false},
		{"image-compression", "light", "twitter", 120, 2, false},
		{"sentiment-analysis", "medial", "wiki", 80, 3, true},
		{"audio-translation", "light", "poisson", 60, 4, false},
		{"email-categorization", "heavy", "twitter", 60, 5, false},
	}
	policies := append(policy.Names(), policy.Extras()...)
	if testing.Short() {
		policies = []string{"atoll", "cypress", "oracle", "gantry"}
	}
	met := 0
	for _, c := range cases {
		app, _ := workload.Lookup(c.app)
		dist, _ := workload.LookupDist(c.dist)
		tr, err := trace.Generate(c.trace, c.rate, 2*time.Minute, c.seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range policies {
			res, err := Run(Config{App: app, Dist: dist, Trace: tr, Policy: p, Seed: c.seed, ColdBoot: c.coldBoot})
			if err != nil {
				t.Fatalf("%s %s: %v", c.app, p, err)
			}
			if res.WorkFloor <= 0 || res.Bound < res.WorkFloor {
				t.Errorf("%s %s %s: floor %.3f, bound %.3f", c.app, c.trace, p, res.WorkFloor, res.Bound)
			}
			if res.AvgContainers < res.WorkFloor {
				t.Errorf("%s %s %s: %.3f live containers below the %.3f busy cores", c.app, c.trace, p, res.AvgContainers, res.WorkFloor)
			}
			if res.SLOCompliance < 1 {
				continue
			}
			met++
			if res.AvgContainers < res.Bound {
				t.Errorf("%s %s %s meets every SLO with %.3f live containers, below the bound %.3f", c.app, c.trace, p, res.AvgContainers, res.Bound)
			}
			for i, f := range res.Functions {
				if f.AvgContainers < f.Bound {
					t.Errorf("%s %s %s, function %d: %.3f live, below its bound %.3f", c.app, c.trace, p, i, f.AvgContainers, f.Bound)
				}
			}
		}
	}
	t.Logf("%d runs met every SLO", met)
	if met < len(cases) {
		t.Errorf("only %d runs met every SLO: the test checks too little", met)
	}
}

// Every policy faces the same work: execution times are drawn per request
// and function, so the busy cores integrate to the same total whatever
// order the policy runs requests in.
func TestEveryPolicyFacesTheSameWork(t *testing.T) {
	app, _ := workload.Lookup("audio-translation")
	dist, _ := workload.LookupDist("heavy")
	tr, _ := trace.Generate("twitter", 60, time.Minute, 7)
	var work float64
	for i, p := range []string{"atoll", "kraken", "cypress", "gantry"} {
		res, err := Run(Config{App: app, Dist: dist, Trace: tr, Policy: p, Seed: 7, MaxQueue: -1})
		if err != nil {
			t.Fatal(err)
		}
		w := res.WorkFloor * res.SimulatedSeconds
		if i == 0 {
			work = w
		} else if d := w/work - 1; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: work %.9g, atoll's %.9g", p, w, work)
		}
		// The floor is what the engine measured as busy.
		if d := res.AvgRunning - res.WorkFloor; p != "atoll" && (d > 1e-6*res.WorkFloor || d < -1e-6*res.WorkFloor) {
			t.Errorf("%s: measured busy %.6f, floor %.6f", p, res.AvgRunning, res.WorkFloor)
		}
	}
}

// The engine accumulates the bound as requests arrive; replaying the
// requests without the engine gives the same bound, so the engine's
// draws are the realised requests.
func TestTheEnginesBoundEqualsTheReplayedOne(t *testing.T) {
	app, _ := workload.Lookup("audio-translation")
	dist, _ := workload.LookupDist("medial")
	tr, _ := trace.Generate("twitter", 80, time.Minute, 3)
	cfg := Config{App: app, Dist: dist, Trace: tr, Policy: "gantry", Seed: 3}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.applyDefaults()
	b, err := computeBound(t.Context(), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	span := res.SimulatedSeconds * 1e9
	if got, want := res.Bound, b.Area/span; got != want {
		t.Errorf("engine bound %.9g, replayed %.9g", got, want)
	}
	if got, want := res.WorkFloor, b.WorkArea/span; got != want {
		t.Errorf("engine floor %.9g, replayed %.9g", got, want)
	}
}
