package policy

import "testing"

// The trend rule: on a steady ramp gantry sizes for the rate the ramp
// reaches, above what the EWMA alone predicts (gantry-no-trend) once the
// trend is told apart from noise (a window may still size one lower: the
// smaller prediction error narrows the margin for the rate's error), and
// on a constant Poisson load the significance gate keeps the sizing
// exactly what it is without the rule.
func TestTrendSizesRampsAndLeavesAConstantRateAlone(t *testing.T) {
	const windows = 24
	ramp, flat := make([]float64, windows), make([]float64, windows)
	for i := range ramp {
		ramp[i], flat[i] = 200+3*float64(i), 200
	}
	with, without := sizeOver(t, "gantry", ramp), sizeOver(t, "gantry-no-trend", ramp)
	t.Logf("ramp: with %v, without %v", with, without)
	sum, sumWithout := 0, 0
	for i := windows / 4; i < windows; i++ {
		sum += with[i]
		sumWithout += without[i]
	}
	if sum <= sumWithout {
		t.Errorf("ramp: %d containers over the last %d windows with the trend, %d without", sum, 3*windows/4, sumWithout)
	}
	with, without = sizeOver(t, "gantry", flat), sizeOver(t, "gantry-no-trend", flat)
	for i := range flat {
		if with[i] != without[i] {
			t.Errorf("constant rate, window %d: sized %d with the trend, %d without", i, with[i], without[i])
		}
	}
}
