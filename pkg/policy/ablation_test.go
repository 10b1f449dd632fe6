package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The burst rules' halves come off and on one at a time for the
// ablation table (docs/simulator.md): gantry alarms and adds no warm
// buffer (since 2 December, docs/experiments.md "The bursty cells:
// two detectors, no warm buffer"), gantry-warm-buffer alarms and adds
// the buffer, gantry-no-burst-alarm does neither, on a load that steps
// between 20/s and 60/s every 10 s; the rises are counted either way.
func TestBurstAblationsTurnOffOneHalfEach(t *testing.T) {
	type got struct {
		alarms int64
		buffer float64
		rises  int
	}
	run := func(name string) got {
		c := mustNew(t, name, spec(FunctionSpec{Name: "f", SLO: time.Second})).(*core)
		rng := rand.New(rand.NewPCG(1, 7))
		views, out := make([]View, 1), make([]Decision, 1)
		var at, next time.Duration
		for at < 4*time.Minute {
			if at >= next {
				c.Plan(t0.Add(next), views, out)
				next += 500 * ms
				continue
			}
			c.Arrive(t0.Add(at), 0, 50, views[0].Counts)
			if err := c.Complete(0, 50, 200*ms, 50); err != nil {
				t.Fatal(err)
			}
			rate := 20.0
			if (at/(10*time.Second))%2 == 1 {
				rate = 60
			}
			at += time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
		}
		return got{c.burst.alarms, c.warmBuffer(), len(c.burst.rises)}
	}
	all, noAlarm, gantry := run("gantry-warm-buffer"), run("gantry-no-burst-alarm"), run("gantry")
	if all.alarms == 0 || all.buffer <= 0 {
		t.Fatalf("gantry-warm-buffer: %d alarms and a warm buffer of %.2f/s on a stepping load, want both", all.alarms, all.buffer)
	}
	if noAlarm.alarms != 0 || noAlarm.buffer != 0 {
		t.Errorf("gantry-no-burst-alarm: %d alarms, buffer %.2f/s; want neither", noAlarm.alarms, noAlarm.buffer)
	}
	if gantry.alarms == 0 || gantry.buffer != 0 || gantry.rises < minRiseSamples {
		t.Errorf("gantry: %d alarms, buffer %.2f/s over %d rises; want alarms and no buffer", gantry.alarms, gantry.buffer, gantry.rises)
	}
}
