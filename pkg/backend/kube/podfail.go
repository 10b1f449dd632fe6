package kube

// Pods that fail: a start whose pod crash-loops, cannot pull its image or
// cannot be scheduled would otherwise wait the whole ready timeout (5
// minutes by default) with no reason given. The backend watches its
// function pods and fails pending starts as soon as pods of the function
// show why they will not become ready, with that reason, so the dispatcher
// backs off and answers requests 503 with it, as it does for the local
// runtime's instances that exit before ready.

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// ErrPodFailing fails a start whose function's pods show a failure: the
// error carries the pod's reason.
var ErrPodFailing = errors.New("pod failing")

// podFunctionIndex indexes function pods by their function's name.
const podFunctionIndex = "function"

func indexPodByFunction(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Labels[LabelFunction] == "" {
		return nil, nil
	}
	return []string{p.Labels[LabelFunction]}, nil
}

// waitingFailures are container waiting reasons that mean the container
// will not run without a change: the kubelet's back-offs and errors.
var waitingFailures = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true,
	"RunContainerError": true, "StartError": true, "ErrImageNeverPull": true,
}

// watchPods starts an informer on the namespace's Gantry-managed pods.
func (b *Backend) watchPods() error {
	b.podFactory = informers.NewSharedInformerFactoryWithOptions(b.kube, b.opts.Resync,
		informers.WithNamespace(b.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = LabelManagedBy + "=" + ManagedBy + "," + LabelFunction
		}))
	b.pods = b.podFactory.Core().V1().Pods().Informer()
	if err := b.pods.AddIndexers(cache.Indexers{podFunctionIndex: indexPodByFunction}); err != nil {
		return err
	}
	check := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			b.checkPods(p.Labels[LabelFunction])
		}
	}
	if _, err := b.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return err
	}
	b.podFactory.Start(b.stop)
	return nil
}

// checkPods fails the pending starts of fn that its failing pods answer.
func (b *Backend) checkPods(fn string) {
	if fn == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if st, ok := b.fns[fn]; ok && !b.closed {
		b.checkPodsLocked(fn, st)
	}
}

// checkPodsLocked fails one pending start per failing pod of the function
// (oldest first): each such pod is a replica that will not become ready,
// so a start counted on it waits on nothing.
func (b *Backend) checkPodsLocked(fn string, st *fnState) {
	if len(st.pending) == 0 || b.pods == nil {
		return
	}
	objs, err := b.pods.GetIndexer().ByIndex(podFunctionIndex, fn)
	if err != nil {
		return
	}
	var reasons []string
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil {
			continue
		}
		if _, routable := st.view[p.Name]; routable {
			continue
		}
		if !sameImage(p, st.decl.Image) {
			continue // an earlier declaration's pod, on its way out
		}
		if r := podFailure(p); r != "" {
			reasons = append(reasons, r)
		}
	}
	if len(reasons) == 0 {
		return
	}
	var evs []event
	for i := 0; i < len(reasons) && len(st.pending) > 0; i++ {
		st.pending = st.pending[1:]
		evs = append(evs, event{kind: evFailed, function: fn,
			err: fmt.Errorf("function %s: %w: %s", fn, ErrPodFailing, reasons[i])})
	}
	b.out.push(evs...)
	b.queue.Add(fn) // the failed starts no longer count: give their replicas back
}

func sameImage(p *corev1.Pod, image string) bool {
	return image == "" || len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image == image
}

// maxMessage bounds a message quoted from a pod's status.
const maxMessage = 300

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxMessage {
		return s[:maxMessage] + "..."
	}
	return s
}

// podFailure is why p will not become ready, or "" if nothing says so
// yet: a container waiting on a back-off or error, a container that
// terminated (its exit code, reason and message), the pod failed, or the
// scheduler found no node.
func podFailure(p *corev1.Pod) string {
	if p.Status.Phase == corev1.PodFailed {
		return fmt.Sprintf("pod %s failed: %s %s", p.Name, p.Status.Reason, clip(p.Status.Message))
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return fmt.Sprintf("pod %s unschedulable: %s", p.Name, clip(c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Ready {
			continue
		}
		var parts []string
		if w := cs.State.Waiting; w != nil && waitingFailures[w.Reason] {
			parts = append(parts, "waiting: "+w.Reason+messageOf(w.Message))
		}
		if t := cs.State.Terminated; t != nil {
			parts = append(parts, terminated("terminated", t))
		} else if t := cs.LastTerminationState.Terminated; t != nil {
			parts = append(parts, terminated("last terminated", t))
		}
		if len(parts) > 0 {
			return fmt.Sprintf("pod %s container %s (restarts %d) %s", p.Name, cs.Name, cs.RestartCount, strings.Join(parts, "; "))
		}
	}
	return ""
}

func terminated(what string, t *corev1.ContainerStateTerminated) string {
	s := fmt.Sprintf("%s with exit code %d", what, t.ExitCode)
	if t.Signal != 0 {
		s += fmt.Sprintf(" (signal %d)", t.Signal)
	}
	if t.Reason != "" {
		s += " (" + t.Reason + ")"
	}
	return s + messageOf(t.Message)
}

func messageOf(m string) string {
	if m = clip(m); m != "" {
		return ": " + m
	}
	return ""
}
