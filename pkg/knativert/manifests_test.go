package knativert

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/pkg/localcluster"
)

// renderConfigKnative runs `go tool kustomize build config/knative`, as a
// user does, and returns the objects by kind and name.
func renderConfigKnative(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	cmd := exec.Command("go", "tool", "kustomize", "build", filepath.Join(root, "config", "knative"))
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kustomize build config/knative: %v", err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		objs[obj.GetKind()+"/"+obj.GetName()] = obj
	}
	return objs
}

// The pieces of config/knative fit together: the controller runs with
// --knative and listens where the Service sends the webhook's traffic,
// the Service selects the controller's pods, the webhook configuration
// names the Service, and Knative's role carries the aggregation label.
func TestConfigKnativeFitsTogether(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kustomize; skipped under -short")
	}
	objs := renderConfigKnative(t)
	dep, svc, hook, role := objs["Deployment/gantry-controller"], objs["Service/gantry-knative-webhook"],
		objs["MutatingWebhookConfiguration/"+WebhookConfigurationName], objs["ClusterRole/gantry-knative-serving-rtresources"]
	if dep == nil || svc == nil || hook == nil || role == nil {
		t.Fatalf("config/knative lacks the controller, the Service, the webhook configuration or Knative's role")
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	if !slices.Contains(args, "--knative") || !slices.Contains(args, "--knative-webhook-address=:8443") {
		t.Errorf("controller args %v lack --knative and the webhook address", args)
	}
	ports, _, _ := unstructured.NestedSlice(c, "ports")
	if !slices.ContainsFunc(ports, func(p any) bool { return fmt.Sprint(p.(map[string]any)["containerPort"]) == "8443" }) {
		t.Errorf("controller ports %v lack 8443", ports)
	}
	sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	podLabels, _, _ := unstructured.NestedStringMap(dep.Object, "spec", "template", "metadata", "labels")
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("the Service selects %s=%s, the controller's pods have %q", k, v, podLabels[k])
		}
	}
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	p := svcPorts[0].(map[string]any)
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(hook.Object, &cfg); err != nil {
		t.Fatal(err)
	}
	ref := cfg.Webhooks[0].ClientConfig.Service
	if ref == nil || ref.Name != svc.GetName() || ref.Namespace != svc.GetNamespace() || fmt.Sprint(*ref.Port) != fmt.Sprint(p["port"]) || fmt.Sprint(p["targetPort"]) != "8443" || *ref.Path != WebhookPath {
		t.Errorf("webhook clientConfig %+v does not reach Service %s/%s %v", ref, svc.GetNamespace(), svc.GetName(), p)
	}
	if role.GetLabels()["serving.knative.dev/controller"] != "true" {
		t.Errorf("Knative's role lacks the label knative-serving-admin aggregates")
	}
}

// Without a URL, Register puts the CA into the configuration
// config/knative installed, as the service account its RBAC binds.
func TestRegisterPutsTheCAIntoTheShippedConfiguration(t *testing.T) {
	cluster := localcluster.Shared(t)
	admin := cluster.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(admin)
	applyShippedRBAC(t, dynamic.NewForConfigOrDie(admin))
	shipped, err := WebhookConfiguration("", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The shipped configuration names a Service nothing serves here and
	// fails closed, so nothing Knative-labelled is created while it exists.
	api := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(context.Background(), shipped, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Delete(context.Background(), WebhookConfigurationName, metav1.DeleteOptions{}) })
	sa := rest.CopyConfig(admin)
	sa.Impersonate = rest.ImpersonationConfig{UserName: controllerSA, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
	if err := Register(context.Background(), kubernetes.NewForConfigOrDie(sa), "", []byte("CA PEM")); err != nil {
		t.Fatalf("Register as the controller's service account: %v", err)
	}
	got, err := api.Get(context.Background(), WebhookConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc := got.Webhooks[0].ClientConfig
	if string(cc.CABundle) != "CA PEM" || cc.Service == nil || cc.Service.Name != "gantry-knative-webhook" {
		t.Errorf("clientConfig after Register: %+v", cc)
	}
}
