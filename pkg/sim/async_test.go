package sim

import (
	"context"
	"errors"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/trace"
	"gantry.dev/gantry/pkg/workload"
)

// Async requests are drawn at the configured share, measured against the
// async deadline apart from the synchronous ones, and leave the
// synchronous requests' SLO no worse than a run with none under a
// platform with room for all.
func TestAsyncShareIsMeasuredAgainstTheAsyncDeadline(t *testing.T) {
	app := workload.App{Name: "a", SLO: time.Second, MinSize: 1, MaxSize: 10,
		Chain: []workload.Function{{Name: "f", ExecMean: func(float64) time.Duration { return 100 * time.Millisecond },
			OutputMean: func(x float64) float64 { return x }}}}
	per := make([]float64, 60)
	for i := range per {
		per[i] = 50
	}
	cfg := Config{App: app, Dist: dist(t, "uniform"), Trace: trace.Trace{Name: "flat", PerSecond: per},
		Policy: "gantry", Seed: 7, AsyncShare: 0.3, NoBound: true}
	res, err := RunContext(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Async == nil {
		t.Fatal("no async result with AsyncShare 0.3")
	}
	share := float64(res.Async.Requests) / float64(res.Requests)
	if share < 0.25 || share > 0.35 {
		t.Errorf("async share %.3f of %d requests, want about 0.3", share, res.Requests)
	}
	if res.Async.Deadline != policy.DefaultAsyncDeadline || res.Async.SLOCompliance < 0.99 {
		t.Errorf("async deadline %v, compliance %.3f: want the default deadline, nearly all met", res.Async.Deadline, res.Async.SLOCompliance)
	}
	cfg.AsyncShare = 0
	none, err := RunContext(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if none.Async != nil {
		t.Errorf("async result %+v without async requests", none.Async)
	}
}

func TestAsyncConfigIsValidated(t *testing.T) {
	app := workload.App{Name: "a", SLO: 2 * time.Second, MinSize: 1, MaxSize: 10,
		Chain: []workload.Function{{Name: "f", ExecMean: func(float64) time.Duration { return time.Millisecond },
			OutputMean: func(x float64) float64 { return x }}}}
	for _, c := range []Config{{AsyncShare: 1.5}, {AsyncShare: -0.1}, {AsyncShare: 0.5, AsyncDeadline: time.Second}} {
		c.App, c.Dist, c.Policy = app, dist(t, "uniform"), "gantry"
		c.Trace = trace.Trace{Name: "t", PerSecond: []float64{1}}
		if _, err := RunContext(context.Background(), c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("share %v, deadline %v: err %v, want ErrBadConfig", c.AsyncShare, c.AsyncDeadline, err)
		}
	}
}
