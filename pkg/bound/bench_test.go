package bound

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// benchJobs is a Poisson stream of jobs at rate per second for d, with
// exponential execution times of mean exec and a deadline of slo after
// release: the shape of one function's jobs in the paper matrix.
func benchJobs(rate float64, d, exec, slo time.Duration) []Job {
	rng := rand.New(rand.NewPCG(1, 2))
	var jobs []Job
	for t := int64(0); t < int64(d); {
		t += int64(rng.ExpFloat64() / rate * float64(time.Second))
		p := max(1, int64(rng.ExpFloat64()*float64(exec)))
		jobs = append(jobs, Job{Release: t, Deadline: t + max(p, int64(slo)), Exec: p})
	}
	return jobs
}

// BenchmarkBound reports jobs per CPU-second that the bound's accumulator
// takes (Acc.Add, then Result): the engine feeds it every job of every
// run (250 jobs/s for 1 h, 200 ms mean execution, 700 ms SLO).
func BenchmarkBound(b *testing.B) {
	jobs := benchJobs(250, time.Hour, 200*time.Millisecond, 700*time.Millisecond)
	var n int64
	cpu0 := cpuTime()
	for b.Loop() {
		a := New(1500*time.Millisecond, time.Hour+time.Minute, 700*time.Millisecond, 50)
		for _, j := range jobs {
			a.Add(j)
		}
		_ = a.Result()
		n += int64(len(jobs))
	}
	b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "jobs/cpu-s")
}

// BenchmarkPlanner reports jobs per CPU-second that the oracle's planner
// places, best fit and first fit, at the real scale (250 jobs/s) and at
// the large one (3000 jobs/s, thousands of busy containers).
func BenchmarkPlanner(b *testing.B) {
	for _, c := range []struct {
		name string
		rate float64
	}{{"250rps", 250}, {"3000rps", 3000}} {
		jobs := benchJobs(c.rate, 10*time.Minute, 200*time.Millisecond, 700*time.Millisecond)
		for _, firstFit := range []bool{false, true} {
			name := c.name + "/best-fit"
			if firstFit {
				name = c.name + "/first-fit"
			}
			b.Run(name, func(b *testing.B) {
				var n int64
				cpu0 := cpuTime()
				for b.Loop() {
					var sink edgeSink
					p := NewPlanner(1, int64(1500*time.Millisecond), []int{50}, 0, 0, &sink)
					p.FirstFit = firstFit
					for _, j := range jobs {
						p.Place(0, j)
					}
					p.Finish()
					n += int64(len(jobs))
				}
				b.ReportMetric(float64(n)/(cpuTime()-cpu0).Seconds(), "jobs/cpu-s")
			})
		}
	}
}

// cpuTime is the process's CPU time: on a shared machine wall time
// includes other tenants' load.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
