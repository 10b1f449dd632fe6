package knativeingress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// backendEnv makes the test binary a backend instead of the tests: the
// process node runs it as the program "kni-backend".
const (
	backendEnv     = "KNI_BACKEND"
	backendProgram = "kni-backend"
	backendNS      = "kni-backends"
)

// port is the backends' port: free on every address, since each pod
// listens on its own address.
var port int32

func TestMain(m *testing.M) {
	if os.Getenv(backendEnv) != "" {
		os.Exit(backendMain())
	}
	self, err := os.Executable()
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
		Programs: map[string]string{backendProgram: self}, Images: conformanceImages()}))
}

// echo is what a backend answers: who it is and what it got.
type echo struct {
	Name    string      `json:"name"`
	Host    string      `json:"host"`
	Path    string      `json:"path"`
	Proto   string      `json:"proto"`
	Headers http.Header `json:"headers"`
}

// backendMain serves on $POD_IP:$PORT, HTTP/1.1 and h2c: GET /ready
// answers 200; anything else answers an echo as JSON, after ?before=D
// (before the headers) and ?after=D (between headers and body).
func backendMain() int {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == upgradeProto {
			echoUpgraded(w)
			return
		}
		before, _ := time.ParseDuration(r.URL.Query().Get("before"))
		after, _ := time.ParseDuration(r.URL.Query().Get("after"))
		time.Sleep(before)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(after)
		_ = json.NewEncoder(w).Encode(echo{Name: os.Getenv("NAME"), Host: r.Host, Path: r.URL.Path, Proto: r.Proto, Headers: r.Header})
	})
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), os.Getenv("PORT")))
	if err != nil {
		fmt.Println("listen:", err)
		return 2
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p, ReadHeaderTimeout: 5 * time.Second}
	fmt.Println("serving on", ln.Addr())
	_ = srv.Serve(ln)
	return 0
}

// upgradeProto is the protocol a backend switches to on request: it
// then echoes every line, prefixed with its name.
const upgradeProto = "kni-echo"

func echoUpgraded(w http.ResponseWriter) {
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: " + upgradeProto + "\r\nConnection: Upgrade\r\n\r\n")
	_ = rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		_, _ = rw.WriteString(os.Getenv("NAME") + ":" + line)
		_ = rw.Flush()
	}
}

// env is a test's view of the shared cluster, with the backends running.
type env struct {
	kube  kubernetes.Interface
	quiet kubernetes.Interface // without API warnings
	dyn   dynamic.Interface
	ns    string
}

var backends struct {
	sync.Once
	err error
}

func setup(t *testing.T) *env {
	t.Helper()
	c := localcluster.Shared(t)
	for _, n := range c.ProcessNodes() {
		if !n.Routed() {
			t.Skipf("process node %s has loopback pod addresses (%s), which EndpointSlices refuse: needs root for the pods' network namespaces", n.Name(), n.Addresses())
		}
	}
	cfg := c.RESTConfig()
	cfg.QPS, cfg.Burst = 100, 200
	e := &env{kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg)}
	quiet := rest.CopyConfig(cfg)
	quiet.WarningHandler = rest.NoWarnings{} // the Endpoints API's deprecation
	e.quiet = kubernetes.NewForConfigOrDie(quiet)
	backends.Do(func() { backends.err = e.startBackends(t) })
	if backends.err != nil {
		t.Fatalf("backends: %v", backends.err)
	}
	e.ns = e2etest.Namespace(t, e.kube)
	return e
}

// The backends: pods a, b and c behind Services of the same names (port
// 80, named http), a-h2c speaking h2c to a's pod, and lb, an ExternalName
// Service at the ingress's private load balancer, as Knative makes them.
var backendNames = []string{"a", "b", "c"}

func (e *env) startBackends(t *testing.T) error {
	ctx := context.Background()
	if err := installCRD(ctx, e.dyn); err != nil {
		return err
	}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: backendNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	e2etest.Eventually(t, "the default service account", func(ctx context.Context) (bool, error) {
		_, err := e.kube.CoreV1().ServiceAccounts(backendNS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	for _, name := range backendNames {
		if _, err := e.kube.CoreV1().Pods(backendNS).Create(ctx, backendPod(name), metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := e.service(ctx, name, name, nil); err != nil {
			return err
		}
	}
	h2c := "kubernetes.io/h2c"
	if err := e.service(ctx, "a-h2c", "a", &h2c); err != nil {
		return err
	}
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: DefaultPrivateLB}}
	if _, err := e.kube.CoreV1().Services(backendNS).Create(ctx, lb, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := e.mirrored(ctx, t); err != nil {
		return err
	}
	for _, svc := range append(backendNames, "a-h2c", "mirrored") {
		e2etest.Eventually(t, "a ready endpoint of "+svc, func(ctx context.Context) (bool, error) {
			list, err := e.kube.DiscoveryV1().EndpointSlices(backendNS).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
			if err != nil {
				return false, err
			}
			for _, s := range list.Items {
				for _, ep := range s.Endpoints {
					if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
						return true, nil
					}
				}
			}
			return false, nil
		})
	}
	return nil
}

// mirrored is a selector-less Service with an Endpoints object at b's
// pod, as Knative's serverless services make a revision's public
// Service: the controller manager mirrors it into an EndpointSlice.
func (e *env) mirrored(ctx context.Context, t *testing.T) error {
	var ip string
	e2etest.Eventually(t, "pod b's address", func(ctx context.Context) (bool, error) {
		p, err := e.kube.CoreV1().Pods(backendNS).Get(ctx, "b", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ip = p.Status.PodIP
		return ip != "", nil
	})
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mirrored"}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port)}}}}
	if _, err := e.kube.CoreV1().Services(backendNS).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	//nolint:staticcheck // Knative writes Endpoints; this is its shape.
	eps := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "mirrored"}, Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: ip}}, Ports: []corev1.EndpointPort{{Name: "http", Port: port}}}}}
	_, err := e.quiet.CoreV1().Endpoints(backendNS).Create(ctx, eps, metav1.CreateOptions{})
	return err
}

func (e *env) service(ctx context.Context, name, app string, appProtocol *string) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": app},
		Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(port), AppProtocol: appProtocol}}}}
	_, err := e.kube.CoreV1().Services(backendNS).Create(ctx, svc, metav1.CreateOptions{})
	return err
}

func backendPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"type": "process"},
			Containers: []corev1.Container{{Name: "backend", Image: "kni-backend", Command: []string{backendProgram},
				Env: []corev1.EnvVar{{Name: backendEnv, Value: "1"}, {Name: "NAME", Value: name},
					{Name: "PORT", Value: fmt.Sprint(port)},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Ports: []corev1.ContainerPort{{ContainerPort: port}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(port)}},
					PeriodSeconds: 1}}},
		},
	}
}

// installCRD applies the KIngress CRD from knative.dev/networking's
// config/ingress.yaml, taken from the module cache (go mod download).
func installCRD(ctx context.Context, dyn dynamic.Interface) error {
	cmd := exec.Command("go", "mod", "download", "-json", "knative.dev/networking@"+NetworkingVersion)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod download knative.dev/networking: %w", err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(mod.Dir, "config", "ingress.yaml"))
	if err != nil {
		return err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return err
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := dyn.Resource(crdGVR).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Established: the resource is served.
	deadline := time.Now().Add(e2etest.Timeout)
	for {
		_, err := dyn.Resource(GVR).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the KIngress CRD is not served: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startIngress runs the ingress until the test ends.
func (e *env) startIngress(t *testing.T, timeout time.Duration) *Server {
	t.Helper()
	return e.startListeners(t, timeout, Listeners{External: "127.0.0.1:0", Local: "127.0.0.1:0"})
}

// startListeners runs the ingress on l until the test ends, once it has
// synced.
func (e *env) startListeners(t *testing.T, timeout time.Duration, l Listeners) *Server {
	t.Helper()
	s, err := StartListeners(Config{Kube: e.kube, Dynamic: e.dyn, Timeout: timeout}, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("ingress shutdown: %v", err)
		}
	})
	select {
	case <-s.C.Synced():
	case <-time.After(e2etest.Timeout):
		t.Fatal("the ingress did not sync")
	}
	return s
}

// get sends GET http://addr+path with Host host and headers h, and
// returns the status, the echo (if 200) and the body.
func get(t *testing.T, client *http.Client, addr, host, path string, h map[string]string) (int, echo, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", path, host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s (Host %s): body: %v", path, host, err)
	}
	var ec echo
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &ec); err != nil {
			t.Fatalf("GET %s (Host %s): %v: %q", path, host, err, body)
		}
	}
	return resp.StatusCode, ec, strings.TrimSpace(string(body))
}
