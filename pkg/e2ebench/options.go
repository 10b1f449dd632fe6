// Package e2ebench is PREEMPT-FaaS's RQ2 on Gantry: the client-side
// latency of a critical function served through the gateway with the
// Kubernetes backend, whose load needs a scale-up, while the control plane
// meets the orchestration benchmark's create/delete churn. It runs once
// with the function as a Deployment reconciled by the real
// kube-controller-manager (vanilla) and once as an RTResource reconciled
// by the in-process Gantry controller (gantry), on the local control
// plane with one process node (the function's pods are real processes)
// and kwok nodes (the churn's pods).
package e2ebench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/orchbench"
	"gantry.dev/gantry/pkg/rtcontroller"
)

// Orchestrators, as orchbench names its controllers.
const (
	Vanilla = orchbench.Vanilla // a Deployment, the real kube-controller-manager
	Gantry  = orchbench.Gantry  // an RTResource, the Gantry controller
)

// Orchestrators lists both in report order.
var Orchestrators = []string{Vanilla, Gantry}

// Bounds on the flags, so a typo cannot run for hours or flood the machine.
const (
	MaxRate     = 500.0
	MaxDuration = 30 * time.Minute
	MaxBurst    = 500
	MaxScale    = 20
	MaxSLO      = time.Minute
	MaxNodes    = 20
)

// DefaultCommand is the function's container command, run by the process
// node under /bin/sh -c: the model-replay function with sentiment's
// service time (25 ms + 11 ms per KB), which sleeps, so more instances add
// capacity even on a small machine.
const DefaultCommand = "gantry fn replay --app sentiment-analysis --function sentiment --seed 1"

// Options configures a run.
type Options struct {
	// Program is the binary the process node runs for "gantry" (the
	// gantry binary itself); required.
	Program string
	// Command is the function's container command (DefaultCommand); Env
	// is added to its environment.
	Command string
	Env     map[string]string
	// Nodes is the kwok nodes that hold the churn's pods.
	Nodes int
	// CRDPath and ConfigDir are what orchbench installs for the Gantry
	// controller; Controller is its configuration.
	CRDPath    string
	ConfigDir  string
	Controller rtcontroller.AppConfig

	Orchestrators []string
	Mode          string // orchbench.ModeContinuous or ModeInterval
	Burst         int
	// IntervalPeriod separates bursts in interval mode.
	IntervalPeriod time.Duration
	// Rate is the open-loop Poisson arrival rate, requests/s, for
	// Duration; Size is every request's input size in KB.
	Rate     float64
	Duration time.Duration
	Size     float64
	// MaxScale is K: the autoscaler may scale the function from 1 to K.
	MaxScale int
	SLO      time.Duration
	// Criticality is the function's (0..99), as its RTResource's.
	Criticality int
	Seed        uint64

	// Progress receives status lines; nil is silent.
	Progress io.Writer
}

// DefaultOptions is one full run: continuous churn at burst 20, 40
// requests/s of about 70 ms each (three instances' worth) for 90 s.
func DefaultOptions() Options {
	return Options{
		Command:        DefaultCommand,
		Nodes:          2,
		ConfigDir:      "config",
		Orchestrators:  slices.Clone(Orchestrators),
		Mode:           orchbench.ModeContinuous,
		Burst:          20,
		IntervalPeriod: 10 * time.Second,
		Rate:           40,
		Duration:       90 * time.Second,
		Size:           4,
		MaxScale:       6,
		SLO:            250 * time.Millisecond,
		Criticality:    10,
		Seed:           1,
	}
}

// Quick is --quick: continuous churn at burst 20, 45 s of load for each
// orchestrator, under five minutes with cached binaries.
func (o Options) Quick() Options {
	o.Orchestrators = slices.Clone(Orchestrators)
	o.Mode, o.Burst = orchbench.ModeContinuous, 20
	o.Duration = 45 * time.Second
	return o
}

// Validate reports options a run cannot use.
func (o Options) Validate() error {
	switch {
	case o.Program == "":
		return fmt.Errorf("the program the process node runs for gantry is not set")
	case o.Command == "":
		return fmt.Errorf("the function's command is empty")
	case o.Nodes < 1 || o.Nodes > MaxNodes:
		return fmt.Errorf("nodes must be in 1..%d, got %d", MaxNodes, o.Nodes)
	case len(o.Orchestrators) == 0:
		return fmt.Errorf("need at least one orchestrator")
	case !slices.Contains(orchbench.Modes, o.Mode):
		return fmt.Errorf("mode must be one of %v, got %q", orchbench.Modes, o.Mode)
	case o.Burst < 1 || o.Burst > MaxBurst:
		return fmt.Errorf("burst must be in 1..%d, got %d", MaxBurst, o.Burst)
	case o.IntervalPeriod < 100*time.Millisecond || o.IntervalPeriod > time.Hour:
		return fmt.Errorf("interval period must be in 100ms..1h, got %v", o.IntervalPeriod)
	case !(o.Rate > 0 && o.Rate <= MaxRate):
		return fmt.Errorf("rate must be in (0, %g] requests/s, got %g", MaxRate, o.Rate)
	case o.Duration < time.Second || o.Duration > MaxDuration:
		return fmt.Errorf("duration must be in 1s..%v, got %v", MaxDuration, o.Duration)
	case !(o.Size >= 1 && o.Size <= 64):
		return fmt.Errorf("size must be in 1..64 KB, got %g", o.Size)
	case o.MaxScale < 2 || o.MaxScale > MaxScale:
		return fmt.Errorf("max scale must be in 2..%d (the run needs a scale-up), got %d", MaxScale, o.MaxScale)
	case o.SLO < time.Millisecond || o.SLO > MaxSLO:
		return fmt.Errorf("slo must be in 1ms..%v, got %v", MaxSLO, o.SLO)
	case o.Criticality < 0 || o.Criticality > 99:
		return fmt.Errorf("criticality must be in 0..99, got %d", o.Criticality)
	}
	for _, c := range o.Orchestrators {
		if !slices.Contains(Orchestrators, c) {
			return fmt.Errorf("unknown orchestrator %q (known: %v)", c, Orchestrators)
		}
	}
	return nil
}
