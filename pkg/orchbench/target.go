package orchbench

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/rtclient"
)

// Labels the benchmark puts on its pod templates; the trackers find a
// pod's service by serviceLabel.
const (
	serviceLabel = "orchbench.gantry.dev/service"
	churnLabel   = "orchbench.gantry.dev/churn"
)

// churnCriticality is the interfering RTResources' criticality: below
// every service's (1..N), so they are background work.
const churnCriticality = 0

// target creates and scales one controller's objects: Deployments for
// vanilla, RTResources for Gantry.
type target interface {
	// createService makes a service with 0 replicas and returns its
	// generation.
	createService(ctx context.Context, name string, criticality int32) (int64, error)
	// scale sends Knative's JSON patch and returns the new generation.
	scale(ctx context.Context, name string, replicas int) (int64, error)
	createChurn(ctx context.Context, name string) error
	deleteChurn(ctx context.Context, name string) error
}

// scalePatch is what Knative's autoscaler sends to scale a revision.
func scalePatch(replicas int) []byte {
	return fmt.Appendf(nil, `[{"op":"replace","path":"/spec/replicas","value":%d}]`, replicas)
}

func podTemplate(key, value string, nodeSelector map[string]string, tolerations []corev1.Toleration) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{key: value}},
		Spec: corev1.PodSpec{
			Containers:   []corev1.Container{{Name: "fn", Image: "registry.k8s.io/pause:3.10"}},
			NodeSelector: nodeSelector,
			Tolerations:  tolerations,
			// kwok runs no containers; a zero grace period lets deleted
			// pods leave at once, so each scale-up starts from zero.
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// deployments is vanilla: the real kube-controller-manager reconciles.
type deployments struct {
	kube           kubernetes.Interface
	svcNS, churnNS string
	churnNodes     map[string]string // the churn pods' nodeSelector, if any
	// churnTolerations let the churn pods onto tainted nodes.
	churnTolerations []corev1.Toleration
}

func (d deployments) deployment(ns, name, key string, replicas int32, nodes map[string]string, tols []corev1.Toleration) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: name}},
			Template: podTemplate(key, name, nodes, tols),
		},
	}
}

func (d deployments) createService(ctx context.Context, name string, _ int32) (int64, error) {
	out, err := d.kube.AppsV1().Deployments(d.svcNS).Create(ctx, d.deployment(d.svcNS, name, serviceLabel, 0, nil, nil), metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	return out.Generation, nil
}

func (d deployments) scale(ctx context.Context, name string, replicas int) (int64, error) {
	out, err := d.kube.AppsV1().Deployments(d.svcNS).Patch(ctx, name, types.JSONPatchType, scalePatch(replicas), metav1.PatchOptions{})
	if err != nil {
		return 0, err
	}
	return out.Generation, nil
}

func (d deployments) createChurn(ctx context.Context, name string) error {
	_, err := d.kube.AppsV1().Deployments(d.churnNS).Create(ctx, d.deployment(d.churnNS, name, churnLabel, 1, d.churnNodes, d.churnTolerations), metav1.CreateOptions{})
	return err
}

func (d deployments) deleteChurn(ctx context.Context, name string) error {
	return d.kube.AppsV1().Deployments(d.churnNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// rtresources is Gantry: the in-process controller reconciles.
type rtresources struct {
	rts            *rtclient.Clients
	svcNS, churnNS string
	churnNodes     map[string]string // the churn pods' nodeSelector, if any
	// churnTolerations let the churn pods onto tainted nodes.
	churnTolerations []corev1.Toleration
}

func (r rtresources) rt(ns, name, key string, replicas, criticality int32, nodes map[string]string, tols []corev1.Toleration) *gantryv1.RTResource {
	return &gantryv1.RTResource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gantryv1.RTResourceSpec{
			Replicas:    ptr.To(replicas),
			Criticality: ptr.To(criticality),
			Selector:    gantryv1.LabelSelector{MatchLabels: map[string]gantryv1.LabelValue{key: gantryv1.LabelValue(name)}},
			Template:    podTemplate(key, name, nodes, tols),
		},
	}
}

func (r rtresources) createService(ctx context.Context, name string, criticality int32) (int64, error) {
	out, err := r.rts.Namespace(r.svcNS).Create(ctx, r.rt(r.svcNS, name, serviceLabel, 0, criticality, nil, nil), metav1.CreateOptions{})
	if err != nil {
		return 0, err
	}
	return out.Generation, nil
}

func (r rtresources) scale(ctx context.Context, name string, replicas int) (int64, error) {
	out, err := r.rts.Namespace(r.svcNS).Patch(ctx, name, types.JSONPatchType, scalePatch(replicas), metav1.PatchOptions{})
	if err != nil {
		return 0, err
	}
	return out.Generation, nil
}

func (r rtresources) createChurn(ctx context.Context, name string) error {
	_, err := r.rts.Namespace(r.churnNS).Create(ctx, r.rt(r.churnNS, name, churnLabel, 1, churnCriticality, r.churnNodes, r.churnTolerations), metav1.CreateOptions{})
	return err
}

func (r rtresources) deleteChurn(ctx context.Context, name string) error {
	return r.rts.Namespace(r.churnNS).Delete(ctx, name, metav1.DeleteOptions{})
}

// deploymentChurn scales RTResources while Deployments interfere.
type deploymentChurn struct {
	rtresources
	churn deployments
}

func (d deploymentChurn) createChurn(ctx context.Context, name string) error {
	return d.churn.createChurn(ctx, name)
}

func (d deploymentChurn) deleteChurn(ctx context.Context, name string) error {
	return d.churn.deleteChurn(ctx, name)
}
