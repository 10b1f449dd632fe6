package processnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Labels and annotations on a process node.
const (
	// LabelType is "process" on a process node, as kwok's nodes carry
	// type=kwok, so a pod can select one with a nodeSelector.
	LabelType = "type"
	TypeValue = "process"
)

// HostIP is a process node's address, and its pods' host IP.
const HostIP = "127.0.0.1"

// Config configures a process node. Name and Client are required.
type Config struct {
	Name   string
	Client kubernetes.Interface
	// Dir is the node's working folder: pods/ (one folder per pod with its
	// container logs) and bin/ (the programs). Default: a temp folder,
	// removed when the node stops.
	Dir string
	// Programs name local executables pods may run by name, e.g.
	// {"gantry": "/usr/local/bin/gantry"}: each is linked into Dir/bin,
	// which comes first in every container's PATH, so both a command
	// ["gantry", "fn", "echo"] and ["/bin/sh", "-c", "gantry fn echo"]
	// run it.
	Programs map[string]string
	// Images map an image to the argv it stands for, for containers with
	// no command (the image's entrypoint): {"registry/echo:1": {"gantry",
	// "fn", "echo"}}, or Knative's {"ko://knative.dev/serving/cmd/queue":
	// {"/path/to/queue"}}. Images dev.local/gantry-fn:NAME not in the map
	// run `gantry fn NAME` on $PORT (Programs["gantry"] names the binary).
	// A container with neither fails to start.
	Images map[string][]string
	// Addresses is the prefix the pods' addresses come from; when set, it
	// must be local already and pods share the host's network. Default: a
	// /24 no other node on the machine holds (claimed with a lock file in
	// the temp folder) of 198.18.0.0/15, each pod in a network namespace
	// of its own on the node's bridge, when the process may create them
	// (CAP_NET_ADMIN and CAP_SYS_ADMIN, iproute2), else of 127.64.0.0/10.
	Addresses netip.Prefix
	// ServiceRange is the control plane's Service range, which the pods'
	// namespaces route onto the node's bridge, so a dial to a ClusterIP
	// never leaves the machine (default DefaultServiceRange).
	ServiceRange netip.Prefix
	// APIServer is the API server's address on the host's loopback
	// (host:port). When set and the pods have namespaces, the node relays
	// the bridge address's same port to it, so pods reach the API server
	// at their host IP (APIServerForPods). In-cluster clients find it by
	// KUBERNETES_SERVICE_HOST=kubernetes.default.svc (a name the API
	// server's certificate must hold; the pods' hosts files give the
	// relay's address) and KUBERNETES_SERVICE_PORT; pods without a
	// namespace get this address itself.
	APIServer string
	// MaxPods is the node's pod capacity and the most addresses it hands
	// out (default 110, a kubelet's; at most the prefix's host addresses).
	MaxPods int
	// CPU and Memory are the node's capacity (default: this machine's).
	CPU, Memory string
	// Labels are added to the node's own (type=process, the hostname,
	// os and arch); Taints are its taints.
	Labels map[string]string
	Taints []corev1.Taint
	// TLS, when set, serves the kubelet API (container logs; kubectl logs
	// through the API server) on 127.0.0.1 on a free port, advertised as
	// the node's kubelet endpoint. It should verify client certificates.
	TLS *tls.Config
	// MaxLogBytes caps each run's log (default 16 MiB).
	MaxLogBytes int64
	// BackoffMin and BackoffMax bound the wait before a failed container
	// restarts (default 1 s doubling to 30 s; a kubelet's are 10 s and
	// 5 min). A run of 10 minutes resets it.
	BackoffMin, BackoffMax time.Duration
	// ShutdownGrace is the most a pod gets between SIGTERM and SIGKILL
	// when the node stops (default 500 ms, so a node stops within a second).
	ShutdownGrace time.Duration
	// Workers is how many pods the pod controller syncs at once (default 4).
	Workers int
	Logger  *slog.Logger
}

var programName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" || c.Client == nil {
		return c, errors.New("processnode: Config.Name and Config.Client are required")
	}
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.MaxPods < 1 || c.MaxPods > 4096 {
		return c, fmt.Errorf("processnode: MaxPods %d out of [1, 4096]", c.MaxPods)
	}
	if c.CPU == "" {
		c.CPU = strconv.Itoa(runtime.NumCPU())
	}
	if c.Memory == "" {
		c.Memory = machineMemory()
	}
	for _, q := range []string{c.CPU, c.Memory} {
		if _, err := resource.ParseQuantity(q); err != nil {
			return c, fmt.Errorf("processnode: capacity %q: %w", q, err)
		}
	}
	for name, path := range c.Programs {
		if !programName.MatchString(name) {
			return c, fmt.Errorf("processnode: program name %q", name)
		}
		if !filepath.IsAbs(path) {
			return c, fmt.Errorf("processnode: program %s: %q is not an absolute path", name, path)
		}
	}
	for image, argv := range c.Images {
		if len(argv) == 0 {
			return c, fmt.Errorf("processnode: image %q maps to an empty command", image)
		}
	}
	if c.MaxLogBytes <= 0 {
		c.MaxLogBytes = 16 << 20
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = time.Second
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(30*time.Second, c.BackoffMin)
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 500 * time.Millisecond
	}
	if !c.ServiceRange.IsValid() {
		c.ServiceRange = DefaultServiceRange
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

func machineMemory() string {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return "16Gi"
	}
	return strconv.FormatUint(uint64(si.Totalram)*uint64(si.Unit), 10)
}

// Node is a running process node.
type Node struct {
	cfg    Config
	prov   *Provider
	vk     *nodeutil.Node
	srv    *http.Server
	lock   *os.File // holds the claim on the address prefix
	prefix netip.Prefix
	net    *podNet // the pods' bridge and namespaces, if the node made them
	relay  *Relay
	proxy  *serviceProxy // answers the ClusterIPs, when the pods have namespaces
	// stopServices stops the Service and EndpointSlice informers of the
	// hosts files and the service proxy.
	stopServices chan struct{}
	servicesDone chan struct{} // closed when their loop has returned
	ownsDir      bool
	cancel       context.CancelFunc
	done         chan struct{}
	runErr       error
	stopOnce     chan struct{}
}

// Start registers the node and returns once it is Ready; it then runs
// until Stop. ctx bounds the start-up only.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, done: make(chan struct{}), stopOnce: make(chan struct{}, 1)}
	if err := n.setup(); err != nil {
		n.cleanup()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	runCtx = vklog.WithLogger(runCtx, vkslog.FromSlog(cfg.Logger.With("node", cfg.Name)))
	go func() {
		defer close(n.done)
		n.runErr = n.vk.Run(runCtx)
	}()
	if err := n.vk.WaitReady(ctx, 0); err != nil {
		_ = n.Stop()
		return nil, fmt.Errorf("processnode %s: not ready: %w", cfg.Name, err)
	}
	return n, nil
}

func (n *Node) setup() error {
	cfg := n.cfg
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "gantry-processnode-*")
		if err != nil {
			return err
		}
		n.cfg.Dir, n.ownsDir = dir, true
		cfg.Dir = dir
	}
	binDir := filepath.Join(cfg.Dir, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return err
	}
	for name, path := range cfg.Programs {
		link := filepath.Join(binDir, name)
		_ = os.Remove(link)
		if err := os.Symlink(path, link); err != nil {
			return err
		}
	}
	prefix := cfg.Addresses
	if !prefix.IsValid() {
		var err error
		if prefix, err = n.claimAddresses(); err != nil {
			return err
		}
	}
	n.prefix = prefix
	hostIP := HostIP
	var reserved []netip.Addr
	if n.net != nil {
		// The pods reach their host at the bridge's address.
		hostIP = n.net.gateway.String()
		reserved = append(reserved, n.net.gateway, n.net.serviceAddr())
	}
	addrs, err := newAddrPool(prefix, cfg.MaxPods, reserved...)
	if err != nil {
		return err
	}
	if n.net != nil && cfg.APIServer != "" {
		if n.relay, err = startAPIRelay(hostIP, cfg.APIServer, cfg.Logger); err != nil {
			return fmt.Errorf("processnode: API server relay: %w", err)
		}
	}
	port := 0
	var ln net.Listener
	if cfg.TLS != nil {
		if ln, err = tls.Listen("tcp", net.JoinHostPort(HostIP, "0"), cfg.TLS); err != nil {
			return fmt.Errorf("processnode: kubelet API listener: %w", err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
	}
	spec := n.nodeSpec(port, min(cfg.MaxPods, len(addrs.free)))
	apiHost, apiPort := n.apiForPods()
	var hosts *hostsTable
	if n.net != nil {
		hosts = &hostsTable{}
		if n.relay != nil {
			hosts.apiAddr = hostIP
		}
	}
	newProv := func(pc nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		n.prov = newProvider(providerConfig{
			HostIP: hostIP, Dir: cfg.Dir, BinDir: binDir, Net: n.net,
			BasePath: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			Images:   cfg.Images, MaxLogBytes: cfg.MaxLogBytes,
			BackoffMin: cfg.BackoffMin, BackoffMax: cfg.BackoffMax, BackoffReset: 10 * time.Minute,
			ShutdownGrace: cfg.ShutdownGrace, Logger: cfg.Logger.With("node", cfg.Name),
			Env:    envSources{configMaps: pc.ConfigMaps, secrets: pc.Secrets, client: cfg.Client},
			Remove: n.removePod, APIHost: apiHost, APIPort: apiPort, Hosts: hosts,
			Allocatable: spec.Status.Allocatable,
		}, addrs)
		return n.prov, nil, nil
	}
	n.vk, err = nodeutil.NewNode(cfg.Name, newProv, nodeutil.WithClient(cfg.Client), func(c *nodeutil.NodeConfig) error {
		c.NodeSpec = spec
		c.NumWorkers = cfg.Workers
		c.SkipDownwardAPIResolution = true // the provider resolves env itself, status.podIP included
		c.InformerResyncPeriod = time.Minute
		return nil
	})
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return err
	}
	if hosts != nil {
		if err := n.watchServices(); err != nil {
			return fmt.Errorf("processnode: service proxy: %w", err)
		}
	}
	if ln != nil {
		h := api.PodHandler(api.PodHandlerConfig{
			RunInContainer:    n.prov.RunInContainer,
			AttachToContainer: n.prov.AttachToContainer,
			PortForward:       n.prov.PortForward,
			GetContainerLogs:  n.prov.GetContainerLogs,
			GetPods:           n.prov.GetPods,
			GetPodsFromKubernetes: func(ctx context.Context) ([]*corev1.Pod, error) {
				return n.prov.GetPods(ctx)
			},
		}, false)
		n.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = n.srv.Serve(ln) }()
	}
	return nil
}

// apiForPods is where pods reach the API server: the relay, by the name
// its certificate holds and the pods' hosts files give the relay's address
// (the address itself is not in the certificate), or the API server itself
// on loopback when the pods share the host's network.
func (n *Node) apiForPods() (host, port string) {
	switch {
	case n.relay != nil:
		_, port, _ = net.SplitHostPort(n.relay.Addr())
		return apiServerName, port
	case n.net == nil && n.cfg.APIServer != "":
		host, port, _ = net.SplitHostPort(n.cfg.APIServer)
		return host, port
	}
	return "", ""
}

// apiServerName is the API server's name for pods: one its serving
// certificate holds (pkg/localcluster issues it for kubernetes,
// kubernetes.default and kubernetes.default.svc).
const apiServerName = "kubernetes.default.svc"

// watchServices keeps the pods' hosts files and the service proxy in step
// with the cluster's Services and EndpointSlices until the node stops.
func (n *Node) watchServices() error {
	ns, err := n.net.addServiceNS()
	if err != nil {
		return err
	}
	f := informers.NewSharedInformerFactory(n.cfg.Client, 10*time.Minute)
	slices := f.Discovery().V1().EndpointSlices()
	services := f.Core().V1().Services()
	n.proxy = newServiceProxy(ns, n.net.services, slices.Lister(), n.cfg.Logger.With("node", n.cfg.Name))
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	for _, inf := range []cache.SharedIndexInformer{slices.Informer(), services.Informer()} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) }})
	}
	stop := make(chan struct{})
	n.stopServices = stop
	f.Start(stop)
	n.servicesDone = make(chan struct{})
	go func() {
		defer close(n.servicesDone)
		if !cache.WaitForCacheSync(stop, slices.Informer().HasSynced, services.Informer().HasSynced) {
			return
		}
		for {
			n.proxy.sync(services.Lister())
			n.prov.refreshHosts(services.Lister(), slices.Lister())
			select {
			case <-stop:
				return
			case <-wake:
			}
		}
	}()
	return nil
}

// claimAddresses claims a /24 no other node on the machine uses: of
// 198.18.0.0/15 with the node's bridge and a namespace per pod when this
// process may create them, so the pods' addresses can be EndpointSlice
// endpoints; else of 127.64.0.0/10, which needs no privilege but which the
// API server refuses in EndpointSlices.
func (n *Node) claimAddresses() (netip.Prefix, error) {
	dir := addressLockDir()
	prefix, lock, err := claimPrefix(dir, routedSpace)
	if err != nil {
		return netip.Prefix{}, err
	}
	pn, nerr := setupPodNet(prefix, n.cfg.ServiceRange, n.cfg.Dir)
	if nerr == nil {
		n.lock, n.net = lock, pn
		return prefix, nil
	}
	lock.Close()
	n.cfg.Logger.Warn("pods share the host's network on loopback addresses, which EndpointSlices refuse: no pod network namespaces", "err", nerr)
	prefix, n.lock, err = claimPrefix(dir, loopbackSpace)
	return prefix, err
}

// Addresses is the prefix the pods' addresses come from.
func (n *Node) Addresses() netip.Prefix { return n.prefix }

// Routed reports whether the pods' addresses are outside 127.0.0.0/8, so
// the EndpointSlice controller can publish them.
//
// With the default Addresses, it also means each pod has a network
// namespace of its own (Namespaced).
func (n *Node) Routed() bool { return !loopback.Contains(n.prefix.Addr()) }

// APIServerForPods is where the node's pods reach the API server
// (Config.APIServer), or "" when they do not.
func (n *Node) APIServerForPods() string {
	if n.relay == nil {
		return ""
	}
	return n.relay.Addr()
}

// Namespaced reports whether each pod runs in a network namespace of its
// own on the node's bridge.
func (n *Node) Namespaced() bool { return n.net != nil }

// Bridge is the name of the node's bridge on the host and its address
// (the pods' host IP), or "" when the pods are not namespaced.
func (n *Node) Bridge() (string, netip.Addr) {
	if n.net == nil {
		return "", netip.Addr{}
	}
	return bridgeName(n.net.index), n.net.gateway
}

// nodeSpec is the node object: capacity, Ready once running, no pressure,
// 127.0.0.1 as its only address and the kubelet API's port.
func (n *Node) nodeSpec(port, maxPods int) corev1.Node {
	cfg := n.cfg
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cfg.CPU),
		corev1.ResourceMemory: resource.MustParse(cfg.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	lbls := map[string]string{
		LabelType: TypeValue, "kubernetes.io/hostname": cfg.Name,
		"kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		"kubernetes.io/role": "agent",
	}
	maps.Copy(lbls, cfg.Labels)
	now := metav1.Now()
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: cfg.Name, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: cfg.Taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			Phase: corev1.NodePending,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated"),
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: HostIP}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
				KubeletVersion: "processnode", ContainerRuntimeVersion: "process://",
			},
		},
	}
}

// removePod deletes a pod object whose processes are gone, as a kubelet
// does once a deleted pod's containers have stopped, so it does not wait
// out its grace period in the API. The UID precondition spares a new pod
// of the same name.
func (n *Node) removePod(pod *corev1.Pod) {
	// Bounded tightly: a node stopping waits for this.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := n.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		n.cfg.Logger.Warn("removing a stopped pod", "pod", pod.Namespace+"/"+pod.Name, "err", err)
	}
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Dir is the node's working folder.
func (n *Node) Dir() string { return n.cfg.Dir }

// Done is closed when the node has stopped running, by Stop or an error.
func (n *Node) Done() <-chan struct{} { return n.done }

// Stop stops the pod controller and the kubelet API, then every pod (each
// gets at most ShutdownGrace before SIGKILL), removes the pods' bridge and
// namespaces, releases the addresses and removes a folder Start created. The node object stays, as a stopped
// kubelet's does. Safe to call more than once.
func (n *Node) Stop() error {
	select {
	case n.stopOnce <- struct{}{}:
	default:
		<-n.done
		return nil
	}
	if n.cancel != nil {
		n.cancel()
		<-n.done
	}
	n.cleanup()
	if errors.Is(n.runErr, context.Canceled) {
		return nil
	}
	return n.runErr
}

func (n *Node) cleanup() {
	if n.stopServices != nil {
		close(n.stopServices)
		if n.servicesDone != nil {
			<-n.servicesDone
		}
	}
	if n.proxy != nil {
		n.proxy.close()
	}
	if n.srv != nil {
		_ = n.srv.Close()
	}
	if n.prov != nil {
		n.prov.Close()
	}
	if n.relay != nil {
		n.relay.Close()
	}
	if n.net != nil {
		// After the pods: their namespaces go with the bridge.
		n.net.close()
	}
	if n.lock != nil {
		n.lock.Close()
	}
	if n.ownsDir {
		_ = os.RemoveAll(n.cfg.Dir)
	}
}
