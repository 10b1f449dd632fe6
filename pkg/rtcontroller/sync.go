package rtcontroller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// burstReplicas caps the creates or deletes one reconcile issues, as the
// ReplicaSet controller does, so one huge object cannot monopolise a worker.
const burstReplicas = 500

// Event reasons.
const (
	EventCreated            = "SuccessfulCreate"
	EventDeleted            = "SuccessfulDelete"
	EventFailedCreate       = "FailedCreate"
	EventFailedDelete       = "FailedDelete"
	EventInvalidSpec        = "InvalidSpec"
	EventFailedStatusUpdate = "FailedStatusUpdate"
)

// reconcile is the Handler the engine calls for each key.
func (c *Controller) reconcile(ctx context.Context, key Key) error {
	if err := ctx.Err(); err != nil {
		return err // shutting down: leave the key to the next leader
	}
	start := c.clock.Now()
	var tracer *reconcileTracer
	if c.opts.Trace != nil {
		tracer = &reconcileTracer{tr: ReconcileTrace{Start: time.Now()}}
		ctx = context.WithValue(ctx, tracerKey{}, tracer)
	}
	outcome, err := c.sync(ctx, key)
	c.metrics.duration.Observe(c.clock.Since(start).Seconds())
	if tracer != nil && tracer.marked {
		tracer.tr.End = time.Now()
		c.opts.Trace(tracer.tr)
	}
	switch {
	case errors.Is(err, errGone):
		// Deleted meanwhile: nothing is left to report on, and a retry
		// would only meet the same 404.
		outcome, err = outcomeGone, nil
		c.log.Debug("reconcile: object gone before its status write", "key", key.String())
	case apierrors.IsConflict(err):
		// The cache had not yet seen our last write; the retry will.
		outcome = outcomeError
		c.log.Debug("reconcile conflict", "key", key.String(), "err", err)
	case err != nil:
		outcome = outcomeError
		c.log.Warn("reconcile failed", "key", key.String(), "err", err)
	}
	c.metrics.reconciles.WithLabelValues(outcome).Inc()
	return err
}

func (c *Controller) sync(ctx context.Context, key Key) (string, error) {
	cached, ok := c.cachedRT(key)
	if !ok || cached.DeletionTimestamp != nil {
		return outcomeGone, nil // pods go with their owner via garbage collection
	}
	rt := cached.DeepCopy()
	crit, err := Criticality(rt)
	if err != nil {
		c.recorder.Event(rt, corev1.EventTypeWarning, EventInvalidSpec, err.Error())
	}
	ctx = WithPriority(ctx, int(crit))
	hash, sel, err := c.derive(rt)
	if err != nil {
		c.recorder.Event(rt, corev1.EventTypeWarning, EventInvalidSpec, err.Error())
		return outcomeError, nil // retrying cannot help until the spec changes
	}
	owned, err := c.ownedPods(rt)
	if err != nil {
		return outcomeError, err
	}
	pods, strays := claim(owned, sel)
	marked := func() (*gantryv1.RTResource, error) { return rt, nil }
	if rt.Status.ObservedGeneration != rt.Generation {
		marked = c.startMark(ctx, key, rt, markProcessing(rt, pods, hash, sel.String(), crit, c.clock.Now()), crit)
	}
	// As in the ReplicaSet controller, a failed release stops the sync: the
	// stray would otherwise be replaced while still owned.
	if err := c.release(ctx, rt, strays); err != nil {
		_, markErr := marked()
		return outcomeError, errors.Join(err, markErr)
	}
	return c.manageAndReport(ctx, key, rt, marked, pods, crit, hash, sel.String())
}

// startMark writes the processing mark beside the rest of the reconcile:
// the pod creates that follow do not wait for its round trip, which on a
// loaded apiserver is the longest part of a scale-up (a custom resource's
// status write costs the apiserver more than a pod create). The returned
// func waits for the write and gives the object as stored, for the final
// status write.
func (c *Controller) startMark(ctx context.Context, key Key, rt *gantryv1.RTResource, mark gantryv1.RTResourceStatus, crit int32) func() (*gantryv1.RTResource, error) {
	var (
		out  *gantryv1.RTResource
		err  error
		done = make(chan struct{})
	)
	goSibling(func() {
		defer close(done)
		out, err = c.writeMark(ctx, key, rt, mark, crit)
	})
	return func() (*gantryv1.RTResource, error) {
		<-done
		return out, err
	}
}

func (c *Controller) manageAndReport(ctx context.Context, key Key, rt *gantryv1.RTResource, marked func() (*gantryv1.RTResource, error), pods []*corev1.Pod, crit int32, hash, selector string) (string, error) {
	if adopted, err := c.adoptOrphans(ctx, rt); adopted || err != nil {
		// The adopted pods reach the cache, and the next reconcile, through
		// their update events; planning now would count them as missing.
		_, markErr := marked()
		return outcomeRequeue, errors.Join(err, markErr)
	}
	outcome := outcomeWaiting
	managed, createErr, deleteErr := c.manage(ctx, rt, pods, hash)
	manageErr := errors.Join(deleteErr, createErr)
	rt, err := marked()
	if err != nil {
		return outcomeError, errors.Join(manageErr, err)
	}
	res := computeStatus(rt, pods, hash, selector, crit, c.clock.Now())
	if managed {
		outcome = outcomeSuccess
		setReplicaFailure(&res.status, rt.Generation, createErr, deleteErr, c.clock.Now())
	}
	recheck := res.recheckAfter
	if wait := c.written.wait(key, rt.Status, res.status, c.clock.Now()); wait > 0 {
		// Only the counts moved, and the last write was just now: the
		// requeue writes them with whatever else the window brings.
		recheck = minPositive(recheck, wait)
	} else if _, err := c.writeStatus(ctx, rt, res.status); err != nil {
		return outcomeError, errors.Join(manageErr, err)
	}
	if manageErr != nil {
		return outcomeError, manageErr
	}
	if recheck > 0 {
		c.queue.AddAfter(key, recheck)
		outcome = outcomeRequeue
	}
	return outcome, nil
}

// manage plans and applies creates and deletes, unless the expectations
// say the cache has not yet seen the previous ones; managed reports whether
// it ran.
func (c *Controller) manage(ctx context.Context, rt *gantryv1.RTResource, pods []*corev1.Pod, hash string) (managed bool, createErr, deleteErr error) {
	if !c.expect.satisfied(ownerOf(rt)) {
		return false, nil, nil
	}
	createErr, deleteErr = c.apply(ctx, rt, computePlan(rt, pods, hash, c.clock.Now()), hash)
	return true, createErr, deleteErr
}

// adoptOrphans adopts the cached orphans of rt, reporting whether there were
// any.
func (c *Controller) adoptOrphans(ctx context.Context, rt *gantryv1.RTResource) (bool, error) {
	orphans, err := c.orphansFor(rt)
	if err != nil || len(orphans) == 0 {
		return false, err
	}
	return true, c.adopt(ctx, rt, orphans)
}

// derive computes what a reconcile needs from the spec alone.
func (c *Controller) derive(rt *gantryv1.RTResource) (hash string, sel labels.Selector, err error) {
	sel, err = metav1.LabelSelectorAsSelector(rt.Spec.Selector.AsMetav1())
	if err != nil {
		return "", nil, fmt.Errorf("spec.selector: %w", err)
	}
	hash, err = TemplateHash(&rt.Spec.Template)
	return hash, sel, err
}

// ownedPods reads the owner's pods from the cache index: no LIST.
func (c *Controller) ownedPods(rt *gantryv1.RTResource) ([]*corev1.Pod, error) {
	objs, err := c.podInformer.GetIndexer().ByIndex(controllerUIDIndex, string(rt.UID))
	if err != nil {
		return nil, fmt.Errorf("pod cache: %w", err)
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == rt.Namespace {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// writeMark writes the processing mark, traced when a Trace is set.
func (c *Controller) writeMark(ctx context.Context, key Key, rt *gantryv1.RTResource, mark gantryv1.RTResourceStatus, crit int32) (*gantryv1.RTResource, error) {
	tracer := tracerFrom(ctx)
	if tracer == nil {
		return c.writeStatus(ctx, rt, mark)
	}
	gen := rt.Generation
	var (
		out   *gantryv1.RTResource
		wrote bool
	)
	ct, err := timeCall(ctx, func(ctx context.Context) error {
		var err error
		out, wrote, err = c.updateStatus(ctx, rt, mark)
		return err
	})
	if err == nil && wrote {
		tracer.mu.Lock()
		tracer.marked = true
		tracer.tr.Namespace, tracer.tr.Name, tracer.tr.Criticality, tracer.tr.Generation = key.Namespace, key.Name, crit, gen
		tracer.tr.Seen, tracer.tr.Mark = c.seen.take(key, gen), ct
		tracer.mu.Unlock()
	}
	return out, err
}

// writeStatus updates the status subresource if it changed and returns the
// object as stored.
func (c *Controller) writeStatus(ctx context.Context, rt *gantryv1.RTResource, st gantryv1.RTResourceStatus) (*gantryv1.RTResource, error) {
	out, _, err := c.updateStatus(ctx, rt, st)
	return out, err
}

// errGone is a status write not made, or answered 404, because the
// RTResource is being deleted or is gone: reconcile drops the key quietly.
var errGone = errors.New("the RTResource is being deleted or is gone")

// updateStatus writes st unless it is rt's status already, or rt is the
// very version this controller last wrote a status over: the cache has not
// seen that write yet, so a write now would only conflict (the API server
// answered 122 conflicts to 192 writes in one RQ1 arm, each a request
// among the KPA's). The write's own watch event brings the key back
// (specRelevantChange lets status changes through); a requeue after
// statusCoalesce covers a watch that lost it. A write starts the key's
// coalescing window (statusCoalesce). wrote says whether it wrote.
//
// Nor does it write to an object the cache says is being deleted, is gone
// or was replaced by a new one of the same name since the reconcile read
// it (the pod creates before a write take long enough on a loaded API
// server for the object to go: 234-264 status writes per RQ1 arm met a
// 404), and a 404 is not an error: both give errGone.
func (c *Controller) updateStatus(ctx context.Context, rt *gantryv1.RTResource, st gantryv1.RTResourceStatus) (out *gantryv1.RTResource, wrote bool, err error) {
	if equality.Semantic.DeepEqual(rt.Status, st) {
		return rt, false, nil
	}
	key := Key{Namespace: rt.Namespace, Name: rt.Name}
	if cur, ok := c.cachedRT(key); !ok || cur.DeletionTimestamp != nil || cur.UID != rt.UID {
		return rt, false, errGone
	}
	if c.written.stale(key, rt.ResourceVersion) {
		c.queue.AddAfter(key, statusCoalesce)
		return rt, false, nil
	}
	next := rt.DeepCopy()
	next.Status = st
	out, err = c.rts.Namespace(rt.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return rt, false, errGone
	}
	if err != nil {
		if !apierrors.IsConflict(err) {
			c.recorder.Event(rt, corev1.EventTypeWarning, EventFailedStatusUpdate, err.Error())
		}
		return rt, false, fmt.Errorf("update status of %s/%s: %w", rt.Namespace, rt.Name, err)
	}
	c.written.note(key, rt.ResourceVersion, c.clock.Now())
	return out, true, nil
}

// apply issues a plan's deletes and creates after recording them as
// expectations, so the next reconcile waits for the cache to see them. The
// errors come apart so the status can say which operation failed.
func (c *Controller) apply(ctx context.Context, rt *gantryv1.RTResource, p plan, hash string) (createErr, deleteErr error) {
	dels := p.delete[:min(len(p.delete), burstReplicas)]
	adds := min(p.create, burstReplicas)
	if adds == 0 && len(dels) == 0 {
		return nil, nil
	}
	uids := make([]types.UID, len(dels))
	for i, d := range dels {
		uids[i] = d.UID
	}
	c.expect.expect(ownerOf(rt), adds, uids)
	deleteErr = c.deletePods(ctx, rt, dels)
	return c.createPods(ctx, rt, adds, hash), deleteErr
}

// createPods creates n pods in slow-start batches (1, 2, 4, ...): a template
// the apiserver rejects costs one failed request, not n.
func (c *Controller) createPods(ctx context.Context, rt *gantryv1.RTResource, n int, hash string) error {
	owner := ownerOf(rt)
	done := 0
	for batch := 1; done < n; batch *= 2 {
		size := min(batch, n-done)
		errs := parallel(size, func(int) error { return c.createPod(ctx, rt, hash) })
		done += size
		if err := errors.Join(errs...); err != nil {
			for range n - done {
				c.expect.creationObserved(owner) // skipped: will never be seen
			}
			return err
		}
	}
	return nil
}

func (c *Controller) createPod(ctx context.Context, rt *gantryv1.RTResource, hash string) error {
	pod := newPod(rt, hash)
	var created *corev1.Pod
	ct, err := timeCall(ctx, func(ctx context.Context) error {
		var err error
		created, err = c.kube.CoreV1().Pods(rt.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	tracerFrom(ctx).create(ct)
	if err != nil {
		c.expect.creationObserved(ownerOf(rt))
		c.metrics.podOps.WithLabelValues("create", "error").Inc()
		c.recorder.Eventf(rt, corev1.EventTypeWarning, EventFailedCreate, "Error creating pod: %v", err)
		return fmt.Errorf("create pod for %s/%s: %w", rt.Namespace, rt.Name, err)
	}
	c.metrics.podOps.WithLabelValues("create", "ok").Inc()
	c.recorder.Eventf(rt, corev1.EventTypeNormal, EventCreated, "Created pod: %s", created.Name)
	return nil
}

func (c *Controller) deletePods(ctx context.Context, rt *gantryv1.RTResource, pods []*corev1.Pod) error {
	errs := parallel(len(pods), func(i int) error { return c.deletePod(ctx, rt, pods[i]) })
	return errors.Join(errs...)
}

// deletePod deletes by name with a UID precondition, so a pod is never
// confused with a later one of the same name.
func (c *Controller) deletePod(ctx context.Context, rt *gantryv1.RTResource, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	switch {
	case err == nil:
		c.metrics.podOps.WithLabelValues("delete", "ok").Inc()
		c.recorder.Eventf(rt, corev1.EventTypeNormal, EventDeleted, "Deleted pod: %s", pod.Name)
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		c.expect.deletionObserved(ownerOf(rt), uid) // already gone
		return nil
	default:
		c.expect.deletionObserved(ownerOf(rt), uid)
		c.metrics.podOps.WithLabelValues("delete", "error").Inc()
		c.recorder.Eventf(rt, corev1.EventTypeWarning, EventFailedDelete, "Error deleting pod %s: %v", pod.Name, err)
		return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
}

// parallel runs f(0..n-1) concurrently and returns the errors. f(0) runs
// on the calling goroutine: under the rtqueue engine that is the worker's
// locked, real-time thread, so a critical reconcile's single create,
// delete or adoption (and the first of any batch) is issued at the
// worker's SCHED_FIFO priority, not from a goroutine the Go scheduler puts
// on an ordinary thread.
func parallel(n int, f func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = f(i) })
	}
	if n > 0 {
		errs[0] = f(0)
	}
	wg.Wait()
	return errs
}

// newPod stamps out one pod of rt's template, controlled by rt.
func newPod(rt *gantryv1.RTResource, hash string) *corev1.Pod {
	t := rt.Spec.Template.DeepCopy()
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[gantryv1.TemplateHashLabel] = hash
	labels[gantryv1.OwnerLabel] = ownerLabelValue(rt.Name)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    rt.Name + "-",
			Namespace:       rt.Namespace,
			Labels:          labels,
			Annotations:     t.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rt, gantryv1.SchemeGroupVersion.WithKind("RTResource"))},
		},
		Spec: t.Spec,
	}
}

// ownerLabelValue fits a name into a label value (63 characters, alphanumeric
// at both ends). The label only filters the pod watch; ownership is decided by
// the controller reference.
func ownerLabelValue(name string) string {
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}
