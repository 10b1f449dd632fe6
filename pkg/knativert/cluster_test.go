package knativert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/config/knative"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// The controller's service account, as config/rbac and config/knative
// bind it.
const controllerSA = "system:serviceaccount:gantry-system:gantry-controller"

// env is a namespace on the shared cluster with Knative's and Gantry's
// CRDs, the RTResource controller, and Gantry's Knative controller and
// webhook running under the shipped RBAC.
type env struct {
	dyn  dynamic.Interface
	kube kubernetes.Interface
	ns   string
}

func setup(t *testing.T) *env {
	t.Helper()
	cluster := localcluster.Shared(t)
	cfg := cluster.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	dyn := dynamic.NewForConfigOrDie(cfg)
	kube := kubernetes.NewForConfigOrDie(cfg)
	e2etest.InstallCRD(t, dyn)
	installKnativeCRDs(t, dyn)
	applyShippedRBAC(t, dyn)
	e := &env{dyn: dyn, kube: kube, ns: e2etest.Namespace(t, kube)}
	e2etest.StartRTController(t, cfg, e.ns, "gantry-knativert-test")
	e.startKnativeController(t, cfg)
	return e
}

var rbacOnce struct {
	sync.Once
	err error
}

// applyShippedRBAC applies config/knative/rbac.yaml as shipped; the
// controller then runs as the service account it binds, so a call the
// roles lack fails the tests.
func applyShippedRBAC(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	rbacOnce.Do(func() {
		for _, doc := range bytes.Split(knative.RBAC, []byte("\n---\n")) {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
				rbacOnce.err = err
				return
			}
			gvr := rbacGVR(obj.GetKind())
			body, _ := obj.MarshalJSON()
			_, err := dyn.Resource(gvr).Patch(context.Background(), obj.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: "gantry-knativert-test", Force: ptr.To(true)})
			if err != nil {
				rbacOnce.err = fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
				return
			}
		}
	})
	if rbacOnce.err != nil {
		t.Fatal(rbacOnce.err)
	}
}

func rbacGVR(kind string) schema.GroupVersionResource {
	return rbacv1.SchemeGroupVersion.WithResource(strings.ToLower(kind) + "s")
}

// startKnativeController runs Gantry's Knative controller for the test's
// namespace as the controller's service account, and its webhook on
// loopback, registered with clientConfig.url (the local case,
// docs/knative.md) by the admin, as `gantry controller
// --knative-webhook-url` does.
func (e *env) startKnativeController(t *testing.T, admin *rest.Config) {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:gantry-system", "system:authenticated"}}
	c, err := New(Options{Config: cfg, Namespace: e.ns, Workers: 1, Component: "gantry-knativert-test"})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert, ca, err := Certificate(ServeOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String() + WebhookPath
	if err := Register(context.Background(), e.kube, url, ca); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- Serve(ctx, ln, c.Webhook(), cert) }()
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		// The configuration goes first: with the server gone it would
		// refuse every Knative-labelled create in the cluster (Fail).
		err := e.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(),
			WebhookConfigurationName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration: %v", err)
		}
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("knative controller: %v", err)
			}
		}
	})
}

// revision creates a Revision as Knative's configuration reconciler does,
// with these annotations (besides Knative's own).
func (e *env) revision(t *testing.T, name string, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	ann := map[string]string{"serving.knative.dev/creator": "admin", "serving.knative.dev/routingStateModified": "2026-12-02T00:00:00Z"}
	for k, v := range annotations {
		ann[k] = v
	}
	rev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1", "kind": "Revision",
		"metadata": map[string]any{
			"name": name, "namespace": e.ns,
			"labels": map[string]any{
				"serving.knative.dev/configuration":           "fn",
				"serving.knative.dev/configurationGeneration": "1",
				"serving.knative.dev/configurationUID":        "00000000-0000-0000-0000-00000000c0f1",
				"serving.knative.dev/routingState":            "active",
				"serving.knative.dev/service":                 "fn",
				"serving.knative.dev/serviceUID":              "00000000-0000-0000-0000-0000000005e1",
			},
		},
		"spec": map[string]any{
			"containerConcurrency": int64(5),
			"timeoutSeconds":       int64(300),
			"containers": []any{map[string]any{
				"name": "user-container", "image": "dev.local/gantry-fn:echo",
				"ports":          []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}},
				"readinessProbe": map[string]any{"successThreshold": int64(1), "tcpSocket": map[string]any{"port": int64(0)}},
			}},
		},
	}}
	rev.SetAnnotations(ann)
	got, err := e.dyn.Resource(RevisionGVR).Namespace(e.ns).Create(context.Background(), rev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Revision %s: %v", name, err)
	}
	return got
}

func controllerRef(rev *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "serving.knative.dev/v1", Kind: "Revision", Name: rev.GetName(), UID: rev.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// knativeLabels are what Knative v0.50.0 puts on a Revision's Deployment,
// PodAutoscaler and pods (resources.makeLabels): the Revision's labels
// less route and routing state, its name and UID, and app.
func knativeLabels(rev *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for k, v := range rev.GetLabels() {
		if k != "serving.knative.dev/route" && k != "serving.knative.dev/routingState" {
			out[k] = v
		}
	}
	out[RevisionLabel] = rev.GetName()
	out[RevisionUIDLabel] = string(rev.GetUID())
	out["app"] = rev.GetName()
	return out
}

// knativeDeployment is the Deployment Knative v0.50.0's revision
// reconciler creates (resources.MakeDeployment with the default config):
// the initial scale as replicas, the Revision's UID as selector, no
// autoscaling annotations, and the queue-proxy beside the user container.
func knativeDeployment(rev *unstructured.Unstructured, queueImage string) *appsv1.Deployment {
	labels := knativeLabels(rev)
	depLabels := knativeLabels(rev)
	depLabels["serving.knative.dev/deployment-hash"] = "1x2y3z"
	name := rev.GetName()
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-deployment", Namespace: rev.GetNamespace(), Labels: depLabels,
			Annotations:     map[string]string{"serving.knative.dev/creator": "admin"},
			OwnerReferences: []metav1.OwnerReference{controllerRef(rev)},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To[int32](1),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{RevisionUIDLabel: string(rev.GetUID())}},
			ProgressDeadlineSeconds: ptr.To[int32](600),
			RevisionHistoryLimit:    ptr.To[int32](0),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels,
					Annotations: map[string]string{"serving.knative.dev/creator": "admin", "kubectl.kubernetes.io/default-container": "user-container"}},
				Spec: corev1.PodSpec{
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](300),
					Containers: []corev1.Container{{
						Name: "user-container", Image: "dev.local/gantry-fn:echo",
						Ports: []corev1.ContainerPort{{Name: "user-port", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{{Name: "PORT", Value: "8080"}, {Name: "K_REVISION", Value: name},
							{Name: "K_CONFIGURATION", Value: "fn"}, {Name: "K_SERVICE", Value: "fn"}},
						Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/wait-for-drain", Port: intstr.FromInt32(8022), Scheme: corev1.URISchemeHTTP}}},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
					}, {
						Name: "queue-proxy", Image: queueImage,
						Ports: []corev1.ContainerPort{{Name: "http-queueadm", ContainerPort: 8022}, {Name: "http-autometric", ContainerPort: 9090},
							{Name: "http-usermetric", ContainerPort: 9091}, {Name: "queue-port", ContainerPort: 8012}, {Name: "https-port", ContainerPort: 8112}},
						Env: []corev1.EnvVar{
							{Name: "SERVING_NAMESPACE", Value: rev.GetNamespace()}, {Name: "SERVING_REVISION", Value: name},
							{Name: "CONTAINER_CONCURRENCY", Value: "5"}, {Name: "USER_PORT", Value: "8080"},
							{Name: "SERVING_POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "SERVING_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
							{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
						},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Port: intstr.FromInt32(8012), Scheme: corev1.URISchemeHTTP,
							HTTPHeaders: []corev1.HTTPHeader{{Name: "K-Network-Probe", Value: "queue"}}}},
							PeriodSeconds: 1, TimeoutSeconds: 1},
						SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							RunAsNonRoot: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					}},
				},
			},
		},
	}
}

// knativePA is the PodAutoscaler Knative v0.50.0 creates (resources.MakePA
// plus the class annotation): named as the Revision, its labels, all its
// annotations (autoscaling ones included), scaleTargetRef the Deployment.
func knativePA(rev *unstructured.Unstructured) *unstructured.Unstructured {
	ann := map[string]string{"autoscaling.knative.dev/class": "kpa.autoscaling.knative.dev"}
	for k, v := range rev.GetAnnotations() {
		if k != "serving.knative.dev/routingStateModified" {
			ann[k] = v
		}
	}
	pa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "autoscaling.internal.knative.dev/v1alpha1", "kind": "PodAutoscaler",
		"metadata": map[string]any{"name": rev.GetName(), "namespace": rev.GetNamespace()},
		"spec": map[string]any{
			"containerConcurrency": int64(5),
			"protocolType":         "http1",
			"reachability":         "Reachable",
			"scaleTargetRef":       map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": rev.GetName() + "-deployment"},
		},
	}}
	labels := knativeLabels(rev)
	pa.SetLabels(labels)
	pa.SetAnnotations(ann)
	pa.SetOwnerReferences([]metav1.OwnerReference{controllerRef(rev)})
	return pa
}

func (e *env) createDeployment(t *testing.T, d *appsv1.Deployment) *appsv1.Deployment {
	t.Helper()
	got, err := e.kube.AppsV1().Deployments(e.ns).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment: %v", err)
	}
	return got
}

func (e *env) createPA(t *testing.T, pa *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got, err := e.dyn.Resource(PodAutoscalerGVR).Namespace(e.ns).Create(context.Background(), pa, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create PodAutoscaler: %v", err)
	}
	return got
}

func scaleTargetRef(pa *unstructured.Unstructured) map[string]string {
	ref, _, _ := unstructured.NestedStringMap(pa.Object, "spec", "scaleTargetRef")
	return ref
}

// waitRT waits for the RTResource behind a Revision and for cond on it.
func (e *env) waitRT(t *testing.T, name, what string, cond func(*gantryv1.RTResource) bool) *gantryv1.RTResource {
	t.Helper()
	var rt *gantryv1.RTResource
	e2etest.Eventually(t, what, func(ctx context.Context) (bool, error) {
		u, err := e.dyn.Resource(RTResourceGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rt = &gantryv1.RTResource{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rt); err != nil {
			return false, err
		}
		return cond(rt), nil
	})
	return rt
}

// revisionPods lists the pods that carry the Revision's label, as the KPA
// counts them, and checks each is controlled by the RTResource.
func (e *env) revisionPods(ctx context.Context, rev string, rtUID types.UID) (int, error) {
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: RevisionLabel + "=" + rev})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.Kind != rtKind || ref.UID != rtUID {
			return 0, fmt.Errorf("pod %s with the revision's label is controlled by %v, not the RTResource", p.Name, ref)
		}
		n++
	}
	return n, nil
}

func unstructuredSet(u *unstructured.Unstructured, value any, fields ...string) error {
	return unstructured.SetNestedField(u.Object, value, fields...)
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
