package rtcontroller

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// An owned pod whose owner label was removed must stay in the pod cache:
// dropped from a label-filtered watch, it looked deleted, was replaced, and
// kept running uncounted, so a scale-down never reached it.
func TestPodCacheKeepsOwnedPodsWithoutTheOwnerLabel(t *testing.T) {
	rt := testRT(2)
	labelled := testPod("labelled", "h", 0, ownedBy(rt), orphaned("svc"))
	unlabelled := testPod("unlabelled", "h", 1, ownedBy(rt))
	unlabelled.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	factory := newPodInformerFactory(fake.NewClientset(labelled, unlabelled), "", 0)
	informer := factory.Core().V1().Pods().Informer()
	if err := informer.AddIndexers(cache.Indexers{controllerUIDIndex: indexByControllerUID}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("pod cache did not sync")
	}
	objs, err := informer.GetIndexer().ByIndex(controllerUIDIndex, string(rt.UID))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		p := o.(*corev1.Pod)
		got = append(got, p.Name)
		if p.ManagedFields != nil {
			t.Errorf("pod %s cached with its managed fields; the cache holds every pod now, keep it lean", p.Name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"labelled", "unlabelled"}) {
		t.Fatalf("owned pods in the cache = %v, want both, with or without the owner label", got)
	}
}

// Pods rt controls that its selector no longer matches are strays to
// release, as client-go's ClaimPods does; the rest are counted.
func TestClaimSplitsOffPodsTheSelectorNoLongerMatches(t *testing.T) {
	matching := testPod("serving", "h", 0, orphaned("svc"))
	stray := testPod("debugging", "h", 1, orphaned("svc"))
	stray.Labels["app"] = "debug"
	kept, strays := claim([]*corev1.Pod{matching, stray}, labels.SelectorFromSet(labels.Set{"app": "svc"}))
	if !slices.Equal(names(kept), []string{"serving"}) || !slices.Equal(names(strays), []string{"debugging"}) {
		t.Fatalf("kept %v strays %v, want [serving] and [debugging]", names(kept), names(strays))
	}
}

// The release patch removes rt's controller reference, and only it, and
// pins the pod's UID so it cannot land on a later pod of the same name.
func TestReleasePatchRemovesOnlyTheOwnersReference(t *testing.T) {
	rt := testRT(1)
	pod := testPod("p", "h", 0, ownedBy(rt))
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "other-uid"}
	pod.OwnerReferences = append(pod.OwnerReferences, other)
	patch, err := releasePatch(rt, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	original, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := strategicpatch.StrategicMergePatch(original, patch, corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	var out corev1.Pod
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.OwnerReferences) != 1 || out.OwnerReferences[0] != other || out.UID != pod.UID {
		t.Fatalf("after the release patch %s: owner references %+v, uid %s; want only the other owner, same uid",
			patch, out.OwnerReferences, out.UID)
	}
	if _, ok := podOwner(&out); ok {
		t.Fatal("the released pod still has an RTResource controller")
	}
}
