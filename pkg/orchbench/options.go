package orchbench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"gantry.dev/gantry/pkg/rtcontroller"
)

// Interference modes.
const (
	// ModeInterval is the paper's stress load: a burst of creates and
	// deletes every IntervalPeriod.
	ModeInterval = "interval"
	// ModeContinuous runs bursts back to back. On a small machine spaced
	// bursts rarely meet a scale-up, so this is the mode that loads the
	// control plane throughout.
	ModeContinuous = "continuous"
)

// MaxChurnRate bounds --churn-rate: far above what a control plane
// absorbs, low enough that a typo is caught.
const MaxChurnRate = 10000

// Controllers under test.
const (
	Vanilla    = "vanilla"     // Deployments, the real kube-controller-manager
	Gantry     = "gantry"      // RTResources, the priority-preemptive engine
	GantryFIFO = "gantry-fifo" // RTResources, client-go's FIFO workqueue
	Gantry5    = "gantry-5"    // RTResources, worker pool fixed at 5 (Table 2)
	// GantryDeploymentChurn scales RTResources while the interference is
	// vanilla's Deployments: a cluster where both live, and the same
	// apiserver load as the vanilla case.
	GantryDeploymentChurn = "gantry-deployment-churn"
	// GantryNoRT is the SCHED_FIFO ablation: workers keep nice values only.
	GantryNoRT = "gantry-nort"
	// GantryNoPrio is the ablation of the client-side priority order: the
	// reconcile client's rate limiter is client-go's FIFO token bucket.
	GantryNoPrio = "gantry-noprio"
	// GantryNoAPF is the ablation of the server side: config/apf's
	// FlowSchema and priority level are removed for the run, so the
	// controller's requests fall to the built-in service-accounts schema
	// (workload-low).
	GantryNoAPF = "gantry-noapf"
	// GantrySharedConn is the ablation of the thread transport: critical
	// requests go over client-go's shared HTTP/2 connection.
	GantrySharedConn = "gantry-sharedconn"
)

// Controllers lists every controller the benchmark knows, in report order.
var Controllers = []string{Vanilla, Gantry, GantryFIFO, Gantry5, GantryDeploymentChurn, GantryNoRT, GantryNoPrio, GantryNoAPF, GantrySharedConn}

// Modes lists the interference modes.
var Modes = []string{ModeInterval, ModeContinuous}

// Case is one interference setting: a mode and its burst size.
type Case struct {
	Mode  string `json:"mode"`
	Burst int    `json:"burst"`
}

// PaperCases are RQ1's interval bursts and the continuous levels of the
// paper's end-to-end experiment.
var PaperCases = []Case{
	{ModeInterval, 5}, {ModeInterval, 10}, {ModeInterval, 20},
	{ModeContinuous, 15}, {ModeContinuous, 30}, {ModeContinuous, 45},
}

// QuickCases is --quick's pair.
var QuickCases = []Case{{ModeContinuous, 20}, {ModeInterval, 20}}

// Options configures a benchmark run.
type Options struct {
	// Kubeconfig targets an existing cluster; empty starts the local
	// control plane (localcluster) for the run.
	Kubeconfig string
	// Nodes is the number of kwok nodes of the local control plane.
	Nodes int
	// CRDPath is the RTResource CRD installed before the Gantry cases; empty
	// is the one built into the binary (config/crd).
	CRDPath string
	// ConfigDir holds config/rbac and config/apf, applied before the
	// Gantry cases: the in-process controller runs as its service account
	// (impersonated), so RBAC and API Priority and Fairness treat its
	// requests as they treat a deployed controller's.
	ConfigDir string
	// Controller is the Gantry controller's configuration as
	// `gantry controller` builds it from its flags; each Gantry variant
	// changes it (queue kind, pool size). Options.Config is filled in.
	Controller rtcontroller.AppConfig

	Controllers []string
	Cases       []Case
	Services    int           // N critical services, criticalities 1..N
	Replicas    int           // K: each scale-up goes from 0 to K
	Repetitions int           // iterations per controller and case
	Iteration   time.Duration // length of one iteration
	// Gap is the mean pause between one service's scale-down and its next
	// scale-up (uniform in [Gap/2, 3Gap/2)); the first scale-ups are
	// spread uniformly over [0, Gap).
	Gap time.Duration
	// IntervalPeriod separates bursts in interval mode (10 s in the paper).
	IntervalPeriod time.Duration
	// ChurnRate caps the continuous mode's interference at this many
	// objects created (and deleted) per second, the same for every
	// controller; 0 sends them back to back, so each controller meets as
	// much churn as its apiserver absorbs (vanilla's Deployments go about
	// twice as fast as RTResources: docs/benchmarks.md).
	ChurnRate float64
	// StageTimeout bounds the wait for one scale-up's stages; a stage not
	// reached by then is counted as missed.
	StageTimeout time.Duration
	Seed         uint64

	// Progress receives one line per iteration and status lines; nil is
	// silent.
	Progress io.Writer

	// Knative runs RQ1 on Knative Serving (knative.go): the services are
	// Knative Services scaled by Knative's KPA under real traffic, not
	// patched by the benchmark; Replicas and Gap do not apply.
	Knative bool
	// KN configures the Knative run.
	KN KnativeOptions
}

// DefaultOptions is the full RQ1 matrix for vanilla and Gantry.
func DefaultOptions() Options {
	return Options{
		Nodes:          2,
		ConfigDir:      "config",
		Controllers:    []string{Vanilla, Gantry},
		Cases:          slices.Clone(PaperCases),
		Services:       10,
		Replicas:       1,
		Repetitions:    10,
		Iteration:      60 * time.Second,
		Gap:            2 * time.Second,
		IntervalPeriod: 10 * time.Second,
		StageTimeout:   30 * time.Second,
		Seed:           1,
	}
}

// Quick turns o into --quick: one repetition of the two cases at burst 20,
// vanilla and Gantry, with iterations short enough for the whole run to
// take under four minutes.
func (o Options) Quick() Options {
	o.Controllers = []string{Vanilla, Gantry}
	o.Cases = slices.Clone(QuickCases)
	o.Repetitions = 1
	o.Iteration = 40 * time.Second
	return o
}

// Validate reports options the run cannot use.
func (o Options) Validate() error {
	if o.Knative {
		if err := o.validateKnative(); err != nil {
			return err
		}
	}
	switch {
	case o.Services < 1 || o.Services > 100:
		return fmt.Errorf("services must be in 1..100, got %d", o.Services)
	case o.Replicas < 1 || o.Replicas > 20:
		return fmt.Errorf("replicas must be in 1..20, got %d", o.Replicas)
	case o.Repetitions < 1:
		return fmt.Errorf("repetitions must be at least 1, got %d", o.Repetitions)
	case o.Iteration < time.Second:
		return fmt.Errorf("iteration must be at least 1s, got %v", o.Iteration)
	case o.ChurnRate < 0 || o.ChurnRate > MaxChurnRate:
		return fmt.Errorf("churn rate must be in 0..%d objects/s, got %v", MaxChurnRate, o.ChurnRate)
	case o.Gap <= 0 || o.IntervalPeriod <= 0 || o.StageTimeout <= 0:
		return fmt.Errorf("gap, interval period and stage timeout must be positive")
	case len(o.Controllers) == 0 || len(o.Cases) == 0:
		return fmt.Errorf("need at least one controller and one case")
	case o.Kubeconfig == "" && o.Nodes < 1:
		return fmt.Errorf("nodes must be at least 1, got %d", o.Nodes)
	}
	for _, c := range o.Controllers {
		if !slices.Contains(Controllers, c) {
			return fmt.Errorf("unknown controller %q (known: %v)", c, Controllers)
		}
	}
	for _, c := range o.Cases {
		if !slices.Contains(Modes, c.Mode) || c.Burst < 1 || c.Burst > 500 {
			return fmt.Errorf("bad case %s/%d: mode must be one of %v, burst in 1..500", c.Mode, c.Burst, Modes)
		}
	}
	return nil
}

// controllerConfig is the Gantry controller configuration for one variant.
func (o Options) controllerConfig(name string) rtcontroller.AppConfig {
	cfg := o.Controller
	switch name {
	case GantryFIFO:
		cfg.QueueKind = rtcontroller.QueueFIFO
	case GantryNoRT:
		cfg.Pool.RealTime = false
	case GantryNoPrio:
		cfg.Options.PlainLimiter = true
	case GantrySharedConn:
		cfg.Options.SharedConnection = true
	case Gantry5:
		// The paper's Table 2: five watchdog threads, no elasticity.
		cfg.Pool.Min, cfg.Pool.Max = 5, 5
		cfg.Pool.IdleThreshold = min(cfg.Pool.IdleThreshold, 5)
		cfg.Pool.Reserve = min(cfg.Pool.Reserve, 4)
	}
	return cfg
}

func isGantry(controller string) bool { return controller != Vanilla }
