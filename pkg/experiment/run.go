// Package experiment runs many simulations in parallel and collects their
// results as report records. It also defines the paper's experiment matrix
// (see paper.go) and the report that sets our figures beside the paper's.
package experiment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"gantry.dev/gantry/pkg/report"
	"gantry.dev/gantry/pkg/sim"
)

var (
	// ErrNoJobs is returned when there is nothing to run.
	ErrNoJobs = errors.New("no simulations to run")
	// ErrSimPanicked wraps a panic raised inside a simulation: a bug.
	ErrSimPanicked = errors.New("simulation panicked")
)

// Job is one simulation and the labels its record carries.
type Job struct {
	Config sim.Config
	// TraceLabel overrides the trace name in the record, e.g. "twitter-large".
	TraceLabel string
	Scale      string
}

// cores is the cluster size the job simulates, after sim's defaults.
func (j Job) cores() int {
	n, c := j.Config.Nodes, j.Config.CoresPerNode
	if n == 0 {
		n = sim.DefaultNodes
	}
	if c == 0 {
		c = sim.DefaultCoresPerNode
	}
	return n * c
}

// weight estimates a job's cost as the function invocations it simulates,
// so that the progress bar moves evenly across small and large jobs.
func (j Job) weight() int64 {
	return max(1, int64(j.Config.Trace.Total())*int64(len(j.Config.App.Chain)))
}

// Options controls how jobs run.
type Options struct {
	// Workers is how many simulations run at once; 0 means GOMAXPROCS.
	Workers int
	// Progress receives a progress bar; nil draws none.
	Progress io.Writer
	// Simulate runs one configuration; nil means sim.RunContext with Run's
	// context, so that a cancelled run stops within one policy tick.
	// Tests replace it; a replaced simulator gets no yardsticks (the
	// oracle, the fixed pool and oracle-predicted need the real one).
	Simulate func(sim.Config) (sim.Result, error)
}

// Run executes every job, in parallel, and returns one record per job in job
// order, so the output does not depend on scheduling. The first failure, or
// the end of ctx (SIGINT, SIGTERM), stops every job and is returned, naming
// its job, together with the records of the jobs that had finished (in job
// order), so that a caller can keep them.
func Run(ctx context.Context, jobs []Job, opts Options) ([]report.Record, error) {
	if len(jobs) == 0 {
		return nil, ErrNoJobs
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	simulate := opts.Simulate
	if simulate == nil {
		simulate = func(cfg sim.Config) (sim.Result, error) { return sim.RunContext(ctx, cfg) }
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	bar := newBar(opts.Progress, jobs)

	records := make([]report.Record, len(jobs))
	finished := make([]bool, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Go(func() {
			for i := range next {
				if ctx.Err() != nil {
					continue // feed may hand out one more job as ctx ends
				}
				rec, err := runOne(jobs[i], simulate, bar)
				if err != nil {
					cancel(err)
					continue
				}
				records[i], finished[i] = rec, true
			}
		})
	}
	feed(ctx, next, len(jobs))
	wg.Wait()
	if ctx.Err() == nil && opts.Simulate == nil {
		if err := frontier(ctx, jobs, records, workers); err != nil {
			cancel(err)
		}
	}
	err := context.Cause(ctx)
	bar.finish(err == nil)
	if err != nil {
		var done []report.Record
		for i, ok := range finished {
			if ok {
				done = append(done, records[i])
			}
		}
		return done, err
	}
	return records, nil
}

// feed hands out job indices until all are handed out or ctx ends.
func feed(ctx context.Context, next chan<- int, n int) {
	defer close(next)
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			return
		}
	}
}

func runOne(job Job, simulate func(sim.Config) (sim.Result, error), bar *progress) (report.Record, error) {
	cfg := job.Config
	weight := job.weight()
	var reported int64
	cfg.Progress = func(simulated, total time.Duration) {
		if total <= 0 {
			return
		}
		done := min(weight, int64(float64(weight)*float64(simulated)/float64(total)))
		bar.add(done - reported)
		reported = done
	}
	start := time.Now()
	res, err := simulateSafely(simulate, cfg)
	if err != nil {
		return report.Record{}, fmt.Errorf("%s/%s/%s/%s: %w", cfg.App.Name, cfg.Dist.Name(), label(job), cfg.Policy, err)
	}
	bar.add(weight - reported)
	rec := FromResult(res)
	rec.Trace = label(job)
	rec.Scale = job.Scale
	rec.Cores = job.cores()
	if rec.WallS == 0 {
		rec.WallS = time.Since(start).Seconds()
	}
	return rec, nil
}

// simulateSafely turns a panic inside one simulation into an error, so that
// a bug in one run names its run instead of killing the whole matrix.
func simulateSafely(simulate func(sim.Config) (sim.Result, error), cfg sim.Config) (res sim.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrSimPanicked, r)
		}
	}()
	return simulate(cfg)
}

func label(job Job) string {
	if job.TraceLabel != "" {
		return job.TraceLabel
	}
	return job.Config.Trace.Name
}

// Describe says in one line what the job simulates, for a report's preamble.
func (j Job) Describe() string {
	c := j.Config
	return fmt.Sprintf("App %s (SLO %v), %s input sizes, trace %s (mean %.1f rps, peak %.1f rps, %v), %d nodes × %d cores, seed %d.",
		c.App.Name, c.App.SLO, c.Dist.Name(), label(j), c.Trace.Mean(), c.Trace.Peak(), c.Trace.Duration(),
		c.Nodes, c.CoresPerNode, c.Seed)
}

// Traces returns each distinct trace of the jobs once, in job order, for
// plotting. With relative, rates are divided by the trace's mean so that
// traces of very different scales share one chart.
func Traces(jobs []Job, relative bool) []report.TraceSeries {
	var out []report.TraceSeries
	seen := map[string]bool{}
	for _, j := range jobs {
		name := label(j)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, traceSeries(j, name, relative))
	}
	return out
}

func traceSeries(j Job, name string, relative bool) report.TraceSeries {
	tr := j.Config.Trace
	if !relative || tr.Mean() <= 0 {
		return report.TraceSeries{Name: name, PerSecond: tr.PerSecond}
	}
	rel := tr.Scale(1 / tr.Mean())
	return report.TraceSeries{Name: fmt.Sprintf("%s (mean %.0f rps)", name, tr.Mean()), PerSecond: rel.PerSecond}
}
