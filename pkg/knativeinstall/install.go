package knativeinstall

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager owns the fields Install applies.
const FieldManager = "gantry-knative"

// pollEvery is how often Install and WaitReady look again.
const pollEvery = 200 * time.Millisecond

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// KnativeServiceGVR is Knative's Service (serving.knative.dev/v1).
var KnativeServiceGVR = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}

// Install applies objs (as Load returns them) with server-side apply: the
// namespaces and CRDs first, waiting until every CRD is Established, then
// the rest in order, the webhook configurations last. ctx bounds it.
func Install(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var first, rest, last []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace", "CustomResourceDefinition":
			first = append(first, u)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			last = append(last, u)
		default:
			rest = append(rest, u)
		}
	}
	if err := applyAll(ctx, dyn, mapper, first); err != nil {
		return err
	}
	for _, u := range first {
		if u.GetKind() == "CustomResourceDefinition" {
			if err := waitEstablished(ctx, dyn, u.GetName()); err != nil {
				return err
			}
		}
	}
	mapper.Reset() // the new CRDs' kinds are now served
	if err := applyAll(ctx, dyn, mapper, rest); err != nil {
		return err
	}
	return applyAll(ctx, dyn, mapper, last)
}

func applyAll(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if ns := u.GetNamespace(); ns != "" {
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	return poll(ctx, "CRD "+name+" Established", func() (bool, error) {
		u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// WaitReady returns once Knative is ready: the four component Deployments
// Available and the webhook admitting a dry-run Knative Service (its
// defaulting sets the serving.knative.dev/creator annotation, so an answer
// without it means the webhook was not consulted). ctx bounds the wait; the
// error then says what was still missing.
func WaitReady(ctx context.Context, cfg *rest.Config) error {
	// The probe Service draws Knative's securityContext advice as API
	// warnings on every try; they say nothing about readiness.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, name := range Components {
		if err := poll(ctx, "Deployment "+Namespace+"/"+name+" Available", func() (bool, error) {
			d, err := client.AppsV1().Deployments(Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return deploymentAvailable(d), nil
		}); err != nil {
			return err
		}
	}
	return poll(ctx, "the Knative webhook admitting a Service", func() (bool, error) {
		return webhookAdmits(ctx, dyn)
	})
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ProbeService is the Knative Service WaitReady creates with dry run.
func ProbeService(namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": "gantry-ready-probe", "namespace": namespace},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"image": "dev.local/gantry-fn:echo"}},
		}}},
	}}
}

func webhookAdmits(ctx context.Context, dyn dynamic.Interface) (bool, error) {
	got, err := dyn.Resource(KnativeServiceGVR).Namespace("default").Create(ctx, ProbeService("default"),
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return false, err
	}
	if _, ok := got.GetAnnotations()["serving.knative.dev/creator"]; !ok {
		return false, fmt.Errorf("the dry-run Service came back without serving.knative.dev/creator: the webhook did not default it")
	}
	return true, nil
}

// poll calls check every pollEvery until it says done, and on ctx's end
// returns an error naming what and the last check's error.
func poll(ctx context.Context, what string, check func() (bool, error)) error {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		done, err := check()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
