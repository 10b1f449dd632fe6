package e2e

import (
	"context"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
)

// This test lives in the last file on purpose: kube-controller-manager's
// garbage collector notices a new CRD only at its next discovery resync (30 s),
// and by the time this runs the earlier tests have used that time.
func TestDeletingRTResourceGarbageCollectsPods(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	rt := e.create(t, e.newRT("tmp", 2, 5))
	e.waitReady(t, "tmp", 2)
	if err := e.rts.Namespace(e.ns).Delete(context.Background(), "tmp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "the garbage collector to delete the pods", func(ctx context.Context) (bool, error) {
		pods, err := e.ownedPods(ctx, rt)
		return len(pods) == 0, err
	})
}

// kubectl delete --cascade=orphan, then create again (the way to change an
// immutable selector): the new object adopts the pods its predecessor left
// instead of starting a second set beside them, as a ReplicaSet would.
func TestRecreatedRTResourceAdoptsPodsOrphanedByItsPredecessor(t *testing.T) {
	e := setup(t)
	e.startController(t, ctrlOpts{})
	ctx := context.Background()
	first := e.create(t, e.newRT("keep", 2, 5))
	e.waitReady(t, "keep", 2)
	before := e.podUIDs(t, first)
	orphan := metav1.DeletePropagationOrphan
	if err := e.rts.Namespace(e.ns).Delete(ctx, "keep", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "the pods to be orphaned", func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if metav1.GetControllerOf(&p) != nil {
				return false, nil
			}
		}
		_, err = e.rts.Namespace(e.ns).Get(ctx, "keep", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	second := e.create(t, e.newRT("keep", 2, 5))
	e.waitReady(t, "keep", 2)
	if after := e.podUIDs(t, second); !maps.Equal(before, after) {
		t.Fatalf("pods after re-create %v, want the orphaned ones %v adopted", after, before)
	}
}

func (e *env) podUIDs(t *testing.T, rt *gantryv1.RTResource) map[types.UID]bool {
	t.Helper()
	pods, err := e.ownedPods(context.Background(), rt)
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]bool{}
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}
