//go:build gantry_local

package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"gantry.dev/gantry/pkg/gateway"
)

// fullBuild: this is the local build (build.go), without the commands
// that need Kubernetes.
const fullBuild = false

// kubeCommands are stand-ins for the full build's cluster, controller and
// node.
func kubeCommands() []*cobra.Command {
	return []*cobra.Command{
		leftOut("cluster", "cluster", "A real local control plane"),
		leftOut("controller", "controller", "Run the RTResource controller on the priority-preemptive engine"),
		leftOut("node", "node", "Join a node whose pods run as local processes to a cluster"),
	}
}

// kubeBenchCommands are stand-ins for the benchmarks that need Kubernetes.
func kubeBenchCommands() []*cobra.Command {
	return []*cobra.Command{
		leftOut("bench queue", "queue", "Enqueue-to-start latency of critical items on a saturated work queue"),
		leftOut("bench orchestration", "orchestration", "PREEMPT-FaaS RQ1 on a control plane"),
		leftOut("bench e2e", "e2e", "PREEMPT-FaaS RQ2 on a control plane"),
	}
}

// kubeBackend is empty: backendFlags.validate refuses --backend kubernetes
// and its flags in this build.
type kubeBackend struct{}

func (f *backendFlags) apply(*gateway.ServerConfig, *slog.Logger) error {
	if f.kind == backendKubernetes {
		return notInThisBuild("serve --backend " + backendKubernetes)
	}
	return nil
}

func (f *backendFlags) campaign(context.Context, gateway.ServerConfig, *gateway.Server, *slog.Logger) error {
	return notInThisBuild("serve --peers")
}

// knativeIngressFlags keeps the full build's flag names, so asking for the
// ingress gets notInThisBuild rather than "unknown flag".
type knativeIngressFlags struct {
	enabled bool
	cmd     *cobra.Command
}

var knativeIngressFlagNames = []string{"knative-ingress-addr", "knative-ingress-local-addr", "knative-ingress-public-lb", "knative-ingress-local-lb"}

func (f *knativeIngressFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	fs := cmd.Flags()
	fs.BoolVar(&f.enabled, "knative-ingress", false, "also serve Knative's KIngresses (not in this build: make build)")
	for _, name := range knativeIngressFlagNames {
		fs.String(name, "", "with --knative-ingress (not in this build: make build)")
	}
	fs.Duration("knative-ingress-timeout", 0, "with --knative-ingress (not in this build: make build)")
}

func (f *knativeIngressFlags) validate() error {
	if f.enabled {
		return notInThisBuild("serve --knative-ingress")
	}
	for _, name := range append(knativeIngressFlagNames, "knative-ingress-timeout") {
		if f.cmd != nil && f.cmd.Flags().Changed(name) {
			return notInThisBuild("serve --" + name)
		}
	}
	return nil
}

func (f *knativeIngressFlags) start(string, *slog.Logger) error { return nil }

func (f *knativeIngressFlags) shutdown(context.Context) error { return nil }

func (f *knativeIngressFlags) hurry() {}
