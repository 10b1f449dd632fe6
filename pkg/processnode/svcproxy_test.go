package processnode_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"gantry.dev/gantry/pkg/localcluster"
)

// A pod reaches a Service by each of its names at its ClusterIP, on the
// Service's port (80) where the pods listen on another (8080): the node's
// service proxy forwards to the ready endpoints in turn, follows an added
// and a deleted endpoint, and stops answering once the Service is deleted.
func TestPodsReachServicesAtTheirClusterIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	kc := startNamespacedCluster(ctx, t, "helper")
	const ns = "sp"
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the namespace's default service account", func() bool {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	svc, err := kc.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*corev1.Pod{servingPod(ns, "client", "client"), servingPod(ns, "web-a", "web")} {
		if _, err := kc.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clientIP := readyPodIP(t, ctx, kc, ns, "client")
	webA := readyPodIP(t, ctx, kc, ns, "web-a")

	// fetch GETs u from inside the client pod: the answering pod's IP, or
	// "" and what went wrong.
	fetch := func(u string) (string, string) {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + net.JoinHostPort(clientIP, "8080") + "/fetch?url=" + url.QueryEscape(u))
		if err != nil {
			t.Fatalf("asking the client pod: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var got struct{ PodIP string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &got) != nil {
			return "", resp.Status + ": " + string(b)
		}
		return got.PodIP, ""
	}
	// answers are the pods that answer n GETs of u in a row.
	answers := func(u string, n int) map[string]int {
		out := map[string]int{}
		for range n {
			ip, _ := fetch(u)
			out[ip]++
		}
		return out
	}

	waitUntil(t, ctx, "web-a answering at web.sp.svc.cluster.local:80", func() bool {
		ip, _ := fetch("http://web.sp.svc.cluster.local/")
		return ip == webA
	})
	for _, name := range []string{"web", "web.sp", "web.sp.svc", svc.Spec.ClusterIP} {
		if ip, msg := fetch("http://" + name + "/"); ip != webA {
			t.Errorf("GET http://%s/ from the client pod: answered by %q (%s), want web-a %s", name, ip, msg, webA)
		}
	}

	// A second endpoint: the connections go to both in turn.
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, servingPod(ns, "web-b", "web"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webB := readyPodIP(t, ctx, kc, ns, "web-b")
	waitUntil(t, ctx, "web-a and web-b answering in turn", func() bool {
		got := answers("http://web/", 4)
		return got[webA] == 2 && got[webB] == 2
	})

	// web-a goes: its endpoint turns not ready, then goes; web-b alone answers.
	if err := kc.CoreV1().Pods(ns).Delete(ctx, "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "web-b alone answering", func() bool { return answers("http://web/", 4)[webB] == 4 })

	// The Service goes: its name leaves the hosts file and its ClusterIP's
	// listener closes.
	if err := kc.CoreV1().Services(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, "the Service's name gone", func() bool {
		_, msg := fetch("http://web.sp.svc.cluster.local/")
		return strings.Contains(msg, "lookup web.sp.svc.cluster.local")
	})
	waitUntil(t, ctx, "the ClusterIP refusing", func() bool {
		_, msg := fetch("http://" + svc.Spec.ClusterIP + "/")
		return strings.Contains(msg, "connection refused")
	})
}

// servingPod runs the helper's server on $POD_IP:8080 with the label
// app=app, ready by an HTTP probe.
func servingPod(ns, name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
			Name: "main", Image: "example/helper:1", Command: []string{"helper"},
			Env: []corev1.EnvVar{{Name: "PROCESSNODE_TEST_HELPER", Value: "serve"}, {Name: "PORT", Value: "8080"},
				fieldEnv("POD_IP", "status.podIP")},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: "/healthz", Port: intstr.FromInt32(8080)}}},
		}}},
	}
}

// readyPodIP waits for the pod to be Ready and returns its IP.
func readyPodIP(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns, name string) string {
	t.Helper()
	var ip string
	waitUntil(t, ctx, name+" Ready", func() bool {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ip = p.Status.PodIP
				return ip != ""
			}
		}
		return false
	})
	return ip
}

// startNamespacedCluster starts a local control plane with one process node
// whose pods get network namespaces (root), with this test binary as each
// of the programs named, stopped when the test ends, and returns an admin
// client.
func startNamespacedCluster(ctx context.Context, t *testing.T, programs ...string) kubernetes.Interface {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: starts a control plane")
	}
	if os.Geteuid() != 0 {
		t.Skip("pod network and mount namespaces need root")
	}
	if err := localcluster.RequireBinaries(); err != nil {
		t.Skip(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	progs := map[string]string{}
	for _, p := range programs {
		progs[p] = self
	}
	c, err := localcluster.Start(ctx, localcluster.Options{ProcessNodes: 1, Scheduler: true, ControllerManager: true, Programs: progs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	if !c.ProcessNodes()[0].Namespaced() {
		t.Fatal("the process node has no pod network namespaces, as root")
	}
	kc, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return kc
}
