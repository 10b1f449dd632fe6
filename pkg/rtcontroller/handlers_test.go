package rtcontroller

import (
	"encoding/json"
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

func orphaned(name string) podOpt {
	return func(p *corev1.Pod) {
		p.Labels[gantryv1.OwnerLabel] = name
		p.Labels["app"] = "svc"
	}
}

// Pods left by a delete with propagationPolicy=Orphan name their old owner
// in the owner label; a re-created object of that name must adopt the ones
// its selector matches, and only those.
func TestOrphansAreFoundAndTheirOwnerWoken(t *testing.T) {
	c := newOfflineController(t, nil)
	rt := testRT(2)
	if err := c.rtInformer.GetIndexer().Add(rt); err != nil {
		t.Fatal(err)
	}
	pods := c.podInformer.GetIndexer()
	other := testPod("other", "h", 0, orphaned("svc"))
	other.Labels["app"] = "not-svc"
	for _, p := range []*corev1.Pod{
		testPod("orphan", "h", 0, orphaned("svc")),
		other,
		testPod("owned", "h", 0, orphaned("svc"), ownedBy(rt)),
		testPod("gone", "h", 0, orphaned("svc"), terminating),
		testPod("elsewhere", "h", 0, orphaned("svc2")),
	} {
		if err := pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.orphansFor(rt)
	if err != nil {
		t.Fatal(err)
	}
	if n := names(got); len(n) != 1 || n[0] != "orphan" {
		t.Fatalf("orphans = %v, want only the live, unowned, matching pod", n)
	}
	c.podHandlers().OnAdd(got[0], false)
	if key, _ := c.queue.Get(); key != (Key{Namespace: "ns", Name: "svc"}) {
		t.Fatalf("an orphan's add enqueued %v, want the object it names", key)
	}
}

func TestAdoptionPatchSetsControllerAndPinsPodUID(t *testing.T) {
	raw, err := adoptionPatch(testRT(1), "pod-uid")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Metadata struct {
			UID             string                  `json:"uid"`
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	refs := p.Metadata.OwnerReferences
	if p.Metadata.UID != "pod-uid" || len(refs) != 1 || refs[0].UID != "rt-uid" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Fatalf("patch %s: want the pod UID pinned and rt as controller", raw)
	}
}

// Seen in e2e: reconcile A writes Replicas=1; reconcile B runs before the
// cache has A's write, computes Replicas=2, finds it equal to the stale
// cached status and skips its write. When the cache then catches up with
// A's write, that update must wake the key, or the status stays wrong.
func TestStatusUpdateSeenByTheCacheWakesTheKey(t *testing.T) {
	stale := testRT(2)
	stale.ResourceVersion = "1"
	stale.Status.Replicas = 2
	caughtUp := stale.DeepCopy()
	caughtUp.ResourceVersion = "2"
	caughtUp.Status.Replicas = 1
	if !specRelevantChange(stale, caughtUp) {
		t.Fatal("a status change was filtered out; a skipped write would never be redone")
	}
	relabelled := stale.DeepCopy()
	relabelled.ResourceVersion = "3"
	relabelled.Labels = map[string]string{"team": "x"}
	if specRelevantChange(stale, relabelled) {
		t.Fatal("a label-only update woke the key")
	}
}
