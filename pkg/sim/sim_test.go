package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/policy/policytest"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func paperApp(t testing.TB, name string) workload.App {
	t.Helper()
	app, err := workload.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func dist(t testing.TB, name string) workload.Distribution {
	t.Helper()
	d, err := workload.LookupDist(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func constantTrace(rate float64, d time.Duration) trace.Trace {
	per := make([]float64, int(d/time.Second))
	for i := range per {
		per[i] = rate
	}
	return trace.Trace{Name: "constant", PerSecond: per}
}

// Every request that arrives completes exactly once, for every policy and
// for single and chained apps alike.
func TestEveryRequestCompletesExactlyOnce(t *testing.T) {
	for _, appName := range []string{"image-compression", "audio-translation"} {
		for _, pol := range policy.Names() {
			seen := map[int64]int{}
			cfg := Config{App: paperApp(t, appName), Dist: dist(t, "medial"), Trace: constantTrace(40, 2*time.Minute),
				Policy: pol, Seed: 9, OnComplete: func(id int64, _ time.Duration) { seen[id]++ }}
			res, err := Run(cfg)
			if err != nil {
				t.Fatalf("%s/%s: %v", appName, pol, err)
			}
			if res.Requests < 4000 || int64(len(seen)) != res.Requests {
				t.Fatalf("%s/%s: %d requests, %d distinct completions", appName, pol, res.Requests, len(seen))
			}
			for id, n := range seen {
				if n != 1 || id < 0 || id >= res.Requests {
					t.Fatalf("%s/%s: request %d completed %d times", appName, pol, id, n)
				}
			}
			for _, f := range res.Functions {
				if f.Requests != res.Requests {
					t.Errorf("%s/%s: function %s ran %d of %d requests", appName, pol, f.Name, f.Requests, res.Requests)
				}
			}
		}
	}
}

func TestSameSeedGivesIdenticalResults(t *testing.T) {
	tr, err := trace.Generate("twitter", 60, 3*time.Minute, 5)
	if err != nil {
		t.Fatal(err)
	}
	run := func(seed uint64) Result {
		res, err := Run(Config{App: paperApp(t, "email-categorization"), Dist: dist(t, "heavy"), Trace: tr, Policy: "gantry", Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		res.WallSeconds = 0
		return res
	}
	a, b, c := run(1), run(1), run(2)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different results:\n%+v\n%+v", a, b)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave identical results; the seed is not used")
	}
}

// expSizes draws exponential input sizes with the given mean; with an
// execution time of one millisecond per unit of size and no noise, service
// times are exponential: the M/M/c model.
type expSizes struct{ mean float64 }

func (expSizes) Name() string { return "exponential" }
func (d expSizes) Sample(rng *rand.Rand, _, _ float64) float64 {
	return max(1e-6, rng.ExpFloat64()*d.mean)
}

// fixedSize draws the same size every time, even an invalid one.
type fixedSize float64

func (fixedSize) Name() string                                  { return "fixed" }
func (f fixedSize) Sample(*rand.Rand, float64, float64) float64 { return float64(f) }

func erlangCWait(c int, lambda, mu float64) float64 {
	a := lambda / mu
	rho := a / float64(c)
	sum, term := 0.0, 1.0
	for k := range c {
		if k > 0 {
			term *= a / float64(k)
		}
		sum += term
	}
	last := term * a / float64(c)
	pWait := last / (1 - rho) / (sum + last/(1-rho))
	return pWait / (float64(c)*mu - lambda)
}

// The engine is validated against queueing theory: Poisson arrivals,
// exponential service and c fixed servers form an M/M/c queue, whose mean
// wait is given by the Erlang C formula.
func TestMMcMeanWaitMatchesErlangC(t *testing.T) {
	linear := func(s float64) time.Duration { return time.Duration(s * float64(time.Millisecond)) }
	fn := workload.Function{Name: "mm", SizeSensitive: true, ExecMean: linear,
		OutputMean: func(s float64) float64 { return s }}
	app := workload.App{Name: "mmc", Chain: []workload.Function{fn}, MinSize: 1, MaxSize: 1, SLO: time.Second}
	for _, tc := range []struct {
		c      int
		lambda float64
		meanMs float64
	}{{1, 15, 50}, {4, 60, 50}, {16, 280, 50}} {
		cfg := Config{App: app, Dist: expSizes{tc.meanMs}, Trace: constantTrace(tc.lambda, 2*time.Hour),
			Custom: policytest.Fixed(tc.c), Seed: 3, ColdStart: time.Nanosecond, MaxQueue: -1}
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := erlangCWait(tc.c, tc.lambda, 1000/tc.meanMs)
		got := (res.MeanQueue + res.MeanColdStart).Seconds()
		if math.Abs(got-want) > 0.05*want {
			t.Errorf("M/M/%d at λ=%v: mean wait %.5fs, Erlang C %.5fs", tc.c, tc.lambda, got, want)
		}
	}
}

func TestResultIsConsistent(t *testing.T) {
	res, err := Run(Config{App: paperApp(t, "audio-translation"), Dist: dist(t, "light"),
		Trace: constantTrace(80, 5*time.Minute), Policy: "cypress", Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !(res.P50 <= res.P95 && res.P95 <= res.P99 && res.P99 <= res.P999) {
		t.Errorf("percentiles out of order: %v %v %v %v", res.P50, res.P95, res.P99, res.P999)
	}
	if res.SLOCompliance < 0 || res.SLOCompliance > 1 || res.EnergyJ <= 0 || res.AvgContainers <= 0 {
		t.Errorf("implausible result %+v", res)
	}
	var energy float64
	for _, f := range res.Functions {
		energy += f.EnergyJ
	}
	if math.Abs(energy-res.EnergyJ) > 1e-6*res.EnergyJ {
		t.Errorf("function energies sum to %v, app %v", energy, res.EnergyJ)
	}
	if n := len(res.LatencyCDF); n == 0 || res.LatencyCDF[n-1].Fraction != 1 {
		t.Errorf("CDF does not end at 1: %v", res.LatencyCDF)
	}
}

func TestBadConfigIsRejected(t *testing.T) {
	good := Config{App: paperApp(t, "image-compression"), Dist: dist(t, "heavy"), Trace: constantTrace(5, time.Minute), Policy: "cypress"}
	cases := map[string]func(c *Config){
		"no policy":       func(c *Config) { c.Policy = "" },
		"no dist":         func(c *Config) { c.Dist = nil },
		"empty trace":     func(c *Config) { c.Trace = trace.Trace{} },
		"negative nodes":  func(c *Config) { c.Nodes = -1 },
		"negative cold":   func(c *Config) { c.ColdStart = -time.Second },
		"huge container":  func(c *Config) { c.ContainerMemoryMB = 1 << 30 },
		"no functions":    func(c *Config) { c.App.Chain = nil },
		"bad size range":  func(c *Config) { c.App.MinSize = 0 },
		"negative window": func(c *Config) { c.Window = -time.Second },
	}
	for name, mutate := range cases {
		cfg := good
		mutate(&cfg)
		if _, err := Run(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: err = %v, want ErrBadConfig", name, err)
		}
	}
	cfg := good
	cfg.Dist = fixedSize(-1)
	if _, err := Run(cfg); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative sizes: err = %v, want ErrBadConfig", err)
	}
	cfg = good
	cfg.App.Chain = []workload.Function{{Name: "nan", ExecMean: func(float64) time.Duration { return time.Millisecond },
		OutputMean: func(float64) float64 { return math.NaN() }}}
	if _, err := Run(cfg); !errors.Is(err, ErrBadConfig) {
		t.Errorf("NaN output sizes: err = %v, want ErrBadConfig", err)
	}
	cfg = good
	cfg.Policy = "lambda"
	if _, err := Run(cfg); !errors.Is(err, policy.ErrUnknownPolicy) {
		t.Errorf("unknown policy: err = %v", err)
	}
}
