package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// A Deployment's pods run as processes on the process node, each on its
// own local address; the real EndpointSlice controller publishes them;
// requests reach them; kubectl logs reads their output through the API
// server; deleting one stops its process, and the endpoint follows.
func TestDeploymentPodsServeBehindTheEndpointSliceController(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "fn", Image: "example.invalid/echo:1", Command: []string{program},
					Env: []corev1.EnvVar{
						{Name: instanceEnv, Value: "1"},
						{Name: "PORT", Value: strconv.Itoa(int(port))},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port}},
					ReadinessProbe: &corev1.Probe{
						ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/_/health", Port: intstr.FromString("http")}},
						PeriodSeconds: 1,
					},
				}}},
			},
		},
	}
	if _, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: e.ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: port, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := e.kube.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var pods []corev1.Pod
	e2etest.Eventually(t, "two ready pods", func(ctx context.Context) (bool, error) {
		var err error
		pods, err = e.readyPods(ctx, "app=echo")
		return len(pods) == 2, err
	})
	ips := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName != localcluster.ProcessNodeName(0) {
			t.Errorf("pod %s on node %q", p.Name, p.Spec.NodeName)
		}
		// The node claims a /24 of 198.18.0.0/15 made local by a route:
		// loopback addresses would be refused in EndpointSlices.
		a, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !netip.MustParsePrefix("198.18.0.0/15").Contains(a) {
			t.Errorf("pod %s has IP %q, want its own address in 198.18.0.0/15", p.Name, p.Status.PodIP)
		}
		ips[p.Status.PodIP] = p.Name
	}
	if len(ips) != 2 {
		t.Fatalf("two pods share an address: %v", ips)
	}

	// The EndpointSlice controller publishes both, ready, at their addresses.
	e2etest.Eventually(t, "the EndpointSlice with both pods ready", func(ctx context.Context) (bool, error) {
		ready, err := e.readyEndpoints(ctx, "echo")
		return slices.Equal(ready, sortedKeys(ips)), err
	})
	for ip, name := range ips {
		if got := post(t, ip, "hi"); got != name+":hi" {
			t.Errorf("POST to %s = %q, want %q", ip, got, name+":hi")
		}
	}

	// kubectl logs: through the API server to the node's kubelet API.
	victim := pods[0]
	raw, err := e.kube.CoreV1().Pods(e.ns).GetLogs(victim.Name, &corev1.PodLogOptions{Container: "fn"}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), "listening on "+victim.Status.PodIP) {
		t.Errorf("logs of %s: %q, %v", victim.Name, raw, err)
	}

	// Deleting a pod: SIGTERM, the process drains and exits, the pod
	// object goes at once, and its endpoint with it.
	vpid, err := pid(&victim)
	if err != nil || !alive(vpid) {
		t.Fatalf("victim's process %d: %v", vpid, err)
	}
	t0 := time.Now()
	if err := e.kube.CoreV1().Pods(e.ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "the deleted pod gone", func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, victim.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("the pod object took %v to go; its process exits on SIGTERM at once", took)
	}
	if alive(vpid) {
		t.Errorf("the deleted pod's process %d is alive", vpid)
	}
	e2etest.Eventually(t, "the replacement ready and the victim's endpoint gone", func(ctx context.Context) (bool, error) {
		ready, err := e.readyEndpoints(ctx, "echo")
		if err != nil || len(ready) != 2 {
			return false, err
		}
		return !slices.Contains(ready, victim.Status.PodIP) || ips[victim.Status.PodIP] == "", nil
	})
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// readyEndpoints are the ready addresses the Service's EndpointSlices hold.
func (e *env) readyEndpoints(ctx context.Context, svc string) ([]string, error) {
	list, err := e.kube.DiscoveryV1().EndpointSlices(e.ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func post(t *testing.T, ip, body string) string {
	t.Helper()
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(ip, strconv.Itoa(int(port))))
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
