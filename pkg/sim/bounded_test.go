package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/policy"
	"gantry.dev/gantry/pkg/policy/policytest"
)

// A cancelled context stops the run at the next tick with the cause, not
// after the whole trace.
func TestRunContextStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := Config{App: paperApp(t, "image-compression"), Dist: dist(t, "heavy"),
		Trace: constantTrace(100, time.Hour), Policy: "gantry", Seed: 1}
	var stoppedAt time.Duration
	cfg.Progress = func(simulated, _ time.Duration) {
		if simulated >= 30*time.Second && stoppedAt == 0 {
			stoppedAt = simulated
			cancel()
		}
	}
	_, err := RunContext(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "stopped after 30") {
		t.Errorf("err %q does not say where the run stopped (cancelled at %v)", err, stoppedAt)
	}
}

// An overloaded function sheds at its queue bound, as the live gateway
// answers 429: rejected requests are counted, are SLO misses, and every
// other request completes.
func TestOverloadIsShedAtTheQueueBound(t *testing.T) {
	app := flatApp(100*time.Millisecond, time.Second)
	cfg := Config{App: app, Dist: dist(t, "uniform"), Trace: constantTrace(100, time.Minute),
		Custom: policytest.Fixed(2), Seed: 1, MaxQueue: 50}
	var completed int64
	cfg.OnComplete = func(int64, time.Duration) { completed++ }
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 2 containers serve 20 requests/s of the 100 offered.
	if res.Rejected < res.Requests/2 || res.Rejected != res.Functions[0].Rejected {
		t.Fatalf("rejected %d of %d (function: %d), want most", res.Rejected, res.Requests, res.Functions[0].Rejected)
	}
	if completed+res.Rejected != res.Requests {
		t.Errorf("%d completed + %d rejected != %d requests", completed, res.Rejected, res.Requests)
	}
	if max := float64(completed) / float64(res.Requests); res.SLOCompliance > max {
		t.Errorf("compliance %v counts rejected requests as met (at most %v)", res.SLOCompliance, max)
	}
	// The bound holds the wait: at most 50 queued ahead at 20/s.
	if res.P99 > 2*time.Second+app.SLO {
		t.Errorf("p99 %v: the queue grew past its bound", res.P99)
	}
	cfg.MaxQueue = -1
	unbounded, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if unbounded.Rejected != 0 || unbounded.P99 < 10*time.Second {
		t.Errorf("unbounded queue: %d rejected, p99 %v", unbounded.Rejected, unbounded.P99)
	}
}

// detailedFixed is Fixed that asks for the queue's contents and records
// the longest it is shown.
type detailedFixed struct {
	policy.Policy
	maxShown, maxQueued int
}

func (p *detailedFixed) Caps() policy.Caps { return policy.Caps{Detailed: true} }

func (p *detailedFixed) Plan(now time.Time, views []policy.View, out []policy.Decision) {
	for _, v := range views {
		p.maxShown = max(p.maxShown, len(v.Queue))
		p.maxQueued = max(p.maxQueued, v.Queued)
	}
	p.Policy.Plan(now, views, out)
}

// A policy that plans on the queue sees at most viewCap requests of it, so
// a tick costs the same whatever the backlog; Queued still counts them all.
func TestDetailedViewIsCappedWhateverTheBacklog(t *testing.T) {
	p := &detailedFixed{Policy: policytest.Fixed(1)}
	cfg := Config{App: flatApp(100*time.Millisecond, time.Second), Dist: dist(t, "uniform"),
		Trace: constantTrace(200, time.Minute), Custom: p, Seed: 1, Nodes: 1, CoresPerNode: 8, MaxQueue: MaxQueueBound}
	if _, err := Run(cfg); err != nil {
		t.Fatal(err)
	}
	if p.maxQueued <= DefaultMaxQueue || p.maxShown != DefaultMaxQueue {
		t.Errorf("queued up to %d, shown up to %d; want a backlog past %d and a view of exactly %d",
			p.maxQueued, p.maxShown, DefaultMaxQueue, DefaultMaxQueue)
	}
}

func TestConfigBeyondTheBoundsIsRejected(t *testing.T) {
	good := Config{App: paperApp(t, "image-compression"), Dist: dist(t, "heavy"), Trace: constantTrace(5, time.Minute), Policy: "atoll"}
	for name, mutate := range map[string]func(c *Config){
		"1e9 nodes":        func(c *Config) { c.Nodes = 1e9 },
		"1e6 cores a node": func(c *Config) { c.CoresPerNode = 1e6 },
		"cold start 1000h": func(c *Config) { c.ColdStart = 1000 * time.Hour },
		"queue 1e7":        func(c *Config) { c.MaxQueue = 1e7 },
		"rate 1e308":       func(c *Config) { c.Trace = constantTrace(1e308, time.Second) },
	} {
		cfg := good
		mutate(&cfg)
		if _, err := Run(cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("%s: err = %v, want ErrBadConfig", name, err)
		}
	}
}
