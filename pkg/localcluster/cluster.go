package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/processnode"
)

// Options configures a local control plane. The zero value is a working
// cluster: etcd, kube-apiserver and kwok with one fake node.
type Options struct {
	Nodes               int           // kwok fake nodes (default 1)
	NodeCPU, NodeMemory string        // each node's capacity, e.g. "32", "256Gi" (default "32", "256Gi")
	NodePods            int           // pod capacity per node (default 110)
	PodReadyDelay       time.Duration // how long kwok waits before marking a bound pod Running and Ready (default 0)

	Scheduler         bool // also run kube-scheduler
	ControllerManager bool // also run kube-controller-manager (see the package doc for its controllers)

	// ProcessNodes are nodes whose pods run as local processes
	// (pkg/processnode), beside the kwok nodes; with ProcessNodes set,
	// Nodes may be 0. They need the scheduler and the controller manager,
	// which then also runs the EndpointSlice controller.
	ProcessNodes int
	// Programs and Images are the process nodes' program names and image
	// map (processnode.Config).
	Programs map[string]string
	Images   map[string][]string

	// Knative installs Knative Serving (`make knative` builds it) once the
	// control plane is ready, its components running as pods on the
	// process nodes; it needs ProcessNodes >= 1, and Start returns once
	// Knative is ready (pkg/knativeinstall.WaitReady).
	Knative bool
	// KnativeDomain is the cluster's domain for Knative Services (default
	// knativeinstall.DefaultDomain).
	KnativeDomain string
	// KnativeIngress, with Knative, is where Gantry's Knative ingress
	// (pkg/knativeingress) serves Knative Services by their host names
	// (host:port; its cluster-local listener takes a free port on
	// 127.0.0.1); "" runs no ingress. StartIngress starts it.
	KnativeIngress string
	// StartIngress starts the ingress KnativeIngress names. It is injected
	// (internal/cli passes pkg/knativeingress's) because the ingress's own
	// tests start clusters: this package cannot import it.
	StartIngress IngressStarter

	// AuditPolicy, if set, is the API server's audit policy (YAML): it
	// then writes its audit log, JSON lines, to AuditLogPath.
	AuditPolicy []byte

	Dir  string // working dir; a temp dir if empty (removed on Stop)
	Port int    // kube-apiserver's port on 127.0.0.1; 0 picks a free one

	// Progress, when set, receives one line per start-up step.
	Progress io.Writer
}

func (o Options) withDefaults() Options {
	if o.Nodes == 0 && o.ProcessNodes == 0 {
		o.Nodes = 1
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "32"
	}
	if o.NodeMemory == "" {
		o.NodeMemory = "256Gi"
	}
	if o.NodePods == 0 {
		o.NodePods = 110
	}
	return o
}

func (o Options) validate() error {
	if o.Nodes < 0 || o.NodePods < 0 || o.PodReadyDelay < 0 || o.Port < 0 || o.Port > 65535 {
		return fmt.Errorf("localcluster: negative or out-of-range option in %+v", o)
	}
	if err := o.validateProcessNodes(); err != nil {
		return err
	}
	if err := o.validateKnative(); err != nil {
		return err
	}
	for _, q := range []string{o.NodeCPU, o.NodeMemory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return fmt.Errorf("localcluster: node capacity %q: %w", q, err)
		}
	}
	return nil
}

// Cluster is a running control plane. Stop it when done.
type Cluster struct {
	opts    Options
	dir     string
	ownsDir bool
	ports   ports
	admin   *rest.Config
	client  kubernetes.Interface

	procs     []*process // in start order: etcd, kube-apiserver, then the rest
	ca        *authority
	pnodes    []*processnode.Node
	pnodeLogs []*os.File
	ingress   Ingress
	ingLog    *os.File
	// localRelay relays the pods' way to the ingress's cluster-local
	// listener (ingresslocal.go).
	localRelay    *processnode.Relay
	ingressLogger *slog.Logger

	stopOnce sync.Once
	stopErr  error
}

// startTimeout bounds Start even when ctx has no deadline.
const startTimeout = 2 * time.Minute

// stopGrace is how long a component that gets SIGTERM has before SIGKILL:
// kwok, kube-scheduler and kube-controller-manager exit within 0.1 s.
const stopGrace = 500 * time.Millisecond

// Start runs a control plane and returns once every component is healthy,
// every node is Ready and, with the controller manager, schedulable. ctx
// bounds the start-up only: afterwards the cluster runs until Stop.
//
// On failure every started process is stopped; the error names the component
// at fault, quotes the end of its log and gives the log folder, which is kept.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if err := RequireBinaries(); err != nil {
		return nil, err
	}
	if opts.Knative {
		if err := knativeinstall.RequireBuild(); err != nil {
			return nil, err
		}
		opts = opts.withKnativeImages()
	}
	p, err := pickPorts(opts.Port)
	if err != nil {
		return nil, err
	}
	c := &Cluster{opts: opts, ports: p}
	if err := c.makeDir(); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	err = c.run(runCtx)
	if err == nil {
		// Knative has its own bound (knativeTimeout), after the control plane's.
		err = c.installKnative(ctx)
	}
	if err != nil {
		// Nothing is worth a graceful stop: a component still starting
		// may not even handle SIGTERM yet (kube-apiserver waiting for etcd).
		// The logs are kept unless the caller gave up.
		aborted := ctx.Err() != nil
		_ = c.teardown(0, !aborted)
		if aborted {
			return nil, fmt.Errorf("local control plane: start-up cancelled: %w", ctx.Err())
		}
		return nil, fmt.Errorf("local control plane did not start: %w\n(logs kept in %s)", err, c.path("logs"))
	}
	return c, nil
}

// Stop stops the Knative ingress, the process nodes and every component
// together (kube-apiserver and etcd with SIGKILL, the others with SIGTERM
// and SIGKILL after 500 ms), so it returns within about a second, and, if
// Start made the working folder, removes it. It is safe to call more than
// once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() { c.stopErr = c.teardown(stopGrace, false) })
	return c.stopErr
}

// KubeconfigPath is the admin kubeconfig.
func (c *Cluster) KubeconfigPath() string { return c.path("kubeconfig") }

// AuditLogPath is the API server's audit log (Options.AuditPolicy).
func (c *Cluster) AuditLogPath() string { return c.path("audit.log") }

// RESTConfig returns a copy of the admin config (group system:masters). Its
// QPS and Burst are client-go's defaults; raise them for load tests.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.admin) }

// ControllerManagerURL is kube-controller-manager's secure port (its
// /metrics answers the admin's client certificate; the serving
// certificate is self-signed), "" if it was not started.
func (c *Cluster) ControllerManagerURL() string {
	if !c.opts.ControllerManager {
		return ""
	}
	return fmt.Sprintf("https://127.0.0.1:%d", c.ports.controllerManager)
}

// Dir is the working folder: certificates, kubeconfigs, etcd data and logs.
func (c *Cluster) Dir() string { return c.dir }

// LogPaths maps each started component to its log file.
func (c *Cluster) LogPaths() map[string]string {
	m := make(map[string]string, len(c.procs))
	for _, p := range c.procs {
		m[p.name] = p.logPath
	}
	return m
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, "localcluster: "+format+"\n", args...)
	}
}

// makeDir creates the working folder. A folder the caller names is reused,
// but a previous run's etcd data and logs in it are cleared.
func (c *Cluster) makeDir() error {
	if c.opts.Dir == "" {
		dir, err := makeOwnedTempDir()
		if err != nil {
			return err
		}
		c.dir, c.ownsDir = dir, true
	} else {
		c.dir = c.opts.Dir
		for _, stale := range []string{"etcd", "logs"} {
			if err := os.RemoveAll(c.path(stale)); err != nil {
				return err
			}
		}
	}
	return os.MkdirAll(c.path("logs"), 0o700)
}

// teardown stops everything at once: the Knative ingress, the process
// nodes (their pods get at most the nodes' ShutdownGrace, 500 ms) and
// every component, then removes an owned folder, or when keepLogs is set
// only the etcd data in it. The cluster's data goes with it (a folder the
// caller named is cleared by the next Start), so no component's orderly
// shutdown saves anything: kube-apiserver and etcd get SIGKILL at once
// (stopped together on SIGTERM they took 4.2 s, the apiserver draining
// and etcd waiting for its streams; in order 1.2 s), the others SIGTERM
// and SIGKILL after grace; with grace 0 every one gets SIGKILL.
func (c *Cluster) teardown(grace time.Duration, keepLogs bool) error {
	var (
		wg               sync.WaitGroup
		ingErr, nodesErr error
	)
	wg.Go(func() { ingErr = c.stopKnativeIngress() })
	wg.Go(func() { nodesErr = c.stopProcessNodes() })
	stopTogether(c.procs, grace)
	wg.Wait()
	err := errors.Join(ingErr, nodesErr)
	switch {
	case keepLogs:
		err = errors.Join(err, os.RemoveAll(c.path("etcd")))
	case c.ownsDir:
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// killedAtOnce are the components Stop does not ask to stop: see teardown.
var killedAtOnce = map[string]bool{"kube-apiserver": true, "etcd": true}

// killAfter is the bound on a component's orderly exit; tests replace it
// to fire it when they choose.
var killAfter = time.After

// stopTogether signals every one of ps at once (SIGKILL to those in
// killedAtOnce, and to all when grace is 0; SIGTERM to the rest), then
// waits until each has exited or grace is over, when it kills what is
// left. It returns once every process is reaped.
func stopTogether(ps []*process, grace time.Duration) {
	for _, p := range ps {
		if grace == 0 || killedAtOnce[p.name] {
			p.signal(syscall.SIGKILL)
		} else {
			p.signal(syscall.SIGTERM)
		}
	}
	var deadline <-chan time.Time
	if grace > 0 {
		deadline = killAfter(grace)
	}
	over := grace == 0 // everything got SIGKILL: wait for the reaping
	for _, p := range ps {
		if !over {
			select {
			case <-p.done:
				continue
			case <-deadline:
				over = true
			}
		}
		p.signal(syscall.SIGKILL)
		<-p.done
	}
}
