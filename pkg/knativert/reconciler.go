package knativert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
)

// Options configures a Controller.
type Options struct {
	Config    *rest.Config
	Namespace string        // "" watches every namespace
	Workers   int           // reconcile workers (default 2)
	Resync    time.Duration // informer resync (default none)
	Logger    *slog.Logger  // default slog.Default()
	Component string        // names the controller in Events (default gantry-knative)
}

// Controller keeps an RTResource behind every critical Revision and
// serves the webhook (Webhook) that points Knative at it.
type Controller struct {
	opts     Options
	dyn      dynamic.Interface
	kube     kubernetes.Interface
	dynInf   dynamicinformer.DynamicSharedInformerFactory
	depInf   informers.SharedInformerFactory
	revs     cache.GenericLister
	pas      cache.GenericLister
	rts      cache.GenericLister
	deps     appslisters.DeploymentLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	events   record.EventBroadcaster
}

// New builds a Controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if opts.Config == nil {
		return nil, errors.New("knativert: Options.Config is required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Component == "" {
		opts.Component = "gantry-knative"
	}
	dyn, err := dynamic.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	c := &Controller{opts: opts, dyn: dyn, kube: kube}
	c.dynInf = dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, opts.Resync, opts.Namespace, nil)
	// Only Knative's Deployments: everything Knative makes for a Revision
	// carries its label.
	c.depInf = informers.NewSharedInformerFactoryWithOptions(kube, opts.Resync, informers.WithNamespace(opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = RevisionLabel }))
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "knative-rtresources"})

	byRevision := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { c.enqueueOwner(o) },
		UpdateFunc: func(_, o any) { c.enqueueOwner(o) },
		DeleteFunc: func(o any) { c.enqueueOwner(o) },
	}
	for _, inf := range []struct {
		gvr     schema.GroupVersionResource
		lister  *cache.GenericLister
		handler cache.ResourceEventHandler
	}{
		{RevisionGVR, &c.revs, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.enqueueSelf(o) },
			UpdateFunc: func(_, o any) { c.enqueueSelf(o) },
		}},
		{PodAutoscalerGVR, &c.pas, byRevision},
		{RTResourceGVR, &c.rts, byRevision},
	} {
		gi := c.dynInf.ForResource(inf.gvr)
		if _, err := gi.Informer().AddEventHandler(inf.handler); err != nil {
			return nil, err
		}
		*inf.lister = gi.Lister()
		c.synced = append(c.synced, gi.Informer().HasSynced)
	}
	di := c.depInf.Apps().V1().Deployments()
	if _, err := di.Informer().AddEventHandler(byRevision); err != nil {
		return nil, err
	}
	c.deps = di.Lister()
	c.synced = append(c.synced, di.Informer().HasSynced)

	c.events = record.NewBroadcaster()
	c.recorder = c.events.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: opts.Component})
	return c, nil
}

// Webhook is the admission handler; serve it at WebhookPath over TLS.
func (c *Controller) Webhook() http.Handler {
	return &Webhook{revisions: c.getRevision, rtOwner: c.getRTOwner, log: c.opts.Logger}
}

// Run reconciles until ctx ends. The webhook may serve before Run has
// synced: it reads Revisions the cache lacks from the apiserver.
func (c *Controller) Run(ctx context.Context) error {
	c.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.kube.CoreV1().Events("")})
	defer c.events.Shutdown()
	defer c.queue.ShutDown()
	c.dynInf.Start(ctx.Done())
	c.depInf.Start(ctx.Done())
	defer c.dynInf.Shutdown()
	defer c.depInf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("knativert: caches did not sync: %w", context.Cause(ctx))
	}
	done := make(chan struct{})
	for range c.opts.Workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	for range c.opts.Workers {
		<-done
	}
	return nil
}

func (c *Controller) next(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	if err := c.reconcile(ctx, k); err != nil {
		if ctx.Err() == nil {
			c.opts.Logger.Warn("knativert: reconcile failed; retrying", "revision", k, "err", err)
		}
		c.queue.AddRateLimited(k)
		return true
	}
	c.queue.Forget(k)
	return true
}

func (c *Controller) enqueueSelf(o any) {
	if m, err := metaOf(o); err == nil {
		c.queue.Add(key(m.GetNamespace(), m.GetName()))
	}
}

func (c *Controller) enqueueOwner(o any) {
	m, err := metaOf(o)
	if err != nil {
		return
	}
	if name, _ := revisionOwner(m.GetOwnerReferences()); name != "" {
		c.queue.Add(key(m.GetNamespace(), name))
	}
}

func metaOf(o any) (metav1.Object, error) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	if u, ok := o.(*unstructured.Unstructured); ok {
		return u, nil
	}
	if d, ok := o.(*appsv1.Deployment); ok {
		return d, nil
	}
	return nil, fmt.Errorf("unexpected %T", o)
}

// getRevision reads a Revision from the apiserver, not the cache: the
// webhook decides on the Revision as it is now. Knative writes a
// PodAutoscaler after its own cache has seen a Revision's change, and a
// lagging cache here would undo that decision (a Revision just annotated
// would keep its Deployment as target, one just un-annotated its
// RTResource). Knative writes a Revision's PodAutoscaler and Deployment
// rarely (on a change of the Revision, its Deployment or its config), so
// one read per admission is cheap.
func (c *Controller) getRevision(ctx context.Context, ns, name string) (revisionInfo, bool, error) {
	u, err := c.dyn.Resource(RevisionGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return revisionInfo{}, false, nil
	}
	if err != nil {
		return revisionInfo{}, false, err
	}
	return revisionInfo{UID: string(u.GetUID()), APIVersion: u.GetAPIVersion(), Annotations: u.GetAnnotations()}, true, nil
}

// getRTOwner reads an RTResource's controller from the apiserver, for the
// webhook, for the same reason as getRevision.
func (c *Controller) getRTOwner(ctx context.Context, ns, name string) (string, bool, error) {
	u, err := c.dyn.Resource(RTResourceGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if ref := metav1.GetControllerOf(u); ref != nil {
		return string(ref.UID), true, nil
	}
	return "", true, nil
}

// reconcile brings one Revision's RTResource where it should be.
func (c *Controller) reconcile(ctx context.Context, k string) error {
	ns, name, err := splitKey(k)
	if err != nil {
		return nil // never retried: a bad key cannot become good
	}
	obj, err := c.revs.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // the garbage collector removes its RTResource
	}
	if err != nil {
		return err
	}
	revU := obj.(*unstructured.Unstructured)
	if revU.GetDeletionTimestamp() != nil {
		return nil
	}
	rev := revisionRef{Namespace: ns, Name: name, UID: revU.GetUID(), APIVersion: revU.GetAPIVersion(), Annotations: revU.GetAnnotations()}
	revObjRef := &corev1.ObjectReference{APIVersion: rev.APIVersion, Kind: revisionKind, Namespace: ns, Name: name, UID: rev.UID}

	rt, err := c.getRT(ns, RTName(name))
	if err != nil {
		return err
	}
	if rt != nil && !metav1.IsControlledBy(rt, revU) {
		if Critical(rev.Annotations) {
			c.recorder.Eventf(revObjRef, corev1.EventTypeWarning, "RTResourceNotOwned",
				"RTResource %s exists and is not controlled by this Revision; the Revision cannot be backed by it", rt.Name)
		}
		return nil
	}
	pa, paNamesRT := c.pa(ns, name, rev.UID)
	dep, err := c.deployment(ns, rev.UID)
	if err != nil {
		return err
	}
	if !Critical(rev.Annotations) {
		if paNamesRT && dep != nil {
			// Knative turns it back on its next update of the PodAutoscaler;
			// this does the same at once, so the two never disagree for long.
			return c.retarget(ctx, pa, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": dep.Name})
		}
		// Keep the RTResource until the PodAutoscaler has turned back to the
		// Deployment, so the KPA never scales a target that is gone.
		if rt != nil && !paNamesRT {
			err := c.dyn.Resource(RTResourceGVR).Namespace(ns).Delete(ctx, rt.Name,
				metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &rt.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete RTResource %s/%s: %w", ns, rt.Name, err)
			}
			c.recorder.Eventf(revObjRef, corev1.EventTypeNormal, "DeletedRTResource",
				"RTResource %s deleted: the Revision is no longer critical", rt.Name)
		}
		return nil
	}
	if dep == nil {
		return nil // no Deployment yet: its add event brings the key back
	}
	want := desiredRT(rev, dep)
	if rt == nil {
		if err := c.createRT(ctx, want); err != nil {
			c.recorder.Eventf(revObjRef, corev1.EventTypeWarning, "FailedCreateRTResource", "create RTResource %s: %v", want.Name, err)
			return err
		}
		c.recorder.Eventf(revObjRef, corev1.EventTypeNormal, "CreatedRTResource", "RTResource %s created from Deployment %s", want.Name, dep.Name)
		return nil
	}
	if u := update(rt, want); u != nil {
		if err := c.updateRT(ctx, u); err != nil {
			return err
		}
		return nil // the update's event brings the key back for the hand-over
	}
	if pa != nil && !paNamesRT {
		// The webhook turns every write of the PodAutoscaler to the
		// RTResource, but a Revision annotated after its PodAutoscaler was
		// written waits for Knative's next write; this is that write.
		return c.retarget(ctx, pa, ScaleTargetRef(name))
	}
	return c.handOver(ctx, dep, rt, paNamesRT)
}

// handOver scales the Deployment to 0 once the PodAutoscaler names the
// RTResource and the RTResource is ready: the case of a Revision that
// became critical while its Deployment served. On the usual path the
// webhook created the Deployment at 0 and there is nothing to do.
func (c *Controller) handOver(ctx context.Context, dep *appsv1.Deployment, rt *gantryv1.RTResource, paNamesRT bool) error {
	if !paNamesRT || dep.Spec.Replicas == nil || *dep.Spec.Replicas == 0 {
		return nil
	}
	want := ptr.Deref(rt.Spec.Replicas, 1)
	if rt.Status.ObservedGeneration != rt.Generation || rt.Status.ReadyReplicas < want {
		return nil // the RTResource's status event brings the key back
	}
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: dep.Namespace, Name: dep.Name}}
	if _, err := c.kube.AppsV1().Deployments(dep.Namespace).UpdateScale(ctx, dep.Name, scale, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("scale Deployment %s/%s to 0: %w", dep.Namespace, dep.Name, err)
	}
	return nil
}

func (c *Controller) getRT(ns, name string) (*gantryv1.RTResource, error) {
	obj, err := c.rts.ByNamespace(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rt := &gantryv1.RTResource{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, rt); err != nil {
		return nil, fmt.Errorf("decode RTResource %s/%s: %w", ns, name, err)
	}
	return rt, nil
}

func (c *Controller) createRT(ctx context.Context, rt *gantryv1.RTResource) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return err
	}
	_, err = c.dyn.Resource(RTResourceGVR).Namespace(rt.Namespace).Create(ctx, &unstructured.Unstructured{Object: u}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // the cache was behind; its add event brings the key back
	}
	return err
}

func (c *Controller) updateRT(ctx context.Context, rt *gantryv1.RTResource) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rt)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(gantryv1.SchemeGroupVersion.String())
	obj.SetKind(rtKind)
	_, err = c.dyn.Resource(RTResourceGVR).Namespace(rt.Namespace).Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// deployment is the Deployment Knative made for the Revision: selected
// by the Revision's UID label and controlled by it.
func (c *Controller) deployment(ns string, uid types.UID) (*appsv1.Deployment, error) {
	deps, err := c.deps.Deployments(ns).List(labels.SelectorFromSet(labels.Set{RevisionUIDLabel: string(uid)}))
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		if ref := metav1.GetControllerOf(d); ref != nil && ref.UID == uid && d.DeletionTimestamp == nil {
			return d, nil
		}
	}
	return nil, nil
}

// pa returns the Revision's PodAutoscaler (named as the Revision, as
// Knative names it, and controlled by it), nil if there is none, and
// whether it targets the RTResource.
func (c *Controller) pa(ns, name string, uid types.UID) (*unstructured.Unstructured, bool) {
	obj, err := c.pas.ByNamespace(ns).Get(name)
	if err != nil {
		return nil, false
	}
	pa := obj.(*unstructured.Unstructured)
	if _, owner := revisionOwner(pa.GetOwnerReferences()); owner != string(uid) {
		return nil, false
	}
	ref, _, _ := unstructured.NestedStringMap(pa.Object, "spec", "scaleTargetRef")
	gv, _ := schema.ParseGroupVersion(ref["apiVersion"])
	return pa, gv.Group == gantryv1.GroupName && ref["kind"] == rtKind && ref["name"] == RTName(name)
}

// retarget writes the PodAutoscaler's scaleTargetRef; the write passes the
// webhook, which agrees with it. A conflict means the PodAutoscaler moved
// on: its event brings the key back.
func (c *Controller) retarget(ctx context.Context, pa *unstructured.Unstructured, ref map[string]any) error {
	pa = pa.DeepCopy()
	if err := unstructured.SetNestedField(pa.Object, ref, "spec", "scaleTargetRef"); err != nil {
		return err
	}
	_, err := c.dyn.Resource(PodAutoscalerGVR).Namespace(pa.GetNamespace()).Update(ctx, pa, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("point PodAutoscaler %s/%s at %s %s: %w", pa.GetNamespace(), pa.GetName(), ref["kind"], ref["name"], err)
	}
	return nil
}
