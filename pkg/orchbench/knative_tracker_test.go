package orchbench

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/knativert"
)

const trackedRev = "i1-svc-01-00001"

// fakeClock steps by the test's hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }
func (c *fakeClock) step(ms int)    { c.t = c.t.Add(time.Duration(ms) * time.Millisecond) }

func newTestTracker(vanilla bool) (*knTracker, *fakeClock) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	t := newKnTracker(vanilla)
	t.now = clk.now
	t.watch(trackedRev, 1)
	return t, clk
}

var revLabels = map[string]string{knativert.RevisionLabel: trackedRev}

// replicasBy is a managedFields entry owning spec.replicas.
func replicasBy(manager, subresource string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{}}}`)}}
}

func deployment(replicas int32, gen int64, owner metav1.ManagedFieldsEntry) *appsv1.Deployment {
	other := metav1.ManagedFieldsEntry{Manager: "controller", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{}},"f:status":{"f:replicas":{}}}`)}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: trackedRev + "-deployment", Labels: revLabels, Generation: gen,
			ManagedFields: []metav1.ManagedFieldsEntry{other, owner}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
	}
}

func replicaSet(replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Labels: revLabels}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
}

func knPod(uid string, ready bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Labels: revLabels}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	if ready {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	return p
}

func stageMs(k *knTrigger, s Stage) float64 {
	if k.seen[s].IsZero() {
		return -1
	}
	return float64(k.seen[s].Sub(k.at)) / float64(time.Millisecond)
}

// Vanilla: the KPA's /scale write is the trigger, the ReplicaSet's
// replicas starts processing, the pods' add and readiness the rest.
func TestKnTrackerTimesVanillaFromTheKPAsScaleWrite(t *testing.T) {
	tr, clk := newTestTracker(true)
	tr.onTarget(deployment(0, 1, replicasBy("controller", "")))
	tr.onReplicaSet(replicaSet(0))
	clk.step(100)
	tr.onTarget(deployment(1, 2, replicasBy("autoscaler", "scale")))
	clk.step(40)
	tr.onReplicaSet(replicaSet(1))
	clk.step(60)
	tr.onPod(knPod("a", false))
	if tr.pending() != 1 {
		t.Fatalf("pending %d, want the trigger open until its pod is ready", tr.pending())
	}
	clk.step(900)
	tr.onPod(knPod("a", true))
	trigs, cancelled, foreign, writers := tr.take()
	if len(trigs) != 1 || cancelled != 0 || foreign != 0 || writers["autoscaler"] != 1 {
		t.Fatalf("triggers %d, cancelled %d, foreign %d, writers %v", len(trigs), cancelled, foreign, writers)
	}
	k := trigs[0]
	if k.from != 0 || k.want != 1 || k.service != 1 {
		t.Errorf("trigger %+v", k)
	}
	for st, want := range map[Stage]float64{StartsProcessing: 40, PodsCreated: 100, PodsReady: 1000} {
		if got := stageMs(k, st); got != want {
			t.Errorf("%s: %v ms, want %v", st, got, want)
		}
	}
}

// Separate watches keep no order between them: a ReplicaSet or pod event
// that arrives before the trigger's event counts as no time.
func TestKnTrackerStagesSeenBeforeTheTriggerTakeNoTime(t *testing.T) {
	tr, clk := newTestTracker(true)
	tr.onTarget(deployment(0, 1, replicasBy("controller", "")))
	tr.onReplicaSet(replicaSet(2))
	tr.onPod(knPod("a", true))
	tr.onPod(knPod("b", false))
	clk.step(50)
	tr.onTarget(deployment(2, 2, replicasBy("autoscaler", "scale")))
	k := tr.open[0]
	if stageMs(k, StartsProcessing) != 0 || stageMs(k, PodsCreated) != 0 || stageMs(k, PodsReady) != -1 {
		t.Fatalf("stages %v ms, %v ms, %v ms; want 0, 0 and not yet", stageMs(k, StartsProcessing), stageMs(k, PodsCreated), stageMs(k, PodsReady))
	}
}

// A rise of replicas not written through /scale is no trigger, and a
// scale-up lowered before it completed is dropped, not timed.
func TestKnTrackerIgnoresForeignWritesAndDropsCancelledScaleUps(t *testing.T) {
	tr, clk := newTestTracker(true)
	tr.onTarget(deployment(0, 1, replicasBy("controller", "")))
	tr.onTarget(deployment(1, 2, replicasBy("kubectl-edit", "")))
	clk.step(10)
	tr.onTarget(deployment(3, 3, replicasBy("autoscaler", "scale")))
	tr.onTarget(deployment(1, 4, replicasBy("autoscaler", "scale")))
	if fw := tr.takeForeign(); len(fw) != 1 || fw["kubectl-edit (Update)"] != 1 {
		t.Errorf("foreign writers %v, want kubectl-edit (Update) once", fw)
	}
	trigs, cancelled, foreign, _ := tr.take()
	if len(trigs) != 0 || cancelled != 1 || foreign != 1 {
		t.Fatalf("triggers %d, cancelled %d, foreign %d; want 0, 1, 1", len(trigs), cancelled, foreign)
	}
	// Events of revisions not watched are ignored.
	tr.onTarget(deployment(0, 1, replicasBy("controller", "")))
	tr.onTarget(deployment(1, 2, replicasBy("autoscaler", "scale")))
	if tr.count() != 0 {
		t.Fatalf("a revision of a past iteration made %d triggers", tr.count())
	}
}

// Gantry: starts processing is the controller's Progressing=True for the
// trigger's generation, not an earlier one.
func TestKnTrackerTimesGantryByProgressingForTheNewGeneration(t *testing.T) {
	tr, clk := newTestTracker(false)
	rt := func(replicas int32, gen, progressed int64) *gantryv1.RTResource {
		return &gantryv1.RTResource{
			ObjectMeta: metav1.ObjectMeta{Name: trackedRev, Labels: revLabels, Generation: gen,
				ManagedFields: []metav1.ManagedFieldsEntry{replicasBy("autoscaler", "scale")}},
			Spec: gantryv1.RTResourceSpec{Replicas: ptr.To(replicas)},
			Status: gantryv1.RTResourceStatus{Conditions: []metav1.Condition{{Type: gantryv1.ConditionProgressing,
				Status: metav1.ConditionTrue, ObservedGeneration: progressed}}},
		}
	}
	tr.onTarget(rt(0, 1, 1))
	clk.step(5)
	tr.onTarget(rt(1, 2, 1))
	if tr.count() != 1 || !tr.open[0].seen[StartsProcessing].IsZero() {
		t.Fatalf("want one trigger, not yet processing: %+v", tr.open)
	}
	clk.step(30)
	tr.onTarget(rt(1, 2, 2))
	if got := stageMs(tr.open[0], StartsProcessing); got != 30 {
		t.Fatalf("starts processing %v ms, want 30", got)
	}
}

// A rise of replicas that no managedFields entry owns came through /scale
// from zero (the API server keeps no owner then): a trigger.
func TestKnTrackerTakesAnOwnerlessRiseForTheKPAs(t *testing.T) {
	tr, clk := newTestTracker(true)
	tr.onTarget(deployment(0, 1, metav1.ManagedFieldsEntry{}))
	clk.step(10)
	tr.onTarget(deployment(2, 2, metav1.ManagedFieldsEntry{}))
	trigs, _, foreign, writers := tr.take()
	if len(trigs) != 1 || foreign != 0 || writers[unownedScale] != 1 {
		t.Fatalf("triggers %d, foreign %d, writers %v; want one trigger by %q", len(trigs), foreign, writers, unownedScale)
	}
}
