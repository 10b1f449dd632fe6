//go:build !gantry_local

package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gantry.dev/gantry/pkg/processnode"
)

type nodeFlags struct {
	name, kubeconfig, dir     string
	programs, images          []string
	maxPods                   int
	cpu, memory               string
	certFile, keyFile, caFile string
}

// newNodeCmd is "gantry node": a process node, whose pods run as local
// processes, joined to any cluster until SIGINT or SIGTERM.
func newNodeCmd() *cobra.Command {
	f := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Join a node whose pods run as local processes to a cluster (virtual-kubelet); docs/platform-kubernetes.md",
		Long: `Register a node whose pods run as processes of this machine, each on an
address of its own, until SIGINT or SIGTERM (then every pod is stopped within
a second). Images are not pulled: a container runs its command, or what
--image maps its image to; names in --program are found first in PATH.
gantry cluster up --process-nodes N runs such nodes for you.`,
		Example: `  gantry node --name laptop --kubeconfig ~/.kube/config
  gantry node --name n1 --image registry.example/echo:1='gantry fn sentiment'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNode(cmd, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.name, "name", "", "the node's name (required)")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)")
	fs.StringVar(&f.dir, "dir", "", "working folder for pods and logs (default: a temp folder, removed on exit)")
	fs.StringArrayVar(&f.programs, "program", nil, "NAME=PATH: a program pods may run by name (repeatable; gantry is this binary unless given)")
	fs.StringArrayVar(&f.images, "image", nil, "IMAGE=COMMAND: what a container without a command runs for that image, split on spaces (repeatable)")
	fs.IntVar(&f.maxPods, "max-pods", 110, "pod capacity")
	fs.StringVar(&f.cpu, "cpu", "", "CPU capacity (default: this machine's)")
	fs.StringVar(&f.memory, "memory", "", "memory capacity (default: this machine's)")
	fs.StringVar(&f.certFile, "tls-cert-file", "", "serve the kubelet API (kubectl logs) with this certificate")
	fs.StringVar(&f.keyFile, "tls-private-key-file", "", "its key")
	fs.StringVar(&f.caFile, "client-ca-file", "", "CA of the client certificates the kubelet API accepts (the API server's --kubelet-client-certificate)")
	return cmd
}

func (f *nodeFlags) config() (processnode.Config, error) {
	cfg := processnode.Config{Name: f.name, Dir: f.dir, MaxPods: f.maxPods, CPU: f.cpu, Memory: f.memory,
		Programs: map[string]string{}, Images: map[string][]string{}}
	if f.name == "" {
		return cfg, usagef("--name is required")
	}
	if f.maxPods < 1 || f.maxPods > 4096 {
		return cfg, usagef("--max-pods must be in [1, 4096], got %d", f.maxPods)
	}
	if self, err := os.Executable(); err == nil {
		cfg.Programs["gantry"] = self
	}
	for _, p := range f.programs {
		name, path, ok := strings.Cut(p, "=")
		if !ok || name == "" || path == "" {
			return cfg, usagef("--program wants NAME=PATH, got %q", p)
		}
		cfg.Programs[name] = path
	}
	for _, m := range f.images {
		image, command, ok := strings.Cut(m, "=")
		if !ok || image == "" || len(strings.Fields(command)) == 0 {
			return cfg, usagef("--image wants IMAGE=COMMAND, got %q", m)
		}
		cfg.Images[image] = strings.Fields(command)
	}
	set := 0
	for _, s := range []string{f.certFile, f.keyFile, f.caFile} {
		if s != "" {
			set++
		}
	}
	switch set {
	case 0:
	case 3:
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return cfg, err
		}
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return cfg, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return cfg, fmt.Errorf("no certificate in %s", f.caFile)
		}
		cfg.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	default:
		return cfg, usagef("--tls-cert-file, --tls-private-key-file and --client-ca-file go together")
	}
	return cfg, nil
}

func runNode(cmd *cobra.Command, f *nodeFlags) error {
	cfg, err := f.config()
	if err != nil {
		return err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	if cfg.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	n, err := processnode.Start(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	cfg.Logger.Info("node ready", "name", n.Name(), "pod addresses", n.Addresses(), "endpoint-slice addresses", n.Routed(), "dir", n.Dir())
	select {
	case <-cmd.Context().Done():
	case <-n.Done():
	}
	return n.Stop()
}
