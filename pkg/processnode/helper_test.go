package processnode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// The test binary is also the containers' program: with
// PROCESSNODE_TEST_HELPER set it runs helperMain instead of the tests.
const helperEnv = "PROCESSNODE_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		helperMain(mode)
		return
	}
	// A port free on every address: a process listening on a wildcard
	// address (:8080, say) holds that port on every pod address too.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testPort = int32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	os.Exit(m.Run())
}

// testPort is the containers' port.
var testPort int32

// helperMain is a container's program. "serve" listens on $POD_IP:$PORT:
// GET /healthz answers 200, GET / the environment it sees, GET /live 500
// once $HOME/unhealthy exists, GET /slow after 300 ms, GET /fetch?url=U
// what a GET of U from the pod gets. On SIGTERM it says
// so and exits after $TERM_DELAY, or never with IGNORE_TERM=1; CHILD=1
// starts a sleeping child in its process group first. "exit" prints a line
// and exits with $EXIT_CODE.
func helperMain(mode string) {
	fmt.Println("started", os.Getenv("HOSTNAME"))
	fmt.Fprintln(os.Stderr, "to stderr")
	if mode == "exit" {
		code, _ := strconv.Atoi(os.Getenv("EXIT_CODE"))
		os.Exit(code)
	}
	if mode == "dial" {
		dialMain()
		return
	}
	if mode == "incluster" {
		os.Exit(inClusterMain())
	}
	if mode == "args" {
		fmt.Printf("args %q PORT=%s\n", os.Args[1:], os.Getenv("PORT"))
		return
	}
	if os.Getenv("CHILD") == "1" {
		child := exec.Command("sleep", "1000")
		if err := child.Start(); err == nil {
			_ = os.WriteFile(filepath.Join(os.Getenv("HOME"), "child.pid"), []byte(strconv.Itoa(child.Process.Pid)), 0o644)
		}
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	ln, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), os.Getenv("PORT")))
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("/probe", func(w http.ResponseWriter, r *http.Request) {
		// Ready only to a probe with Knative's queue-proxy header.
		if r.Header.Get("K-Network-Probe") != "queue" {
			w.WriteHeader(http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/live", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), "unhealthy")); err == nil {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(300 * time.Millisecond)
		fmt.Fprint(w, "slow done")
	})
	mux.HandleFunc("/fetch", func(w http.ResponseWriter, r *http.Request) {
		// GET ?url= from inside the pod, on a new connection each time,
		// and answer its status and body, or 502 and the error.
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get(r.URL.Query().Get("url"))
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, err)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{
			"hostname": os.Getenv("HOSTNAME"), "podIP": os.Getenv("POD_IP"),
			"greeting": os.Getenv("GREETING"), "path": os.Getenv("PATH"), "cwd": must(os.Getwd()),
		})
	})
	go func() { _ = http.Serve(ln, mux) }()
	for range sigs {
		fmt.Println("got SIGTERM")
		if os.Getenv("IGNORE_TERM") == "1" {
			continue
		}
		d, _ := time.ParseDuration(os.Getenv("TERM_DELAY"))
		time.Sleep(d)
		os.Exit(0)
	}
}

func must(s string, _ error) string { return s }

// testNode is a provider without a cluster: the test plays the pod
// controller, calling CreatePod and DeletePod and reading the statuses
// NotifyPods delivers.
type testNode struct {
	p    *Provider
	lock *os.File

	mu       sync.Mutex
	removed  []string
	statuses map[string][]*corev1.Pod
	changed  chan struct{}
}

func newTestNode(t *testing.T, maxPods int) *testNode {
	t.Helper()
	return newTestNodeOn(t, maxPods, nil)
}

// newTestNodeOn is newTestNode whose pods get namespaces on pn, when not nil.
func newTestNodeOn(t *testing.T, maxPods int, pn *podNet) *testNode {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, "helper")); err != nil {
		t.Fatal(err)
	}
	hostIP := HostIP
	var addrs *addrPool
	var lock *os.File
	if pn != nil {
		hostIP = pn.gateway.String()
		addrs, err = newAddrPool(pn.prefix, maxPods, pn.gateway)
	} else {
		var prefix netip.Prefix
		if prefix, lock, err = claimPrefix(addressLockDir(), loopbackSpace); err != nil {
			t.Fatal(err)
		}
		addrs, err = newAddrPool(prefix, maxPods)
	}
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewSimpleClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	tn := &testNode{lock: lock, statuses: map[string][]*corev1.Pod{}, changed: make(chan struct{})}
	tn.p = newProvider(providerConfig{
		HostIP: hostIP, Dir: dir, BinDir: bin, BasePath: "/usr/bin:/bin", Net: pn,
		Images:      map[string][]string{"example/helper:1": {"helper"}},
		MaxLogBytes: 1 << 20, BackoffMin: 100 * time.Millisecond, BackoffMax: 400 * time.Millisecond,
		BackoffReset: time.Minute, ShutdownGrace: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
		Env:    envSources{configMaps: f.Core().V1().ConfigMaps().Lister(), secrets: f.Core().V1().Secrets().Lister()},
		Remove: func(pod *corev1.Pod) {
			tn.mu.Lock()
			tn.removed = append(tn.removed, pod.Name)
			tn.mu.Unlock()
		},
	}, addrs)
	ctx, cancel := context.WithCancel(context.Background())
	tn.p.NotifyPods(ctx, tn.record)
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { tn.p.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Close did not return within 5 s")
		}
		cancel()
		if lock != nil {
			lock.Close()
		}
	})
	return tn
}

func (tn *testNode) record(pod *corev1.Pod) {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	tn.statuses[key] = append(tn.statuses[key], pod)
	close(tn.changed)
	tn.changed = make(chan struct{})
}

// last is the latest status delivered for a pod.
func (tn *testNode) last(name string) *corev1.Pod {
	tn.mu.Lock()
	defer tn.mu.Unlock()
	s := tn.statuses["ns/"+name]
	if len(s) == 0 {
		return nil
	}
	return s[len(s)-1]
}

// waitFor waits until cond holds for the latest delivered status.
func (tn *testNode) waitFor(t *testing.T, name, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.After(timeout)
	for {
		tn.mu.Lock()
		ch := tn.changed
		tn.mu.Unlock()
		if p := tn.last(name); p != nil && cond(p) {
			return p
		}
		select {
		case <-ch:
		case <-deadline:
			p := tn.last(name)
			if p == nil {
				t.Fatalf("pod %s: %s: no status within %v", name, what, timeout)
			}
			t.Fatalf("pod %s: %s: not within %v; last status %+v", name, what, timeout, p.Status)
		}
	}
}

func (tn *testNode) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := tn.p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

func (tn *testNode) delete(t *testing.T, name string, grace int64) {
	t.Helper()
	pod, err := tn.p.GetPod(context.Background(), "ns", name)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &now, &grace
	if err := tn.p.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
}

// gone waits until the pod has left the node: its processes, address and
// folder are gone and GetPod no longer finds it.
func (tn *testNode) gone(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	r := tn.p.get("ns/" + name)
	if r == nil {
		return
	}
	select {
	case <-r.gone:
	case <-time.After(timeout):
		t.Fatalf("pod %s still on the node after %v", name, timeout)
	}
}

// servePod is a pod whose one container runs the helper in serve mode on
// a free port, with its address from the downward API and an HTTP readiness
// probe every second.
func servePod(name string, env ...corev1.EnvVar) *corev1.Pod {
	c := corev1.Container{
		Name: "main", Image: "example/helper:1", Command: []string{"helper"},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: testPort}},
		Env: append([]corev1.EnvVar{
			{Name: helperEnv, Value: "serve"},
			{Name: "PORT", Value: strconv.Itoa(int(testPort))},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		}, env...),
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, NodeName: "test-node"},
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// alive reports whether pid names a live process (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command in parentheses.
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] != 'Z'
		}
	}
	return true
}

func containerPid(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	id := p.Status.ContainerStatuses[0].ContainerID
	pid, err := strconv.Atoi(id[len("process://"):])
	if err != nil {
		t.Fatalf("container ID %q", id)
	}
	return pid
}

// dialMain waits until $HOME/go exists, then dials each address of $DIAL
// (comma-separated host:port) at once and prints one line each: "dial
// ADDR: ok" or "dial ADDR: ERROR".
func dialMain() {
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(filepath.Join(os.Getenv("HOME"), "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Println("no go file")
			os.Exit(2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	addrs := strings.Split(os.Getenv("DIAL"), ",")
	out := make([]string, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			conn, err := net.DialTimeout("tcp", a, 10*time.Second)
			if err != nil {
				out[i] = fmt.Sprintf("dial %s: %v", a, err)
				return
			}
			conn.Close()
			out[i] = fmt.Sprintf("dial %s: ok", a)
		})
	}
	wg.Wait()
	for _, l := range out {
		fmt.Println(l)
	}
}
