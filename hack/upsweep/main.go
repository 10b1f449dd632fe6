// Command upsweep runs `gantry up`'s load in the simulator over SLO factors
// and instance start delays, to show which loads a policy can hold: it is
// how the default load of `gantry up` was chosen (docs/platform.md,
// "gantry up side by side"). Each cell is the mean over seeds of one
// policy's SLO compliance (and its worst seed), mean live containers and
// p99, on one node of --capacity cores with gantry up's idle timeout.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/liverun"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

func main() {
	var (
		appName  = flag.String("app", liverun.DefaultUpApp, "app")
		traceNm  = flag.String("trace", liverun.DefaultUpTrace, "trace")
		distName = flag.String("dist", "uniform", "input-size distribution")
		rate     = flag.Float64("rate", liverun.DefaultUpRate, "mean requests/s")
		duration = flag.Duration("duration", 10*time.Minute, "simulated time per run")
		factors  = flag.String("slo-factors", "1.2,1.5,2", "SLO over the app's largest execution time, comma list")
		delays   = flag.String("start-delays", "500ms,1s,1.5s", "instance start (the simulator's cold start), comma list")
		policies = flag.String("policies", strings.Join(liverun.DefaultPolicies, ","), "policies, comma list")
		seeds    = flag.Int("seeds", 3, "how many seeds, from -first-seed on")
		first    = flag.Int("first-seed", 1, "first seed")
		capacity = flag.Int("capacity", liverun.DefaultUpCapacity, "cores (instances) of the one node")
	)
	flag.Parse()
	if err := run(*appName, *traceNm, *distName, *rate, *duration, *factors, *delays, *policies, *first, *seeds, *capacity); err != nil {
		fmt.Fprintln(os.Stderr, "upsweep:", err)
		os.Exit(2)
	}
}

type cell struct {
	comp, minComp, live, p99 float64
	n                        int
}

func run(appName, traceName, distName string, rate float64, duration time.Duration, factorList, delayList, policyList string,
	first, seeds, capacity int) error {
	app, err := workload.Lookup(appName)
	if err != nil {
		return err
	}
	dist, err := workload.LookupDist(distName)
	if err != nil {
		return err
	}
	var fs []float64
	for _, s := range strings.Split(factorList, ",") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 1 || f > liverun.MaxSLOFactor {
			return fmt.Errorf("SLO factor %q must be in [1, %d]", s, liverun.MaxSLOFactor)
		}
		fs = append(fs, f)
	}
	var ds []time.Duration
	for _, s := range strings.Split(delayList, ",") {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 || d > time.Minute {
			return fmt.Errorf("start delay %q must be a duration in [0, 1m]", s)
		}
		ds = append(ds, d)
	}
	if seeds < 1 || seeds > 100 || first < 1 {
		return fmt.Errorf("seeds must be in [1, 100] and the first seed at least 1")
	}
	pols := strings.Split(policyList, ",")
	type key struct {
		f      float64
		d      time.Duration
		policy string
	}
	var (
		mu    sync.Mutex
		cells = map[key]*cell{}
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 2)
	)
	for _, f := range fs {
		for _, d := range ds {
			for _, p := range pols {
				for seed := first; seed < first+seeds; seed++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						slots <- struct{}{}
						defer func() { <-slots }()
						a := app
						a.SLO = time.Duration(f * float64(app.MaxExec())).Round(time.Millisecond)
						tr, err := trace.Generate(traceName, rate, duration, uint64(seed))
						if err == nil {
							var r sim.Result
							r, err = sim.Run(sim.Config{App: a, Dist: dist, Trace: tr, Policy: p, Seed: uint64(seed),
								Nodes: 1, CoresPerNode: capacity, ColdStart: d, IdleTimeout: liverun.DefaultUpIdleTimeout, NoBound: true})
							if err == nil {
								mu.Lock()
								k := key{f, d, p}
								c := cells[k]
								if c == nil {
									c = &cell{minComp: 1}
									cells[k] = c
								}
								c.comp += r.SLOCompliance
								c.minComp = min(c.minComp, r.SLOCompliance)
								c.live += r.AvgContainers
								c.p99 += float64(r.P99) / float64(time.Millisecond)
								c.n++
								mu.Unlock()
							}
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, fmt.Errorf("%s, SLO factor %g, start %v, seed %d: %w", p, f, d, seed, err))
							mu.Unlock()
						}
					}()
				}
			}
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	fmt.Printf("%s, %s sizes, %s trace at %g requests/s, %v simulated, seeds %d-%d, one node of %d, idle timeout %v\n\n",
		appName, distName, traceName, rate, duration, first, first+seeds-1, capacity, liverun.DefaultUpIdleTimeout)
	fmt.Println("| SLO factor (SLO) | start delay | policy | SLO compliance, mean (worst seed) | mean live | p99 |")
	fmt.Println("|---|---|---|--:|--:|--:|")
	for _, f := range fs {
		slo := time.Duration(f * float64(app.MaxExec())).Round(time.Millisecond)
		for _, d := range ds {
			for _, p := range pols {
				c := cells[key{f, d, p}]
				n := float64(c.n)
				fmt.Printf("| %g (%v) | %v | %s | %.3f%% (%.3f%%) | %.2f | %.0f ms |\n",
					f, slo, d, p, 100*c.comp/n, 100*c.minComp, c.live/n, c.p99/n)
			}
		}
	}
	return nil
}
