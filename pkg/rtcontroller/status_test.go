package rtcontroller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func TestStatusCountsOnlyLivePods(t *testing.T) {
	rt := testRT(3)
	pods := append(nPods("p", "h", 2), testPod("nr", "old", 9, notReady), testPod("f", "h", 3, failed), testPod("t", "h", 4, terminating))
	st := computeStatus(rt, pods, "h", "app=svc", 7, t0).status
	if st.Replicas != 3 || st.ReadyReplicas != 2 || st.UpdatedReplicas != 2 || st.AvailableReplicas != 2 {
		t.Fatalf("status = %+v, want replicas 3 ready 2 updated 2 available 2", st)
	}
	if st.Selector != "app=svc" || st.Criticality != 7 || st.ObservedGeneration != 1 {
		t.Fatalf("status = %+v, want selector, criticality and generation copied", st)
	}
	if !meta.IsStatusConditionFalse(st.Conditions, gantryv1.ConditionReady) ||
		!meta.IsStatusConditionTrue(st.Conditions, gantryv1.ConditionProgressing) {
		t.Fatalf("conditions = %+v, want Ready=False Progressing=True", st.Conditions)
	}
}

func TestReadyWhenAllReplicasReady(t *testing.T) {
	st := computeStatus(testRT(2), nPods("p", "h", 2), "h", "", 0, t0).status
	if !meta.IsStatusConditionTrue(st.Conditions, gantryv1.ConditionReady) ||
		!meta.IsStatusConditionFalse(st.Conditions, gantryv1.ConditionProgressing) {
		t.Fatalf("conditions = %+v, want Ready=True Progressing=False", st.Conditions)
	}
}

// lastTransitionTime must move only when a condition's status flips, or
// "time since Ready" and the benchmark's processing mark would be meaningless.
func TestConditionTransitionTimeMovesOnlyOnRealTransitions(t *testing.T) {
	rt := testRT(2)
	rt.Status = computeStatus(rt, nPods("p", "h", 1), "h", "", 0, t0).status
	readyAt := func(st gantryv1.RTResourceStatus) time.Time {
		return meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReady).LastTransitionTime.Time
	}
	later := t0.Add(time.Minute)
	again := computeStatus(rt, nPods("p", "h", 1), "h", "", 0, later).status
	if !readyAt(again).Equal(t0) {
		t.Fatalf("unchanged Ready=False moved its transition time to %v", readyAt(again))
	}
	rt.Status = again
	flipped := computeStatus(rt, nPods("p", "h", 2), "h", "", 0, later).status
	if !readyAt(flipped).Equal(later) {
		t.Fatalf("Ready flip kept transition time %v, want %v", readyAt(flipped), later)
	}
}

// The benchmark's "starts processing" stage is the first status write after
// a new generation with Progressing=True.
func TestMarkProcessingSetsProgressingForNewGeneration(t *testing.T) {
	rt := testRT(2)
	rt.Status = computeStatus(rt, nPods("p", "h", 2), "h", "app=svc", 0, t0).status
	rt.Generation = 2
	now := t0.Add(time.Hour)
	st := markProcessing(rt, nPods("p", "h", 2), "h", "app=svc", 5, now)
	c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionProgressing)
	if st.ObservedGeneration != 2 || c.Status != metav1.ConditionTrue || c.Reason != ReasonNewGeneration || !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("status = %+v, want generation 2 and Progressing=True since %v", st, now)
	}
}

func TestMinReadySecondsDelaysAvailability(t *testing.T) {
	rt := testRT(1)
	rt.Spec.MinReadySeconds = 10
	pods := nPods("p", "h", 1) // ready since t0
	res := computeStatus(rt, pods, "h", "", 0, t0.Add(4*time.Second))
	if res.status.ReadyReplicas != 1 || res.status.AvailableReplicas != 0 || res.recheckAfter != 6*time.Second {
		t.Fatalf("got %+v recheck %v, want ready 1 available 0 recheck 6s", res.status, res.recheckAfter)
	}
	res = computeStatus(rt, pods, "h", "", 0, t0.Add(10*time.Second))
	if res.status.AvailableReplicas != 1 || res.recheckAfter != 0 {
		t.Fatalf("got %+v recheck %v, want available 1 and no recheck", res.status, res.recheckAfter)
	}
}

// After a scale-up the processing mark claims the new generation, so its
// Ready must be the new generation's: 2 ready pods of 4 wanted is not
// ready. The ReplicaSet controller recomputes every condition on each
// status write; a mark that kept Ready=True from generation 1 told Knative
// the revision was healthy before its new pods existed.
func TestProcessingMarkRecomputesReadyForTheNewGeneration(t *testing.T) {
	rt := testRT(2)
	pods := nPods("p", "h", 2)
	rt.Status = computeStatus(rt, pods, "h", "app=svc", 0, t0).status
	if !meta.IsStatusConditionTrue(rt.Status.Conditions, gantryv1.ConditionReady) {
		t.Fatal("setup: generation 1 should be ready")
	}
	rt.Generation, rt.Spec.Replicas = 2, ptr.To[int32](4)
	st := markProcessing(rt, pods, "h", "app=svc", 0, t0.Add(time.Minute))
	ready := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.ObservedGeneration != 2 {
		t.Fatalf("Ready after a scale-up mark = %+v, want False for generation 2", ready)
	}
	if !meta.IsStatusConditionTrue(st.Conditions, gantryv1.ConditionProgressing) || st.ObservedGeneration != 2 {
		t.Fatalf("mark = %+v, want Progressing=True at generation 2", st)
	}
}

// ReplicaFailure says in the status why replicas are missing, as on a
// ReplicaSet: True with the create error while creates fail (they win over
// deletes), its transition time kept across retries, and removed once a
// reconcile manages the pods without an error. A retry that fails the same
// way leaves it untouched.
func TestReplicaFailureConditionFollowsPodOperationErrors(t *testing.T) {
	var st gantryv1.RTResourceStatus
	quota := errors.New(`pods "svc-x" is forbidden: exceeded quota`)
	setReplicaFailure(&st, 1, quota, errors.New("delete failed"), t0)
	c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReplicaFailure)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonFailedCreate || c.Message != quota.Error() {
		t.Fatalf("after a failed create: %+v, want True/FailedCreate with the API error", c)
	}
	setReplicaFailure(&st, 1, errors.New(`pods "svc-y" is forbidden: exceeded quota`), nil, t0.Add(time.Minute))
	if c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReplicaFailure); !c.LastTransitionTime.Time.Equal(t0) || c.Message != quota.Error() {
		t.Fatalf("a retry that fails again changed the condition to %+v; each change is a status write", c)
	}
	setReplicaFailure(&st, 1, nil, errors.New("delete failed"), t0)
	if c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReplicaFailure); c.Reason != ReasonFailedDelete {
		t.Fatalf("after a failed delete alone: reason %q, want FailedDelete", c.Reason)
	}
	setReplicaFailure(&st, 1, nil, nil, t0)
	if c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReplicaFailure); c != nil {
		t.Fatalf("after a clean reconcile: %+v, want the condition removed", c)
	}
}
