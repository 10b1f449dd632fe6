package bound

import (
	"math/rand/v2"
	"testing"
	"time"
)

// randomJobs is a Poisson stream at rate per second over d, each job with
// a window of slo from its release and an execution time in (0, slo/1.2].
func randomJobs(rng *rand.Rand, rate float64, d, slo time.Duration) []Job {
	var out []Job
	for t := rng.ExpFloat64() / rate * 1e9; t < float64(d); t += rng.ExpFloat64() / rate * 1e9 {
		p := int64((0.05 + 0.95*rng.Float64()) * float64(slo) / 1.2)
		out = append(out, Job{Release: int64(t), Deadline: int64(t) + int64(slo), Exec: p})
	}
	return out
}

// Any schedule that meets every deadline is at or above the bound, and the
// bound is at or above the work; the greedy schedule is one such schedule.
func TestBoundIsBelowTheGreedySchedulesContainerTime(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 9))
		rate := []float64{2, 20, 200}[seed%3]
		cold := []time.Duration{300 * time.Millisecond, 1500 * time.Millisecond}[seed%2]
		slo := 700 * time.Millisecond
		d := time.Minute
		jobs := randomJobs(rng, rate, d, slo)
		warm := int(seed % 4)
		acc := New(cold, d+slo, slo, warm)
		for _, j := range jobs {
			acc.Add(j)
		}
		r := acc.Result()
		ends, steps, missed := Schedule(jobs, int64(cold), warm, 0)
		if missed > 0 {
			// Jobs released within a cold start of time 0 may be unservable
			// without enough warm containers; skip such instances.
			continue
		}
		for i, j := range jobs {
			if ends[i] > j.Deadline || ends[i]-j.Exec < j.Release {
				t.Fatalf("seed %d: job %d planned [%d, %d] outside [%d, %d]", seed, i, ends[i]-j.Exec, ends[i], j.Release, j.Deadline)
			}
		}
		area := Area(steps, int64(d+slo+cold))
		if r.Area < r.Work || area < r.Area {
			t.Errorf("seed %d (rate %v, cold %v): work %.4g <= bound %.4g <= schedule %.4g does not hold", seed, rate, cold, r.Work, r.Area, area)
		}
		if steps[len(steps)-1].Live != 0 {
			t.Errorf("seed %d: the plan ends with %d containers live", seed, steps[len(steps)-1].Live)
		}
	}
}

// A burst that no warm container covers forces cold starts: the bound
// charges a cold start for every container the burst needs beyond the
// warm ones.
func TestABurstForcesColdStarts(t *testing.T) {
	const ms = int64(time.Millisecond)
	cold := 1500 * time.Millisecond
	var jobs []Job
	// 40 jobs of 600 ms, all released at 10 s and due at 10.7 s: each needs
	// its own container.
	for range 40 {
		jobs = append(jobs, Job{Release: 10_000 * ms, Deadline: 10_700 * ms, Exec: 600 * ms})
	}
	acc := New(cold, 20*time.Second, 700*time.Millisecond, 10)
	for _, j := range jobs {
		acc.Add(j)
	}
	r := acc.Result()
	if r.PeakNeed != 40 || r.ForcedStarts != 30 {
		t.Fatalf("peak need %d, forced starts %d; want 40 and 30", r.PeakNeed, r.ForcedStarts)
	}
	want := float64(40*600*ms) + 30*float64(cold)
	if r.Area < want-1 {
		t.Errorf("area %.4g < work + 30 cold starts %.4g", r.Area, want)
	}
	_, steps, missed := Schedule(jobs, int64(cold), 10, 0)
	if missed != 0 {
		t.Fatalf("the schedule missed %d", missed)
	}
	if a := Area(steps, 20_000*ms); a < r.Area {
		t.Errorf("schedule %.4g below the bound %.4g", a, r.Area)
	}
}

// With a queue bound the schedule never has more jobs waiting at once than
// the bound: it starts containers instead.
func TestScheduleKeepsItsQueueWithinTheBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	jobs := randomJobs(rng, 400, 20*time.Second, 700*time.Millisecond)
	for _, bound := range []int{0, 5} {
		ends, steps, missed := Schedule(jobs, int64(time.Second), 300, bound)
		if missed != 0 {
			t.Fatalf("bound %d: %d missed", bound, missed)
		}
		most := 0
		for _, j := range jobs {
			waiting := 0
			for i, k := range jobs {
				if k.Release <= j.Release && ends[i]-k.Exec > j.Release {
					waiting++
				}
			}
			most = max(most, waiting)
		}
		if bound > 0 && most > bound {
			t.Errorf("bound %d: %d jobs waiting at once", bound, most)
		}
		t.Logf("bound %d: at most %d waiting, %.4g container-s", bound, most, Area(steps, int64(21*time.Second))/1e9)
	}
}
