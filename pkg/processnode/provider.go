package processnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// providerConfig is what the provider needs of the node.
type providerConfig struct {
	HostIP        string
	Dir           string              // pods live in Dir/pods
	BinDir        string              // first in every container's PATH
	BasePath      string              // the rest of the PATH
	Images        map[string][]string // image -> program, for containers without a command
	MaxLogBytes   int64
	BackoffMin    time.Duration
	BackoffMax    time.Duration
	BackoffReset  time.Duration // a run this long resets the back-off
	ShutdownGrace time.Duration // the most a pod gets when the node stops
	Logger        *slog.Logger
	Env           envSources
	Net           *podNet // when set, each pod gets a network namespace on it
	// APIHost and APIPort are where the pods reach the API server
	// (KUBERNETES_SERVICE_HOST and _PORT), "" when they do not.
	APIHost, APIPort string
	// Hosts is what the pods' hosts files say (hosts.go); nil names no
	// Service.
	Hosts *hostsTable
	// Allocatable is the node's, what a resourceFieldRef of a limit the
	// container does not set gives.
	Allocatable corev1.ResourceList
	// Remove, when set, is called once a deleted pod's processes are gone,
	// to remove the pod object as a kubelet does (not on node shutdown).
	Remove func(pod *corev1.Pod)
}

// Provider runs pods as local processes. It implements virtual-kubelet's
// PodLifecycleHandler and PodNotifier: CreatePod starts a pod's containers
// and returns, and every change of a pod's status goes out through the
// NotifyPods callback from one goroutine of the provider's own.
type Provider struct {
	cfg   providerConfig
	addrs *addrPool

	mu     sync.Mutex // guards the fields below
	pods   map[string]*podRun
	closed bool
	dirty  map[*podRun]bool
	notify func(*corev1.Pod)

	wake chan struct{} // a buffer of one: the notifier has work
	wg   sync.WaitGroup
}

func newProvider(cfg providerConfig, addrs *addrPool) *Provider {
	return &Provider{cfg: cfg, addrs: addrs, pods: map[string]*podRun{},
		dirty: map[*podRun]bool{}, wake: make(chan struct{}, 1)}
}

func podKey(ns, name string) string { return ns + "/" + name }

// CreatePod starts the pod's containers. A pod the node cannot run (init
// or ephemeral containers, gRPC probes, no free address, an environment
// that does not resolve) is not an error the pod controller would retry:
// it becomes Failed with the reason in its status.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("processnode: the node is stopping")
	}
	if old, ok := p.pods[key]; ok {
		p.mu.Unlock()
		old.mu.Lock()
		same := old.pod.UID == pod.UID
		old.mu.Unlock()
		if same {
			return nil
		}
		return fmt.Errorf("processnode: pod %s: a previous pod of that name is still stopping", key)
	}
	r := &podRun{p: p, key: key, pod: pod.DeepCopy(), started: metav1.Now(),
		conds:  map[corev1.PodConditionType]corev1.PodCondition{},
		stopCh: make(chan struct{}), killCh: make(chan struct{}), gone: make(chan struct{}),
		dir: filepath.Join(p.cfg.Dir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))}
	// The pod is visible (GetPod) while it is prepared; its lock keeps
	// readers out until its address and containers are set.
	r.mu.Lock()
	p.pods[key] = r
	p.wg.Add(1)
	p.mu.Unlock()
	r.refused = p.prepare(r)
	r.mu.Unlock()
	if r.refused != "" {
		p.cfg.Logger.Warn("pod refused", "pod", key, "reason", r.refused)
	}
	for _, c := range r.cs {
		r.loops.Add(1)
		go c.loop()
	}
	if r.refused == "" && len(pod.Spec.Volumes) > 0 {
		r.loops.Add(1)
		go r.keepVolumes()
	}
	go r.finish()
	p.markDirty(r)
	return nil
}

// prepare checks the pod, gives it an address and a folder and builds its
// containers; it returns why the pod cannot run, or "". Call with r.mu held.
func (p *Provider) prepare(r *podRun) string {
	pod := r.pod
	switch {
	case len(pod.Spec.InitContainers) > 0:
		return "init containers are not supported by the process node"
	case len(pod.Spec.EphemeralContainers) > 0:
		return "ephemeral containers are not supported by the process node"
	case pod.Spec.HostNetwork:
		return "hostNetwork pods are not supported by the process node"
	}
	ip, err := p.addrs.get()
	if err != nil {
		return err.Error()
	}
	r.ip = ip
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err.Error()
	}
	if p.cfg.Net != nil {
		ns, err := p.cfg.Net.addPod(ip)
		if err != nil {
			return "pod network: " + err.Error()
		}
		r.netns = ns
	}
	if r.netns != "" {
		r.writeHostsLocked()
	}
	w := r.volumeWriter(true)
	vols, err := w.write(context.Background())
	if err != nil {
		return err.Error()
	}
	r.vols = vols
	base := []string{"PATH=" + p.cfg.BinDir + string(filepath.ListSeparator) + p.cfg.BasePath,
		"HOME=" + r.dir, "HOSTNAME=" + pod.Name}
	if p.cfg.APIHost != "" {
		base = append(base, "KUBERNETES_SERVICE_HOST="+p.cfg.APIHost, "KUBERNETES_SERVICE_PORT="+p.cfg.APIPort,
			"KUBERNETES_SERVICE_PORT_HTTPS="+p.cfg.APIPort)
	}
	var cs []*container
	for i := range pod.Spec.Containers {
		spec := pod.Spec.Containers[i]
		cbase := base
		if _, fn := gantryFn(spec.Image); fn && len(spec.Command) == 0 {
			// Knative's user-container contract: $PORT, 8080 by default.
			cbase = append(slices.Clone(base), "PORT=8080")
		}
		env, err := p.cfg.Env.containerEnv(pod, &spec, ip.String(), p.cfg.HostIP, cbase, p.cfg.Allocatable)
		if err != nil {
			return fmt.Sprintf("container %s: %v", spec.Name, err)
		}
		t := probeTarget{ip: ip.String(), ports: spec.Ports, netns: r.netns}
		for kind, probe := range map[string]*corev1.Probe{"readiness": spec.ReadinessProbe, "liveness": spec.LivenessProbe, "startup": spec.StartupProbe} {
			if err := checkProbe(kind, probe, t); err != nil {
				return fmt.Sprintf("container %s: %v", spec.Name, err)
			}
		}
		mounts, err := containerMounts(pod, &spec, vols.paths, env)
		if err != nil {
			return fmt.Sprintf("container %s: %v", spec.Name, err)
		}
		if r.netns != "" {
			if err := makeMountPoints(mounts); err != nil {
				return fmt.Sprintf("container %s: %v", spec.Name, err)
			}
		} else {
			env = remapMounts(env, spec.VolumeMounts, vols.paths)
		}
		c := &container{r: r, spec: spec, env: env, mounts: mounts}
		c.status = corev1.ContainerStatus{Name: spec.Name, Image: spec.Image, ImageID: "processnode://" + spec.Image,
			State:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			Started: ptrBool(false)}
		cs = append(cs, c)
	}
	if r.netns == "" {
		r.notice = unmounted(cs)
		for _, c := range cs {
			c.mounts = nil
		}
	}
	r.cs = cs
	return ""
}

// UpdatePod takes the pod's new metadata; a process cannot change what it
// runs, so spec changes other than deletion (DeletePod) are not applied.
func (p *Provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	r := p.get(podKey(pod.Namespace, pod.Name))
	if r == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	r.update(func() { r.pod.ObjectMeta = *pod.ObjectMeta.DeepCopy() })
	return nil
}

// DeletePod stops the pod: SIGTERM to each container's process group, then
// SIGKILL once the grace period is over: the deletion's grace period, else
// the pod's terminationGracePeriodSeconds (30 s by default). It returns at
// once; the terminal status follows through NotifyPods.
func (p *Provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	r := p.get(podKey(pod.Namespace, pod.Name))
	if r == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	grace := specGrace(pod)
	if s := pod.DeletionGracePeriodSeconds; s != nil {
		grace = time.Duration(*s) * time.Second
	}
	r.mu.Lock()
	r.deleted = true
	r.mu.Unlock()
	r.stop(grace)
	return nil
}

func (p *Provider) get(key string) *podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[key]
}

// forget drops a finished pod from the node.
func (p *Provider) forget(r *podRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pods[r.key] == r {
		delete(p.pods, r.key)
	}
}

// GetPod returns the pod with its current status.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	r := p.get(podKey(namespace, name))
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return r.snapshot(), nil
}

// GetPodStatus returns the pod's current status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every pod on the node, in name order.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].key < runs[j].key })
	out := make([]*corev1.Pod, len(runs))
	for i, r := range runs {
		out[i] = r.snapshot()
	}
	return out, nil
}

// NotifyPods registers the callback that receives every status change and
// starts the goroutine that calls it, which ends with ctx.
func (p *Provider) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
	go p.notifier(ctx)
	p.signal()
}

func (p *Provider) markDirty(r *podRun) {
	p.mu.Lock()
	p.dirty[r] = true
	p.mu.Unlock()
	p.signal()
}

func (p *Provider) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// notifier delivers status changes: each pod marked since the last round
// once, with its status as it is when delivered.
func (p *Provider) notifier(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		cb, dirty := p.notify, p.dirty
		if cb != nil {
			p.dirty = map[*podRun]bool{}
		}
		p.mu.Unlock()
		if cb == nil {
			continue
		}
		runs := make([]*podRun, 0, len(dirty))
		for r := range dirty {
			runs = append(runs, r)
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].key < runs[j].key })
		for _, r := range runs {
			cb(r.snapshot())
		}
	}
}

// isClosed reports whether Close has begun: the node is stopping.
func (p *Provider) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close stops every pod, giving each at most ShutdownGrace between SIGTERM
// and SIGKILL, and waits until their processes are gone.
func (p *Provider) Close() {
	p.mu.Lock()
	p.closed = true
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	for _, r := range runs {
		r.mu.Lock()
		grace := min(specGrace(r.pod), p.cfg.ShutdownGrace)
		r.mu.Unlock()
		r.stop(grace)
	}
	p.wg.Wait()
}

// GetContainerLogs returns a container's output, of its current run or,
// with Previous, of the run before.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	r := p.get(podKey(namespace, podName))
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	var lg *runLog
	r.mu.Lock()
	for _, c := range r.cs {
		if c.spec.Name == containerName {
			lg = c.cur
			if opts.Previous {
				lg = c.prev
			}
		}
	}
	r.mu.Unlock()
	if lg == nil {
		return nil, errdefs.NotFoundf("container %s of pod %s/%s has no log yet (or no previous run)", containerName, namespace, podName)
	}
	o := LogOptions{Tail: opts.Tail, LimitBytes: opts.LimitBytes, Timestamps: opts.Timestamps, Follow: opts.Follow, Since: opts.SinceTime}
	if opts.SinceSeconds > 0 {
		o.Since = time.Now().Add(-time.Duration(opts.SinceSeconds) * time.Second)
	}
	return lg.open(ctx, o)
}

var errUnsupported = errdefs.InvalidInput("not supported by the process node")

// RunInContainer is not supported: a container is a process, not a
// namespace to enter.
func (p *Provider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return errUnsupported
}

// AttachToContainer is not supported: a container's stdin is /dev/null.
func (p *Provider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return errUnsupported
}

// PortForward is not supported: a pod's address is reachable on this
// machine already.
func (p *Provider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return errUnsupported
}

// GetStatsSummary is not supported.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errUnsupported
}

// GetMetricsResource is not supported.
func (p *Provider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errUnsupported
}
