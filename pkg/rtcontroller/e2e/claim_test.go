package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
)

// Removing the owner label from a pod must not hide it from the controller:
// it is still owned, so it is counted (no replacement appears) and a
// scale-down can delete it. With a pod watch filtered on the label, the pod
// dropped out of the cache, a third pod was created, and scaling to 1 left
// two pods running.
func TestPodWhoseOwnerLabelIsRemovedIsStillCountedAndScaledDown(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.create(t, e.newRT("unlabel", 2, 5))
	e.waitReady(t, "unlabel", 2)
	pod := e.anyOwnedPod(t, rt)
	e.patchPod(t, pod.Name, `[{"op":"remove","path":"/metadata/labels/gantry.dev~1rtresource"}]`)
	e.scaleTo(t, "unlabel", 1)
	e.waitReady(t, "unlabel", 1)
}

// Changing a pod's labels so the selector no longer matches takes it out of
// the set, as for a ReplicaSet: the controller releases it (drops its
// controller reference; the pod keeps running, e.g. for debugging) and
// creates a replacement.
func TestPodThatStopsMatchingTheSelectorIsReleasedAndReplaced(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.create(t, e.newRT("stray", 2, 5))
	e.waitReady(t, "stray", 2)
	pod := e.anyOwnedPod(t, rt)
	e.patchPod(t, pod.Name, `[{"op":"replace","path":"/metadata/labels/app","value":"debug"}]`)
	e2etest.Eventually(t, "the stray pod to be released", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.UID != pod.UID || p.DeletionTimestamp != nil {
			return false, fmt.Errorf("pod %s was deleted, want it released and kept", pod.Name)
		}
		return metav1.GetControllerOf(p) == nil, nil
	})
	e.waitReady(t, "stray", 2)
	if uids := e.podUIDs(t, rt); uids[pod.UID] {
		t.Fatalf("the released pod %s is still among the owned pods", pod.Name)
	}
}

func (e *env) anyOwnedPod(t *testing.T, rt *gantryv1.RTResource) corev1.Pod {
	t.Helper()
	pods, err := e.ownedPods(context.Background(), rt)
	if err != nil || len(pods) == 0 {
		t.Fatalf("owned pods of %s: %d, %v", rt.Name, len(pods), err)
	}
	return pods[0]
}

func (e *env) patchPod(t *testing.T, name, jsonPatch string) {
	t.Helper()
	_, err := e.kube.CoreV1().Pods(e.ns).Patch(context.Background(), name, types.JSONPatchType, []byte(jsonPatch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("patch pod %s: %v", name, err)
	}
}
