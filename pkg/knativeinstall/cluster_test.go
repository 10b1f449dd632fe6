package knativeinstall_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/knativeingress"
	"gantry.dev/gantry/pkg/knativeinstall"
	"gantry.dev/gantry/pkg/localcluster"
)

// serveEnv makes the test binary a Knative user container: an HTTP server
// on $PORT that answers "knative-test:" and the request's body.
const serveEnv = "GANTRY_KNATIVE_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<16))
			fmt.Fprintf(w, "knative-test:%s", body)
		})
		// /who answers the pod's name and the caller's address, after
		// ?sleep= (at most 5 s), so a test can hold requests open.
		http.HandleFunc("/who", func(w http.ResponseWriter, r *http.Request) {
			if d, err := time.ParseDuration(r.URL.Query().Get("sleep")); err == nil {
				time.Sleep(min(d, 5*time.Second))
			}
			fmt.Fprintf(w, "%s %s", os.Getenv("HOSTNAME"), r.RemoteAddr)
		})
		// /fetch GETs ?url= from inside the pod and answers its status and
		// body, so a test can call a Service as another pod would.
		http.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
			client := &http.Client{Timeout: 10 * time.Second}
			resp, err := client.Get(r.URL.Query().Get("url"))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			fmt.Fprintf(w, "%d %s", resp.StatusCode, body)
		})
		fmt.Fprintln(os.Stderr, http.ListenAndServe(":"+os.Getenv("PORT"), nil))
		os.Exit(1)
	}
	code := m.Run()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the shared cluster:", err)
			code = max(code, 1)
		}
	}
	os.Exit(code)
}

// Knative Serving, unpatched, on the local control plane: Start with
// Knative returns once its four components run as pods of its own
// Deployments on the process node and its webhook admits Services; the
// webhook also refuses what Knative's validation refuses (a check no CRD
// schema makes), and the configuration is the rendered one. Then a Knative
// Service gets Ready, its pod (user container and queue-proxy) on the
// process node, and answers through Gantry's Knative ingress by its host
// name.
//
// `make test` builds Knative first (the Makefile's test target depends on
// knative), so a missing build fails; the test needs root for the process
// node's network namespaces.
func TestKnativeGetsReadyOnTheLocalControlPlane(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	c := startKnativeCluster(t)
	cfg := c.RESTConfig()
	cfg.WarningHandler = rest.NoWarnings{} // Knative's securityContext advice on every Service
	client := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	pods, err := client.CoreV1().Pods(knativeinstall.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != localcluster.ProcessNodeName(0) {
			t.Errorf("pod %s is on node %q, want the process node", p.Name, p.Spec.NodeName)
		}
		if p.Status.Phase == corev1.PodRunning && len(p.OwnerReferences) == 1 && p.OwnerReferences[0].Kind == "ReplicaSet" {
			running[p.Labels["app"]] = true
		}
	}
	for _, comp := range knativeinstall.Components {
		if !running[comp] {
			t.Errorf("no running pod of Knative's %s Deployment: %v", comp, running)
		}
	}

	cm, err := client.CoreV1().ConfigMaps(knativeinstall.Namespace).Get(ctx, "config-network", metav1.GetOptions{})
	if err != nil || cm.Data["ingress-class"] != knativeinstall.IngressClass {
		t.Errorf("config-network: %v %v, want ingress-class %s", cm.Data, err, knativeinstall.IngressClass)
	}

	// The webhook's validation: a negative min-scale annotation is refused
	// with Knative's reason.
	bad := knativeinstall.ProbeService("default")
	if err := unstructured.SetNestedStringMap(bad.Object, map[string]string{"autoscaling.knative.dev/min-scale": "-1"},
		"spec", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
	_, err = dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace("default").Create(ctx, bad,
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "min-scale") {
		t.Errorf("a Service with min-scale -1: %v, want the webhook's refusal naming min-scale", err)
	}

	ns := e2etest.Namespace(t, client)
	serveThroughKnative(ctx, t, client, dyn, ns)
	host := "hello." + ns + "." + knativeinstall.DefaultDomain
	if got := post(ctx, t, "http://"+c.KnativeIngressAddr()+"/", host); got != "knative-test:ping" {
		t.Errorf("through Gantry's Knative ingress: %q, want %q", got, "knative-test:ping")
	}
	// A pod calls the Service by its cluster-local name, as Knative
	// Services call each other: an ExternalName to the ingress's private
	// load balancer, which the process node names and relays to the
	// ingress's cluster-local listener.
	// The pods' hosts files follow the Services a moment after Knative
	// made them, so the call is retried for a while.
	local := "http://hello." + ns + ".svc.cluster.local/"
	fetch := "http://" + c.KnativeIngressAddr() + "/fetch?url=" + url.QueryEscape(local)
	var got string
	for deadline := time.Now().Add(30 * time.Second); got != "200 knative-test:" && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got = tryPost(ctx, fetch, host)
	}
	if got != "200 knative-test:" {
		t.Errorf("a pod's GET %s: %q, want %q", local, got, "200 knative-test:")
	}
}

// tryPost is post without failing the test: the status and body, or the
// error.
func tryPost(ctx context.Context, url, host string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return err.Error()
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return resp.Status + " " + string(body)
	}
	return string(body)
}

// shared is the cluster the tests of this binary share: starting Knative
// costs most of a test's time. TestMain stops it.
var shared struct {
	sync.Once
	c   *localcluster.Cluster
	err error
}

// startKnativeCluster returns the shared local control plane with Knative
// and Gantry's Knative ingress, this test binary as the program
// knative-test-server, starting it on first use. Each test works in a
// namespace of its own.
func startKnativeCluster(t *testing.T) *localcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane and Knative; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: Knative's pods run on a process node, in network namespaces of their own")
	}
	if err := knativeinstall.RequireBuild(); err != nil {
		t.Fatal(err)
	}
	shared.Do(func() {
		self, err := os.Executable()
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		shared.c, shared.err = localcluster.Start(ctx, localcluster.Options{
			ProcessNodes: 1, Scheduler: true, ControllerManager: true, Knative: true,
			Programs:       map[string]string{"knative-test-server": self},
			KnativeIngress: "127.0.0.1:0",
			StartIngress: func(kube kubernetes.Interface, dyn dynamic.Interface, log *slog.Logger, addr string) (localcluster.Ingress, error) {
				srv, err := knativeingress.Start(knativeingress.Config{Kube: kube, Dynamic: dyn, Logger: log}, addr, "127.0.0.1:0")
				if err != nil {
					return nil, err
				}
				return srv, nil
			},
		})
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// serveThroughKnative creates a Knative Service running this test binary
// as its user container and returns once the Service is Ready, its pod on
// the process node.
func serveThroughKnative(ctx context.Context, t *testing.T, client kubernetes.Interface, dyn dynamic.Interface, ns string) {
	t.Helper()
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "serving.knative.dev/v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": "hello", "namespace": ns},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{
				"image":   "dev.local/knative-test:1",
				"command": []any{"knative-test-server"},
				"env":     []any{map[string]any{"name": serveEnv, "value": "1"}},
			}},
		}}},
	}}
	if _, err := dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const rev = "hello-00001"
	var last string
	for {
		u, err := dyn.Resource(knativeinstall.KnativeServiceGVR).Namespace(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err == nil && readyCondition(u) == "True" {
			break
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprint(u.Object["status"])
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Knative Service hello not Ready: %v; last: %s", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "serving.knative.dev/revision=" + rev})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the Revision's pods: %v %v", pods, err)
	}
	pod := pods.Items[0]
	if pod.Spec.NodeName != localcluster.ProcessNodeName(0) || pod.Status.PodIP == "" {
		t.Fatalf("pod %s on %q at %q, want the process node and an address", pod.Name, pod.Spec.NodeName, pod.Status.PodIP)
	}
}

// post sends "ping" to url with the Host host and returns the answer's body.
func post(ctx context.Context, t *testing.T, url, host string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST %s (Host %s): %v", url, host, err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST %s (Host %s): %s %s", url, host, resp.Status, body)
	}
	return string(body)
}

func readyCondition(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}
