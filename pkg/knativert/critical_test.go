package knativert

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
)

// A critical Revision, with the objects Knative's revision reconciler
// makes for it: the webhook creates the Deployment at 0 replicas and
// points the PodAutoscaler at the RTResource (also when Knative writes the
// Deployment back, without storing anything), the RTResource is made from
// the Deployment's template and owned by the Revision, scaling it through
// /scale as the KPA does makes pods with the Revision's labels, and it
// follows the Deployment's template when Knative changes it.
func TestCriticalRevisionIsBackedByAnRTResource(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	rev := e.revision(t, "fn-00001", map[string]string{gantryv1.CriticalityAnnotation: "7"})

	dep := e.createDeployment(t, knativeDeployment(rev, "ko://knative.dev/serving/cmd/queue"))
	if got := ptr.Deref(dep.Spec.Replicas, -1); got != 0 {
		t.Errorf("Deployment stored with %d replicas, want 0", got)
	}
	if got := dep.Annotations[InitialReplicasAnnotation]; got != "1" {
		t.Errorf("Deployment's %s = %q, want the 1 replica Knative asked for", InitialReplicasAnnotation, got)
	}

	pa := e.createPA(t, knativePA(rev))
	want := map[string]string{"apiVersion": "gantry.dev/v1alpha1", "kind": "RTResource", "name": "fn-00001"}
	if got := scaleTargetRef(pa); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("PodAutoscaler stored with scaleTargetRef %v, want %v", got, want)
	}

	// Knative's revision reconciler finds the spec differs from MakePA's and
	// updates it with the Deployment as target: the webhook turns it back,
	// so the apiserver stores nothing new and sends no watch event.
	back := pa.DeepCopy()
	if err := unstructuredSet(back, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "fn-00001-deployment"},
		"spec", "scaleTargetRef"); err != nil {
		t.Fatal(err)
	}
	updated, err := e.dyn.Resource(PodAutoscalerGVR).Namespace(e.ns).Update(ctx, back, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("Knative's PodAutoscaler update: %v", err)
	}
	if got := scaleTargetRef(updated); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("after Knative's update scaleTargetRef is %v, want %v", got, want)
	}
	if updated.GetResourceVersion() != pa.GetResourceVersion() {
		t.Errorf("Knative's update stored a new resourceVersion (%s -> %s): each would wake Knative's reconcilers again",
			pa.GetResourceVersion(), updated.GetResourceVersion())
	}

	rt := e.waitRT(t, "fn-00001", "the RTResource", func(*gantryv1.RTResource) bool { return true })
	if ref := metav1.GetControllerOf(rt); ref == nil || ref.UID != rev.GetUID() || ref.Kind != "Revision" || ref.APIVersion != "serving.knative.dev/v1" {
		t.Errorf("RTResource's controller is %v, want Revision %s", ref, rev.GetUID())
	}
	if !equality.Semantic.DeepEqual(rt.Spec.Template, dep.Spec.Template) {
		t.Errorf("RTResource's template differs from the Deployment's:\n got %+v\nwant %+v", rt.Spec.Template, dep.Spec.Template)
	}
	if got := ptr.Deref(rt.Spec.Replicas, -1); got != 1 {
		t.Errorf("RTResource starts at %d replicas, want the Deployment's initial 1", got)
	}
	if got := rt.Spec.Selector.MatchLabels[RevisionUIDLabel]; got != gantryv1.LabelValue(rev.GetUID()) || len(rt.Spec.Selector.MatchLabels) != 1 {
		t.Errorf("RTResource's selector is %v, want the Deployment's (%s=%s)", rt.Spec.Selector.MatchLabels, RevisionUIDLabel, rev.GetUID())
	}
	if got := rt.Annotations[gantryv1.CriticalityAnnotation]; got != "7" {
		t.Errorf("RTResource's criticality annotation is %q, want the Revision's 7", got)
	}
	if rt.Labels[RevisionLabel] != "fn-00001" || rt.Labels["serving.knative.dev/service"] != "fn" {
		t.Errorf("RTResource's labels %v lack the Deployment's", rt.Labels)
	}
	e.waitRT(t, "fn-00001", "the RTResource controller's criticality 7", func(rt *gantryv1.RTResource) bool {
		return rt.Status.Criticality == 7
	})
	e2etest.Eventually(t, "one pod of the RTResource with the Revision's labels", func(ctx context.Context) (bool, error) {
		n, err := e.revisionPods(ctx, "fn-00001", rt.UID)
		return n == 1, err
	})

	// The KPA's write: a JSON patch of /spec/replicas on the scale subresource.
	_, err = e.dyn.Resource(RTResourceGVR).Namespace(e.ns).Patch(ctx, "fn-00001", types.JSONPatchType,
		[]byte(`[{"op":"add","path":"/spec/replicas","value":3}]`), metav1.PatchOptions{}, "scale")
	if err != nil {
		t.Fatalf("scale the RTResource as the KPA does: %v", err)
	}
	e2etest.Eventually(t, "three pods with the Revision's labels", func(ctx context.Context) (bool, error) {
		n, err := e.revisionPods(ctx, "fn-00001", rt.UID)
		return n == 3, err
	})

	// A config change (a new queue-proxy image): Knative updates the
	// Deployment's template and keeps its replicas; the RTResource follows
	// the template and keeps the KPA's replicas.
	cur, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := knativeDeployment(rev, "ko://knative.dev/serving/cmd/queue:v2")
	cur.Spec.Template = next.Spec.Template
	cur, err = e.kube.AppsV1().Deployments(e.ns).Update(ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rt = e.waitRT(t, "fn-00001", "the RTResource to take the new queue-proxy image", func(rt *gantryv1.RTResource) bool {
		return len(rt.Spec.Template.Spec.Containers) == 2 && rt.Spec.Template.Spec.Containers[1].Image == "ko://knative.dev/serving/cmd/queue:v2"
	})
	if !equality.Semantic.DeepEqual(rt.Spec.Template, cur.Spec.Template) {
		t.Errorf("RTResource's template differs from the updated Deployment's")
	}
	if got := ptr.Deref(rt.Spec.Replicas, -1); got != 3 {
		t.Errorf("RTResource has %d replicas after the template change, want the KPA's 3", got)
	}
	e.checkDeploymentAtZero(t, dep.Name)
}

// Without the annotation the webhook changes nothing and no RTResource
// is made: Knative's Deployment serves the Revision.
func TestRevisionWithoutTheAnnotationIsLeftToKnative(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	plain := e.revision(t, "plain-00001", nil)
	dep := e.createDeployment(t, knativeDeployment(plain, "ko://knative.dev/serving/cmd/queue"))
	if got := ptr.Deref(dep.Spec.Replicas, -1); got != 1 {
		t.Errorf("Deployment stored with %d replicas, want Knative's 1", got)
	}
	if _, ok := dep.Annotations[InitialReplicasAnnotation]; ok {
		t.Errorf("Deployment got %s", InitialReplicasAnnotation)
	}
	pa := e.createPA(t, knativePA(plain))
	if got := scaleTargetRef(pa); got["kind"] != "Deployment" || got["name"] != "plain-00001-deployment" {
		t.Errorf("PodAutoscaler's scaleTargetRef is %v, want Knative's Deployment", got)
	}

	// A critical Revision created after it, on the one worker: once its
	// RTResource exists the controller has been through the plain one.
	crit := e.revision(t, "crit-00001", map[string]string{gantryv1.CriticalityAnnotation: "3"})
	e.createDeployment(t, knativeDeployment(crit, "ko://knative.dev/serving/cmd/queue"))
	e.waitRT(t, "crit-00001", "the critical Revision's RTResource", func(*gantryv1.RTResource) bool { return true })
	rts, err := e.dyn.Resource(RTResourceGVR).Namespace(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rts.Items) != 1 {
		t.Errorf("%d RTResources in the namespace, want only the critical Revision's", len(rts.Items))
	}
	got, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(got.Spec.Replicas, -1) != 1 {
		t.Errorf("the plain Revision's Deployment now has %d replicas, want 1", ptr.Deref(got.Spec.Replicas, -1))
	}
}

// checkDeploymentAtZero checks a critical Revision's Deployment still asks
// for no pods and has none, and that the Deployment controller reports it
// Progressing=True, which Knative turns into the Revision's
// ResourcesAvailable=True (serving.TransformDeploymentStatus).
func (e *env) checkDeploymentAtZero(t *testing.T, name string) {
	t.Helper()
	var d *appsv1.Deployment
	e2etest.Eventually(t, "the Deployment controller to report "+name+" Progressing", func(ctx context.Context) (bool, error) {
		var err error
		d, err = e.kube.AppsV1().Deployments(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || d.Status.ObservedGeneration != d.Generation {
			return false, err
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if ptr.Deref(d.Spec.Replicas, -1) != 0 || d.Status.Replicas != 0 {
		t.Errorf("Deployment %s has spec.replicas %d and status.replicas %d, want 0 and 0", name, ptr.Deref(d.Spec.Replicas, -1), d.Status.Replicas)
	}
}

// An RTResource of the Revision's name that is someone else's is never
// handed to the KPA: the PodAutoscaler is refused with the reason, which
// Knative shows on the Revision.
func TestPodAutoscalerIsRefusedForSomeoneElsesRTResource(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	other := desiredRT(revisionRef{Namespace: e.ns, Name: "taken-00001", UID: "not-a-revision", APIVersion: "serving.knative.dev/v1"}, testDeployment())
	other.OwnerReferences = nil
	other.Spec.Selector.MatchLabels = map[string]gantryv1.LabelValue{RevisionUIDLabel: "rev-uid"}
	other.Spec.Replicas = ptr.To[int32](0)
	if err := e.createTyped(ctx, other); err != nil {
		t.Fatal(err)
	}
	rev := e.revision(t, "taken-00001", map[string]string{gantryv1.CriticalityAnnotation: "1"})
	_, err := e.dyn.Resource(PodAutoscalerGVR).Namespace(e.ns).Create(ctx, knativePA(rev), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "is not controlled by Revision taken-00001") {
		t.Fatalf("PodAutoscaler create: %v, want a refusal naming the foreign RTResource", err)
	}
}

func (e *env) createTyped(ctx context.Context, rt *gantryv1.RTResource) error {
	rt.Namespace = e.ns
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return err
	}
	_, err = e.dyn.Resource(RTResourceGVR).Namespace(e.ns).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	return err
}
