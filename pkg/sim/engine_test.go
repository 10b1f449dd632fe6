package sim

import (
	"context"
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/policy/policytest"
	"gantry.dev/gantry/pkg/workload"
)

// ordered is Fixed with another queue order.
type ordered struct {
	policy.Policy
	order policy.Order
}

func (o ordered) Order() policy.Order               { return o.order }
func (ordered) Estimate(int, float64) time.Duration { return 100 * time.Millisecond }
func (o ordered) Name() string                      { return "ordered" }

func flatApp(exec time.Duration, slo time.Duration) workload.App {
	fn := workload.Function{Name: "flat", SizeSensitive: false,
		ExecMean: func(float64) time.Duration { return exec }, OutputMean: func(s float64) float64 { return s }}
	return workload.App{Name: "flat", Chain: []workload.Function{fn}, MinSize: 1, MaxSize: 1, SLO: slo}
}

// Under LeastSlack a request that can no longer make its deadline waits
// behind those that still can.
func TestLeastSlackServesRequestsThatCanStillMeetTheirDeadlineFirst(t *testing.T) {
	cfg := Config{App: flatApp(100*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
		Trace: constantTrace(1, time.Second), Custom: ordered{policytest.Fixed(1), policy.LeastSlack}}
	cfg.applyDefaults()
	e, err := newEngine(context.Background(), cfg, cfg.Custom)
	if err != nil {
		t.Fatal(err)
	}
	rt := &e.fns[0]
	add := func(arrival int64) int32 {
		r := e.newRequest()
		e.reqs[r].arrival, e.reqs[r].enq, e.reqs[r].pred = arrival, arrival, int64(100*time.Millisecond)
		rt.queue.Push(e.entry(rt, &e.reqs[r]), r)
		return r
	}
	e.now = int64(2 * time.Second)
	late := add(0)                                // deadline 1 s: already missed
	onTime := add(int64(1500 * time.Millisecond)) // deadline 2.5 s: still reachable
	if r, _, _ := rt.queue.Pop(e.now); r != onTime {
		t.Fatalf("ran request %d first, want the one that can still meet its deadline (%d)", r, onTime)
	}
	if r, _, _ := rt.queue.Pop(e.now); r != late {
		t.Fatalf("then ran %d, want the late one %d", r, late)
	}
	if _, _, ok := rt.queue.Pop(e.now); ok {
		t.Fatal("queue should be empty")
	}
}

// A full cluster refuses containers, counts the refusals, and still
// completes every request on the containers it has.
func TestFullClusterRefusesContainersButCompletesEveryRequest(t *testing.T) {
	res, err := Run(Config{App: paperApp(t, "image-compression"), Dist: dist(t, "heavy"),
		Trace: constantTrace(30, time.Minute), Policy: "atoll", Seed: 1, Nodes: 1, CoresPerNode: 4, ColdBoot: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.SpawnFailures == 0 || res.PeakContainers > 4 {
		t.Fatalf("spawn failures %d, peak %v on a 4-core cluster", res.SpawnFailures, res.PeakContainers)
	}
	if res.Functions[0].Requests != res.Requests {
		t.Fatalf("%d of %d requests ran", res.Functions[0].Requests, res.Requests)
	}
}

// The energy model: powered nodes draw idle watts, each live container a
// little, each busy core more. With a fixed pool on one node the total is
// known in closed form from the run's own figures.
func TestEnergyFollowsTheDocumentedModel(t *testing.T) {
	res, err := Run(Config{App: flatApp(50*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
		Trace: constantTrace(10, 10*time.Minute), Custom: policytest.Fixed(3), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	busy := float64(res.Requests) * res.MeanExec.Seconds()
	want := NodeIdleWatts*res.SimulatedSeconds + 3*ContainerIdleWatts*res.SimulatedSeconds + CoreBusyWatts*busy
	if math.Abs(res.EnergyJ-want) > 1e-3*want {
		t.Fatalf("energy %.1f J, model says %.1f J", res.EnergyJ, want)
	}
}

func TestProgressReportsEveryWindow(t *testing.T) {
	var calls int
	var last time.Duration
	_, err := Run(Config{App: flatApp(10*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
		Trace: constantTrace(5, 2*time.Minute), Policy: "gantry", Seed: 1,
		Progress: func(sim, total time.Duration) {
			calls++
			if sim < last || total != 2*time.Minute {
				t.Errorf("progress %v of %v after %v", sim, total, last)
			}
			last = sim
		}})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 10 || last != 2*time.Minute {
		t.Fatalf("%d progress calls, last at %v", calls, last)
	}
}

// Cypress's IS Reordering runs heaviest first within the requests its
// Reactive Scaler has not yet ordered; a heavier request that arrives in a
// later round must not overtake a light one ordered in an earlier round,
// or a steady stream of heavy requests would starve the light ones.
func TestISReorderingRunsHeaviestFirstWithinARoundWithoutStarvingEarlierRounds(t *testing.T) {
	cfg := Config{App: flatApp(100*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
		Trace: constantTrace(1, time.Second), Custom: ordered{policytest.Fixed(1), policy.HeaviestFirst}}
	cfg.applyDefaults()
	e, err := newEngine(context.Background(), cfg, cfg.Custom)
	if err != nil {
		t.Fatal(err)
	}
	rt := &e.fns[0]
	add := func(enq int64, pred time.Duration) int32 {
		r := e.newRequest()
		e.reqs[r].arrival, e.reqs[r].enq, e.reqs[r].pred = enq, enq, int64(pred)
		rt.queue.Push(e.entry(rt, &e.reqs[r]), r)
		return r
	}
	round := int64(policy.RoundLen(cfg.Tick, time.Duration(rt.slo))) // 500 ms: the tick, within half the 1 s SLO
	light := add(0, 10*time.Millisecond)
	heavy := add(round/2, 300*time.Millisecond) // same round, arrived later
	laterHeavy := add(round+1, 900*time.Millisecond)
	for i, want := range []int32{heavy, light, laterHeavy} {
		if r, _, _ := rt.queue.Pop(e.now); r != want {
			t.Fatalf("position %d ran request %d, want %d", i, r, want)
		}
	}
}
