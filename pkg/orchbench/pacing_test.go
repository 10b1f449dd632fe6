package orchbench

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// countingTarget counts the churn it is sent; onCreate, if set, runs on
// every create (a slow API server, on a fake clock).
type countingTarget struct {
	created, deleted atomic.Int64
	onCreate         func(name string)
}

func (c *countingTarget) createService(context.Context, string, int32) (int64, error) { return 1, nil }
func (c *countingTarget) scale(context.Context, string, int) (int64, error)           { return 1, nil }
func (c *countingTarget) createChurn(_ context.Context, name string) error {
	if c.onCreate != nil {
		c.onCreate(name)
	}
	c.created.Add(1)
	return nil
}
func (c *countingTarget) deleteChurn(context.Context, string) error {
	c.deleted.Add(1)
	return nil
}

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// waitForPacer returns once the pacer waits on the fake clock.
func waitForPacer(t *testing.T, fc *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // generous: a loaded machine
	for !fc.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the pacer never waited for its next burst")
		}
		time.Sleep(time.Millisecond)
	}
}

// runLoop runs churnLoop on a fake clock in the background.
func runLoop(ctx context.Context, fc *clocktesting.FakeClock, tg target, c Case, rate float64, pace *churnPace) <-chan int {
	done := make(chan int, 1)
	go func() {
		done <- churnLoop(context.Background(), ctx, tg, c, 0, pacing{period: 10 * time.Second, rate: rate, pace: pace, clock: fc})
	}()
	return done
}

func TestPacedContinuousChurnKeepsItsGrid(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	tg := &countingTarget{}
	ctx, cancel := context.WithCancel(context.Background())
	var pace churnPace
	// 10 objects a burst at 100 objects/s: a burst every 100 ms.
	done := runLoop(ctx, fc, tg, Case{ModeContinuous, 10}, 100, &pace)
	for i := range 5 {
		waitForPacer(t, fc)
		if got, want := tg.created.Load(), int64(10*(i+1)); got != want {
			t.Fatalf("after %d periods: %d created, want %d (one burst a period, no more)", i, got, want)
		}
		fc.Step(100 * time.Millisecond)
	}
	waitForPacer(t, fc)
	fc.Step(50 * time.Millisecond)
	cancel()
	created := <-done
	if created != 60 || tg.deleted.Load() != 60 {
		t.Errorf("created %d, deleted %d; want 60 and 60 (6 bursts, each deleted)", created, tg.deleted.Load())
	}
	want := churnPace{elapsed: 550 * time.Millisecond, bursts: 6, target: 100, dueObjects: 60}
	if pace != want {
		t.Errorf("pace %+v, want %+v", pace, want)
	}
}

// A burst the API server took 350 ms for (three periods) is made up at
// once: the next bursts go back to back until the grid is met again, and
// the lag is recorded.
func TestPacerCatchesUpAfterASlowBurst(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	tg := &countingTarget{onCreate: func(name string) {
		if strings.HasSuffix(name, "-0-1-0") { // round 1's first object
			fc.Step(350 * time.Millisecond)
		}
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var pace churnPace
	done := runLoop(ctx, fc, tg, Case{ModeContinuous, 10}, 100, &pace)
	waitForPacer(t, fc)
	fc.Step(100 * time.Millisecond) // round 1 at 100 ms takes until 450 ms
	waitForPacer(t, fc)
	// Rounds 2 and 3 (due at 200 and 300 ms) went at 450 ms, round 4
	// (due at 400 ms) too; round 5 waits for 500 ms.
	if got := tg.created.Load(); got != 50 {
		t.Fatalf("%d created after the slow burst, want 50 (the grid caught up)", got)
	}
	fc.Step(100 * time.Millisecond)
	waitForPacer(t, fc)
	cancel()
	created := <-done
	want := churnPace{elapsed: 550 * time.Millisecond, bursts: 6, late: 2, maxLag: 250 * time.Millisecond, target: 100, dueObjects: 60}
	if created != 60 || pace != want {
		t.Errorf("created %d, pace %+v; want 60, %+v", created, pace, want)
	}
}

// An API server that takes every burst twice as long as the grid allows
// leaves the arm short, and the run says so.
func TestPacerReportsAShortfall(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rounds := 0
	tg := &countingTarget{onCreate: func(name string) {
		if strings.HasSuffix(name, "-0") { // each round's first object
			fc.Step(200 * time.Millisecond)
			if rounds++; rounds == 5 {
				cancel()
			}
		}
	}}
	var pace churnPace
	created := <-runLoop(ctx, fc, tg, Case{ModeContinuous, 10}, 100, &pace)
	want := churnPace{elapsed: time.Second, bursts: 5, late: 4, maxLag: 400 * time.Millisecond, target: 100, dueObjects: 100}
	if created != 50 || pace != want {
		t.Fatalf("created %d, pace %+v; want 50, %+v", created, pace, want)
	}
	r := &runner{churned: map[churnKey]*Churn{}}
	r.addChurnPace(Gantry, Case{ModeContinuous, 10}, created, pace)
	r.addChurnPace(Vanilla, Case{ModeContinuous, 10}, 100, churnPace{elapsed: time.Second, bursts: 10, target: 100, dueObjects: 100})
	ch := r.churned[churnKey{Gantry, Case{ModeContinuous, 10}}]
	if ch.Shortfall != 0.5 || ch.PerSecond != 50 || ch.LateBursts != 4 || ch.MaxLagMs != 400 {
		t.Errorf("churn %+v: want shortfall 0.5, 50 objects/s, 4 late bursts, max lag 400 ms", ch)
	}
	warn := churnWarnings([]Churn{*r.churned[churnKey{Vanilla, Case{ModeContinuous, 10}}], *ch})
	if len(warn) != 2 || !strings.Contains(warn[0], "gantry continuous/10: created 50 of the 100 objects") ||
		!strings.Contains(warn[1], "unequal interference") {
		t.Errorf("warnings %q: want gantry's shortfall and the unequal arms", warn)
	}
}

// The interval mode keeps the paper's burst every period.
func TestIntervalChurnIsABurstEveryPeriod(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	tg := &countingTarget{}
	ctx, cancel := context.WithCancel(context.Background())
	var pace churnPace
	done := runLoop(ctx, fc, tg, Case{ModeInterval, 20}, 0, &pace)
	for i := range 3 {
		waitForPacer(t, fc)
		if got := tg.created.Load(); got != int64(20*(i+1)) {
			t.Fatalf("after %d periods: %d created, want %d", i, got, 20*(i+1))
		}
		fc.Step(5 * time.Second)
		waitForPacer(t, fc)
		if got := tg.created.Load(); got != int64(20*(i+1)) {
			t.Fatalf("half a period later: %d created, want still %d", got, 20*(i+1))
		}
		fc.Step(5 * time.Second)
	}
	waitForPacer(t, fc) // the fourth burst went at 30 s
	fc.Step(time.Second)
	cancel()
	<-done
	if pace.target != 2 || pace.dueObjects != 80 || pace.bursts != 4 || pace.late != 0 {
		t.Errorf("pace %+v: want 2 objects/s, 80 due, 4 bursts, none late", pace)
	}
}

func TestUnpacedContinuousChurnGoesBackToBack(t *testing.T) {
	tg := &countingTarget{}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var pace churnPace
	if created := churnLoop(context.Background(), ctx, tg, Case{Mode: ModeContinuous, Burst: 10}, 0, pacing{period: time.Second, pace: &pace}); created < 200 {
		t.Errorf("unpaced churn created only %d objects in 100 ms against an instant target", created)
	}
	if pace.target != 0 || pace.dueObjects != 0 {
		t.Errorf("pace %+v: an unpaced loop has no target", pace)
	}
}

func TestChurnWarningsNameUnequalArms(t *testing.T) {
	paced := func(ctl string, objects int, perS float64) Churn {
		return Churn{Controller: ctl, Mode: ModeContinuous, Burst: 30, Objects: objects, PerSecond: perS, TargetPerSecond: 30, DueObjects: 900}
	}
	if w := churnWarnings([]Churn{paced(Vanilla, 900, 30), paced(Gantry, 880, 29.3)}); len(w) != 0 {
		t.Errorf("arms within 5%% of each other and of the grid: warnings %q", w)
	}
	back := []Churn{{Controller: Vanilla, Mode: ModeContinuous, Burst: 30, Objects: 5700, PerSecond: 178},
		{Controller: Gantry, Mode: ModeContinuous, Burst: 30, Objects: 2760, PerSecond: 86}}
	if w := churnWarnings(back); len(w) != 1 || !strings.Contains(w[0], "not paced") || !strings.Contains(w[0], "vanilla 5700 objects, 178.0/s") {
		t.Errorf("back-to-back arms: warnings %q, want one naming both rates", w)
	}
}
