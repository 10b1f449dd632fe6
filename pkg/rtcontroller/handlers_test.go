package rtcontroller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func ownedBy(rt *gantryv1.RTResource) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(rt, gantryv1.SchemeGroupVersion.WithKind("RTResource"))}
	}
}

// A pod released from its owner (controller reference removed, as
// `kubectl patch` or an orphaning tool does) leaves the owner a replica
// short: the owner must be reconciled, or the gap stays until a resync.
func TestReleasedPodWakesItsFormerOwner(t *testing.T) {
	c := newOfflineController(t, nil)
	rt := testRT(1)
	if err := c.rtInformer.GetIndexer().Add(rt); err != nil {
		t.Fatal(err)
	}
	old := testPod("p", "h", 0, ownedBy(rt))
	released := old.DeepCopy()
	released.OwnerReferences = nil
	released.ResourceVersion = "2"
	c.podHandlers().OnUpdate(old, released)
	if got := c.queue.Len(); got != 1 {
		t.Fatalf("queue holds %d keys after a pod was released, want its former owner", got)
	}
	key, _ := c.queue.Get()
	if key != (Key{Namespace: "ns", Name: "svc"}) {
		t.Fatalf("enqueued %v, want ns/svc", key)
	}
	c.queue.Done(key)
	c.podHandlers().OnUpdate(released, released)
	if got := c.queue.Len(); got != 0 {
		t.Fatalf("an unowned pod's update enqueued %d keys, want none", got)
	}
}
