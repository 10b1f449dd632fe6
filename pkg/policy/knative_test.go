package policy

import (
	"math"
	"testing"
	"time"
)

// knRun drives the knative policy for one function with a concurrency
// (requests running or waiting) given per instant, every 500 ms tick;
// every pod it starts is ready at once. It returns the pods after each
// tick.
func knRun(t *testing.T, p Policy, from, to time.Duration, conc func(at time.Duration) int, pods *int) []int {
	t.Helper()
	var out []int
	views, decs := make([]View, 1), make([]Decision, 1)
	for at := from; at < to; at += 500 * time.Millisecond {
		c := conc(at)
		busy := min(c, *pods)
		views[0] = View{Counts: Counts{Live: *pods, Idle: *pods - busy, Queued: c - busy}}
		p.Plan(t0.Add(at), views, decs)
		d := decs[0]
		if d.Retire > views[0].Idle {
			t.Fatalf("at %v: retires %d of %d idle", at, d.Retire, views[0].Idle)
		}
		*pods += d.Add - d.Retire
		out = append(out, *pods)
	}
	return out
}

func TestKnativeSizesForTheTargetConcurrency(t *testing.T) {
	p := mustNew(t, "knative", spec(FunctionSpec{Name: "f", SLO: time.Second}))
	pods := 1
	got := knRun(t, p, 0, 3*time.Minute, func(time.Duration) int { return 7 }, &pods)
	// 7 in flight at 0.7 per pod (target 100 capped by containerConcurrency
	// 1, utilization 70%).
	if want := int(math.Ceil(7 / 0.7)); got[len(got)-1] != want {
		t.Fatalf("pods %d, want %d", got[len(got)-1], want)
	}
}

// A burst that doubles the panic window's demand over the ready pods makes
// the KPA follow the 6 s window at once, and it does not scale down until
// a stable window has passed without that.
func TestKnativePanicsOnABurstAndHoldsUntilTheStableWindowPasses(t *testing.T) {
	p := mustNew(t, "knative", spec(FunctionSpec{Name: "f", SLO: time.Second}))
	pods := 1
	knRun(t, p, 0, 2*time.Minute, func(time.Duration) int { return 7 }, &pods) // 10 pods
	burst := func(at time.Duration) int {
		if at < 2*time.Minute+20*time.Second {
			return 70
		}
		return 7
	}
	got := knRun(t, p, 2*time.Minute, 2*time.Minute+8*time.Second, burst, &pods)
	if got[len(got)-1] < 100 {
		t.Fatalf("pods %v after 8 s of a tenfold burst, want the panic window's 100 within it", got)
	}
	peak := got[len(got)-1]
	// Panic mode lasts a stable window past the last decision that found
	// the panic window over the threshold (within the first seconds of the
	// burst), and never scales down meanwhile, though the burst ends at
	// 2m20s.
	got = knRun(t, p, 2*time.Minute+8*time.Second, 3*time.Minute, burst, &pods)
	for i, n := range got {
		if n < peak {
			t.Fatalf("scaled down to %d at %v while panicking", n, 2*time.Minute+8*time.Second+time.Duration(i)*500*time.Millisecond)
		}
	}
	// Then it scales down, at most halving per decision (max scale-down
	// rate 2).
	prev := pods
	got = knRun(t, p, 3*time.Minute, 6*time.Minute, burst, &pods)
	for _, n := range got {
		if n < prev/2 {
			t.Fatalf("scaled from %d to %d in one decision", prev, n)
		}
		prev = n
	}
	if pods != 10 {
		t.Errorf("pods %d after the burst, want 10 again", pods)
	}
}

func TestKnativeScalesToZeroOnlyAfterTheGracePeriod(t *testing.T) {
	p := mustNew(t, "knative", spec(FunctionSpec{Name: "f", SLO: time.Second}))
	pods := 1
	knRun(t, p, 0, time.Minute, func(time.Duration) int { return 1 }, &pods)
	idle := func(time.Duration) int { return 0 }
	got := knRun(t, p, time.Minute, time.Minute+29*time.Second, idle, &pods)
	for _, n := range got {
		if n == 0 {
			t.Fatalf("scaled to zero within the 30 s grace: %v", got)
		}
	}
	knRun(t, p, time.Minute+29*time.Second, 3*time.Minute, idle, &pods)
	if pods != 0 {
		t.Errorf("pods %d after two idle minutes, want 0", pods)
	}
}
