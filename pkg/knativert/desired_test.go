package knativert

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func testRevision() revisionRef {
	return revisionRef{Namespace: "ns", Name: "fn-00001", UID: "rev-uid", APIVersion: "serving.knative.dev/v1",
		Annotations: map[string]string{gantryv1.CriticalityAnnotation: "9", "serving.knative.dev/creator": "admin"}}
}

func testDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "fn-00001-deployment", Namespace: "ns",
			Labels: map[string]string{RevisionLabel: "fn-00001", RevisionUIDLabel: "rev-uid"},
			Annotations: map[string]string{"serving.knative.dev/creator": "admin", "deployment.kubernetes.io/revision": "1",
				InitialReplicasAnnotation: "2"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{RevisionUIDLabel: "rev-uid"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromString("25%"))}},
			MinReadySeconds: 3,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{RevisionLabel: "fn-00001", RevisionUIDLabel: "rev-uid"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "user-container", Image: "a"}, {Name: "queue-proxy", Image: "q"}}},
			},
		},
	}
}

// The RTResource carries the Deployment's metadata less what the
// Deployment controller and the webhook added, plus the Revision's
// criticality, which Knative leaves off the Deployment.
func TestDesiredRTTakesTheDeploymentAndTheRevisionsCriticality(t *testing.T) {
	rt := desiredRT(testRevision(), testDeployment())
	if got := rt.Annotations; len(got) != 2 || got["serving.knative.dev/creator"] != "admin" || got[gantryv1.CriticalityAnnotation] != "9" {
		t.Errorf("annotations = %v, want the creator and the criticality only", got)
	}
	if got := ptr.Deref(rt.Spec.Replicas, -1); got != 2 {
		t.Errorf("replicas = %d, want the noted initial 2", got)
	}
	if rt.Spec.Strategy.Type != gantryv1.RollingUpdateStrategy || rt.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 ||
		rt.Spec.Strategy.RollingUpdate.MaxSurge.String() != "25%" || rt.Spec.MinReadySeconds != 3 {
		t.Errorf("strategy %+v, minReadySeconds %d: want the Deployment's", rt.Spec.Strategy, rt.Spec.MinReadySeconds)
	}
	if got := rt.Spec.Selector.MatchLabels; len(got) != 1 || got[RevisionUIDLabel] != "rev-uid" {
		t.Errorf("selector = %v", got)
	}
	ref := rt.OwnerReferences
	if len(ref) != 1 || ref[0].UID != "rev-uid" || !ptr.Deref(ref[0].Controller, false) || ref[0].Kind != "Revision" {
		t.Errorf("owner references = %+v, want the Revision as controller", ref)
	}
	if rt.Spec.Template.Spec.Containers[1].Name != "queue-proxy" {
		t.Errorf("template lost the queue-proxy")
	}
}

func TestInitialReplicasFallsBackToTheDeployments(t *testing.T) {
	d := testDeployment()
	delete(d.Annotations, InitialReplicasAnnotation)
	d.Spec.Replicas = ptr.To[int32](4)
	if got := initialReplicas(d); got != 4 {
		t.Errorf("without the note: %d, want the Deployment's 4", got)
	}
	d.Spec.Replicas = nil
	if got := initialReplicas(d); got != 1 {
		t.Errorf("without replicas: %d, want a Deployment's default 1", got)
	}
	d.Annotations[InitialReplicasAnnotation] = "-3"
	if got := initialReplicas(d); got != 1 {
		t.Errorf("with a bad note: %d, want 1", got)
	}
}

// update follows the template and the criticality, keeps the KPA's
// replicas and what others added, and says when nothing differs.
func TestUpdateKeepsReplicasAndFollowsTheTemplate(t *testing.T) {
	rev, dep := testRevision(), testDeployment()
	have := desiredRT(rev, dep)
	have.Spec.Replicas = ptr.To[int32](7) // the KPA's
	have.Labels["team"] = "x"             // someone else's
	if u := update(have, desiredRT(rev, dep)); u != nil {
		t.Fatalf("nothing changed, yet update = %+v", u)
	}
	dep.Spec.Template.Spec.Containers[1].Image = "q2"
	delete(rev.Annotations, gantryv1.CriticalityAnnotation)
	u := update(have, desiredRT(rev, dep))
	if u == nil {
		t.Fatal("template changed, update = nil")
	}
	if u.Spec.Template.Spec.Containers[1].Image != "q2" || ptr.Deref(u.Spec.Replicas, -1) != 7 || u.Labels["team"] != "x" {
		t.Errorf("update = image %s, replicas %d, labels %v; want q2, 7 and the team label kept",
			u.Spec.Template.Spec.Containers[1].Image, ptr.Deref(u.Spec.Replicas, -1), u.Labels)
	}
	if _, ok := u.Annotations[gantryv1.CriticalityAnnotation]; ok {
		t.Errorf("the criticality annotation the Revision dropped is still there")
	}
}

func TestRecreateStrategyCarriesOver(t *testing.T) {
	if s := strategy(appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}); s.Type != gantryv1.RecreateStrategy || s.RollingUpdate != nil {
		t.Errorf("strategy = %+v", s)
	}
}
