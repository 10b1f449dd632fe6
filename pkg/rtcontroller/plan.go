package rtcontroller

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// plan is what one reconcile must do to an RTResource's pods. It is computed
// from the cache without I/O; the driver applies it.
type plan struct {
	// create is how many pods of the current template to create.
	create int
	// delete lists pods to delete, most expendable first.
	delete []*corev1.Pod
}

// podSets sorts an owner's cached pods into the groups that scaling and
// rollouts reason about.
type podSets struct {
	current, old []*corev1.Pod // live pods of the current and of older templates
	finished     []*corev1.Pod // Failed or Succeeded, waiting to be replaced
	terminating  []*corev1.Pod // being deleted; never counted as live
}

// TemplateHash names a pod template. Pods carry it in TemplateHashLabel so a
// template change is visible as a label mismatch.
func TemplateHash(t *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("hash pod template: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write(b) // hash.Hash never returns an error
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32())), nil
}

func classify(pods []*corev1.Pod, hash string) podSets {
	var s podSets
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
			s.terminating = append(s.terminating, p)
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			s.finished = append(s.finished, p)
		case p.Labels[gantryv1.TemplateHashLabel] == hash:
			s.current = append(s.current, p)
		default:
			s.old = append(s.old, p)
		}
	}
	return s
}

// computePlan decides the creates and deletes that move pods towards the spec.
// Finished pods are always deleted, so a Failed pod is replaced and does not
// linger; the replacement is counted from the live pods alone.
func computePlan(rt *gantryv1.RTResource, pods []*corev1.Pod, hash string, now time.Time) plan {
	s := classify(pods, hash)
	want := int(replicasOf(rt))
	var p plan
	switch {
	case len(s.old) == 0 && !(rt.Spec.Strategy.Type == gantryv1.RecreateStrategy && hasOld(s.terminating, hash)):
		p = scale(s.current, want)
	case rt.Spec.Strategy.Type == gantryv1.RecreateStrategy:
		p = plan{delete: s.old} // new pods wait until every old one is gone
	default:
		p = rollingUpdate(rt, s, want, now)
	}
	p.delete = append(append([]*corev1.Pod{}, s.finished...), p.delete...)
	return p
}

func hasOld(pods []*corev1.Pod, hash string) bool {
	for _, p := range pods {
		if p.Labels[gantryv1.TemplateHashLabel] != hash {
			return true
		}
	}
	return false
}

// scale brings the pods of one template to want, deleting the most
// expendable pods first on scale-down.
func scale(live []*corev1.Pod, want int) plan {
	if diff := want - len(live); diff > 0 {
		return plan{create: diff}
	}
	return plan{delete: mostExpendable(live, len(live)-want)}
}

// rollingUpdate creates new pods within the surge bound and deletes old ones
// within the unavailability bound.
func rollingUpdate(rt *gantryv1.RTResource, s podSets, want int, now time.Time) plan {
	surge, unavailable := rolloutBounds(rt.Spec.Strategy.RollingUpdate, want)
	live := len(s.current) + len(s.old)
	p := plan{create: max(0, min(want-len(s.current), want+surge-live))}
	if len(s.current) > want {
		p.delete = mostExpendable(s.current, len(s.current)-want)
	}
	minReady := time.Duration(rt.Spec.MinReadySeconds) * time.Second
	p.delete = append(p.delete, oldToDelete(s, want-unavailable, minReady, now)...)
	return p
}

// oldToDelete picks the old pods a rolling update may delete now, by the
// Deployment controller's rule (reconcileOldReplicaSets), so that the
// update never goes below minAvailable:
//
//   - nothing, unless live pods exceed minAvailable plus the new pods that
//     are not yet available (maxScaledDown > 0). Unavailable pods are not
//     free to delete: most are starting and would be available soon, and
//     deleting all of them at once leaves the replacements to start from
//     nothing, far below minAvailable;
//   - unavailable old pods first, at most maxScaledDown of them, since they
//     serve nobody and would otherwise block the rollout;
//   - then available old pods while the available count stays at least
//     minAvailable.
func oldToDelete(s podSets, minAvailable int, minReady time.Duration, now time.Time) []*corev1.Pod {
	availableCurrent := countAvailable(s.current, minReady, now)
	newUnavailable := len(s.current) - availableCurrent
	maxScaledDown := len(s.current) + len(s.old) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return nil
	}
	var available, unavailable []*corev1.Pod
	for _, pod := range s.old {
		if isAvailable(pod, minReady, now) {
			available = append(available, pod)
		} else {
			unavailable = append(unavailable, pod)
		}
	}
	out := mostExpendable(unavailable, min(len(unavailable), maxScaledDown))
	budget := availableCurrent + len(available) - minAvailable
	return append(out, mostExpendable(available, max(0, min(budget, len(available))))...)
}

// rolloutBounds resolves maxSurge (rounded up) and maxUnavailable (rounded
// down) against want, with the Deployment defaults of 25% each.
func rolloutBounds(ru *gantryv1.RollingUpdate, want int) (surge, unavailable int) {
	quarter := intstr.FromString("25%")
	s, u := &quarter, &quarter
	if ru != nil && ru.MaxSurge != nil {
		s = ru.MaxSurge
	}
	if ru != nil && ru.MaxUnavailable != nil {
		u = ru.MaxUnavailable
	}
	surge = scaledOrZero(s, want, true)
	unavailable = scaledOrZero(u, want, false)
	if surge == 0 && unavailable == 0 {
		unavailable = 1 // otherwise no pod could ever be replaced
	}
	return surge, unavailable
}

// scaledOrZero treats a malformed bound as 0; the schema only admits ints and
// strings, and a non-percentage string is the user's error to see in status.
func scaledOrZero(v *intstr.IntOrString, total int, roundUp bool) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, roundUp)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// mostExpendable returns the n pods to delete first: unscheduled, then
// pending, then not ready, then the newest.
func mostExpendable(pods []*corev1.Pod, n int) []*corev1.Pod {
	if n <= 0 {
		return nil
	}
	ranked := append([]*corev1.Pod{}, pods...)
	sort.SliceStable(ranked, func(i, j int) bool { return moreExpendable(ranked[i], ranked[j]) })
	return ranked[:min(n, len(ranked))]
}

func moreExpendable(a, b *corev1.Pod) bool {
	if ra, rb := expendabilityRank(a), expendabilityRank(b); ra != rb {
		return ra < rb
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name > b.Name
}

// expendabilityRank: lower ranks are deleted first.
func expendabilityRank(p *corev1.Pod) int {
	switch {
	case p.Spec.NodeName == "":
		return 0
	case p.Status.Phase == corev1.PodPending:
		return 1
	case !isReady(p):
		return 2
	default:
		return 3
	}
}

func replicasOf(rt *gantryv1.RTResource) int32 {
	if rt.Spec.Replicas == nil {
		return 1 // the schema default; only unset on objects not from the apiserver
	}
	return *rt.Spec.Replicas
}
