package liverun

import (
	"fmt"
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// The figures docs/platform.md ("Simulator against live") quotes beside
// the live measurements, from the simulator and the policy alone:
//
//	go test -run '^$' -bench 'SimSeedSpread|SimExcess|PanicAfterStall' -benchtime 1x ./pkg/liverun

// experimentConfig is the measured set-up: email-categorization, uniform
// sizes, Poisson 10 requests/s for 90 s, the dispatcher's timings.
func experimentConfig(b *testing.B, policyName string, cold time.Duration, seed uint64, coldBoot bool) sim.Config {
	b.Helper()
	app, err := workload.Lookup("email-categorization")
	if err != nil {
		b.Fatal(err)
	}
	dist, err := workload.LookupDist("uniform")
	if err != nil {
		b.Fatal(err)
	}
	tr, err := trace.Generate("poisson", 10, 90*time.Second, 1)
	if err != nil {
		b.Fatal(err)
	}
	return sim.Config{App: app, Dist: dist, Trace: tr, Policy: policyName, Seed: seed, ColdStart: cold,
		Tick: policy.DefaultTick, Window: policy.DefaultWindow, IdleTimeout: policy.DefaultIdleTimeout, ColdBoot: coldBoot}
}

// seedMeans runs 40 seeds and returns the mean and coefficient of
// variation of mean live instances, the mean SLO compliance and the
// highest peak of live instances.
func seedMeans(b *testing.B, cfgFor func(seed uint64) sim.Config) (mean, cv, compliance, peak float64) {
	b.Helper()
	const seeds = 40
	var sum, sq float64
	for s := uint64(1); s <= seeds; s++ {
		res, err := sim.Run(cfgFor(s))
		if err != nil {
			b.Fatal(err)
		}
		sum += res.AvgContainers
		sq += res.AvgContainers * res.AvgContainers
		compliance += res.SLOCompliance / seeds
		peak = max(peak, res.PeakContainers)
	}
	mean = sum / seeds
	return mean, math.Sqrt(max(0, sq/seeds-mean*mean)) / mean, compliance, peak
}

// How much one run's mean live instances vary from seed to seed, cold-
// booted (as bench simlive runs) and prewarmed (the simulator's default),
// and the highest peak, which DefaultCompareCapacity stays above.
func BenchmarkSimSeedSpread(b *testing.B) {
	for range b.N {
		for _, pol := range []string{"gantry", "cypress"} {
			for _, coldBoot := range []bool{true, false} {
				mean, cv, _, peak := seedMeans(b, func(s uint64) sim.Config {
					return experimentConfig(b, pol, 1700*time.Millisecond, s, coldBoot)
				})
				b.Logf("%s cold boot %v: mean live instances %.2f, seed-to-seed cv %.1f%%, highest peak %.0f", pol, coldBoot, mean, 100*cv, peak)
			}
		}
	}
}

// What a per-request cost the simulator lacks does to its figures: d added
// to every function's execution time, cold start as measured on the busy
// machine.
func BenchmarkSimExcess(b *testing.B) {
	for range b.N {
		for _, pol := range []string{"gantry", "cypress"} {
			for _, d := range []time.Duration{0, 13 * time.Millisecond} {
				mean, _, compliance, _ := seedMeans(b, func(s uint64) sim.Config {
					cfg := experimentConfig(b, pol, 1900*time.Millisecond, s, true)
					cfg.App = withOverhead(cfg.App, d)
					return cfg
				})
				b.Logf("%s + %v per function: mean live instances %.2f, SLO compliance %.2f%%", pol, d, mean, 100*compliance)
			}
		}
	}
}

// Gantry's panic rule when the driver's tick is late: 40 s of 10 arrivals
// per second on 250 ms ticks, then a 2 s stall after which the stale tick
// runs first, the 20 arrivals of the stall are counted, and the next tick
// follows after gap.
func BenchmarkPanicAfterStall(b *testing.B) {
	app, err := workload.Lookup("email-categorization")
	if err != nil {
		b.Fatal(err)
	}
	slos := sim.FunctionSLOs(app)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spec := policy.Spec{App: app.Name, AppSLO: app.SLO, MinSize: app.MinSize, MaxSize: app.MaxSize,
		ColdStart: 1600 * time.Millisecond, Window: policy.DefaultWindow, Start: start, Seed: 1}
	for i, f := range app.Chain {
		spec.Functions = append(spec.Functions, policy.FunctionSpec{Name: f.Name, SLO: slos[i], SizeSensitive: f.SizeSensitive})
	}
	const live = 6
	for range b.N {
		for _, gap := range []time.Duration{250 * time.Millisecond, 50 * time.Millisecond, 10 * time.Millisecond, time.Millisecond} {
			pol, err := policy.New("gantry", spec)
			if err != nil {
				b.Fatal(err)
			}
			views := make([]policy.View, len(app.Chain))
			for i := range views {
				views[i].Counts = policy.Counts{Live: live, Idle: live}
			}
			out := make([]policy.Decision, len(views))
			now := start
			for tick := range 160 {
				for range 2 + tick%2 { // 2.5 a tick: 10 per second
					pol.Arrive(now, 0, 100, views[0].Counts)
					if err := pol.Complete(0, 100, 120*time.Millisecond, 90); err != nil {
						b.Fatal(err)
					}
					pol.Arrive(now, 1, 90, views[1].Counts)
					if err := pol.Complete(1, 90, 150*time.Millisecond, 0.1); err != nil {
						b.Fatal(err)
					}
				}
				now = now.Add(250 * time.Millisecond)
				pol.Plan(now, views, out)
			}
			now = now.Add(2 * time.Second)
			pol.Plan(now, views, out)
			for range 20 {
				pol.Arrive(now, 0, 100, views[0].Counts)
			}
			now = now.Add(gap)
			pol.Plan(now, views, out)
			adds := ""
			for i, d := range out {
				adds += fmt.Sprintf(" %s +%d", app.Chain[i].Name, d.Add)
			}
			b.Logf("next tick %v after the stale one: Plan adds%s (each holds %d)", gap, adds, live)
		}
	}
}
