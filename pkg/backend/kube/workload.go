package kube

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/rtclient"
	"gantry.dev/gantry/pkg/stack"
)

// workload is the Kubernetes object that holds a function's pods, one
// implementation per stack kind.
type workload interface {
	// apply creates f's object with replicas, or updates an existing one
	// Gantry manages, keeping its replica count (the worker owns that).
	apply(ctx context.Context, f stack.Function, port, replicas int32) error
	// scale sets the replica count through the /scale subresource.
	scale(ctx context.Context, name string, replicas int32) error
	// remove deletes the object if Gantry manages it; its pods follow
	// through the garbage collector.
	remove(ctx context.Context, name string) error
	// retire makes pod the one the next scale-down removes. force deletes
	// it outright.
	retire(ctx context.Context, pod string, force bool) error
}

// scalePatch is the merge patch that sets a /scale subresource's replicas.
func scalePatch(replicas int32) []byte {
	return []byte(`{"spec":{"replicas":` + strconv.Itoa(int(replicas)) + `}}`)
}

// deletePod deletes a pod; one already gone is what was wanted.
func deletePod(ctx context.Context, kube kubernetes.Interface, ns, pod string) error {
	err := kube.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// errUnmanaged refuses to touch an object of the same name that Gantry did
// not create: deploying a function must never take over a user's workload.
func errUnmanaged(kind, ns, name string) error {
	return fmt.Errorf("%w: %s %s/%s exists and is not managed by Gantry (no %s=%s label)",
		stack.ErrInvalid, kind, ns, name, LabelManagedBy, ManagedBy)
}

// backgroundDelete deletes obj's pods after it, and only the object seen
// (uid), not a later one of the same name.
func backgroundDelete(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid},
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
}

// mergeMeta updates an existing object's labels and annotations with
// Gantry's, keeping keys others set (kubectl, admission controllers).
func mergeMeta(dst *metav1.ObjectMeta, src metav1.ObjectMeta) {
	if dst.Labels == nil {
		dst.Labels = map[string]string{}
	}
	if dst.Annotations == nil {
		dst.Annotations = map[string]string{}
	}
	maps.Copy(dst.Labels, src.Labels)
	maps.Copy(dst.Annotations, src.Annotations)
}

// rtWorkload runs a function as an RTResource. The RTResource controller
// does not read pod deletion costs (it deletes unscheduled, pending, not
// ready, then the newest pods), so a stopped instance's pod is deleted and
// the replica count lowered after it: the controller either sees both at
// once or replaces the pod and then removes the replacement, which is not
// ready yet and so goes first. (A replacement already Ready, created in
// the same second as another ready pod, loses a tie by name instead; see
// docs/platform-kubernetes.md. Deleting first is still the better order:
// lowering the count first would lose the newest pod every time.)
type rtWorkload struct {
	kube         kubernetes.Interface
	rts          *rtclient.Client
	rest         rest.Interface
	ns           string
	nodeSelector map[string]string
}

func newRTWorkload(cfg *rest.Config, kube kubernetes.Interface, ns string) (*rtWorkload, error) {
	scheme, err := rtclient.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := rtclient.New(cfg, scheme)
	if err != nil {
		return nil, err
	}
	return &rtWorkload{kube: kube, rts: c.Namespace(ns), rest: c.REST(), ns: ns}, nil
}

func (w *rtWorkload) apply(ctx context.Context, f stack.Function, port, replicas int32) error {
	want := newRTResource(f, w.ns, port, replicas)
	want.Spec.Template.Spec.NodeSelector = maps.Clone(w.nodeSelector)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := w.rts.Get(ctx, f.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = w.rts.Create(ctx, want, metav1.CreateOptions{})
			if apierrors.IsNotFound(err) {
				// A create finds no object to miss: the resource type is.
				return fmt.Errorf("%w (is the RTResource CRD installed? make deploy applies it)", err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if !isManaged(cur) {
			return errUnmanaged("RTResource", w.ns, f.Name)
		}
		mergeMeta(&cur.ObjectMeta, want.ObjectMeta)
		cur.Spec.Criticality = want.Spec.Criticality
		cur.Spec.Template = want.Spec.Template
		_, err = w.rts.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (w *rtWorkload) scale(ctx context.Context, name string, replicas int32) error {
	return w.rest.Patch(types.MergePatchType).Namespace(w.ns).Resource(gantryv1.Resource).
		Name(name).SubResource("scale").Body(scalePatch(replicas)).Do(ctx).Error()
}

func (w *rtWorkload) remove(ctx context.Context, name string) error {
	cur, err := w.rts.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !isManaged(cur):
		return nil
	}
	err = w.rts.Delete(ctx, name, backgroundDelete(cur.UID))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or already replaced by someone else's object
	}
	return err
}

func (w *rtWorkload) retire(ctx context.Context, pod string, _ bool) error {
	return deletePod(ctx, w.kube, w.ns, pod)
}

// deploymentWorkload runs a function as an apps/v1 Deployment. Its
// ReplicaSet controller honours pod deletion costs, so a stopped
// instance's pod is marked cheapest and the replica count lowered; the
// pod keeps serving its current requests until the controller deletes it.
type deploymentWorkload struct {
	kube         kubernetes.Interface
	ns           string
	nodeSelector map[string]string
}

func (w *deploymentWorkload) apply(ctx context.Context, f stack.Function, port, replicas int32) error {
	want := newDeployment(f, w.ns, port, replicas)
	want.Spec.Template.Spec.NodeSelector = maps.Clone(w.nodeSelector)
	deps := w.kube.AppsV1().Deployments(w.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := deps.Get(ctx, f.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = deps.Create(ctx, want, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		if !isManaged(cur) {
			return errUnmanaged("Deployment", w.ns, f.Name)
		}
		mergeMeta(&cur.ObjectMeta, want.ObjectMeta)
		cur.Spec.Template = want.Spec.Template
		_, err = deps.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func (w *deploymentWorkload) scale(ctx context.Context, name string, replicas int32) error {
	return w.kube.AppsV1().RESTClient().Patch(types.MergePatchType).Namespace(w.ns).Resource("deployments").
		Name(name).SubResource("scale").Body(scalePatch(replicas)).Do(ctx).Error()
}

func (w *deploymentWorkload) remove(ctx context.Context, name string) error {
	deps := w.kube.AppsV1().Deployments(w.ns)
	cur, err := deps.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !isManaged(cur):
		return nil
	}
	err = deps.Delete(ctx, name, backgroundDelete(cur.UID))
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// retire gives pod the lowest possible deletion cost, so the ReplicaSet
// controller picks it on the next scale-down.
func (w *deploymentWorkload) retire(ctx context.Context, pod string, force bool) error {
	if force {
		return deletePod(ctx, w.kube, w.ns, pod)
	}
	patch := []byte(`{"metadata":{"annotations":{"` + DeletionCostAnnotation + `":"` + strconv.Itoa(math.MinInt32) + `"}}}`)
	_, err := w.kube.CoreV1().Pods(w.ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
