package knativert

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
)

// annotateRevision sets (value non-nil) or removes the criticality
// annotation on a live Revision.
func (e *env) annotateRevision(t *testing.T, name string, value *string) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{gantryv1.CriticalityAnnotation: value}}})
	if _, err := e.dyn.Resource(RevisionGVR).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// knativeSyncsPA does what Knative's revision reconciler does after a
// Revision's annotations change: it copies them onto the PodAutoscaler
// and writes MakePA's spec, whose scaleTargetRef is the Deployment,
// reading again after a conflict (Gantry's reconciler may have written
// the PodAutoscaler meanwhile), as Knative's requeue does.
func (e *env) knativeSyncsPA(t *testing.T, rev string) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	var got *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		r, err := e.dyn.Resource(RevisionGVR).Namespace(e.ns).Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pa, err := e.dyn.Resource(PodAutoscalerGVR).Namespace(e.ns).Get(ctx, rev, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pa.SetAnnotations(knativePA(r).GetAnnotations())
		if err := unstructured.SetNestedField(pa.Object, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": rev + "-deployment"},
			"spec", "scaleTargetRef"); err != nil {
			return err
		}
		got, err = e.dyn.Resource(PodAutoscalerGVR).Namespace(e.ns).Update(ctx, pa, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("Knative's PodAutoscaler update: %v", err)
	}
	return got
}

// A Revision annotated while its Deployment serves: the RTResource starts
// with the Deployment's replicas, the PodAutoscaler turns to it at
// Knative's next update, and the Deployment goes to 0 only once the
// RTResource's pods are ready.
func TestRevisionThatBecomesCriticalHandsOverFromItsDeployment(t *testing.T) {
	e := setup(t)
	rev := e.revision(t, "late-00001", nil)
	d := knativeDeployment(rev, "ko://knative.dev/serving/cmd/queue")
	d.Spec.Replicas = ptr.To[int32](2) // the KPA scaled it
	dep := e.createDeployment(t, d)
	e.createPA(t, knativePA(rev))

	e.annotateRevision(t, "late-00001", ptr.To("5"))
	rt := e.waitRT(t, "late-00001", "the RTResource", func(*gantryv1.RTResource) bool { return true })
	if got := ptr.Deref(rt.Spec.Replicas, -1); got != 2 {
		t.Errorf("RTResource starts at %d replicas, want the Deployment's 2", got)
	}
	if pa := e.knativeSyncsPA(t, "late-00001"); scaleTargetRef(pa)["kind"] != "RTResource" {
		t.Fatalf("after Knative's update the PodAutoscaler targets %v", scaleTargetRef(pa))
	}
	e.waitRT(t, "late-00001", "two ready pods", func(rt *gantryv1.RTResource) bool { return rt.Status.ReadyReplicas == 2 })
	e2etest.Eventually(t, "the Deployment scaled to 0", func(ctx context.Context) (bool, error) {
		got, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, dep.Name, metav1.GetOptions{})
		return err == nil && ptr.Deref(got.Spec.Replicas, -1) == 0, err
	})
}

// A Revision whose annotation is removed: the RTResource stays while the
// PodAutoscaler still targets it, and goes once Knative has turned the
// PodAutoscaler back to the Deployment, which the webhook now lets
// through.
func TestRevisionThatStopsBeingCriticalReturnsToItsDeployment(t *testing.T) {
	e := setup(t)
	rev := e.revision(t, "back-00001", map[string]string{gantryv1.CriticalityAnnotation: "5"})
	e.createDeployment(t, knativeDeployment(rev, "ko://knative.dev/serving/cmd/queue"))
	e.createPA(t, knativePA(rev))
	e.waitRT(t, "back-00001", "the RTResource", func(*gantryv1.RTResource) bool { return true })

	e.annotateRevision(t, "back-00001", nil)
	pa := e.knativeSyncsPA(t, "back-00001")
	if got := scaleTargetRef(pa); got["kind"] != "Deployment" {
		t.Fatalf("the PodAutoscaler of a Revision no longer critical targets %v, want the Deployment", got)
	}
	e2etest.Eventually(t, "the RTResource deleted", func(ctx context.Context) (bool, error) {
		_, err := e.dyn.Resource(RTResourceGVR).Namespace(e.ns).Get(ctx, "back-00001", metav1.GetOptions{})
		return isNotFound(err), nil
	})
}
