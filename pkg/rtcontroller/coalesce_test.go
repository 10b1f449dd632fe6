package rtcontroller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// A scale-up's processing mark is the status the reconcile computes after
// its creates, before the cache has seen the new pods: one write, not two.
func TestScaleUpMarkNeedsNoSecondWrite(t *testing.T) {
	rt := testRT(1)
	pods := nPods("p", "h", 1)
	rt.Status = computeStatus(rt, pods, "h", "app=svc", 0, t0).status
	rt.Generation, rt.Spec.Replicas = 2, ptr.To[int32](3)
	mark := markProcessing(rt, pods, "h", "app=svc", 5, t0.Add(time.Minute))
	if c := meta.FindStatusCondition(mark.Conditions, gantryv1.ConditionProgressing); c.Status != metav1.ConditionTrue || c.ObservedGeneration != 2 || mark.ObservedGeneration != 2 {
		t.Fatalf("mark = %+v, want Progressing=True at generation 2", mark)
	}
	rt.Status = mark // as stored
	after := computeStatus(rt, pods, "h", "app=svc", 5, t0.Add(time.Minute+time.Second)).status
	if !equality.Semantic.DeepEqual(rt.Status, after) {
		t.Fatalf("status after the creates differs from the mark:\n%+v\n%+v", after, rt.Status)
	}
}

// A change of the counts alone waits out the second after the key's last
// write; a new generation, a condition that flips, a key never written or
// a window gone by write at once.
func TestOnlyCountChangesWaitForTheCoalescingWindow(t *testing.T) {
	rt := testRT(3)
	key := Key{Namespace: "ns", Name: "svc"}
	cur := computeStatus(rt, nPods("p", "h", 1), "h", "app=svc", 0, t0).status
	more := computeStatus(rt, nPods("p", "h", 2), "h", "app=svc", 0, t0).status
	ready := computeStatus(rt, nPods("p", "h", 3), "h", "app=svc", 0, t0).status
	var w writeTimes
	if d := w.wait(key, cur, more, t0); d != 0 {
		t.Fatalf("a key never written waits %v", d)
	}
	w.note(key, "10", t0)
	if d := w.wait(key, cur, more, t0.Add(200*time.Millisecond)); d != 800*time.Millisecond {
		t.Errorf("1 to 2 replicas 200 ms after a write waits %v, want 800ms", d)
	}
	if d := w.wait(key, cur, more, t0.Add(1500*time.Millisecond)); d != 0 {
		t.Errorf("after the window: waits %v, want 0", d)
	}
	if d := w.wait(key, more, ready, t0.Add(200*time.Millisecond)); d != 0 {
		t.Errorf("Ready flipping to True waits %v, want 0", d)
	}
	next := more
	next.ObservedGeneration++
	if d := w.wait(key, cur, next, t0.Add(200*time.Millisecond)); d != 0 {
		t.Errorf("a new observed generation waits %v, want 0", d)
	}
	w.forget(key)
	if d := w.wait(key, cur, more, t0.Add(200*time.Millisecond)); d != 0 {
		t.Errorf("a forgotten key waits %v, want 0", d)
	}
}

// A cache that still holds the version the last status write replaced
// has not seen that write: writing over it again would conflict.
func TestStaleIsTheVersionTheLastWriteReplaced(t *testing.T) {
	key := Key{Namespace: "ns", Name: "svc"}
	var w writeTimes
	if w.stale(key, "10") {
		t.Fatal("a key never written is stale")
	}
	w.note(key, "10", t0)
	if !w.stale(key, "10") {
		t.Error("the version written over is not stale")
	}
	if w.stale(key, "11") || w.stale(key, "") || w.stale(Key{Namespace: "ns", Name: "other"}, "10") {
		t.Error("a newer version, no version or another key is stale")
	}
}
