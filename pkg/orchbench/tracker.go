package orchbench

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// Stage is one step of a scale-up.
type Stage int

// The stages, in the order they happen.
const (
	StartsProcessing Stage = iota
	PodsCreated
	PodsReady
	numStages
)

// StageNames are the stages as the JSON and CSV name them.
var StageNames = [numStages]string{"starts_processing", "pods_created", "pods_running_ready"}

// RequestLatency is the Knative run's fourth row: the requests' latency
// through the ingress, from send to the last byte of the answer. It is
// not a stage of a scale-up, so no tracker marks it.
const RequestLatency Stage = numStages

func (s Stage) String() string {
	if s == RequestLatency {
		return "request_latency"
	}
	return StageNames[s]
}

// pending is one scale-up in flight: the arrival time of each stage's
// watch event, zero until seen.
type pending struct {
	afterGen int64 // Gantry: Progressing must be for a later generation
	want     int
	seen     [numStages]time.Time
	created  map[types.UID]bool // pods added since begin
	ready    map[types.UID]bool // of those, Running and Ready
	done     chan struct{}      // closed once every stage is seen
}

func (p *pending) complete() bool { return allSeen(&p.seen) }

// allSeen reports whether every stage has a time.
func allSeen(seen *[numStages]time.Time) bool {
	for _, t := range seen {
		if t.IsZero() {
			return false
		}
	}
	return true
}

// tracker turns watch events into stage times. Informer handlers call its
// on* methods; each service goroutine calls begin before its patch and end
// after it has read the times.
type tracker struct {
	mu         sync.Mutex
	pend       map[string]*pending
	live       map[string]map[types.UID]bool // non-terminating pods per service
	rsReplicas map[string]int32              // vanilla: spec.replicas of the service's ReplicaSet
	now        func() time.Time
}

func newTracker() *tracker {
	return &tracker{
		pend: map[string]*pending{}, live: map[string]map[types.UID]bool{},
		rsReplicas: map[string]int32{}, now: time.Now,
	}
}

// begin registers a scale-up before its patch is sent, so an event that
// arrives before the patch's response is not lost.
func (t *tracker) begin(svc string, afterGen int64, want int) *pending {
	p := &pending{afterGen: afterGen, want: want, created: map[types.UID]bool{},
		ready: map[types.UID]bool{}, done: make(chan struct{})}
	t.mu.Lock()
	t.pend[svc] = p
	t.mu.Unlock()
	return p
}

// end stops tracking svc's scale-up and returns a copy of its stage times.
func (t *tracker) end(svc string) [numStages]time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pend[svc]
	delete(t.pend, svc)
	if p == nil {
		return [numStages]time.Time{}
	}
	return p.seen
}

// settled says svc has no live pod and, for vanilla, its ReplicaSet wants
// none: the next scale-up starts from zero.
func (t *tracker) settled(svc string, vanilla bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live[svc]) == 0 && (!vanilla || t.rsReplicas[svc] == 0)
}

// mark records the first arrival of a stage; the caller holds mu.
func (t *tracker) mark(p *pending, s Stage, at time.Time) {
	if !p.seen[s].IsZero() {
		return
	}
	p.seen[s] = at
	if p.complete() {
		close(p.done)
	}
}

func (t *tracker) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	at := t.now()
	svc := pod.Labels[serviceLabel]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.updateLive(svc, pod)
	if p := t.pend[svc]; p != nil && pod.DeletionTimestamp == nil {
		p.created[pod.UID] = true
		if len(p.created) >= p.want {
			t.mark(p, PodsCreated, at)
		}
		t.checkReady(p, pod, at)
	}
}

func (t *tracker) onPodUpdate(_, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	at := t.now()
	svc := pod.Labels[serviceLabel]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.updateLive(svc, pod)
	if p := t.pend[svc]; p != nil && p.created[pod.UID] {
		t.checkReady(p, pod, at)
	}
}

func (t *tracker) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.live[pod.Labels[serviceLabel]], pod.UID)
}

// updateLive keeps the set of svc's pods that are neither deleted nor
// finished; the caller holds mu.
func (t *tracker) updateLive(svc string, pod *corev1.Pod) {
	if t.live[svc] == nil {
		t.live[svc] = map[types.UID]bool{}
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		delete(t.live[svc], pod.UID)
		return
	}
	t.live[svc][pod.UID] = true
}

func (t *tracker) checkReady(p *pending, pod *corev1.Pod, at time.Time) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			p.ready[pod.UID] = true
		}
	}
	if len(p.ready) >= p.want {
		t.mark(p, PodsReady, at)
	}
}

// onReplicaSet is vanilla's "starts processing": the deployment
// controller's first write for a scale-up is the ReplicaSet's
// spec.replicas, so its arrival in a watch is the moment vanilla has
// picked the change up.
func (t *tracker) onReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || rs.Spec.Replicas == nil {
		return
	}
	at := t.now()
	svc := rs.Labels[serviceLabel]
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rsReplicas[svc] = *rs.Spec.Replicas
	if p := t.pend[svc]; p != nil && int(*rs.Spec.Replicas) >= p.want {
		t.mark(p, StartsProcessing, at)
	}
}

// onRTResource is Gantry's "starts processing": the status write that sets
// Progressing=True for the new generation.
func (t *tracker) onRTResource(obj any) {
	rt, ok := obj.(*gantryv1.RTResource)
	if !ok {
		return
	}
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.pend[rt.Name]
	if p == nil {
		return
	}
	for _, c := range rt.Status.Conditions {
		if c.Type == gantryv1.ConditionProgressing && c.Status == metav1.ConditionTrue && c.ObservedGeneration > p.afterGen {
			t.mark(p, StartsProcessing, at)
		}
	}
}

// handlers adapts an add-or-update callback to an informer.
func handlers(f func(any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: f, UpdateFunc: func(_, obj any) { f(obj) }}
}
