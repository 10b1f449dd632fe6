package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/localcluster"
)

// The scaled-out gateway as a user deploys it: a Deployment of two
// `gantry serve --peers gateway` replicas behind the Service "gateway",
// pods on the process node. One wins the Lease and scales the function
// for both from both replicas' queues; clients spread over the replicas,
// as the Service would spread them, and:
//   - no instance ever runs more requests than its concurrency, though
//     both replicas send to the same instances (the instance reports what
//     it held as each request began);
//   - the function scales up under load sent to both replicas;
//   - deleting the leader's pod mid-load loses no accepted request: it
//     drains what it holds, the other replica takes the Lease, the
//     Deployment brings a new follower, and a client retries only a
//     connection no replica accepted.
func TestScaledOutGatewayTwoReplicas(t *testing.T) {
	e := setup(t)
	e2etest.InstallCRD(t, e.dyn)
	e2etest.StartRTController(t, e.cfg, e.ns, "gantry-processnode-e2e")
	ctx := context.Background()
	gwPort := freePort(t)
	const concurrency = 2

	dir := t.TempDir()
	stackFile := filepath.Join(dir, "stack.yml")
	if err := os.WriteFile(stackFile, []byte(fmt.Sprintf(`functions:
  echo:
    image: example.invalid/echo:1
    fprocess: %s
    environment: {%s: "1", SLEEP: 150ms}
    criticality: 80
    concurrency: %d
    slo: 1s
    timeout: 10s
    scale: {min: 1, max: 4}
`, program, instanceEnv, concurrency)), 0o644); err != nil {
		t.Fatal(err)
	}
	kubeconfig := e.asGatewayServiceAccount(t, dir)
	labels := map[string]string{"app": "gateway"}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "gateway", Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
			Ports: []corev1.ServicePort{{Name: "http", Port: gwPort, TargetPort: intstr.FromInt32(gwPort)}}}}
	if _, err := e.kube.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := int32(2)
	grace := int64(20)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "gateway", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{{
					Name: "gateway", Image: "example.invalid/gantry:1",
					Command: []string{gatewayProgram},
					Args: []string{"serve", "--backend", "kubernetes", "--kubeconfig", kubeconfig,
						"--namespace", e.ns, "--peers", "gateway", "--stack", stackFile,
						"--addr", "$(POD_IP):" + strconv.Itoa(int(gwPort)), "--drain-timeout", "15s", "--tick", "100ms"},
					Env: []corev1.EnvVar{{Name: gatewayEnv, Value: "1"},
						{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: gwPort}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(gwPort)}}},
				}}}}}}
	if _, err := e.kube.AppsV1().Deployments(e.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.stopGateways(t) })
	// On failure, name every gateway pod seen with its IP and show the end
	// of its log, so a lost request says which replica held it.
	pods := e.watchGatewayPods(t)
	t.Cleanup(func() {
		if t.Failed() {
			pods.report(t, e, gwPort)
		}
	})
	e2etest.Eventually(t, "two ready gateway replicas and a leader", func(ctx context.Context) (bool, error) {
		eps, err := e.readyEndpoints(ctx, "gateway")
		return len(eps) == 2 && e.leader(ctx) != "", err
	})
	leader := e.leader(ctx)
	t.Logf("leader: %s", leader)
	maxReplicas := e.watchReplicas(t, "echo")

	// Load on both replicas, the way the Service spreads it: each client
	// picks the replicas in turn from the ready endpoints.
	var (
		endpoints atomic.Pointer[[]string]
		worst     atomic.Int64
		served    atomic.Int64
		retried   atomic.Int64
		failures  = make(chan string, 1000)
	)
	refresh := func() {
		if eps, err := e.readyEndpoints(ctx, "gateway"); err == nil && len(eps) > 0 {
			endpoints.Store(&eps)
		}
	}
	refresh()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				refresh()
			}
		}
	})
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("c%d-%d", c, i)
				for attempt := 0; ; attempt++ {
					eps := *endpoints.Load()
					url := fmt.Sprintf("http://%s/function/echo", net.JoinHostPort(eps[(c+i+attempt)%len(eps)], strconv.Itoa(int(gwPort))))
					code, got, inflight, err := callInflight(url, body)
					if err != nil && notAccepted(err) && attempt < 20 {
						retried.Add(1) // no replica took it: the client tries another
						time.Sleep(50 * time.Millisecond)
						continue
					}
					switch {
					case err != nil:
						failures <- fmt.Sprintf("%s: %v", body, err)
					case code != http.StatusOK || !strings.HasSuffix(got, ":"+body):
						failures <- fmt.Sprintf("%s: %d %q", body, code, got)
					default:
						served.Add(1)
						for {
							w := worst.Load()
							if inflight <= w || worst.CompareAndSwap(w, inflight) {
								break
							}
						}
					}
					break
				}
			}
		})
	}
	time.Sleep(8 * time.Second)
	// The leader goes, gracefully, mid-load.
	if err := e.kube.CoreV1().Pods(e.ns).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2etest.Eventually(t, "a new leader", func(ctx context.Context) (bool, error) {
		l := e.leader(ctx)
		return l != "" && l != leader, nil
	})
	t.Logf("new leader: %s", e.leader(ctx))
	e2etest.Eventually(t, "two ready replicas again", func(ctx context.Context) (bool, error) {
		eps, err := e.readyEndpoints(ctx, "gateway")
		return len(eps) == 2, err
	})
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Errorf("request lost: %s", f)
	}
	t.Logf("served %d, %d retried connections, most replicas %d, most requests on one instance at once %d",
		served.Load(), retried.Load(), maxReplicas(), worst.Load())
	if worst.Load() > concurrency {
		t.Errorf("an instance ran %d requests at once; its concurrency is %d", worst.Load(), concurrency)
	}
	if worst.Load() == 0 || served.Load() < 100 {
		t.Errorf("served %d requests; the instances reported no concurrency", served.Load())
	}
	// The new leader says so on its /metrics, and has synced with the
	// other replica.
	if err := e.checkLeaderMetrics(ctx, e.leader(ctx), gwPort); err != nil {
		t.Error(err)
	}
	// The shipped Role grants every call a replica made.
	podList, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gateway"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range podList.Items {
		logs, err := e.kube.CoreV1().Pods(e.ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Errorf("logs of %s: %v", p.Name, err)
		}
		if !strings.Contains(string(logs), "gateway listening") {
			t.Errorf("the logs of %s do not show it starting:\n%s", p.Name, logs)
		}
		if strings.Contains(strings.ToLower(string(logs)), "forbidden") {
			t.Errorf("gateway %s was refused a call:\n%s", p.Name, logs)
		}
	}
	if maxReplicas() < 2 {
		t.Errorf("the function never scaled past %d replicas under load from both gateway replicas", maxReplicas())
	}
}

// asGatewayServiceAccount applies config/gateway's service account, Role
// and binding in the test's namespace and writes a kubeconfig that acts
// as that account, so the replicas run with exactly the shipped rights.
func (e *env) asGatewayServiceAccount(t *testing.T, dir string) string {
	t.Helper()
	ctx := context.Background()
	read := func(name string, into any) {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "gateway", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, into); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var (
		sa   corev1.ServiceAccount
		role rbacv1.Role
		rb   rbacv1.RoleBinding
	)
	read("service_account.yaml", &sa)
	read("role.yaml", &role)
	read("role_binding.yaml", &rb)
	rb.Subjects[0].Namespace = e.ns
	if _, err := e.kube.CoreV1().ServiceAccounts(e.ns).Create(ctx, &sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().Roles(e.ns).Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(ctx, &rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + e.ns + ":" + sa.Name
	groups := []string{"system:serviceaccounts", "system:serviceaccounts:" + e.ns, "system:authenticated"}
	e2etest.Eventually(t, "RBAC to let the gateway take its Lease", func(ctx context.Context) (bool, error) {
		r, err := e.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: groups,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "coordination.k8s.io", Resource: "leases", Verb: "create", Namespace: e.ns}}},
			metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, err
	})
	cfg, err := clientcmd.LoadFromFile(localcluster.Shared(t).KubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate, ai.ImpersonateGroups = user, groups
	}
	// The replicas run in their pods' network namespaces, where 127.0.0.1
	// is their own: they reach the API server through the node's relay at
	// their host IP, and verify it by its name.
	relay := localcluster.Shared(t).ProcessNodes()[0].APIServerForPods()
	if relay == "" {
		t.Fatal("the process node relays no API server to its pods")
	}
	for _, c := range cfg.Clusters {
		c.Server, c.TLSServerName = "https://"+relay, "kubernetes"
	}
	path := filepath.Join(dir, "gateway.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkLeaderMetrics reads the leader's /metrics.
func (e *env) checkLeaderMetrics(ctx context.Context, leader string, port int32) error {
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(ctx, leader, metav1.GetOptions{})
	if err != nil {
		return err
	}
	resp, err := client.Get(fmt.Sprintf("http://%s/metrics", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, want := range []string{"gantry_gateway_leader 1", `gantry_gateway_peer_syncs_total{result="ok"}`, "gantry_gateway_peers 1"} {
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("the leader's /metrics lacks %q", want)
		}
	}
	return nil
}

// leader is the gateway Lease's holder, "" when none.
func (e *env) leader(ctx context.Context) string {
	l, err := e.kube.CoordinationV1().Leases(e.ns).Get(ctx, "gateway", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// stopGateways scales the gateway Deployment to zero and waits for its
// pods to go, so no replica outlives the test's namespace.
func (e *env) stopGateways(t *testing.T) {
	ctx := context.Background()
	zero := int32(0)
	d, err := e.kube.AppsV1().Deployments(e.ns).Get(ctx, "gateway", metav1.GetOptions{})
	if err != nil {
		return
	}
	d.Spec.Replicas = &zero
	if _, err := e.kube.AppsV1().Deployments(e.ns).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Errorf("scale the gateways down: %v", err)
		return
	}
	e2etest.Eventually(t, "the gateway pods gone", func(ctx context.Context) (bool, error) {
		pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gateway"})
		return err == nil && len(pods.Items) == 0, nil
	})
}

// gatewayPods records every gateway pod seen, with its IP and its log
// while it could still be read.
type gatewayPods struct {
	mu   sync.Mutex
	ip   map[string]string
	logs map[string][]byte
}

// watchGatewayPods polls the gateway pods until the test ends, keeping
// each pod's IP and latest log (a deleted pod's log goes with it).
func (e *env) watchGatewayPods(t *testing.T) *gatewayPods {
	g := &gatewayPods{ip: map[string]string{}, logs: map[string][]byte{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			g.poll(ctx, e)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return g
}

func (g *gatewayPods) poll(ctx context.Context, e *env) {
	pods, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=gateway"})
	if err != nil {
		return
	}
	for _, p := range pods.Items {
		logs, _ := e.kube.CoreV1().Pods(e.ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		g.mu.Lock()
		if p.Status.PodIP != "" {
			g.ip[p.Name] = p.Status.PodIP
		}
		if len(logs) > 0 {
			g.logs[p.Name] = logs
		}
		g.mu.Unlock()
	}
}

// report logs each pod's name, IP, what it says of the function echo
// (instances, queue) if it still answers, and the last lines of its log.
func (g *gatewayPods) report(t *testing.T, e *env, port int32) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g.poll(ctx, e)
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, ip := range g.ip {
		lines := strings.Split(strings.TrimRight(string(g.logs[name]), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		status := "no answer"
		c := &http.Client{Timeout: 2 * time.Second}
		if resp, err := c.Get(fmt.Sprintf("http://%s/system/function/echo", net.JoinHostPort(ip, strconv.Itoa(int(port))))); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			status = string(b)
		}
		t.Logf("gateway pod %s at %s says of echo: %s\nlast log lines:\n%s", name, ip, status, strings.Join(lines, "\n"))
	}
}

// callInflight POSTs body and returns the instance's X-Inflight. Like
// callReplayable it sends an Idempotency-Key, so Go's transport resends a
// request that went out on a kept-alive connection the draining leader
// closed just then (no gateway read it).
func callInflight(url, body string) (int, string, int64, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, "", 0, err
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Idempotency-Key", body)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", 0, err
	}
	n, _ := strconv.ParseInt(resp.Header.Get("X-Inflight"), 10, 64)
	return resp.StatusCode, string(b), n, nil
}

// notAccepted is a connection no gateway took: refused, or closed before
// any byte of the request was read.
func notAccepted(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}

func freePort(t *testing.T) int32 {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return int32(ln.Addr().(*net.TCPAddr).Port)
}
