//go:build !gantry_local

package cli

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"gantry.dev/gantry/pkg/knativeingress"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/localcluster"
)

// newClusterCmd is "gantry cluster up/down/env": a local control plane that
// runs in the background.
func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "A real local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok nodes)",
	}
	cmd.AddCommand(newClusterUpCmd(), newClusterServeCmd(), newClusterDownCmd(), newClusterEnvCmd())
	return cmd
}

// clusterFlags are the flags of "up", which passes them on to "serve".
type clusterFlags struct {
	dir     string
	opts    localcluster.Options
	ingress string // --knative: where Knative Services are reached (GANTRY_INGRESS)
	// ingressHTTPS: where they are reached over HTTPS
	// (GANTRY_INGRESS_HTTPS), with the certificates of the KIngresses'
	// spec.tls.
	ingressHTTPS string
	// nodesSet says --nodes was given: --knative alone runs no kwok node,
	// since Knative's Revisions have no nodeSelector and a kwok node would
	// get pods that never run.
	nodesSet bool
}

func (f *clusterFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.dir, "dir", localcluster.DefaultDir(), "folder for the cluster's certificates, data and logs")
	fs.IntVar(&f.opts.Nodes, "nodes", 1, "kwok fake nodes (with --knative, 0 unless given)")
	fs.StringVar(&f.opts.NodeCPU, "node-cpu", "32", "CPU capacity of each node")
	fs.StringVar(&f.opts.NodeMemory, "node-memory", "256Gi", "memory capacity of each node")
	fs.IntVar(&f.opts.NodePods, "node-pods", 110, "pod capacity of each node")
	fs.DurationVar(&f.opts.PodReadyDelay, "pod-ready-delay", 0, "how long kwok waits before marking a bound pod Running")
	fs.BoolVar(&f.opts.ControllerManager, "controller-manager", false, "also run kube-controller-manager")
	fs.BoolVar(&f.opts.Scheduler, "scheduler", false, "also run kube-scheduler")
	fs.IntVar(&f.opts.ProcessNodes, "process-nodes", 0, "nodes whose pods run as local processes (implies --scheduler and --controller-manager; with them --nodes may be 0)")
	fs.BoolVar(&f.opts.Knative, "knative", false, "also install Knative Serving (`make knative` builds it) and run its components on a process node (implies --process-nodes 1 at least)")
	fs.StringVar(&f.opts.KnativeDomain, "knative-domain", knativeinstall.DefaultDomain, "with --knative: the domain of Knative Services' host names")
	fs.StringVar(&f.ingress, "knative-ingress", "", "with --knative: the ingress's listen address (host:port on loopback; default a free port on 127.0.0.1)")
	fs.StringVar(&f.ingressHTTPS, "knative-ingress-https", "", "with --knative: the ingress's HTTPS listen address (host:port on loopback; default a free port on 127.0.0.1)")
}

// absDir resolves --dir, which the detached process must find from any cwd.
func (f *clusterFlags) absDir() (string, error) {
	switch {
	case f.opts.ProcessNodes < 0 || f.opts.ProcessNodes > localcluster.MaxProcessNodes:
		return "", usagef("--process-nodes must be in [0, %d], got %d", localcluster.MaxProcessNodes, f.opts.ProcessNodes)
	case f.opts.Nodes < 0 || f.opts.Nodes+f.opts.ProcessNodes < 1:
		return "", usagef("--nodes must be at least 1, or 0 with --process-nodes, got %d", f.opts.Nodes)
	}
	if err := f.knativeFlags(); err != nil {
		return "", err
	}
	if f.opts.ProcessNodes > 0 {
		f.opts.Scheduler, f.opts.ControllerManager = true, true
	}
	return filepath.Abs(f.dir)
}

// serveArgv is the command line of the detached "serve" process.
func (f *clusterFlags) serveArgv(dir string) ([]string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	o := f.opts
	return []string{self, "cluster", "serve",
		"--dir", dir,
		"--nodes", strconv.Itoa(o.Nodes),
		"--node-cpu", o.NodeCPU,
		"--node-memory", o.NodeMemory,
		"--node-pods", strconv.Itoa(o.NodePods),
		"--pod-ready-delay", o.PodReadyDelay.String(),
		"--controller-manager=" + strconv.FormatBool(o.ControllerManager),
		"--scheduler=" + strconv.FormatBool(o.Scheduler),
		"--process-nodes", strconv.Itoa(o.ProcessNodes),
		"--knative=" + strconv.FormatBool(o.Knative),
		"--knative-domain", o.KnativeDomain,
		"--knative-ingress", f.ingress,
		"--knative-ingress-https", f.ingressHTTPS,
	}, nil
}

func newClusterUpCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the control plane in the background; the last line is `export KUBECONFIG=...`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.nodesSet = cmd.Flags().Changed("nodes")
			dir, err := f.absDir()
			if err != nil {
				return err
			}
			argv, err := f.serveArgv(dir)
			if err != nil {
				return err
			}
			opts := f.opts
			opts.Dir = dir
			kubeconfig, err := localcluster.Up(cmd.Context(), opts, argv, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if opts.Knative {
				fmt.Fprintf(cmd.OutOrStdout(), "export GANTRY_INGRESS_HTTPS=https://%s\n", f.ingressHTTPS)
				fmt.Fprintf(cmd.OutOrStdout(), "export GANTRY_INGRESS=http://%s\n", f.ingress)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "export KUBECONFIG=%s\n", kubeconfig)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

func newClusterServeCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:    "serve",
		Short:  "Run the control plane in the foreground until SIGINT or SIGTERM (what up runs)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.nodesSet = true // up passes the --nodes it resolved
			dir, err := f.absDir()
			if err != nil {
				return err
			}
			opts := f.opts
			opts.Dir = dir
			if opts.ProcessNodes > 0 {
				// Pods name this binary "gantry": gantry fn NAME.
				self, err := os.Executable()
				if err != nil {
					return err
				}
				opts.Programs = map[string]string{"gantry": self}
			}
			opts.KnativeIngress = f.ingress // Gantry's Knative ingress, in the cluster's process
			opts.StartIngress = knativeIngressStarter(f.ingressHTTPS)
			return localcluster.Serve(cmd.Context(), opts)
		},
	}
	f.register(cmd)
	return cmd
}

func newClusterDownCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the background control plane and remove its folder",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if err := localcluster.Down(abs); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "stopped the cluster in %s and removed it\n", abs)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", localcluster.DefaultDir(), "the cluster's folder")
	return cmd
}

func newClusterEnvCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print `export KUBECONFIG=...` for the running control plane",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			kubeconfig, err := localcluster.Env(abs)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "export KUBECONFIG=%s\n", kubeconfig)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", localcluster.DefaultDir(), "the cluster's folder")
	return cmd
}

// knativeFlags checks the --knative flags: Knative's components need a
// process node, and its ingress a loopback address (a free port unless
// --knative-ingress names one; up picks it, so serve gets it fixed).
func (f *clusterFlags) knativeFlags() error {
	if !f.opts.Knative {
		if f.ingress != "" || f.ingressHTTPS != "" {
			return usagef("--knative-ingress and --knative-ingress-https need --knative")
		}
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(f.opts.KnativeDomain); len(errs) > 0 {
		return usagef("--knative-domain %q: %s", f.opts.KnativeDomain, strings.Join(errs, "; "))
	}
	if f.opts.ProcessNodes == 0 {
		f.opts.ProcessNodes = 1
	}
	if !f.nodesSet {
		f.opts.Nodes = 0
	}
	for _, a := range []struct {
		flag string
		addr *string
	}{{"--knative-ingress", &f.ingress}, {"--knative-ingress-https", &f.ingressHTTPS}} {
		if err := loopbackAddr(a.flag, a.addr); err != nil {
			return err
		}
	}
	if f.ingress == f.ingressHTTPS {
		return usagef("--knative-ingress and --knative-ingress-https are both %s", f.ingress)
	}
	return nil
}

// loopbackAddr checks a listen address on loopback, or picks a free port
// for an empty one.
func loopbackAddr(flag string, addr *string) error {
	if *addr == "" {
		free, err := freeLoopbackAddr()
		if err != nil {
			return err
		}
		*addr = free
	}
	host, port, err := net.SplitHostPort(*addr)
	if err != nil {
		return usagef("%s %q: %v", flag, *addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return usagef("%s %q: the host must be a loopback address", flag, *addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return usagef("%s %q: the port must be in [1, 65535]", flag, *addr)
	}
	return nil
}

// freeLoopbackAddr is a port on 127.0.0.1 that nothing listens on now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// knativeIngressStarter starts Gantry's Knative ingress for a local
// cluster, with its HTTPS listener at httpsAddr; its cluster-local
// listener takes a free loopback port.
func knativeIngressStarter(httpsAddr string) localcluster.IngressStarter {
	return func(kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, addr string) (localcluster.Ingress, error) {
		srv, err := knativeingress.StartListeners(knativeingress.Config{Kube: kube, Dynamic: dyn, Logger: log},
			knativeingress.Listeners{External: addr, Local: "127.0.0.1:0", HTTPS: httpsAddr})
		if err != nil {
			return nil, err // not a nil *Server in a non-nil interface
		}
		return srv, nil
	}
}
