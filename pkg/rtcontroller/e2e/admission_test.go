package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/e2etest"
)

// maxCriticalityLabel is the namespace label the shipped admission policy
// reads (config/admission).
const maxCriticalityLabel = "gantry.dev/max-criticality"

// Anyone who may create an RTResource could claim criticality 99 and have
// its work served before every other tenant's. The shipped policy bounds
// it by a namespace label, and without the label to 0, whichever way the
// criticality is given.
func TestNamespaceLabelBoundsCriticality(t *testing.T) {
	e := setup(t)
	e.enforceMaxCriticality(t)

	err := e.tryCreate(e.newRT("one", 0, 1), true)
	wantDenied(t, err, "criticality 1 is above 0", "no gantry.dev/max-criticality label")
	wantAllowed(t, e.tryCreate(e.newRT("zero", 0, 0), true), "criticality 0 without the label")

	e.labelNamespace(t, "10")
	e2etest.Eventually(t, "the namespace label to reach admission", func(ctx context.Context) (bool, error) {
		return e.tryCreate(e.newRT("probe", 0, 10), true) == nil, nil
	})
	e.create(t, e.newRT("ten", 0, 10))
	wantDenied(t, e.tryCreate(e.newRT("eleven", 0, 11), true), "criticality 11 is above 10", maxCriticalityLabel+"=10")

	// The annotations the controller falls back to are bounded too.
	onObject := withCriticality(e.newRT("annotated", 0, 0), nil)
	onObject.Annotations = map[string]string{gantryv1.CriticalityAnnotation: "50"}
	wantDenied(t, e.tryCreate(onObject, true), "criticality 50 is above 10")
	onTemplate := withCriticality(e.newRT("knative", 0, 0), nil)
	onTemplate.Spec.Template.Annotations = map[string]string{gantryv1.CriticalityAnnotation: " 50 "}
	wantDenied(t, e.tryCreate(onTemplate, true), "criticality 50 is above 10")
	malformed := withCriticality(e.newRT("malformed", 0, 0), nil)
	malformed.Annotations = map[string]string{gantryv1.CriticalityAnnotation: "urgent"}
	wantAllowed(t, e.tryCreate(malformed, true), "a malformed annotation (the controller reads it as 0)")

	// An update may not climb above the bound...
	wantDenied(t, e.patchRT("ten", `{"spec":{"criticality":11}}`), "criticality 11 is above 10")
	// ...but an object above a lowered bound keeps working: Knative scales
	// it by patching spec.replicas.
	e.labelNamespace(t, "5")
	e2etest.Eventually(t, "the lowered label to reach admission", func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(e.tryCreate(e.newRT("probe", 0, 6), true)), nil
	})
	wantAllowed(t, e.patchRT("ten", `{"spec":{"replicas":1}}`), "scaling an object created under the old bound")
}

func withCriticality(rt *gantryv1.RTResource, c *int32) *gantryv1.RTResource {
	rt.Spec.Criticality = c
	return rt
}

func wantDenied(t *testing.T, err error, msgs ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want the admission policy to deny it", err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("denial %q does not say %q", err, m)
		}
	}
}

func wantAllowed(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v, want it allowed", what, err)
	}
}

func (e *env) tryCreate(rt *gantryv1.RTResource, dryRun bool) error {
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err := e.rts.Namespace(e.ns).Create(context.Background(), rt, opts)
	return err
}

func (e *env) patchRT(name, mergePatch string) error {
	return e.rts.REST().Patch(types.MergePatchType).Namespace(e.ns).Resource(gantryv1.Resource).Name(name).
		Body([]byte(mergePatch)).Do(context.Background()).Error()
}

func (e *env) labelNamespace(t *testing.T, max string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, maxCriticalityLabel, max)
	_, err := e.kube.CoreV1().Namespaces().Patch(context.Background(), e.ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("label namespace: %v", err)
	}
}

// enforceMaxCriticality applies config/admission as shipped and waits until
// the apiserver enforces it; the policy is removed when the test ends.
func (e *env) enforceMaxCriticality(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { e.removeMaxCriticality(t) })
	kinds := e.apply(t, render(t, "admission"))
	if !kinds["ValidatingAdmissionPolicy"] || !kinds["ValidatingAdmissionPolicyBinding"] {
		t.Fatalf("config/admission renders %v, want the policy and its binding", kinds)
	}
	e2etest.Eventually(t, "the admission policy to be enforced", func(ctx context.Context) (bool, error) {
		return apierrors.IsForbidden(e.tryCreate(e.probe(), true)), nil
	})
}

// removeMaxCriticality deletes the policy and its binding and waits until
// the apiserver stops enforcing them, so later tests on the shared cluster
// may use any criticality.
func (e *env) removeMaxCriticality(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"validatingadmissionpolicybindings", "validatingadmissionpolicies"} {
		gvr := schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: r}
		err := dyn.Resource(gvr).Delete(context.Background(), "gantry-max-criticality", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete %s: %v", r, err)
		}
	}
	e2etest.Eventually(t, "the admission policy to stop being enforced", func(ctx context.Context) (bool, error) {
		return e.tryCreate(e.probe(), true) == nil, nil
	})
}

// probe is an object every bound but 99 denies.
func (e *env) probe() *gantryv1.RTResource {
	return withCriticality(e.newRT("probe", 0, 0), ptr.To[int32](99))
}
