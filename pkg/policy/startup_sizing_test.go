package policy

import (
	"testing"
	"time"
)

// startupPlan runs policy name through 3 s of 20 requests/s of 300 ms on
// 4 live containers, the last tick's view showing queued requests, and
// returns the core and the last tick's decision.
func startupPlan(t *testing.T, name string, queued int) (*core, Decision, float64) {
	t.Helper()
	p := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: 400 * ms})).(*core)
	views := []View{{Counts: Counts{Live: 4, Idle: 4}}}
	out := make([]Decision, 1)
	p.Plan(t0, views, out)
	now := t0
	for i := range 60 {
		now = t0.Add(time.Duration(i) * 50 * ms)
		p.Arrive(now, 0, 10, views[0].Counts)
		if err := p.Complete(0, 10, 300*ms, 1); err != nil {
			t.Fatal(err)
		}
	}
	views[0].Counts = Counts{Live: 4, Queued: queued}
	p.Plan(now, views, out)
	return p, out[0], 60 / now.Sub(t0).Seconds()
}

// Within the first window gantry sizes a function whose requests queue
// for at least the rate seen so far; a function where nothing waits, and
// the ablation, wait for the window.
func TestStartupSizingBeforeTheFirstWindow(t *testing.T) {
	p, d, rate := startupPlan(t, "gantry", 2)
	mix, _ := p.serviceMix(0)
	want := sizeForSpread(rate, 0, mix, 1-p.sloTarget(), maxSizing)
	if want <= 4 {
		t.Fatalf("setup: the sizing wants %d at %.1f/s, want more than the 4 live", want, rate)
	}
	if !p.targetOK || p.fns[0].target != want || d.Add != want-4 {
		t.Errorf("gantry, requests queued: target %d (set %v), adds %d; want %d, adding %d", p.fns[0].target, p.targetOK, d.Add, want, want-4)
	}
	if p, d, _ := startupPlan(t, "gantry", 0); p.fns[0].target != 0 || d.Add != 0 {
		t.Errorf("gantry, nothing queued: target %d, adds %d; want neither", p.fns[0].target, d.Add)
	}
	if p, d, _ := startupPlan(t, "gantry-no-startup-size", 2); p.targetOK || d.Add != 0 {
		t.Errorf("gantry-no-startup-size: target set %v, adds %d; want neither", p.targetOK, d.Add)
	}
}
