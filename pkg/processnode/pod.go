package processnode

import (
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultGrace is a pod's termination grace period when its spec has none.
const defaultGrace = 30 * time.Second

// podRun is one pod on the node: its address, its folder and its
// containers. mu guards the pod object, the containers' status and the
// stop state.
type podRun struct {
	p     *Provider
	key   string
	ip    netip.Addr // invalid when the pod was refused
	netns string     // the pod's network namespace, "" when it shares the host's
	dir   string

	mu      sync.Mutex
	pod     *corev1.Pod // the latest from Kubernetes; its status is built by snapshot
	started metav1.Time
	refused string // why the node refused the pod; it is Failed
	notice  string // what the node could not give the pod, for its status message
	vols    *podVolumes
	// hostsGone is set once the pod's hosts file is removed, so no
	// refresh writes it again.
	hostsGone bool
	cs        []*container
	conds     map[corev1.PodConditionType]corev1.PodCondition
	stopping  bool
	deleted   bool // stopped by DeletePod, not by the node stopping
	stopAt    time.Time

	stopCh    chan struct{} // closed when the pod is to stop: SIGTERM
	killCh    chan struct{} // closed when its grace period is over: SIGKILL
	killOnce  sync.Once
	killTimer *time.Timer
	loops     sync.WaitGroup // the containers' loops
	gone      chan struct{}  // closed once its processes are gone, its address freed and its folder removed
}

func (r *podRun) ipString() string {
	if r.ip.IsValid() {
		return r.ip.String()
	}
	return ""
}

func (r *podRun) restartPolicy() corev1.RestartPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.pod.Spec.RestartPolicy; p != "" {
		return p
	}
	return corev1.RestartPolicyAlways
}

func (r *podRun) isStopping() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopping
}

// update changes state under the lock and queues a status notification.
func (r *podRun) update(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
	r.p.markDirty(r)
}

func (r *podRun) setFinal(c *container) { r.update(func() { c.final = true }) }

// stop ends the pod: SIGTERM to every container now, SIGKILL once grace
// has passed. A second stop may shorten the grace period, never lengthen it.
func (r *podRun) stop(grace time.Duration) {
	grace = max(grace, 0)
	r.mu.Lock()
	at := time.Now().Add(grace)
	switch {
	case !r.stopping:
		r.stopping, r.stopAt = true, at
		for _, c := range r.cs {
			c.status.Ready = false
		}
		close(r.stopCh)
		r.killTimer = time.AfterFunc(grace, r.kill)
	case at.Before(r.stopAt):
		r.stopAt = at
		r.killTimer.Reset(grace)
	}
	r.mu.Unlock()
	r.p.markDirty(r)
}

func (r *podRun) kill() { r.killOnce.Do(func() { close(r.killCh) }) }

// probeKillGrace is how long a container killed by a failed probe gets
// between SIGTERM and SIGKILL: the probe's own grace period, else the pod's.
func (r *podRun) probeKillGrace(c *container) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range []*corev1.Probe{c.spec.LivenessProbe, c.spec.StartupProbe} {
		if p != nil && p.TerminationGracePeriodSeconds != nil {
			return time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
		}
	}
	return specGrace(r.pod)
}

func specGrace(pod *corev1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return defaultGrace
}

// finish waits until the containers are done and the pod is stopping,
// then reports the final status, frees the address, removes the folder and
// drops the pod from the node.
func (r *podRun) finish() {
	defer r.p.wg.Done()
	r.loops.Wait()
	<-r.stopCh
	r.mu.Lock()
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	deleted := r.deleted
	r.mu.Unlock()
	r.p.markDirty(r)
	if remove := r.p.cfg.Remove; deleted && remove != nil {
		remove(r.snapshot())
	}
	if r.netns != "" {
		r.mu.Lock()
		r.hostsGone = true
		removeHosts(r.netns)
		r.mu.Unlock()
		// A stopping node removes every pod's namespace in one go
		// (podNet.close) once the pods are gone.
		if !r.p.isClosed() {
			r.p.cfg.Net.delPod(r.ip)
		}
	}
	removeMemoryDirs(r.dir)
	if r.ip.IsValid() {
		if err := r.p.addrs.put(r.ip); err != nil {
			r.p.cfg.Logger.Error("freeing a pod address", "pod", r.key, "err", err)
		}
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.p.cfg.Logger.Warn("removing a pod's folder", "pod", r.key, "err", err)
	}
	// Forgotten last: a pod that has left the node (GetPod says not found)
	// holds no address and no folder, and a new pod of the same name is
	// refused until the old one's folder is gone.
	r.p.forget(r)
	close(r.gone)
}

// snapshot is the pod as Kubernetes should see it now.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pod.DeepCopy()
	st := &pod.Status
	host := r.p.cfg.HostIP
	st.HostIP, st.HostIPs = host, []corev1.HostIP{{IP: host}}
	if r.ip.IsValid() {
		st.PodIP, st.PodIPs = r.ip.String(), []corev1.PodIP{{IP: r.ip.String()}}
	}
	st.StartTime = &r.started
	st.ContainerStatuses = make([]corev1.ContainerStatus, len(r.cs))
	allReady, allFinal, anyFailed, anyRan := len(r.cs) > 0, true, false, false
	for i, c := range r.cs {
		st.ContainerStatuses[i] = *c.status.DeepCopy()
		allReady = allReady && c.status.Ready
		allFinal = allFinal && c.final
		if t := c.status.State.Terminated; t != nil && t.ExitCode != 0 {
			anyFailed = true
		}
		anyRan = anyRan || c.status.State.Running != nil || c.status.State.Terminated != nil || c.status.RestartCount > 0
	}
	st.Reason, st.Message = "", ""
	switch {
	case r.refused != "":
		st.Phase, st.Reason, st.Message = corev1.PodFailed, "ProcessNodeRefused", r.refused
		allReady = false
	case allFinal && anyFailed:
		st.Phase = corev1.PodFailed
	case allFinal:
		st.Phase = corev1.PodSucceeded
	case anyRan:
		st.Phase = corev1.PodRunning
	default:
		st.Phase = corev1.PodPending
	}
	if r.refused == "" {
		st.Message = r.notice
	}
	ready := allReady && !r.stopping
	r.setCondition(corev1.PodInitialized, true)
	r.setCondition(corev1.PodReadyToStartContainers, r.refused == "")
	r.setCondition(corev1.ContainersReady, ready)
	r.setCondition(corev1.PodReady, ready)
	var conds []corev1.PodCondition
	for _, c := range st.Conditions {
		if _, ours := r.conds[c.Type]; !ours {
			conds = append(conds, c) // PodScheduled and whatever else others set
		}
	}
	for _, t := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		conds = append(conds, r.conds[t])
	}
	st.Conditions = conds
	return pod
}

// setCondition sets one of the node's pod conditions, moving its
// transition time only when its status changes. Call with mu held.
func (r *podRun) setCondition(t corev1.PodConditionType, ok bool) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	if c, found := r.conds[t]; found && c.Status == status {
		return
	}
	r.conds[t] = corev1.PodCondition{Type: t, Status: status, LastTransitionTime: metav1.Now()}
}
