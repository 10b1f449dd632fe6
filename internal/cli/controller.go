//go:build !gantry_local

package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/knativert"
	"gantry.dev/gantry/pkg/rtcontroller"
	"gantry.dev/gantry/pkg/rtqueue"
)

type controllerFlags struct {
	kubeconfig      string
	priorityLimiter bool
	threadTransport bool
	app             rtcontroller.AppConfig
	knative         bool
	kn              knativert.RunConfig
	flags           *pflag.FlagSet
}

// knativeFlagSet names a --knative-* flag that was given, if any.
func (f *controllerFlags) knativeFlagSet() string {
	for _, name := range []string{"knative-webhook-address", "knative-webhook-cert-dir", "knative-webhook-host", "knative-webhook-url"} {
		if f.flags != nil && f.flags.Changed(name) {
			return name
		}
	}
	return ""
}

func (f *controllerFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.flags = fs
	a := &f.app
	def := rtqueue.DefaultPoolConfig()
	band := rtqueue.DefaultCriticalBand()
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file; empty means in-cluster config")
	fs.StringVar(&a.Options.Namespace, "namespace", "", "only reconcile RTResources in this namespace (default: all)")
	fs.StringVar(&a.QueueKind, "queue", rtcontroller.QueueRT, `work queue: "rtqueue" (priority-preemptive engine) or "fifo" (client-go workqueue, the vanilla ablation)`)
	fs.IntVar(&a.FIFOWorkers, "fifo-workers", rtcontroller.FIFOWorkers, "workers for --queue=fifo")
	fs.IntVar(&a.Pool.Min, "min-workers", def.Min, "rtqueue: workers kept alive")
	fs.IntVar(&a.Pool.Max, "max-workers", def.Max, "rtqueue: most workers")
	fs.IntVar(&a.Pool.IdleThreshold, "idle-threshold", def.IdleThreshold, "rtqueue: spawn a worker when fewer are idle")
	fs.IntVar(&a.Pool.Reserve, "reserve-workers", def.Reserve, "rtqueue: workers that only take critical keys (at or above --reserve-floor)")
	fs.IntVar(&a.ReserveFloor, "reserve-floor", 0, "rtqueue: lowest criticality the reserve workers take (default: --critical-from)")
	fs.IntVar(&a.Critical.From, "critical-from", band.From, "rtqueue: lowest critical criticality: at or above it keys run SCHED_FIFO and may take reserve workers (the paper's RQ1 services use 1..10: set 1)")
	fs.IntVar(&a.Critical.To, "critical-to", band.To, "rtqueue: criticality that gets the highest SCHED_FIFO priority; --critical-from..--critical-to spread over --rt-priority-min..--rt-priority-max (RQ1: 10)")
	fs.IntVar(&a.Critical.MinRT, "rt-priority-min", band.MinRT, "rtqueue: SCHED_FIFO priority of --critical-from")
	fs.IntVar(&a.Critical.MaxRT, "rt-priority-max", band.MaxRT, "rtqueue: SCHED_FIFO priority of --critical-to and above (at most 98; idle workers sit above it)")
	fs.BoolVar(&a.Pool.RealTime, "realtime", def.RealTime, "rtqueue: run workers SCHED_FIFO (needs CAP_SYS_NICE; falls back to nice values)")
	fs.Float32Var(&a.Options.QPS, "kube-api-qps", 50, "reconcile client: requests per second")
	fs.IntVar(&a.Options.Burst, "kube-api-burst", 100, "reconcile client: burst")
	fs.Float32Var(&a.Options.CriticalQPS, "critical-kube-api-qps", 50, "reconcile client: requests per second reserved for critical keys (at or above --critical-from) when the shared bucket is empty; 0 disables the reserve")
	fs.IntVar(&a.Options.CriticalBurst, "critical-kube-api-burst", 50, "reconcile client: burst of the critical reserve")
	fs.BoolVar(&f.threadTransport, "critical-thread-transport", true, "reconcile client: send critical requests (at or above --critical-from) over connections of their own, written and read on the worker's real-time thread (false: over the shared HTTP/2 connection, the ablation)")
	fs.BoolVar(&f.priorityLimiter, "priority-limiter", true, "reconcile client: serve waiting requests highest criticality first (false: client-go's FIFO token bucket, the ablation)")
	fs.StringVar(&a.HTTPAddress, "http-address", ":8080", "address for /healthz, /readyz and /metrics; empty disables")
	fs.StringVar(&a.TraceFile, "trace-file", "", "write a JSON line per reconcile that starts a new generation: when the change was seen, taken from the queue, and the status write's and pod creates' limiter and apiserver times (the Knative benchmark reads it)")
	fs.BoolVar(&a.LeaderElect, "leader-elect", false, "take a Lease before reconciling, so only one replica is active")
	fs.StringVar(&a.Leader.Namespace, "leader-election-namespace", "gantry-system", "namespace of the Lease")
	fs.StringVar(&a.Leader.Name, "leader-election-id", "gantry-controller", "name of the Lease")
	fs.StringVar(&a.Leader.Identity, "leader-election-identity", "", "this replica's identity (default: hostname plus a random suffix)")
	fs.DurationVar(&a.Leader.LeaseDuration, "lease-duration", 8*time.Second, "how long a lease lasts without renewal")
	fs.DurationVar(&a.Leader.RenewDeadline, "renew-deadline", 5*time.Second, "how long the leader retries renewing before giving up")
	fs.DurationVar(&a.Leader.RetryPeriod, "retry-period", time.Second, "interval between lease attempts")
	fs.BoolVar(&f.knative, "knative", false, "also back Knative Revisions that carry "+gantryv1.CriticalityAnnotation+" with RTResources: serve the mutating webhook of config/knative and reconcile their RTResources (docs/knative.md)")
	fs.StringVar(&f.kn.Address, "knative-webhook-address", ":8443", "--knative: where the webhook listens (HTTPS)")
	fs.StringVar(&f.kn.Serve.CertDir, "knative-webhook-cert-dir", "", "--knative: folder with tls.crt, tls.key and optionally ca.crt; empty makes a CA and certificate at start-up and puts the CA into the webhook configuration")
	fs.StringSliceVar(&f.kn.Serve.Hosts, "knative-webhook-host", knativert.DefaultHosts, "--knative: DNS names and IP addresses of the generated certificate")
	fs.StringVar(&f.kn.Serve.URL, "knative-webhook-url", "", "--knative: out of cluster, the URL the apiserver reaches the webhook at (https://127.0.0.1:8443/mutate); the controller then writes the webhook configuration with it. Empty: the configuration config/knative installed, with its Service")
}

// validate checks the flags and applies the ones that are not plain
// fields of the configuration.
func (f *controllerFlags) validate() error {
	a := &f.app
	a.Options.PlainLimiter = !f.priorityLimiter
	a.Options.SharedConnection = !f.threadTransport
	switch {
	case a.QueueKind != rtcontroller.QueueRT && a.QueueKind != rtcontroller.QueueFIFO:
		return usagef("--queue must be %q or %q, got %q", rtcontroller.QueueRT, rtcontroller.QueueFIFO, a.QueueKind)
	case a.FIFOWorkers < 1:
		return usagef("--fifo-workers must be at least 1, got %d", a.FIFOWorkers)
	case a.Options.QPS <= 0 || a.Options.Burst < 1:
		return usagef("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", a.Options.QPS, a.Options.Burst)
	case a.Options.CriticalQPS < 0 || a.Options.CriticalBurst < 1:
		return usagef("--critical-kube-api-qps must be at least 0 and --critical-kube-api-burst positive, got %v and %d", a.Options.CriticalQPS, a.Options.CriticalBurst)
	case a.Validate() != nil:
		return usagef("bad worker pool or criticality flags: %v", a.Validate())
	case !f.knative && f.knativeFlagSet() != "":
		return usagef("--%s needs --knative", f.knativeFlagSet())
	case f.knative && f.kn.Serve.URL != "" && knativert.ValidateURL(f.kn.Serve.URL) != nil:
		return usagef("--knative-webhook-url: %v", knativert.ValidateURL(f.kn.Serve.URL))
	case f.knative && f.kn.Serve.CertDir == "" && len(f.kn.Serve.Hosts) == 0:
		return usagef("--knative-webhook-host: a generated certificate needs at least one host")
	case a.LeaderElect && !(a.Leader.RetryPeriod < a.Leader.RenewDeadline && a.Leader.RenewDeadline < a.Leader.LeaseDuration):
		return usagef("need --retry-period < --renew-deadline < --lease-duration, got %v, %v, %v",
			a.Leader.RetryPeriod, a.Leader.RenewDeadline, a.Leader.LeaseDuration)
	}
	return nil
}

func newControllerCmd() *cobra.Command {
	var f controllerFlags
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "Run the RTResource controller on the priority-preemptive engine",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig: %w", err)
			}
			if f.app.Leader.Identity == "" {
				host, _ := os.Hostname()
				f.app.Leader.Identity = host + "_" + string(uuid.NewUUID())
			}
			f.app.Options.Config = cfg
			f.app.Options.Logger = slog.Default()
			if !f.knative {
				return rtcontroller.RunApp(cmd.Context(), f.app)
			}
			f.kn.Options = knativert.Options{Config: knativeClientConfig(cfg, f.app.Options.QPS, f.app.Options.Burst), Namespace: f.app.Options.Namespace, Logger: slog.Default()}
			return runBoth(cmd.Context(), func(ctx context.Context) error { return rtcontroller.RunApp(ctx, f.app) },
				func(ctx context.Context) error { return knativert.Run(ctx, f.kn) })
		},
	}
	f.register(cmd)
	return cmd
}

// knativeClientConfig is the Knative side's client configuration: the
// reconcile client's limits (--kube-api-qps, --kube-api-burst), not
// client-go's default 5/s, burst 10. Its webhook reads the Revision and the
// RTResource live on every PodAutoscaler and Deployment admission, and at
// 5/s, shared with its reconciler, the API server waited 2.5 s on average
// for its answers while Knative scaled Services up (docs/knative.md).
func knativeClientConfig(cfg *rest.Config, qps float32, burst int) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.QPS, out.Burst = qps, burst
	return out
}

// runBoth runs a and b until ctx ends or either returns, and stops the
// other then.
func runBoth(ctx context.Context, a, b func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 2)
	for _, run := range []func(context.Context) error{a, b} {
		go func() {
			err := run(ctx)
			cancel()
			errs <- err
		}()
	}
	return errors.Join(<-errs, <-errs)
}
