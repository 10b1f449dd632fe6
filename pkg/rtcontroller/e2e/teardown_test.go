package e2e

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	e.eventually(t, "the garbage collector to delete the pods", func(ctx context.Context) (bool, error) {
		pods, err := e.ownedPods(ctx, rt)
		return len(pods) == 0, err
	})
}
