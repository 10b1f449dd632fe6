//go:build !gantry_local

package cli

import (
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/orchbench"
)

// knativeBenchFlags are `gantry bench orchestration --knative`'s flags.
type knativeBenchFlags struct {
	on bool
}

func (k *knativeBenchFlags) register(cmd *cobra.Command, opts *orchbench.Options) {
	opts.KN = orchbench.DefaultKnativeOptions()
	f := cmd.Flags()
	f.BoolVar(&k.on, "knative", false, "RQ1 on Knative Serving (docs/knative.md): Knative Services at zero, scaled by Knative's KPA under real traffic through Gantry's Knative ingress; vanilla Knative (Deployments) beside Knative with Gantry (RTResources), each on a local control plane of its own (root: process-node pods have network namespaces), or both on --kubeconfig's")
	f.Float64Var(&opts.KN.Rate, "rate", opts.KN.Rate, "--knative: requests/s to each Service (open loop)")
	f.IntVar(&opts.KN.ContainerConcurrency, "container-concurrency", opts.KN.ContainerConcurrency, "--knative: each Service's containerConcurrency")
	f.IntVar(&opts.KN.MaxScale, "max-scale", opts.KN.MaxScale, "--knative: each Service's autoscaling.knative.dev/max-scale (0: no bound)")
	f.BoolVar(&opts.KN.FreshServices, "fresh-services", opts.KN.FreshServices, "--knative: new Services at zero for every iteration; false creates them once and waits before each iteration for the KPA to scale them to zero, as the paper does (90 s or more an iteration; docs/knative.md)")
	f.StringVar(&opts.KN.Function, "function", opts.KN.Function, "--knative: the example function the Services run (image dev.local/gantry-fn:NAME)")
	f.DurationVar(&opts.KN.RequestTimeout, "request-timeout", opts.KN.RequestTimeout, "--knative: bound on one request")
	f.DurationVar(&opts.KN.Warmup, "warmup", opts.KN.Warmup, "--knative: interference before the traffic starts in each iteration")
	f.DurationVar(&opts.KN.ContinuousPeriod, "continuous-period", opts.KN.ContinuousPeriod, "--knative: continuous cases send a burst of N every period (N/period objects/s) in both arms alike; 0 sends them back to back, as fast as each arm's API server takes its own objects (unequal arms; the run warns); --churn-rate wins")
	f.DurationVar(&opts.KN.ScaleToZeroGrace, "scale-to-zero-grace", 0, "--knative: Knative's scale-to-zero-grace-period in both arms (0: Knative's 30 s); shortens --fresh-services=false's wait between iterations, the scale-up decisions unchanged")
	f.BoolVar(&opts.KN.Floor, "floor", opts.KN.Floor, "--knative: a responder in both arms answers each KPA trigger with one ConfigMap patch, timed in the audit log: how fast a controller that only watches and writes once starts processing under the case's load (the report's floor; off by default, docs/knative.md says why)")
	f.BoolVar(&opts.KN.TrafficAtBurst, "traffic-at-burst", false, "--knative: start each iteration's traffic when an interference burst is due (the first at or after --warmup), in both arms alike, so the first scale-ups from zero meet a burst being absorbed")
	f.DurationVar(&opts.KN.TrafficLead, "traffic-lead", 0, "--knative with --traffic-at-burst: start the traffic this long before the burst is due instead of with it (the KPA writes its first scale from zero a second or more after the first request)")
	f.StringVar(&opts.KN.Ingress, "knative-ingress", "", "--knative with --kubeconfig: the cluster's Knative ingress, host:port ($GANTRY_INGRESS without http://)")
	f.StringVar(&opts.KN.Domain, "knative-domain", knativeinstall.DefaultDomain, "--knative: the cluster's domain of Knative Services")
}

// knativeFairArgs give the Gantry arm's controller vanilla's client
// limits: kube-controller-manager gives each of its controllers a client
// of its own at 20 requests/s, burst 30 (its defaults), and a scale-up
// passes two of them (deployment, then replicaset); Gantry's one
// controller gets 20/30 shared and a critical reserve of 20/30, the same
// 40/60 in all (docs/knative.md).
const knativeFairArgs = "--kube-api-qps=20 --kube-api-burst=30 --critical-kube-api-qps=20 --critical-kube-api-burst=30"

// knativeOnly are the flags that mean nothing without --knative, and
// knativeRefused those a Knative run has no use for: Knative's KPA, not
// the benchmark, decides the replicas and when to scale.
var (
	knativeOnly    = []string{"fresh-services", "rate", "container-concurrency", "max-scale", "function", "request-timeout", "warmup", "continuous-period", "scale-to-zero-grace", "knative-ingress", "knative-domain", "floor", "traffic-at-burst", "traffic-lead"}
	knativeRefused = []string{"replicas", "gap"}
)

// applyKnativeFlags applies --quick and --knative to opts and refuses a
// flag the run would ignore.
func applyKnativeFlags(cmd *cobra.Command, opts *orchbench.Options, k *knativeBenchFlags, quick bool, ctlArgs string) error {
	for _, name := range knativeOnly {
		if !k.on && cmd.Flags().Changed(name) {
			return usagef("bench orchestration: --%s needs --knative", name)
		}
	}
	if !k.on {
		if quick {
			*opts = opts.Quick()
		}
		return nil
	}
	for _, name := range knativeRefused {
		if cmd.Flags().Lookup(name) != nil && cmd.Flags().Changed(name) {
			return usagef("bench orchestration: --%s does not apply with --knative (Knative's autoscaler decides the scale-ups)", name)
		}
	}
	opts.Knative = true
	if quick {
		*opts = opts.KnativeQuick()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The Gantry arm's controller is `gantry controller --knative` in a
	// process of its own, as vanilla's kube-controller-manager is.
	if !cmd.Flags().Changed("controller-args") {
		ctlArgs += " " + knativeFairArgs
	}
	opts.KN.ControllerCommand = append([]string{self, "controller"}, strings.Fields(ctlArgs)...)
	if opts.Kubeconfig == "" {
		// The Services' image dev.local/gantry-fn:NAME runs `gantry fn
		// NAME`: this binary.
		opts.KN.Programs = map[string]string{"gantry": self}
		// The process node runs in this process; its client-go informers
		// log every cache sync through klog, which would bury the
		// progress lines (`gantry cluster serve` sends them to its log).
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	return nil
}
