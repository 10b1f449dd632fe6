package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// Drawn cold starts have the configured mean and the named shape: const
// is always the mean, exp and lognormal have a coefficient of variation
// of about 1, uniform stays within (0, 2·mean] with CV 1/√3.
func TestColdStartDrawsHaveTheirMeanAndShape(t *testing.T) {
	const mean = 200 * time.Millisecond
	wantCV := map[string]float64{"const": 0, "exp": 1, "uniform": 1 / math.Sqrt(3), "lognormal": 1}
	for _, dist := range ColdStartDists() {
		e := &engine{cfg: Config{ColdStart: mean, ColdStartDist: dist}, coldRng: rand.New(rand.NewPCG(1, 11))}
		const n = 40000
		var sum, sq float64
		for range n {
			d := float64(e.drawColdStart())
			if d <= 0 || (dist == "uniform" && d > 2*float64(mean)) {
				t.Fatalf("%s: drew %v", dist, time.Duration(d))
			}
			sum += d
			sq += d * d
		}
		m := sum / n
		cv := math.Sqrt(max(0, sq/n-m*m)) / m
		if math.Abs(m/float64(mean)-1) > 0.03 || math.Abs(cv-wantCV[dist]) > 0.08 {
			t.Errorf("%s: mean %v (want %v ± 3%%), CV %.3f (want %.3f ± 0.08)", dist, time.Duration(m), mean, cv, wantCV[dist])
		}
	}
}

// A cold-start distribution the oracle cannot plan with, a keep-alive a
// policy would ignore and a cold start as long as the trace are refused.
func TestConfigRefusesWhatThePolicyWouldIgnore(t *testing.T) {
	app, _ := workload.Lookup("sentiment-analysis")
	dist, _ := workload.LookupDist("light")
	tr, _ := trace.Generate("poisson", 5, 10*time.Second, 1)
	base := Config{App: app, Dist: dist, Trace: tr, Policy: "gantry"}
	for _, c := range []struct {
		edit func(*Config)
		want error
	}{
		{func(c *Config) { c.ColdStartDist = "pareto" }, ErrColdStartDist},
		{func(c *Config) { c.Policy, c.ColdStartDist = "oracle", "exp" }, ErrColdStartDist},
		{func(c *Config) { c.KeepAlive = time.Minute }, ErrKeepAlive},
		{func(c *Config) { c.Policy, c.KeepAlive = "commercial", 48*time.Hour }, ErrKeepAlive},
		{func(c *Config) { c.ColdStart = 10 * time.Second }, ErrColdStartTooLong},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := Run(cfg); !errors.Is(err, c.want) || !errors.Is(err, ErrBadConfig) {
			t.Errorf("%+v: err %v, want %v", cfg.ColdStartDist+cfg.Policy, err, c.want)
		}
	}
	cfg := base
	cfg.Policy, cfg.KeepAlive = "commercial", time.Second
	if _, err := Run(cfg); err != nil {
		t.Errorf("commercial with a 1 s keep-alive: %v", err)
	}
}
