package e2e

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// render runs `go tool kustomize build config/<dir>`, as make deploy does
// for config/default, and returns the objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	cmd := exec.Command("go", "tool", "kustomize", "build", filepath.Join(root, "config", dir))
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatalf("decode rendered manifest: %v", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// apply server-side applies objs and returns the kinds it applied. Any
// warning the apiserver answers with (PodSecurity, deprecations) fails the
// test: `make deploy` would print it to every user.
func (e *env) apply(t *testing.T, objs []*unstructured.Unstructured) map[string]bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	cfg := rest.CopyConfig(e.cfg)
	cfg.WarningHandler = failOnWarning{t}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		_, err = dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Patch(context.Background(), obj.GetName(),
			types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "gantry-e2e", Force: ptr.To(true)})
		if err != nil {
			t.Fatalf("apply %s %s: %v", gvk.Kind, obj.GetName(), err)
		}
		kinds[gvk.Kind] = true
	}
	return kinds
}

// failOnWarning fails the test on every apiserver warning.
type failOnWarning struct{ t *testing.T }

func (f failOnWarning) HandleWarningHeader(_ int, _ string, text string) {
	f.t.Errorf("the apiserver warned: %s", text)
}

// The rendered manifests must be accepted by a real apiserver: namespace,
// CRD, RBAC, the Deployment, the APF objects and the admission policy.
func TestDeployManifestsApplyAndGrantLeastPrivilege(t *testing.T) {
	e := setup(t)
	// The admission policy would bound every later test's criticalities.
	t.Cleanup(func() { e.removeMaxCriticality(t) })
	kinds := e.apply(t, render(t, "default"))
	for _, k := range []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
		"Role", "RoleBinding", "Deployment", "FlowSchema", "PriorityLevelConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		if !kinds[k] {
			t.Errorf("config/default renders no %s", k)
		}
	}
	e.checkAccess(t)
}

// checkAccess asks the apiserver what the controller's service account may
// do: everything the controller needs, nothing it does not.
func (e *env) checkAccess(t *testing.T) {
	const sa = "system:serviceaccount:gantry-system:gantry-controller"
	cases := []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Verb: "watch", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Subresource: "status", Verb: "update", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "create", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "delete", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "patch", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Resource: "events", Verb: "create", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "gantry-system"}, true},
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Verb: "update", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Verb: "delete", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "update", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Resource: "pods", Verb: "get", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Subresource: "status", Verb: "get", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Verb: "get", Namespace: "any"}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "gantry-system"}, false},
		{authorizationv1.ResourceAttributes{Group: "apps", Resource: "deployments", Verb: "delete", Namespace: "any"}, false},
		{authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Namespace: "kube-system"}, false},
	}
	for _, tc := range cases {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gantry-system", "system:authenticated"},
			ResourceAttributes: &tc.attrs}}
		got, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(errors.Join(errors.New("SubjectAccessReview"), err))
		}
		if got.Status.Allowed != tc.want {
			t.Errorf("%s %s/%s %s in %q: allowed=%v, want %v", tc.attrs.Verb, tc.attrs.Group, tc.attrs.Resource,
				tc.attrs.Subresource, tc.attrs.Namespace, got.Status.Allowed, tc.want)
		}
	}
}
