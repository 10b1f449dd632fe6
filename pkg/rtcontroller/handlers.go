package rtcontroller

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

func (c *Controller) rtHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if rt, ok := obj.(*gantryv1.RTResource); ok {
				c.noteGeneration(rt)
				c.enqueue(rt)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*gantryv1.RTResource)
			rt, ok2 := newObj.(*gantryv1.RTResource)
			if ok1 && ok2 && specRelevantChange(old, rt) {
				c.noteGeneration(rt)
				c.enqueue(rt)
			}
		},
		DeleteFunc: func(obj any) {
			rt, ok := tombstone[*gantryv1.RTResource](obj)
			if !ok {
				return
			}
			c.expect.forget(ownerOf(rt))
			c.written.forget(Key{Namespace: rt.Namespace, Name: rt.Name})
			if c.opts.Trace != nil {
				c.seen.forget(Key{Namespace: rt.Namespace, Name: rt.Name})
			}
			c.enqueue(rt)
		},
	}
}

// specRelevantChange skips updates that cannot change what a reconcile does
// (labels, finalizers, managed fields); periodic resyncs (same
// resourceVersion) still get through. A status change does get through,
// the controller's own writes included: a reconcile that ran before the
// cache saw the previous write compared its status with a stale copy and
// may have skipped a needed write, and nothing else would wake the key. The
// recheck costs one reconcile that writes nothing.
func specRelevantChange(old, rt *gantryv1.RTResource) bool {
	if old.ResourceVersion == rt.ResourceVersion {
		return true
	}
	return old.Generation != rt.Generation ||
		!maps.Equal(old.Annotations, rt.Annotations) ||
		(old.DeletionTimestamp == nil) != (rt.DeletionTimestamp == nil) ||
		!equality.Semantic.DeepEqual(old.Status, rt.Status)
}

func (c *Controller) podHandlers() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			if owner, ok := podOwner(pod); ok {
				c.expect.creationObserved(owner)
				if pod.DeletionTimestamp != nil {
					c.expect.deletionObserved(owner, pod.UID)
				}
				c.enqueueOwner(owner)
				return
			}
			c.enqueueNamedBy(pod)
		},
		UpdateFunc: func(oldObj, newObj any) {
			pod, ok := newObj.(*corev1.Pod)
			if !ok {
				return
			}
			c.enqueueFormerOwner(oldObj, pod)
			if owner, ok := podOwner(pod); ok {
				if pod.DeletionTimestamp != nil {
					c.expect.deletionObserved(owner, pod.UID)
				}
				c.enqueueOwner(owner)
				return
			}
			c.enqueueNamedBy(pod)
		},
		DeleteFunc: func(obj any) {
			pod, ok := tombstone[*corev1.Pod](obj)
			if !ok {
				return
			}
			if owner, ok := podOwner(pod); ok {
				c.expect.deletionObserved(owner, pod.UID)
				c.enqueueOwner(owner)
			}
		},
	}
}

// tombstone unwraps the object of a delete event, which may come as a
// DeletedFinalStateUnknown after a missed watch event.
func tombstone[T any](obj any) (T, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	t, ok := obj.(T)
	return t, ok
}

func ownerOf(rt *gantryv1.RTResource) ownerKey {
	return ownerKey{Namespace: rt.Namespace, Name: rt.Name, UID: rt.UID}
}

// podOwner is the RTResource incarnation that controls pod, if any.
func podOwner(pod *corev1.Pod) (ownerKey, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "RTResource" || ref.APIVersion != gantryv1.SchemeGroupVersion.String() {
		return ownerKey{}, false
	}
	return ownerKey{Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}, true
}

// noteGeneration remembers when a generation not yet observed arrived,
// for the trace of the reconcile that marks it.
func (c *Controller) noteGeneration(rt *gantryv1.RTResource) {
	if c.opts.Trace != nil && rt.Generation != rt.Status.ObservedGeneration {
		c.seen.record(Key{Namespace: rt.Namespace, Name: rt.Name}, rt.Generation)
	}
}

func (c *Controller) enqueue(rt *gantryv1.RTResource) {
	crit, _ := Criticality(rt) // a bad annotation is reported by the reconcile
	c.queue.AddWithPriority(Key{Namespace: rt.Namespace, Name: rt.Name}, int(crit))
}

// enqueueOwner enqueues the owner of a pod at the owner's criticality. A pod
// whose owner UID no longer matches the cached object belongs to a deleted
// incarnation; the garbage collector removes it, so there is nothing to do.
func (c *Controller) enqueueOwner(owner ownerKey) {
	rt, ok := c.cachedRT(Key{Namespace: owner.Namespace, Name: owner.Name})
	if !ok || rt.UID != owner.UID {
		return
	}
	c.enqueue(rt)
}

func (c *Controller) cachedRT(key Key) (*gantryv1.RTResource, bool) {
	obj, exists, err := c.rtInformer.GetIndexer().GetByKey(key.String())
	if err != nil || !exists {
		return nil, false
	}
	rt, ok := obj.(*gantryv1.RTResource)
	return rt, ok
}

// enqueueFormerOwner wakes the owner a pod was taken from (its controller
// reference removed or changed), which is a replica short now, as the
// ReplicaSet controller does.
func (c *Controller) enqueueFormerOwner(oldObj any, pod *corev1.Pod) {
	old, ok := oldObj.(*corev1.Pod)
	if !ok {
		return
	}
	was, ok := podOwner(old)
	if now, still := podOwner(pod); !ok || (still && now == was) {
		return
	}
	c.enqueueOwner(was)
}
