package orchbench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	authzv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The controller's identity, as config/rbac and config/apf name it.
const (
	controllerNamespace = "gantry-system"
	controllerSA        = "system:serviceaccount:gantry-system:gantry-controller"
	apfName             = "gantry-controller"
)

var controllerGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNamespace, "system:authenticated"}

// asController is cfg impersonating the controller's service account: the
// in-process controller then meets the apiserver's RBAC and API Priority
// and Fairness as a deployed one does, not as the exempt admin.
func asController(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Impersonate = rest.ImpersonationConfig{UserName: controllerSA, Groups: controllerGroups}
	return c
}

// kinds maps the kinds of config/rbac and config/apf to their resources.
var kinds = map[string]schema.GroupVersionResource{
	"ServiceAccount":             {Version: "v1", Resource: "serviceaccounts"},
	"ClusterRole":                {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	"ClusterRoleBinding":         {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	"Role":                       {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	"RoleBinding":                {Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	"FlowSchema":                 {Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas"},
	"PriorityLevelConfiguration": {Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"},
}

// readManifests reads every object of the YAML files in dir, the
// kustomization aside.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	// A missing folder globs to nothing; without this the run would wait a
	// minute for permissions that were never granted.
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s (run from the repository root or pass --config-dir)", dir)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read %s (run from the repository root or pass --config-dir): %w", f, err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) > 0 {
				objs = append(objs, obj)
			}
		}
	}
	return objs, nil
}

// installIdentity applies config/rbac and config/apf (server-side, so a
// second run is a no-op) and waits until RBAC lets the service account
// write a status.
func installIdentity(ctx context.Context, cfg *rest.Config, configDir string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": controllerNamespace}}}
	if _, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", controllerNamespace, err)
	}
	for _, sub := range []string{"rbac", "apf"} {
		objs, err := readManifests(filepath.Join(configDir, sub))
		if err != nil {
			return err
		}
		if err := applyAll(ctx, dyn, objs); err != nil {
			return err
		}
	}
	kube, err := authClient(cfg)
	if err != nil {
		return err
	}
	return poll(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		r, err := kube.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: controllerSA, Groups: controllerGroups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "gantry.dev", Resource: "rtresources", Subresource: "status", Verb: "update", Namespace: "any"}}},
			metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	})
}

func applyAll(ctx context.Context, dyn dynamic.Interface, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		gvr, ok := kinds[obj.GetKind()]
		if !ok {
			return fmt.Errorf("unexpected kind %s in the controller's manifests", obj.GetKind())
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		_, err = dyn.Resource(gvr).Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "gantry-orchbench", Force: ptr.To(true)})
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// removeAPF deletes config/apf's FlowSchema and priority level: the
// gantry-noapf ablation. installIdentity puts them back.
func removeAPF(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for _, kind := range []string{"FlowSchema", "PriorityLevelConfiguration"} {
		err := dyn.Resource(kinds[kind]).Delete(ctx, apfName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s %s: %w", kind, apfName, err)
		}
	}
	// The apiserver's APF configuration follows its informers; give it a
	// moment, and check that the schema is gone.
	return poll(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(kinds["FlowSchema"]).Get(ctx, apfName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// flowSchemaOf reports which FlowSchema the apiserver matched a request
// to, from the X-Kubernetes-PF-FlowSchema-UID response header's name
// lookup; empty if unknown.
func flowSchemaOf(ctx context.Context, cfg *rest.Config) string {
	c, err := rest.HTTPClientFor(asController(cfg))
	if err != nil {
		return ""
	}
	req, err := newGet(ctx, cfg.Host+"/apis/gantry.dev/v1alpha1/namespaces/"+controllerNamespace+"/rtresources")
	if err != nil {
		return ""
	}
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	resp.Body.Close()
	uid := resp.Header.Get("X-Kubernetes-Pf-Flowschema-Uid")
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil || uid == "" {
		return ""
	}
	list, err := dyn.Resource(kinds["FlowSchema"]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return ""
	}
	for _, fs := range list.Items {
		if string(fs.GetUID()) == uid {
			return fs.GetName()
		}
	}
	return strings.TrimSpace(uid)
}

func authClient(cfg *rest.Config) (authzv1client.SubjectAccessReviewInterface, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return kube.AuthorizationV1().SubjectAccessReviews(), nil
}

func newGet(ctx context.Context, url string) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
}
