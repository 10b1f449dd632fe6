package orchbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/localcluster"
)

// The API server's record of who owns spec.replicas, which the tracker
// reads to tell the KPA's /scale writes from others: a /scale write of 0
// leaves the field without an owner, and so does the next /scale write
// from zero, as Knative's KPA does for a Revision it scaled to zero.
func TestScaleFromZeroLeavesReplicasWithoutOwner(t *testing.T) {
	cluster := localcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := cluster.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "default", "scale-owner"
	lbl := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0),
		Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "dev.local/none"}}}}}}
	if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{FieldManager: "controller"}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kube.AppsV1().Deployments(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) }()
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	for _, step := range []struct {
		replicas int
		owner    string
		scale    bool
	}{{1, "autoscaler", true}, {0, unownedScale, true}, {1, unownedScale, true}} {
		patch := fmt.Appendf(nil, `[{"op":"replace","path":"/spec/replicas","value":%d}]`, step.replicas)
		if _, err := dyn.Resource(gvr).Namespace(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "autoscaler"}, "scale"); err != nil {
			t.Fatalf("scale to %d: %v", step.replicas, err)
		}
		got, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if owner, ok := scaleWriter(got.ManagedFields); owner != step.owner || ok != step.scale {
			t.Errorf("after /scale to %d: spec.replicas owned by %q (through /scale: %v), want %q", step.replicas, owner, ok, step.owner)
		}
	}
}
