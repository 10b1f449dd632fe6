package orchbench

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/knativert"
)

// A Knative run's scale-up trigger is the KPA's write of its scale
// target's replicas: the autoscaler patches the /scale subresource of the
// Revision's Deployment (vanilla) or RTResource (Gantry). The benchmark
// sees it as the watch event in which the target's spec.replicas rose,
// and attributes the rise by the target's managedFields: the field
// spec.replicas is owned by the entry of the manager that last changed
// it, and the KPA's entry has the subresource "scale". Every stage is
// timed from that event's arrival, on this process's monotonic clock, as
// the stages' own events are.

// knTrigger is one scale-up of one revision's scale target.
type knTrigger struct {
	rev     string
	target  string // the scale target's name
	service int    // 1..N
	at      time.Time
	from    int32
	want    int32
	gen     int64 // the target's generation with the new replicas
	seen    [numStages]time.Time
	manager string
}

func (k *knTrigger) complete() bool { return allSeen(&k.seen) }

// knRev is what the watches last showed of one revision.
type knRev struct {
	service    int
	replicas   int32 // the scale target's spec.replicas
	known      bool  // replicas was seen at least once
	rsReplicas int32 // vanilla: its ReplicaSet's spec.replicas
	progressed int64 // Gantry: the last generation Progressing=True was set for
	live       map[types.UID]bool
	ready      map[types.UID]bool
}

// knTracker turns watch events of a Knative run into triggers and stage
// times.
type knTracker struct {
	mu      sync.Mutex
	vanilla bool
	now     func() time.Time
	revs    map[string]*knRev // by the serving.knative.dev/revision label
	open    []*knTrigger
	done    []*knTrigger
	// cancelled counts scale-ups undone (replicas lowered) before every
	// stage was seen; foreign counts rises of replicas the KPA did not
	// write through /scale. Neither is a sample.
	cancelled, foreign int
	managers           map[string]int // trigger writers, e.g. "autoscaler"
	// foreignBy counts the foreign rises by the owner of spec.replicas,
	// e.g. "controller (Update)".
	foreignBy map[string]int
	// onTrigger, if set, is told of every trigger as the tracker takes it
	// (the floor's responder); it must not block.
	onTrigger func(service int, target string, gen int64)
}

func newKnTracker(vanilla bool) *knTracker {
	return &knTracker{vanilla: vanilla, now: time.Now, revs: map[string]*knRev{}, managers: map[string]int{}}
}

// watch registers a revision of the current iteration, serving service
// (1..N); events of other revisions are ignored. Every iteration starts
// with the revision at zero (a new Service at initial-scale 0, or one the
// KPA scaled to zero), so its target's replicas are known to be 0: the
// KPA's first write is a rise even when no event came before it.
func (t *knTracker) watch(rev string, service int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.revs[rev] = &knRev{service: service, known: true, live: map[types.UID]bool{}, ready: map[types.UID]bool{}}
}

// take ends the iteration: it returns every trigger, finished or not, and
// forgets the revisions.
func (t *knTracker) take() (out []*knTrigger, cancelled, foreign int, managers map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out = append(t.done, t.open...)
	cancelled, foreign, managers = t.cancelled, t.foreign, t.managers
	t.done, t.open, t.revs = nil, nil, map[string]*knRev{}
	t.cancelled, t.foreign, t.managers = 0, 0, map[string]int{}
	return out, cancelled, foreign, managers
}

// pending is the number of triggers with a stage not yet seen.
func (t *knTracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// count is the number of triggers so far.
func (t *knTracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open) + len(t.done)
}

// onTarget handles the scale target's events: its replicas (the trigger)
// and, for an RTResource, its Progressing condition (Gantry's starts
// processing).
func (t *knTracker) onTarget(obj any) {
	at := t.now()
	var (
		meta     metav1.Object
		replicas *int32
	)
	switch o := obj.(type) {
	case *appsv1.Deployment:
		meta, replicas = o, o.Spec.Replicas
	case *gantryv1.RTResource:
		meta, replicas = o, o.Spec.Replicas
	default:
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	rev := t.revs[meta.GetLabels()[knativert.RevisionLabel]]
	if rev == nil || replicas == nil {
		return
	}
	name := meta.GetLabels()[knativert.RevisionLabel]
	r, prev, known := *replicas, rev.replicas, rev.known
	rev.replicas, rev.known = r, true
	if rt, ok := obj.(*gantryv1.RTResource); ok {
		t.onProgressing(rev, rt, at)
	}
	switch {
	case known && r > prev:
		manager, ok := scaleWriter(meta.GetManagedFields())
		if !ok {
			t.foreign++
			if t.foreignBy == nil {
				t.foreignBy = map[string]int{}
			}
			t.foreignBy[manager]++
			return
		}
		k := &knTrigger{rev: name, target: meta.GetName(), service: rev.service, at: at, from: prev, want: r, gen: meta.GetGeneration(), manager: manager}
		t.managers[manager]++
		t.open = append(t.open, k)
		if t.onTrigger != nil {
			t.onTrigger(k.service, k.target, k.gen)
		}
		// The stages' own events may have arrived first (separate watches
		// keep no order between them): they then took no time.
		t.check(name, rev, at)
	case known && r < prev:
		t.cancelBelow(name, r)
	}
}

// unownedScale names the writer of a rise of spec.replicas that no
// managedFields entry owns. The API server drops the field's owner when
// /scale writes 0 (autoscaling/v1's Scale omits a zero spec.replicas) and
// records none for the next /scale write from zero either
// (TestScaleFromZeroLeavesReplicasWithoutOwner): the KPA's scale-ups of a
// Revision it scaled to zero. A write of the object itself that changed
// replicas would own them, so an ownerless rise came through /scale.
const unownedScale = "unowned (/scale from zero)"

// scaleWriter returns the manager whose managedFields entry owns
// spec.replicas, if that entry was written through the /scale subresource
// (unownedScale if none owns it); else false and the owner as
// "manager (operation)".
func scaleWriter(fields []metav1.ManagedFieldsEntry) (string, bool) {
	owner := unownedScale
	for _, f := range fields {
		if !ownsReplicas(f) {
			continue
		}
		if f.Subresource == "scale" {
			return f.Manager, true
		}
		owner = fmt.Sprintf("%s (%s)", f.Manager, f.Operation)
	}
	return owner, owner == unownedScale
}

// takeForeign returns and forgets the foreign rises' owners.
func (t *knTracker) takeForeign() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.foreignBy
	t.foreignBy = nil
	return out
}

// ownsReplicas says a managedFields entry owns spec.replicas.
func ownsReplicas(f metav1.ManagedFieldsEntry) bool {
	if f.FieldsV1 == nil {
		return false
	}
	var set map[string]map[string]json.RawMessage
	if json.Unmarshal(f.FieldsV1.Raw, &set) != nil {
		return false
	}
	_, ok := set["f:spec"]["f:replicas"]
	return ok
}

// onProgressing marks Gantry's starts processing: the controller's status
// write setting Progressing=True for the trigger's generation; the caller
// holds mu.
func (t *knTracker) onProgressing(rev *knRev, rt *gantryv1.RTResource, at time.Time) {
	for _, c := range rt.Status.Conditions {
		if c.Type == gantryv1.ConditionProgressing && c.Status == metav1.ConditionTrue && c.ObservedGeneration > rev.progressed {
			rev.progressed = c.ObservedGeneration
		}
	}
	t.check(rt.Labels[knativert.RevisionLabel], rev, at)
}

// onReplicaSet marks vanilla's starts processing: the deployment
// controller's write of the ReplicaSet's replicas.
func (t *knTracker) onReplicaSet(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || rs.Spec.Replicas == nil {
		return
	}
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	name := rs.Labels[knativert.RevisionLabel]
	if rev := t.revs[name]; rev != nil {
		rev.rsReplicas = *rs.Spec.Replicas
		t.check(name, rev, at)
	}
}

func (t *knTracker) onPod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	at := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	name := pod.Labels[knativert.RevisionLabel]
	rev := t.revs[name]
	if rev == nil {
		return
	}
	delete(rev.live, pod.UID)
	delete(rev.ready, pod.UID)
	if pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		rev.live[pod.UID] = true
		if podReady(pod) {
			rev.ready[pod.UID] = true
		}
	}
	t.check(name, rev, at)
}

func (t *knTracker) onPodDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		t.mu.Lock()
		defer t.mu.Unlock()
		if rev := t.revs[pod.Labels[knativert.RevisionLabel]]; rev != nil {
			delete(rev.live, pod.UID)
			delete(rev.ready, pod.UID)
		}
	}
}

func podReady(pod *corev1.Pod) bool {
	if pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// check marks every stage a revision's open triggers have reached; the
// caller holds mu.
func (t *knTracker) check(name string, rev *knRev, at time.Time) {
	keep := t.open[:0]
	for _, k := range t.open {
		if k.rev == name {
			if t.vanilla && rev.rsReplicas >= k.want || !t.vanilla && rev.progressed >= k.gen {
				markStage(k, StartsProcessing, at)
			}
			if int32(len(rev.live)) >= k.want {
				markStage(k, PodsCreated, at)
			}
			if int32(len(rev.ready)) >= k.want {
				markStage(k, PodsReady, at)
			}
			if k.complete() {
				t.done = append(t.done, k)
				continue
			}
		}
		keep = append(keep, k)
	}
	t.open = keep
}

func markStage(k *knTrigger, s Stage, at time.Time) {
	if k.seen[s].IsZero() {
		k.seen[s] = at
	}
}

// cancelBelow drops open triggers of a revision whose target now wants
// fewer replicas than they did; the caller holds mu.
func (t *knTracker) cancelBelow(name string, replicas int32) {
	keep := t.open[:0]
	for _, k := range t.open {
		if k.rev == name && k.want > replicas {
			t.cancelled++
			continue
		}
		keep = append(keep, k)
	}
	t.open = keep
}
