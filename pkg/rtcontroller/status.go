package rtcontroller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// Condition reasons.
const (
	ReasonNewGeneration    = "NewGeneration"    // Progressing=True: a new spec is being processed
	ReasonReplicasChanging = "ReplicasChanging" // Progressing=True: pods do not match the spec yet
	ReasonConverged        = "Converged"        // Progressing=False: pods match the spec
	ReasonReplicasReady    = "ReplicasReady"    // Ready=True
	ReasonReplicasNotReady = "ReplicasNotReady" // Ready=False
	// ReplicaFailure=True reasons, the ReplicaSet controller's.
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
)

func isReady(p *corev1.Pod) bool {
	c := podReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

func podReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// isAvailable is readiness held for at least minReady.
func isAvailable(p *corev1.Pod, minReady time.Duration, now time.Time) bool {
	return availableIn(p, minReady, now) == 0
}

// availableIn is how long until a ready pod becomes available: 0 if it is,
// negative if it is not ready at all.
func availableIn(p *corev1.Pod, minReady time.Duration, now time.Time) time.Duration {
	c := podReadyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return -1
	}
	if minReady == 0 {
		return 0
	}
	return max(0, c.LastTransitionTime.Add(minReady).Sub(now))
}

func countAvailable(pods []*corev1.Pod, minReady time.Duration, now time.Time) int {
	n := 0
	for _, p := range pods {
		if isAvailable(p, minReady, now) {
			n++
		}
	}
	return n
}

// statusResult is a computed status plus when to look again because a ready
// pod will cross minReadySeconds (0: no need).
type statusResult struct {
	status       gantryv1.RTResourceStatus
	recheckAfter time.Duration
}

// computeStatus derives the status from cached pods. Conditions are merged
// with meta.SetStatusCondition, so lastTransitionTime moves only when a
// condition's status really flips.
func computeStatus(rt *gantryv1.RTResource, pods []*corev1.Pod, hash, selector string, criticality int32, now time.Time) statusResult {
	s := classify(pods, hash)
	live := append(append([]*corev1.Pod{}, s.current...), s.old...)
	minReady := time.Duration(rt.Spec.MinReadySeconds) * time.Second
	st := gantryv1.RTResourceStatus{
		ObservedGeneration: rt.Generation,
		Criticality:        criticality,
		Replicas:           int32(len(live)),
		UpdatedReplicas:    int32(len(s.current)),
		Selector:           selector,
		Conditions:         append([]metav1.Condition(nil), rt.Status.Conditions...),
	}
	var recheck time.Duration
	for _, p := range live {
		d := availableIn(p, minReady, now)
		switch {
		case d == 0:
			st.ReadyReplicas++
			st.AvailableReplicas++
		case d > 0:
			st.ReadyReplicas++
			recheck = minPositive(recheck, d)
		}
	}
	setConditions(&st, rt, replicasOf(rt), len(s.finished) > 0, now)
	return statusResult{status: st, recheckAfter: recheck}
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 {
		return b
	}
	return min(a, b)
}

func setConditions(st *gantryv1.RTResourceStatus, rt *gantryv1.RTResource, want int32, hasFinished bool, now time.Time) {
	ready := st.ReadyReplicas == want && st.Replicas == want
	converged := ready && st.UpdatedReplicas == want && !hasFinished
	msg := fmt.Sprintf("%d of %d replicas ready, %d updated", st.ReadyReplicas, want, st.UpdatedReplicas)
	setCondition(st, rt.Generation, gantryv1.ConditionReady, ready, ReasonReplicasReady, ReasonReplicasNotReady, msg, now)
	setCondition(st, rt.Generation, gantryv1.ConditionProgressing, !converged, ReasonReplicasChanging, ReasonConverged, msg, now)
}

func setCondition(st *gantryv1.RTResourceStatus, gen int64, typ string, on bool, reasonOn, reasonOff, msg string, now time.Time) {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reasonOff, Message: msg,
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)}
	if on {
		c.Status, c.Reason = metav1.ConditionTrue, reasonOn
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

// markProcessing is the "starts processing" status: the new generation is
// observed and Progressing=True, written before any pod is touched so a
// client can see that the controller has picked the change up. Everything
// else is recomputed from the cached pods for the new spec, Ready included:
// a status that claims the new generation must not carry Ready=True from
// the old one (after a scale-up, Knative would read the revision as
// healthy before the new pods exist).
//
// When the pods do not match the new spec (a scale-up, a new template),
// the computed status already says Progressing=True (ReplicasChanging)
// and is the mark as it is: the status the reconcile computes after its
// creates, before the cache has seen the new pods, is then the same, and
// costs no second write. Only a generation whose pods already match (a
// change that touches no pod) needs NewGeneration to say it was seen.
func markProcessing(rt *gantryv1.RTResource, pods []*corev1.Pod, hash, selector string, criticality int32, now time.Time) gantryv1.RTResourceStatus {
	st := computeStatus(rt, pods, hash, selector, criticality, now).status
	if meta.IsStatusConditionTrue(st.Conditions, gantryv1.ConditionProgressing) {
		return st
	}
	setCondition(&st, rt.Generation, gantryv1.ConditionProgressing, true, ReasonNewGeneration, ReasonConverged,
		fmt.Sprintf("processing generation %d", rt.Generation), now)
	return st
}

// setReplicaFailure keeps the ReplicaSet controller's ReplicaFailure
// condition: True, with the API error, while a reconcile's creates (or,
// failing that, deletes) fail, so a user sees in the status why replicas
// are missing instead of searching Events; removed once a reconcile
// manages the pods without an error. Creates win because a missing replica
// is what the user notices. Reconciles that only wait for the cache leave
// it as it is, so it does not flap while a failing create is retried; and,
// as in the ReplicaSet controller, a condition already set for the same
// operation keeps its first message, since each retry's error names a new
// generated pod and would otherwise cost a status write per retry.
func setReplicaFailure(st *gantryv1.RTResourceStatus, gen int64, createErr, deleteErr error, now time.Time) {
	reason, err := ReasonFailedCreate, createErr
	if createErr == nil {
		reason, err = ReasonFailedDelete, deleteErr
	}
	if err == nil {
		meta.RemoveStatusCondition(&st.Conditions, gantryv1.ConditionReplicaFailure)
		return
	}
	if c := meta.FindStatusCondition(st.Conditions, gantryv1.ConditionReplicaFailure); c != nil && c.Reason == reason {
		return
	}
	setCondition(st, gen, gantryv1.ConditionReplicaFailure, true, reason, "", err.Error(), now)
}
