package policy

import (
	"testing"
	"time"
)

// gantry-startup-room asks the sizing for startupRoomShare more than the
// predicted rate until warmupWindows windows of load have closed, so its
// target is the larger one then; afterwards it adds nothing and sizes as
// gantry does. gantry never adds it.
func TestStartupRoomOnlyBeforeTheLoadIsMeasured(t *testing.T) {
	flat := func(time.Duration) float64 { return 40 }
	early := 15 * time.Second // one 10 s window closed
	g, _ := poissonRunAs(t, "gantry", 3, early, flat)
	v, _ := poissonRunAs(t, "gantry-startup-room", 3, early, flat)
	if !v.targetOK || v.rate <= 0 {
		t.Fatalf("no prediction after %v (rate %.1f)", early, v.rate)
	}
	if got, want := v.warmBuffer(), startupRoomShare*v.rate; got != want {
		t.Errorf("variant's room after %v: %.2f/s, want %.2f/s (%.0f%% of %.1f/s)", early, got, want, 100*startupRoomShare, v.rate)
	}
	if g.warmBuffer() != 0 {
		t.Errorf("gantry's room after %v: %.2f/s, want 0", early, g.warmBuffer())
	}
	if v.fns[0].target <= g.fns[0].target {
		t.Errorf("targets after %v: variant %d, gantry %d: want the variant's larger", early, v.fns[0].target, g.fns[0].target)
	}
	late := time.Minute
	g, _ = poissonRunAs(t, "gantry", 3, late, flat)
	v, _ = poissonRunAs(t, "gantry-startup-room", 3, late, flat)
	if v.loadWindows <= warmupWindows {
		t.Fatalf("%d windows of load after %v, want more than %d", v.loadWindows, late, warmupWindows)
	}
	if v.warmBuffer() != 0 || v.rate != g.rate || v.fns[0].target != g.fns[0].target {
		t.Errorf("after %v: variant room %.2f/s, rate %.2f, target %d; gantry rate %.2f, target %d: want no room and gantry's sizing",
			late, v.warmBuffer(), v.rate, v.fns[0].target, g.rate, g.fns[0].target)
	}
}
