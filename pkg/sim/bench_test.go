package sim

import (
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
)

// BenchmarkSimulatorThroughput reports simulated requests per wall second
// for a single-function app (image compression, Poisson 250 rps, 1 h).
// The target is at least 1M.
func BenchmarkSimulatorThroughput(b *testing.B) {
	tr, err := trace.Generate("poisson", 250, time.Hour, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range append(policy.Names(), "gantry-no-bound") {
		b.Run(pol, func(b *testing.B) {
			var reqs int64
			cpu0 := cpuTime()
			// gantry-no-bound is gantry without the bound's accumulation
			// of every request, to show what the bound costs.
			name, noBound := strings.CutSuffix(pol, "-no-bound")
			for b.Loop() {
				res, err := Run(Config{App: paperApp(b, "image-compression"), Dist: dist(b, "medial"), Trace: tr, Policy: name, Seed: 1, NoBound: noBound})
				if err != nil {
					b.Fatal(err)
				}
				reqs += res.Requests
			}
			b.ReportMetric(float64(reqs)/b.Elapsed().Seconds(), "req/s")
			// On a shared machine wall time includes other tenants' load;
			// CPU time is what the simulator itself used.
			b.ReportMetric(float64(reqs)/(cpuTime()-cpu0).Seconds(), "req/cpu-s")
		})
	}
}

// BenchmarkChainLookAhead is a chain under bursty load, where look-ahead
// on arrival (policy.LookAheadGap) costs the most: every arrival at the
// head packs every request upstream.
func BenchmarkChainLookAhead(b *testing.B) {
	tr, err := trace.Generate("twitter", 250, 10*time.Minute, 1)
	if err != nil {
		b.Fatal(err)
	}
	var reqs int64
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := Run(Config{App: paperApp(b, "audio-translation"), Dist: dist(b, "light"), Trace: tr, Policy: "cypress", Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		reqs += res.Requests
	}
	b.ReportMetric(float64(reqs)/(cpuTime()-cpu0).Seconds(), "req/cpu-s")
}

// BenchmarkMemoryFlatInTraceLength runs the same load for 1 h and 4 h and
// reports the peak heap in use: it must not grow with the request count,
// the oracle's included (its plan is made one cold start ahead, not over
// every request).
func BenchmarkMemoryFlatInTraceLength(b *testing.B) {
	for _, c := range []struct {
		pol string
		d   time.Duration
	}{{"gantry", time.Hour}, {"gantry", 4 * time.Hour}, {"oracle", time.Hour}, {"oracle", 4 * time.Hour}} {
		b.Run(c.pol+"/"+c.d.String(), func(b *testing.B) {
			tr, err := trace.Generate("poisson", 250, c.d, 1)
			if err != nil {
				b.Fatal(err)
			}
			var peak uint64
			for b.Loop() {
				runtime.GC()
				stop := sampleHeap(&peak)
				if _, err := Run(Config{App: paperApp(b, "audio-translation"), Dist: dist(b, "medial"), Trace: tr, Policy: c.pol, Seed: 1}); err != nil {
					b.Fatal(err)
				}
				stop()
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
		})
	}
}

// sampleHeap records the largest live heap seen every few milliseconds
// until the returned stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapAlloc)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGantryAblations measures what each of gantry's changes over
// Cypress buys: every variant undoes one change. It reports SLO compliance
// (percent) and average containers on the bursty Twitter trace, at the
// real-system scale (250 rps mean, 6 nodes) and the paper's large scale
// (5450 rps peak, 133 nodes), image compression, heavy inputs.
func BenchmarkGantryAblations(b *testing.B) {
	small, err := trace.Generate("twitter", 250, time.Hour, 1)
	if err != nil {
		b.Fatal(err)
	}
	large, err := trace.Generate("twitter", 250, 20*time.Minute, 1)
	if err != nil {
		b.Fatal(err)
	}
	large = large.ScaleToPeak(5450)
	scales := []struct {
		name  string
		tr    trace.Trace
		nodes int
	}{{"real", small, 6}, {"large", large, 133}}
	for _, sc := range scales {
		for _, pol := range append([]string{"cypress", "gantry"}, policy.Ablations()...) {
			b.Run(sc.name+"/"+pol, func(b *testing.B) {
				var res Result
				for b.Loop() {
					res, err = Run(Config{App: paperApp(b, "image-compression"), Dist: dist(b, "heavy"),
						Trace: sc.tr, Policy: pol, Seed: 1, Nodes: sc.nodes})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(100*(1-res.SLOCompliance), "miss%")
				b.ReportMetric(res.AvgContainers, "containers")
				b.ReportMetric(100*(res.AvgContainers/res.Bound-1), "vs-bound%")
				b.ReportMetric(float64(res.ContainersSpawned), "spawned")
			})
		}
	}
}

// BenchmarkOverloadCost runs the same load (sentiment analysis, Poisson
// 5000 rps, 20 s) on the default 288 cores, where it does not fit and the
// queue bound sheds, and on 133 nodes (6384 cores), where it fits, and
// reports the CPU time per simulated request of each: overload must cost
// at most twice what the feasible load costs, with the default queue bound
// and with the largest (100 000 waiting requests per function).
func BenchmarkOverloadCost(b *testing.B) {
	tr, err := trace.Generate("poisson", 5000, 20*time.Second, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range []string{"atoll", "cypress", "gantry"} {
		for _, sc := range []struct {
			name         string
			nodes, bound int
		}{{"fits", 133, 0}, {"overloaded", 6, 0}, {"overloaded-queue-100000", 6, MaxQueueBound}} {
			b.Run(pol+"/"+sc.name, func(b *testing.B) {
				var reqs, rejected int64
				cpu0 := cpuTime()
				for b.Loop() {
					res, err := Run(Config{App: paperApp(b, "sentiment-analysis"), Dist: dist(b, "heavy"), Trace: tr, Policy: pol, Seed: 1, Nodes: sc.nodes, MaxQueue: sc.bound})
					if err != nil {
						b.Fatal(err)
					}
					reqs += res.Requests
					rejected += res.Rejected
				}
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(reqs), "cpu-ns/req")
				b.ReportMetric(float64(rejected)/float64(reqs)*100, "rejected%")
			})
		}
	}
}

// BenchmarkOracleMemory is the oracle on the largest run it used to plan
// with every request in memory (audio translation at 3000 requests/s for
// an hour on 133 nodes: 10.8 million requests, 920 MB then): it reports
// the peak heap in use and the process's peak resident memory.
func BenchmarkOracleMemory(b *testing.B) {
	tr, err := trace.Generate("poisson", 3000, time.Hour, 1)
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for b.Loop() {
		runtime.GC()
		stop := sampleHeap(&peak)
		if _, err := Run(Config{App: paperApp(b, "audio-translation"), Dist: dist(b, "heavy"), Trace: tr, Policy: "oracle", Seed: 1, Nodes: 133}); err != nil {
			b.Fatal(err)
		}
		stop()
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(ru.Maxrss)/1024, "max-rss-MB")
}
