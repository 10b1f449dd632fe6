package liverun

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"gantry.dev/gantry/examples/functions"
	"gantry.dev/gantry/pkg/backend"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/sim"
	"gantry.dev/gantry/pkg/stack"
	"gantry.dev/gantry/pkg/workload"
)

// The replay stack gives the live policy what a simulation of the app
// gives it: the simulator's per-function SLOs, the app's SLO and size
// range, each function's size sensitivity, and the replay of its models.
func TestReplayStackMatchesTheSimulator(t *testing.T) {
	for _, name := range workload.Names() {
		t.Run(name, func(t *testing.T) {
			app, err := workload.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ReplayStack(app, 1500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			slos := sim.FunctionSLOs(app)
			if len(s.Apps) != 1 || s.Apps[0].Name != app.Name || s.Apps[0].SLO != app.SLO {
				t.Fatalf("apps %+v, want one app %s with SLO %v", s.Apps, app.Name, app.SLO)
			}
			if len(s.Functions) != len(app.Chain) {
				t.Fatalf("%d functions, want %d", len(s.Functions), len(app.Chain))
			}
			for i, f := range s.Functions {
				want := app.Chain[i]
				if f.Name != want.Name || s.Apps[0].Functions[i] != want.Name {
					t.Errorf("function %d is %q (app chains %q), want %q", i, f.Name, s.Apps[0].Functions[i], want.Name)
				}
				if f.SLO != slos[i] {
					t.Errorf("%s: SLO %v, the simulator's split gives %v", f.Name, f.SLO, slos[i])
				}
				if cmd := fmt.Sprintf("gantry fn replay --app %s --function %d", app.Name, i); f.Command != cmd {
					t.Errorf("%s: command %q, want %q", f.Name, f.Command, cmd)
				}
				if f.SizeHeader != functions.HeaderInputSize || f.SizeSensitive != want.SizeSensitive {
					t.Errorf("%s: size header %q sensitive %v, want %q %v", f.Name, f.SizeHeader, f.SizeSensitive, functions.HeaderInputSize, want.SizeSensitive)
				}
				if f.Concurrency != 1 || f.ColdStart != 1500*time.Millisecond || f.MaxScale != stack.MaxInstances {
					t.Errorf("%s: concurrency %d, cold start %v, max scale %d", f.Name, f.Concurrency, f.ColdStart, f.MaxScale)
				}
			}
			if first := s.Functions[0]; first.MinSize != app.MinSize || first.MaxSize != app.MaxSize {
				t.Errorf("first function's sizes [%v, %v], want the app's [%v, %v]", first.MinSize, first.MaxSize, app.MinSize, app.MaxSize)
			}
			budgets := deployedBudgets(t, s)
			var cum time.Duration
			for i, slo := range slos {
				cum += slo
				// The dispatcher rescales the declared SLOs to the app's;
				// the simulator's split sums to it within rounding.
				if d := budgets[i] - cum; d < -time.Microsecond || d > time.Microsecond {
					t.Errorf("dispatcher's budget up to %s is %v, the simulator's %v", s.Functions[i].Name, budgets[i], cum)
				}
			}
		})
	}
}

// deployedBudgets deploys s on a dispatcher and returns its app's
// cumulative SLO budgets, as the gateway sets deadlines from them.
func deployedBudgets(t *testing.T, s *stack.Stack) []time.Duration {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{}, nopBackend{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	if err := d.Load(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	info, ok := d.App(s.Apps[0].Name)
	if !ok {
		t.Fatal("app not deployed")
	}
	if info.SLO != s.Apps[0].SLO {
		t.Errorf("deployed app SLO %v, want %v", info.SLO, s.Apps[0].SLO)
	}
	return info.Budget
}

// nopBackend starts nothing: the budget test only deploys.
type nopBackend struct{}

func (nopBackend) Attach(backend.Events)                        {}
func (nopBackend) Deploy(context.Context, stack.Function) error { return nil }
func (nopBackend) Undeploy(context.Context, string) error       { return nil }
func (nopBackend) Start(string, int)                            {}
func (nopBackend) Stop(backend.Instance)                        {}
func (nopBackend) Close(context.Context) error                  { return nil }

// Downstream size ranges are valid even where an output is constant.
func TestOutputRangeIsValid(t *testing.T) {
	for _, name := range workload.Names() {
		app, _ := workload.Lookup(name)
		lo, hi := app.MinSize, app.MaxSize
		for _, f := range app.Chain {
			lo, hi = outputRange(f, lo, hi)
			if !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
				t.Errorf("%s/%s: output range [%v, %v]", name, f.Name, lo, hi)
			}
		}
	}
}

// A short replay run end to end: the calibration, the app's chain of
// replay instances behind the gateway, every request answered, the counts
// adding up and the cold starts measured.
func TestReplayRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{Replay: true, App: "email-categorization", Policy: "gantry", Rate: 3,
		Duration: 3 * time.Second, Warmup: -1, Seed: 7, Tick: 100 * time.Millisecond, InstanceLog: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests == 0 || rep.Errors != 0 {
		t.Fatalf("requests %d, errors %d %v: want some requests and no error", rep.Requests, rep.Errors, rep.ErrorsByKind)
	}
	if rep.Requests != rep.load.OK+rep.Errors {
		t.Errorf("requests %d != ok %d + errors %d", rep.Requests, rep.load.OK, rep.Errors)
	}
	for _, f := range rep.Functions {
		// Every request runs every function of the chain exactly once.
		if f.Completed != rep.Requests || f.Crashes != 0 || f.StartFailures != 0 {
			t.Errorf("%s: completed %d of %d requests, %d crashes, %d start failures", f.Name, f.Completed, rep.Requests, f.Crashes, f.StartFailures)
		}
	}
	if rep.SLOMs != float64(mustApp(t, "email-categorization").SLO.Milliseconds()) {
		t.Errorf("compliance measured against %v ms, want the app's SLO", rep.SLOMs)
	}
	facts := rep.replay
	if facts == nil || len(facts.coldStarts) == 0 || facts.calib.ColdStart <= 0 || facts.calib.Overhead <= 0 {
		t.Fatalf("replay facts %+v: want cold starts and a calibration", facts)
	}
	if int64(len(facts.coldStarts)) > rep.ContainersSpawned {
		t.Errorf("%d instances ready, %d spawned", len(facts.coldStarts), rep.ContainersSpawned)
	}
}

func mustApp(t *testing.T, name string) workload.App {
	t.Helper()
	app, err := workload.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return app
}

type testLog struct{ t *testing.T }

func (w testLog) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
