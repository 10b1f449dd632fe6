// Package e2e runs process nodes in the real local control plane (etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager with its
// EndpointSlice controller, and one process node, no kwok node): pods are
// real processes that serve traffic, and the gateway serves requests
// through the Kubernetes backend to them.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"gantry.dev/gantry/internal/cli"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// instanceEnv makes the test binary a function instance instead of the
// tests: the process node runs it as the program "e2e-instance".
const (
	instanceEnv = "E2E_INSTANCE"
	program     = "e2e-instance"
	// gatewayEnv makes it `gantry` instead, for gateway replicas run as
	// pods: the program "e2e-gantry".
	gatewayEnv     = "E2E_GANTRY"
	gatewayProgram = "e2e-gantry"
)

// self is the test binary, the instances' program.
var self string

// port is the instances' port: one free on every address, since a process
// listening on a wildcard address would hold it on every pod address too.
var port int32

func TestMain(m *testing.M) {
	if os.Getenv(instanceEnv) != "" {
		os.Exit(instanceMain())
	}
	if os.Getenv(gatewayEnv) != "" {
		os.Exit(cli.Execute())
	}
	var err error
	self, err = os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	port = int32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	os.Exit(localcluster.RunMain(m, localcluster.Options{ProcessNodes: 1, Scheduler: true, ControllerManager: true,
		Programs: map[string]string{program: self, gatewayProgram: self}}))
}

// instanceMain is a function instance as the gateway expects one, on
// $POD_IP:$PORT: GET /_/health answers 200, POST / answers
// "HOSTNAME:body" after $SLEEP, with the requests it held as it began in
// X-Inflight. On SIGTERM it stops listening, finishes
// the requests it holds, and exits.
func instanceMain() int {
	sleep, _ := time.ParseDuration(os.Getenv("SLEEP"))
	host := os.Getenv("HOSTNAME")
	var inflight atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Inflight", strconv.FormatInt(inflight.Add(1), 10))
		defer inflight.Add(-1)
		var b strings.Builder
		_, _ = fmt.Fprintf(&b, "%s:", host)
		buf := make([]byte, 4096)
		n, _ := r.Body.Read(buf)
		b.Write(buf[:n])
		time.Sleep(sleep)
		_, _ = w.Write([]byte(b.String()))
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), os.Getenv("PORT")))
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	fmt.Println("listening on", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	go func() { _ = srv.Serve(ln) }()
	<-ctx.Done()
	fmt.Println("SIGTERM: draining")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return 0
}

// env is a test's view of the shared cluster, with a namespace of its own.
type env struct {
	cfg  *rest.Config
	kube kubernetes.Interface
	dyn  dynamic.Interface
	ns   string
}

func setup(t *testing.T) *env {
	t.Helper()
	c := localcluster.Shared(t)
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.ProcessNodes() {
		if !n.Routed() {
			t.Skipf("process node %s has loopback pod addresses (%s), which EndpointSlices refuse: this process may not make the pods' network namespaces (needs root or CAP_NET_ADMIN and CAP_SYS_ADMIN, and iproute2)", n.Name(), n.Addresses())
		}
	}
	return &env{cfg: cfg, kube: kc, dyn: dyn, ns: e2etest.Namespace(t, kc)}
}

// readyPods lists the pods matching selector that are Ready and not being
// deleted.
func (e *env) readyPods(ctx context.Context, selector string) ([]corev1.Pod, error) {
	list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pid is the process of the pod's first container.
func pid(p *corev1.Pod) (int, error) {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0, errors.New("no container status")
	}
	id, ok := strings.CutPrefix(p.Status.ContainerStatuses[0].ContainerID, "process://")
	if !ok {
		return 0, fmt.Errorf("container ID %q", p.Status.ContainerStatuses[0].ContainerID)
	}
	return strconv.Atoi(id)
}

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
