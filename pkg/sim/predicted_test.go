package sim

import (
	"errors"
	"testing"
	"time"
)

// The frontier's knobs reshape only what oracle-predicted is told of the
// rate: each second becomes the highest within the lead, times 1 +
// headroom; any other policy refuses them, and out-of-range values are
// refused.
func TestPredictedRateLeadAndHeadroom(t *testing.T) {
	cfg := Config{PredictedHeadroom: 0.5, PredictedLead: 1500 * time.Millisecond}
	cfg.Trace.PerSecond = []float64{10, 10, 10, 40, 10}
	got := predictedRate(&cfg)
	want := []float64{15, 60, 60, 60, 15} // a 1.5 s lead looks 2 whole seconds ahead
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("second %d: %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
	plain := Config{}
	plain.Trace.PerSecond = cfg.Trace.PerSecond
	if p := predictedRate(&plain); &p[0] != &plain.Trace.PerSecond[0] {
		t.Error("no lead and no headroom should tell the trace's own rate")
	}
	for _, c := range []Config{
		{Policy: "gantry", PredictedHeadroom: 0.1},
		{Policy: "oracle", PredictedLead: time.Second},
		{Policy: "oracle-predicted", PredictedHeadroom: -1},
		{Policy: "oracle-predicted", PredictedHeadroom: 11},
		{Policy: "oracle-predicted", PredictedLead: 2 * time.Minute},
	} {
		if err := c.validatePredicted(); !errors.Is(err, ErrPredicted) {
			t.Errorf("%+v: %v, want ErrPredicted", c, err)
		}
	}
	if err := (&Config{Policy: "oracle-predicted", PredictedHeadroom: -0.5, PredictedLead: time.Second}).validatePredicted(); err != nil {
		t.Errorf("a valid lead and headroom: %v", err)
	}
}
