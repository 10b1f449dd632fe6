package policy

import (
	"testing"
	"time"
)

// A step from 20/s to 60/s lifts gantry's slow dispersion (the sizing's
// rate error) by the step window's whole squared error; gantry-disp-recover
// clips that window's sample at dispRecoverClip times the estimate, so
// its estimate rises less and, once the windows at the new level are
// calm, falls back below gantry's. On a constant rate, where no window
// comes near the clip, the two estimates are the same.
func TestDispersionRecoversAfterAStepOnlyInTheVariant(t *testing.T) {
	step := 3 * time.Minute
	before, g, v := stepFrom20To60(t, "gantry-disp-recover", step, step+15*time.Second)
	t.Logf("slow dispersion before %.2f, after the step: gantry %.2f, variant %.2f", before.dispSlow, g.dispSlow, v.dispSlow)
	if g.dispSlow < before.dispSlow+5 {
		t.Fatalf("gantry's slow dispersion %.2f before the step, %.2f after: want the step in it", before.dispSlow, g.dispSlow)
	}
	if lift := v.dispSlow - before.dispSlow; lift <= 0 || lift > 2*slowDispersionAlpha*dispRecoverClip*max(before.dispSlow, 1) {
		t.Errorf("variant's slow dispersion %.2f before the step, %.2f after: want a lift of at most two clipped samples", before.dispSlow, v.dispSlow)
	}
	_, g, v = stepFrom20To60(t, "gantry-disp-recover", step, step+5*time.Minute)
	if v.dispSlow >= g.dispSlow {
		t.Errorf("5 min after the step: variant %.2f, gantry %.2f: want the variant's lower", v.dispSlow, g.dispSlow)
	}
	flat := func(time.Duration) float64 { return 20 }
	a, _ := poissonRunAs(t, "gantry", 6, step, flat)
	b, _ := poissonRunAs(t, "gantry-disp-recover", 6, step, flat)
	if a.dispSlow != b.dispSlow {
		t.Errorf("constant rate: slow dispersion %.3f against %.3f, want the same", a.dispSlow, b.dispSlow)
	}
}
