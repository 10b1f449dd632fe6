package knativeinstall_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/config/knative"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/knativert"
)

var rtGVR = gantryv1.SchemeGroupVersion.WithResource("rtresources")

// Issue 19 part 5, end to end: Knative Serving, unpatched, with Gantry as
// its ingress and Gantry's Knative controller beside it. A Knative Service
// with the criticality annotation is served by an RTResource: its
// PodAutoscaler's scaleTargetRef names the RTResource; at zero, its public
// Service points at the activator and a request by host name through
// Gantry's ingress brings a pod up; under load the KPA scales the
// RTResource up, and without load back to zero; every answer comes from a
// pod the RTResource controls, through queue-proxy (the user container
// sees its caller on the pod's loopback); the Revision's Deployment never
// has a replica. The same Service without the annotation is served by its
// Deployment, as Knative makes it.
func TestCriticalKnativeServiceScalesAnRTResource(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.1f s  %s", time.Since(t0).Seconds(), what) }
	c := startKnativeCluster(t)
	phase("cluster and Knative ready")
	cfg := c.RESTConfig()
	cfg.WarningHandler = rest.NoWarnings{}
	cfg.QPS, cfg.Burst = 50, 100
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	quickAutoscaling(ctx, t, kube)
	ns := startGantryForKnative(ctx, t, cfg, kube, dyn)
	deps := watchDeploymentReplicas(t, kube, ns)

	for name, critical := range map[string]bool{"crit": true, "plain": false} {
		if _, err := dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(ns).Create(ctx, knService(ns, name, critical), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"crit", "plain"} {
		e2etest.Eventually(t, "Knative Service "+name+" Ready", func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && readyCondition(u) == "True", err
		})
	}
	phase("both Knative Services Ready")
	const rev = "crit-00001"
	pa, err := dyn.Resource(knativert.PodAutoscalerGVR).Namespace(ns).Get(ctx, rev, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref, _, _ := unstructured.NestedStringMap(pa.Object, "spec", "scaleTargetRef"); ref["kind"] != "RTResource" || ref["name"] != rev ||
		ref["apiVersion"] != gantryv1.SchemeGroupVersion.String() {
		t.Errorf("the critical Revision's PodAutoscaler targets %v, want RTResource %s", ref, rev)
	}

	ing := &ingressClient{addr: c.KnativeIngressAddr(), host: "crit." + ns + "." + knativeinstall.DefaultDomain,
		hc: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	answeredBy := map[string]bool{}
	var answeredMu sync.Mutex
	check := func(pod, remote string) {
		answeredMu.Lock()
		defer answeredMu.Unlock()
		if answeredBy[pod] {
			return
		}
		answeredBy[pod] = true
		if host, _, _ := net.SplitHostPort(remote); host != "127.0.0.1" {
			t.Errorf("pod %s's user container was called from %s, not from queue-proxy on the pod's loopback", pod, remote)
		}
	}

	// At zero: no pod, the public Service's endpoints are the activator's,
	// and a request through the ingress brings a pod up.
	waitZero(t, kube, dyn, ns, rev)
	phase(rev + " at zero")
	activator := activatorIPs(ctx, t, kube)
	e2etest.Eventually(t, "the public Service of "+rev+" at the activator", func(ctx context.Context) (bool, error) {
		ips, err := serviceEndpointIPs(ctx, kube, ns, rev)
		if err != nil || len(ips) == 0 {
			return false, err
		}
		for _, ip := range ips {
			if !activator[ip] {
				return false, fmt.Errorf("endpoint %s is not the activator's (%v)", ip, activator)
			}
		}
		return true, nil
	})
	pod, remote, err := ing.who(ctx, 0)
	if err != nil {
		t.Fatalf("a request from zero through the ingress: %v", err)
	}
	check(pod, remote)
	phase("answered from zero by " + pod)

	// Under load: 6 requests of 300 ms at a time, for a target of 1 each,
	// until the KPA has scaled the RTResource to at least 2 and two pods
	// have answered.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var failed atomic.Int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for loadCtx.Err() == nil {
				pod, remote, err := ing.who(loadCtx, 300*time.Millisecond)
				switch {
				case err == nil:
					check(pod, remote)
				case loadCtx.Err() == nil:
					failed.Add(1)
					lastErr.Store(err.Error())
				}
			}
		})
	}
	e2etest.Eventually(t, "the KPA scaling "+rev+" up under load", func(ctx context.Context) (bool, error) {
		rt, err := getRT(ctx, dyn, ns, rev)
		if err != nil {
			return false, err
		}
		answeredMu.Lock()
		n := len(answeredBy)
		answeredMu.Unlock()
		return ptr.Deref(rt.Spec.Replicas, 0) >= 2 && rt.Status.ReadyReplicas >= 2 && n >= 2, nil
	})
	stopLoad()
	wg.Wait()
	phase(fmt.Sprintf("scaled up under load (%d pods answered)", len(answeredBy)))
	if n := failed.Load(); n > 0 {
		t.Errorf("%d requests under load failed; the last: %v", n, lastErr.Load())
	}
	answeredMu.Lock()
	pods := make([]string, 0, len(answeredBy))
	for p := range answeredBy {
		pods = append(pods, p)
	}
	answeredMu.Unlock()
	for _, name := range pods {
		p, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("answering pod %s: %v", name, err)
			continue
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "RTResource" || ref.Name != rev {
			t.Errorf("answering pod %s is controlled by %v, want RTResource %s", name, ref, rev)
		}
		if !hasContainers(p, "user-container", "queue-proxy") {
			t.Errorf("answering pod %s has containers %v, want user-container and queue-proxy", name, p.Spec.Containers)
		}
	}

	// Without load, back to zero.
	waitZero(t, kube, dyn, ns, rev)
	phase(rev + " back at zero")
	if seen, most := deps.max(rev + "-deployment"); !seen || most != 0 {
		t.Errorf("the critical Revision's Deployment: seen %v, at most %d replicas (spec or status), want 0 throughout", seen, most)
	}

	// The Service without the annotation: its Deployment serves it.
	plain := &ingressClient{addr: ing.addr, host: "plain." + ns + "." + knativeinstall.DefaultDomain, hc: ing.hc}
	pod, remote, err = plain.who(ctx, 0)
	if err != nil {
		t.Fatalf("a request to the Service without the annotation: %v", err)
	}
	p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "ReplicaSet" || !strings.HasPrefix(ref.Name, "plain-00001-deployment-") {
		t.Errorf("the plain Service's pod %s is controlled by %v, want a ReplicaSet of plain-00001-deployment", pod, ref)
	}
	if host, _, _ := net.SplitHostPort(remote); host != "127.0.0.1" {
		t.Errorf("the plain Service's user container was called from %s, not through queue-proxy", remote)
	}
	pa, err = dyn.Resource(knativert.PodAutoscalerGVR).Namespace(ns).Get(ctx, "plain-00001", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref, _, _ := unstructured.NestedStringMap(pa.Object, "spec", "scaleTargetRef"); ref["kind"] != "Deployment" || ref["name"] != "plain-00001-deployment" {
		t.Errorf("the plain Revision's PodAutoscaler targets %v, want its Deployment", ref)
	}
	if _, err := getRT(ctx, dyn, ns, "plain-00001"); !apierrors.IsNotFound(err) {
		t.Errorf("an RTResource for the plain Revision: %v, want none", err)
	}
	phase("the plain Service answered by its Deployment's pod " + pod)
	if seen, most := deps.max("plain-00001-deployment"); !seen || most < 1 {
		t.Errorf("the plain Revision's Deployment: seen %v, at most %d replicas, want at least 1", seen, most)
	}
}

// quickAutoscaling shortens the KPA's stable window and scale-to-zero
// grace period to Knative's least (6 s each), so scaling down and to zero
// takes seconds, not minutes.
func quickAutoscaling(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	patch := []byte(`{"data":{"stable-window":"6s","scale-to-zero-grace-period":"6s"}}`)
	if _, err := kube.CoreV1().ConfigMaps(knativeinstall.Namespace).Patch(ctx, "config-autoscaler", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startGantryForKnative installs the RTResource CRD and Knative's rights on
// RTResources (config/knative/rbac.yaml's aggregated ClusterRole), and runs
// the RTResource controller and Gantry's Knative controller with its
// webhook (on loopback, registered by URL: the local case of
// docs/knative.md) for a namespace of the test's own, which it returns.
func startGantryForKnative(ctx context.Context, t *testing.T, cfg *rest.Config, kube kubernetes.Interface, dyn dynamic.Interface) string {
	t.Helper()
	e2etest.InstallCRD(t, dyn)
	applied := false
	for _, doc := range bytes.Split(knative.RBAC, []byte("\n---\n")) {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			t.Fatal(err)
		}
		if obj.GetLabels()["serving.knative.dev/controller"] != "true" {
			continue // the Gantry controller's own rights: it runs as the admin here
		}
		body, _ := obj.MarshalJSON()
		if _, err := dyn.Resource(rbacGVR).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "knative-e2e", Force: ptr.To(true)}); err != nil {
			t.Fatal(err)
		}
		applied = true
	}
	if !applied {
		t.Fatal("config/knative/rbac.yaml has no ClusterRole aggregated into Knative's")
	}
	e2etest.Eventually(t, "knative-serving-admin aggregating rtresources/scale", func(ctx context.Context) (bool, error) {
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "knative-serving-admin", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, r := range cr.Rules {
			for _, res := range r.Resources {
				if res == "rtresources/scale" {
					return true, nil
				}
			}
		}
		return false, nil
	})
	ns := e2etest.Namespace(t, kube)
	e2etest.StartRTController(t, cfg, ns, "knative-e2e")

	kc, err := knativert.New(knativert.Options{Config: cfg, Namespace: ns, Component: "knative-e2e", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cert, ca, err := knativert.Certificate(knativert.ServeOptions{Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := knativert.Register(ctx, kube, "https://"+ln.Addr().String()+knativert.WebhookPath, ca); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- knativert.Serve(runCtx, ln, kc.Webhook(), cert) }()
	go func() { done <- kc.Run(runCtx) }()
	t.Cleanup(func() {
		// The configuration goes first: it fails closed.
		err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(),
			knativert.WebhookConfigurationName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete webhook configuration: %v", err)
		}
		cancel()
		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Gantry's Knative controller: %v", err)
			}
		}
	})
	return ns
}

var rbacGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}

// knService is a Knative Service running this test binary, with a target
// of 1 request at a time per pod and at most 3 pods, critical or not.
func knService(ns, name string, critical bool) *unstructured.Unstructured {
	ann := map[string]any{"autoscaling.knative.dev/target": "1", "autoscaling.knative.dev/max-scale": "3"}
	if critical {
		ann[gantryv1.CriticalityAnnotation] = "5"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": ann},
			"spec": map[string]any{"containers": []any{map[string]any{
				"image":   "dev.local/knative-test:1",
				"command": []any{"knative-test-server"},
				"env":     []any{map[string]any{"name": serveEnv, "value": "1"}},
			}}},
		}},
	}}
}

// ingressClient sends requests to a Knative Service through Gantry's
// ingress by its host name.
type ingressClient struct {
	addr, host string
	hc         *http.Client
}

// who GETs /who, held sleep in the user container, and returns the pod
// that answered and the caller its user container saw.
func (c *ingressClient) who(ctx context.Context, sleep time.Duration) (pod, remote string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/who?sleep=%s", c.addr, sleep), nil)
	if err != nil {
		return "", "", err
	}
	req.Host = c.host
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<12))
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("%s: %s %s", c.host, resp.Status, body)
	}
	pod, remote, ok := strings.Cut(string(body), " ")
	if !ok {
		return "", "", fmt.Errorf("%s: answer %q", c.host, body)
	}
	return pod, remote, nil
}

func getRT(ctx context.Context, dyn dynamic.Interface, ns, name string) (*gantryv1.RTResource, error) {
	u, err := dyn.Resource(rtGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	rt := &gantryv1.RTResource{}
	return rt, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rt)
}

// waitZero waits until the KPA has set the RTResource to 0 replicas and
// every pod of the Revision is gone or terminating (queue-proxy drains
// before it exits; a terminating pod is no endpoint).
func waitZero(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, ns, rev string) {
	t.Helper()
	e2etest.Eventually(t, rev+" scaled to zero", func(ctx context.Context) (bool, error) {
		rt, err := getRT(ctx, dyn, ns, rev)
		if err != nil || ptr.Deref(rt.Spec.Replicas, -1) != 0 {
			return false, err
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "serving.knative.dev/revision=" + rev})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// activatorIPs are the addresses of the activator's pods.
func activatorIPs(ctx context.Context, t *testing.T, kube kubernetes.Interface) map[string]bool {
	t.Helper()
	pods, err := kube.CoreV1().Pods(knativeinstall.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=activator"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.PodIP != "" {
			out[p.Status.PodIP] = true
		}
	}
	if len(out) == 0 {
		t.Fatal("no activator pod with an address")
	}
	return out
}

// serviceEndpointIPs are the ready endpoint addresses of a Service.
func serviceEndpointIPs(ctx context.Context, kube kubernetes.Interface, ns, svc string) ([]string, error) {
	slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	return out, nil
}

func hasContainers(p *corev1.Pod, names ...string) bool {
	have := map[string]bool{}
	for _, c := range p.Spec.Containers {
		have[c.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return false
		}
	}
	return len(have) == len(names)
}

// deploymentReplicas records, per Deployment of the namespace, the most
// replicas it ever had in spec or status, from an informer started at
// once, so no state between polls goes unseen.
type deploymentReplicas struct {
	mu   sync.Mutex
	most map[string]int32
}

func watchDeploymentReplicas(t *testing.T, kube kubernetes.Interface, ns string) *deploymentReplicas {
	t.Helper()
	d := &deploymentReplicas{most: map[string]int32{}}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	inf := f.Apps().V1().Deployments().Informer()
	record := func(obj any) {
		dep, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		n := max(ptr.Deref(dep.Spec.Replicas, 0), dep.Status.Replicas)
		d.mu.Lock()
		d.most[dep.Name] = max(d.most[dep.Name], n)
		d.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the Deployments' informer did not sync")
	}
	return d
}

// max is whether the Deployment was seen, and its most replicas.
func (d *deploymentReplicas) max(name string) (bool, int32) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.most[name]
	return ok, n
}
