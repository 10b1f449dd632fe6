package rtcontroller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// orphanIndex indexes live pods with no controller by namespace and the
// RTResource name in their owner label, so finding an object's orphans is
// one map lookup.
const orphanIndex = "orphanOf"

// Reasons of the Events for adopted and released pods.
const (
	EventAdopted  = "SuccessfulAdopt"
	EventReleased = "SuccessfulRelease"
)

func orphanIndexKey(namespace, ownerLabel string) string { return namespace + "/" + ownerLabel }

func indexOrphans(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !isOrphan(p) {
		return nil, nil
	}
	return []string{orphanIndexKey(p.Namespace, p.Labels[gantryv1.OwnerLabel])}, nil
}

// isOrphan: a live pod that names an RTResource in its owner label but has
// no controller, e.g. left by a delete with propagationPolicy=Orphan.
func isOrphan(p *corev1.Pod) bool {
	return metav1.GetControllerOf(p) == nil && p.DeletionTimestamp == nil && p.Labels[gantryv1.OwnerLabel] != ""
}

// orphansFor lists the cached orphans rt may adopt: named by its owner label
// and matched by its selector, as a ReplicaSet adopts matching pods.
func (c *Controller) orphansFor(rt *gantryv1.RTResource) ([]*corev1.Pod, error) {
	objs, err := c.podInformer.GetIndexer().ByIndex(orphanIndex, orphanIndexKey(rt.Namespace, ownerLabelValue(rt.Name)))
	if err != nil || len(objs) == 0 {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(rt.Spec.Selector.AsMetav1())
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	return matching(objs, sel), nil
}

func matching(objs []any, sel labels.Selector) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

// adopt makes rt the controller of orphans. An uncached read first confirms
// that this incarnation of rt still exists and is not being deleted, so a
// pod is never handed to an owner the garbage collector is about to remove.
func (c *Controller) adopt(ctx context.Context, rt *gantryv1.RTResource, orphans []*corev1.Pod) error {
	fresh, err := c.rts.Namespace(rt.Namespace).Get(ctx, rt.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("confirm %s/%s before adopting: %w", rt.Namespace, rt.Name, err)
	}
	if fresh.UID != rt.UID || fresh.DeletionTimestamp != nil {
		return nil
	}
	return errors.Join(parallel(len(orphans), func(i int) error { return c.adoptPod(ctx, rt, orphans[i]) })...)
}

// adoptPod adds rt's controller reference. The pod's UID in the patch makes
// the apiserver refuse it if the name now belongs to another pod, and a pod
// adopted meanwhile by someone else is refused for its second controller.
func (c *Controller) adoptPod(ctx context.Context, rt *gantryv1.RTResource, pod *corev1.Pod) error {
	patch, err := adoptionPatch(rt, pod.UID)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		c.metrics.podOps.WithLabelValues("adopt", "ok").Inc()
		c.recorder.Eventf(rt, corev1.EventTypeNormal, EventAdopted, "Adopted pod: %s", pod.Name)
		return nil
	case apierrors.IsNotFound(err):
		return nil
	default:
		c.metrics.podOps.WithLabelValues("adopt", "error").Inc()
		return fmt.Errorf("adopt pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

func adoptionPatch(rt *gantryv1.RTResource, podUID types.UID) ([]byte, error) {
	ref := metav1.NewControllerRef(rt, gantryv1.SchemeGroupVersion.WithKind("RTResource"))
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{*ref},
		"uid":             podUID,
	}})
}

// enqueueNamedBy wakes the RTResource an orphan names, so it is adopted
// without waiting for a resync.
func (c *Controller) enqueueNamedBy(pod *corev1.Pod) {
	if !isOrphan(pod) {
		return
	}
	if rt, ok := c.cachedRT(Key{Namespace: pod.Namespace, Name: pod.Labels[gantryv1.OwnerLabel]}); ok {
		c.enqueue(rt)
	}
}

// claim splits the pods rt controls into the ones its selector matches and
// strays, as client-go's ClaimPods does. A stray's labels were changed so
// the selector no longer matches (a pod taken out of service for
// debugging, say); the ReplicaSet controller releases such a pod rather
// than count or delete it, and replaces it.
func claim(pods []*corev1.Pod, sel labels.Selector) (kept, strays []*corev1.Pod) {
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			kept = append(kept, p)
		} else {
			strays = append(strays, p)
		}
	}
	return kept, strays
}

// release removes rt's controller reference from strays. The reconcile
// then plans without them, so each is replaced at once.
func (c *Controller) release(ctx context.Context, rt *gantryv1.RTResource, strays []*corev1.Pod) error {
	return errors.Join(parallel(len(strays), func(i int) error { return c.releasePod(ctx, rt, strays[i]) })...)
}

// releasePod deletes rt's owner reference by UID, with the pod's UID in the
// patch so it cannot land on a later pod of the same name. NotFound (the
// pod is gone) and Invalid (the reference is gone, or the name is a new
// pod) mean there is nothing left to release, as in ClaimPods.
func (c *Controller) releasePod(ctx context.Context, rt *gantryv1.RTResource, pod *corev1.Pod) error {
	patch, err := releasePatch(rt, pod.UID)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	switch {
	case err == nil:
		c.metrics.podOps.WithLabelValues("release", "ok").Inc()
		c.recorder.Eventf(rt, corev1.EventTypeNormal, EventReleased, "Released pod %s: the selector no longer matches it", pod.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsInvalid(err):
		return nil
	default:
		c.metrics.podOps.WithLabelValues("release", "error").Inc()
		return fmt.Errorf("release pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

// releasePatch deletes the owner reference with rt's UID (owner references
// merge by UID), the strategic-merge patch ClaimPods sends.
func releasePatch(rt *gantryv1.RTResource, podUID types.UID) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []map[string]any{{"$patch": "delete", "uid": rt.UID}},
		"uid":             podUID,
	}})
}
