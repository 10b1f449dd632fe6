package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The two halves of the burst rules come off one at a time for the
// ablation table (docs/simulator.md): gantry-no-burst-alarm keeps the warm
// buffer and never alarms, gantry-no-warm-buffer alarms and adds no
// buffer, on a load that steps between 20/s and 60/s every 10 s.
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
	all, noAlarm, noBuffer := run("gantry"), run("gantry-no-burst-alarm"), run("gantry-no-warm-buffer")
	if all.alarms == 0 || all.buffer <= 0 {
		t.Fatalf("gantry: %d alarms and a warm buffer of %.2f/s on a stepping load, want both", all.alarms, all.buffer)
	}
	if noAlarm.alarms != 0 || noAlarm.buffer != all.buffer {
		t.Errorf("gantry-no-burst-alarm: %d alarms, buffer %.2f/s; want none and gantry's %.2f/s", noAlarm.alarms, noAlarm.buffer, all.buffer)
	}
	if noBuffer.alarms == 0 || noBuffer.buffer != 0 || noBuffer.rises < minRiseSamples {
		t.Errorf("gantry-no-warm-buffer: %d alarms, buffer %.2f/s over %d rises; want alarms and no buffer", noBuffer.alarms, noBuffer.buffer, noBuffer.rises)
	}
}
