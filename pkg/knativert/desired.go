package knativert

import (
	"maps"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// revisionRef is what the RTResource needs of its Revision.
type revisionRef struct {
	Namespace, Name string
	UID             types.UID
	APIVersion      string
	Annotations     map[string]string
}

// desiredRT is the RTResource behind rev, made from the Deployment Knative
// made for it: its labels, its annotations (less the Deployment
// controller's and Gantry's hand-over note), the Revision's criticality
// annotation (Knative leaves autoscaling.knative.dev keys off the
// Deployment), its selector, template, rollout bounds and minReadySeconds,
// and a controller reference to the Revision, so the garbage collector
// removes it with the Revision. Replicas are set only at create
// (initialReplicas): after that they are the KPA's.
func desiredRT(rev revisionRef, dep *appsv1.Deployment) *gantryv1.RTResource {
	rt := &gantryv1.RTResource{
		TypeMeta: metav1.TypeMeta{APIVersion: gantryv1.SchemeGroupVersion.String(), Kind: rtKind},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   rev.Namespace,
			Name:        RTName(rev.Name),
			Labels:      maps.Clone(dep.Labels),
			Annotations: rtAnnotations(rev, dep),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: rev.APIVersion, Kind: revisionKind, Name: rev.Name, UID: rev.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: gantryv1.RTResourceSpec{
			Replicas:        ptr.To(initialReplicas(dep)),
			Template:        *dep.Spec.Template.DeepCopy(),
			Strategy:        strategy(dep.Spec.Strategy),
			MinReadySeconds: dep.Spec.MinReadySeconds,
		},
	}
	if s := dep.Spec.Selector; s != nil {
		if len(s.MatchLabels) > 0 {
			rt.Spec.Selector.MatchLabels = make(map[string]gantryv1.LabelValue, len(s.MatchLabels))
			for k, v := range s.MatchLabels {
				rt.Spec.Selector.MatchLabels[k] = gantryv1.LabelValue(v)
			}
		}
		for _, e := range s.MatchExpressions {
			rt.Spec.Selector.MatchExpressions = append(rt.Spec.Selector.MatchExpressions, gantryv1.LabelSelectorRequirement{
				Key: e.Key, Operator: e.Operator, Values: append([]string(nil), e.Values...)})
		}
	}
	return rt
}

func rtAnnotations(rev revisionRef, dep *appsv1.Deployment) map[string]string {
	out := make(map[string]string, len(dep.Annotations)+1)
	for k, v := range dep.Annotations {
		if k == InitialReplicasAnnotation || strings.HasPrefix(k, "deployment.kubernetes.io/") {
			continue
		}
		out[k] = v
	}
	if v, ok := rev.Annotations[gantryv1.CriticalityAnnotation]; ok {
		out[gantryv1.CriticalityAnnotation] = v
	}
	return out
}

// initialReplicas is where the RTResource starts: the replicas Knative
// created the Deployment with (kept by the webhook in an annotation), else
// the Deployment's own (a Revision that became critical while running, so
// its capacity carries over), else 1 as for a Deployment.
func initialReplicas(dep *appsv1.Deployment) int32 {
	if v, ok := dep.Annotations[InitialReplicasAnnotation]; ok {
		if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 {
			return int32(n)
		}
	}
	if dep.Spec.Replicas != nil {
		return *dep.Spec.Replicas
	}
	return 1
}

// strategy carries the Deployment's rollout over; Knative asks for
// RollingUpdate with maxUnavailable 0.
func strategy(s appsv1.DeploymentStrategy) gantryv1.Strategy {
	if s.Type == appsv1.RecreateDeploymentStrategyType {
		return gantryv1.Strategy{Type: gantryv1.RecreateStrategy}
	}
	out := gantryv1.Strategy{Type: gantryv1.RollingUpdateStrategy}
	if ru := s.RollingUpdate; ru != nil && (ru.MaxSurge != nil || ru.MaxUnavailable != nil) {
		out.RollingUpdate = &gantryv1.RollingUpdate{MaxSurge: ru.MaxSurge, MaxUnavailable: ru.MaxUnavailable}
	}
	return out
}

// update returns have changed to follow want in everything Gantry keeps in
// step (labels, annotations, template, strategy, minReadySeconds), or nil
// if nothing differs. Replicas stay the KPA's, the selector is immutable,
// and labels or annotations others added are kept.
func update(have, want *gantryv1.RTResource) *gantryv1.RTResource {
	out := have.DeepCopy()
	out.Labels = merged(have.Labels, want.Labels)
	out.Annotations = merged(have.Annotations, want.Annotations)
	if _, ok := want.Annotations[gantryv1.CriticalityAnnotation]; !ok {
		delete(out.Annotations, gantryv1.CriticalityAnnotation)
	}
	out.Spec.Template = *want.Spec.Template.DeepCopy()
	out.Spec.Strategy = want.Spec.Strategy
	out.Spec.MinReadySeconds = want.Spec.MinReadySeconds
	if equality.Semantic.DeepEqual(have.ObjectMeta, out.ObjectMeta) && equality.Semantic.DeepEqual(have.Spec, out.Spec) {
		return nil
	}
	return out
}

func merged(have, want map[string]string) map[string]string {
	if len(have) == 0 && len(want) == 0 {
		return have
	}
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}
