package orchbench

import (
	"fmt"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/knativeinstall"
)

// KnativeOptions configures RQ1 on Knative (Options.Knative).
type KnativeOptions struct {
	// Ingress is Gantry's Knative ingress (host:port) of the --kubeconfig
	// cluster; a local control plane started for the run has its own.
	Ingress string
	// Domain is the cluster's domain for Knative Services.
	Domain string
	// Rate is each service's open-loop request rate (the paper: 5/s,
	// 50/s over 10 services).
	Rate float64
	// ContainerConcurrency is each Service's containerConcurrency (5).
	ContainerConcurrency int
	// MaxScale is each Service's autoscaling.knative.dev/max-scale: a
	// bound on one 2-core machine, where every pod is two processes and a
	// network namespace; 0 leaves Knative's default (no bound).
	MaxScale int
	// FreshServices creates new Services at zero (initial-scale 0) for
	// every iteration and deletes them after it, instead of creating them
	// once and waiting before each iteration for the KPA to scale them to
	// zero, as the paper does: quicker (no 90 s or more of idleness an
	// iteration), but each iteration's Revisions are new. It is the
	// default (docs/knative.md says why).
	FreshServices bool
	// ScaleToZeroGrace, when set, is config-autoscaler's
	// scale-to-zero-grace-period in both arms (Knative's default 30 s):
	// how long the KPA keeps a Revision's last pod after it decided on
	// zero. It does not touch the scale-up decisions (the stable and panic
	// windows stay Knative's); it shortens --fresh-services=false's wait.
	ScaleToZeroGrace time.Duration
	// Function is the example function the Services run, as the image
	// dev.local/gantry-fn:<Function>.
	Function string
	// RequestTimeout bounds one request.
	RequestTimeout time.Duration
	// ContinuousPeriod paces the continuous cases: a burst of N every
	// period, N/period objects/s, in both arms alike (pacer.go); 0 runs
	// them back to back, as fast as each arm's API server takes its own
	// objects, which gives the arms unequal interference (the run warns).
	// --churn-rate, if set, wins. Interval cases keep the paper's burst
	// every IntervalPeriod.
	ContinuousPeriod time.Duration
	// AuditDir, when set, keeps a copy of each arm's API server audit log
	// there (audit-<arm>-<round>.log) before its control plane stops, for
	// reading the writes' timestamps after the run.
	AuditDir string
	// Warmup is how long the interference runs before the traffic starts,
	// so the scale-ups meet a loaded control plane.
	Warmup time.Duration
	// Programs are the process node's programs for a local control plane
	// started for the run; "gantry" must name a gantry binary (the image
	// dev.local/gantry-fn:NAME runs `gantry fn NAME`).
	Programs map[string]string
	// ControllerCommand, when set, runs the Gantry arm's controller as a
	// process of its own: the argv of `gantry controller` with its flags
	// (--kubeconfig and the --knative ones are added); empty runs it in
	// this process (Options.Controller), as the tests do.
	ControllerCommand []string
	// Floor runs the floor responder in both arms (knative_floor.go): one
	// cheap write answering each trigger, how fast a controller that
	// watches and writes once can start processing under the case's load.
	// Off by default: its writes come at the moment the controllers'
	// do, and one run without it could not tell its cost from the
	// machine's load (docs/knative.md).
	Floor bool
	// TrafficAtBurst starts each iteration's traffic when an interference
	// burst is due (the first at or after Warmup), in both arms alike, so
	// that the KPA's first scale-ups from zero meet a burst being
	// absorbed; off, the traffic starts Warmup after the grid.
	TrafficAtBurst bool
	// TrafficLead, with TrafficAtBurst, starts the traffic this long
	// before the burst instead of with it (trafficStart).
	TrafficLead time.Duration
}

// Knative's request-path bounds.
const (
	MaxRate           = 100  // requests/s per service
	MaxConcurrency    = 1000 // Knative's own bound on containerConcurrency
	MaxScaleBound     = 20
	MaxRequestTimeout = 5 * time.Minute
	// MaxContinuousPeriod bounds KnativeOptions.ContinuousPeriod: slower
	// than the interval mode's 10 s is no longer continuous.
	MaxContinuousPeriod = 10 * time.Second
	// MaxKnativeServices bounds Options.Services in a Knative run.
	MaxKnativeServices = 20
)

// DefaultKnativeOptions are the paper's RQ1 settings on Knative.
func DefaultKnativeOptions() KnativeOptions {
	return KnativeOptions{
		Domain:               knativeinstall.DefaultDomain,
		Rate:                 5,
		ContainerConcurrency: 5,
		MaxScale:             3,
		Function:             "sentiment",
		FreshServices:        true,
		RequestTimeout:       30 * time.Second,
		Warmup:               2 * time.Second,
		ContinuousPeriod:     time.Second,
	}
}

// KnativeQuickCases is --knative --quick's pair: the paper's worst RQ1
// interval case and a continuous one.
var KnativeQuickCases = []Case{{ModeInterval, 20}, {ModeContinuous, 30}}

// KnativeQuick turns o into --knative --quick: one 30 s repetition of
// KnativeQuickCases, vanilla and Gantry.
func (o Options) KnativeQuick() Options {
	o.Controllers = []string{Vanilla, Gantry}
	o.Cases = slices.Clone(KnativeQuickCases)
	o.Repetitions = 1
	o.Iteration = 30 * time.Second
	return o
}

// KnativeControllers are the arms of a Knative run: vanilla Knative
// (Deployments, kube-controller-manager) and Knative with Gantry
// (RTResources, the Gantry controller and its Knative webhook).
var KnativeControllers = []string{Vanilla, Gantry}

func (o Options) validateKnative() error {
	k := o.KN
	switch {
	case o.Kubeconfig != "" && k.Ingress == "":
		return fmt.Errorf("knative: a --kubeconfig cluster needs its ingress address (the host:port of $GANTRY_INGRESS)")
	case k.Rate <= 0 || k.Rate > MaxRate:
		return fmt.Errorf("knative: rate must be in (0, %d] requests/s per service, got %v", MaxRate, k.Rate)
	case k.ContainerConcurrency < 1 || k.ContainerConcurrency > MaxConcurrency:
		return fmt.Errorf("knative: container concurrency must be in 1..%d, got %d", MaxConcurrency, k.ContainerConcurrency)
	case k.MaxScale < 0 || k.MaxScale > MaxScaleBound:
		return fmt.Errorf("knative: max scale must be in 0..%d, got %d", MaxScaleBound, k.MaxScale)
	case k.RequestTimeout < time.Second || k.RequestTimeout > MaxRequestTimeout:
		return fmt.Errorf("knative: request timeout must be in 1s..%v, got %v", MaxRequestTimeout, k.RequestTimeout)
	case k.ScaleToZeroGrace < 0 || k.ScaleToZeroGrace > MaxRequestTimeout:
		return fmt.Errorf("knative: scale-to-zero grace must be in 0..%v, got %v", MaxRequestTimeout, k.ScaleToZeroGrace)
	case k.ContinuousPeriod < 0 || k.ContinuousPeriod > MaxContinuousPeriod:
		return fmt.Errorf("knative: continuous period must be in 0..%v, got %v", MaxContinuousPeriod, k.ContinuousPeriod)
	case k.Warmup < 0 || k.Warmup >= o.Iteration:
		return fmt.Errorf("knative: warm-up must be in [0, iteration), got %v", k.Warmup)
	case k.TrafficLead < 0 || k.TrafficLead > MaxContinuousPeriod:
		return fmt.Errorf("knative: traffic lead must be in 0..%v, got %v", MaxContinuousPeriod, k.TrafficLead)
	case k.TrafficLead > 0 && !k.TrafficAtBurst:
		return fmt.Errorf("knative: a traffic lead needs --traffic-at-burst")
	case o.Services > MaxKnativeServices:
		return fmt.Errorf("knative: at most %d services (each is pods of two processes on one machine), got %d", MaxKnativeServices, o.Services)
	case k.Function == "" || k.Domain == "":
		return fmt.Errorf("knative: function and domain must be set")
	}
	for _, c := range o.Cases {
		if at := trafficStart(k.Warmup, o.knPacing(c).every(c), k.TrafficAtBurst, k.TrafficLead); at >= o.Iteration {
			return fmt.Errorf("knative: %s/%d's traffic would start at %v (--traffic-at-burst: the first burst due at or after the warm-up), not within the %v iteration", c.Mode, c.Burst, at, o.Iteration)
		}
	}
	for _, c := range o.Controllers {
		if !slices.Contains(KnativeControllers, c) {
			return fmt.Errorf("knative: controller %q: a Knative run compares %v", c, KnativeControllers)
		}
	}
	return nil
}
