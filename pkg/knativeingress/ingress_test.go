package knativeingress

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"gantry.dev/gantry/pkg/e2etest"
)

func to(svc string, pct int, set map[string]string) Split {
	return Split{Backend: Backend{ServiceNamespace: backendNS, ServiceName: svc, ServicePort: intstr.FromInt(80)}, Percent: pct, AppendHeaders: set}
}

func rule(vis string, hosts []string, paths ...Path) Rule {
	return Rule{Hosts: hosts, Visibility: vis, HTTP: &RuleHTTP{Paths: paths}}
}

// create creates an Ingress of class (none: no annotation) in the test's
// namespace.
func (e *env) create(t *testing.T, name, class string, spec Spec) {
	t.Helper()
	ing := &Ingress{TypeMeta: metav1.TypeMeta{APIVersion: GVR.GroupVersion().String(), Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}, Spec: spec}
	if class != "" {
		ing.Annotations = map[string]string{ClassAnnotation: class}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(GVR).Namespace(e.ns).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ingress %s: %v", name, err)
	}
}

// condition is the status of the Ingress's condition typ, "" if none,
// once its observedGeneration is its generation.
func (e *env) condition(ctx context.Context, name, typ string) (string, *unstructured.Unstructured, error) {
	u, err := e.dyn.Resource(GVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", nil, err
	}
	if g, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); g != u.GetGeneration() {
		return "", u, nil
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			s, _ := m["status"].(string)
			return s, u, nil
		}
	}
	return "", u, nil
}

func (e *env) waitReady(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	e2etest.Eventually(t, "ingress "+name+" Ready", func(ctx context.Context) (bool, error) {
		s, u, err := e.condition(ctx, name, "Ready")
		got = u
		return s == "True", err
	})
	return got
}

func TestIngressRoutesByHostPathAndHeaderAndReportsStatus(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	e.create(t, "route", Class, Spec{Rules: []Rule{rule("", []string{e.host("route")},
		Path{Path: "/a", Splits: []Split{to("a", 0, nil)}},
		Path{Headers: map[string]HeaderMatch{"X-Pick": {Exact: "b"}}, Splits: []Split{to("b", 100, nil)}},
		Path{Path: "/h2c", Splits: []Split{to("a-h2c", 0, nil)}},
		Path{Path: "/mirrored", Splits: []Split{to("mirrored", 0, nil)}},
		Path{Splits: []Split{to("c", 0, nil)}})}})
	u := e.waitReady(t, "route")

	// The status Knative's Route reads.
	for _, typ := range []string{"LoadBalancerReady", "NetworkConfigured"} {
		if st, _, err := e.condition(context.Background(), "route", typ); err != nil || st != "True" {
			t.Errorf("condition %s = %q (%v), want True", typ, st, err)
		}
	}
	if lb, _, _ := unstructured.NestedSlice(u.Object, "status", "privateLoadBalancer", "ingress"); len(lb) != 1 ||
		lb[0].(map[string]any)["domainInternal"] != DefaultPrivateLB {
		t.Errorf("privateLoadBalancer = %v, want domainInternal %s", lb, DefaultPrivateLB)
	}
	if lb, _, _ := unstructured.NestedSlice(u.Object, "status", "publicLoadBalancer", "ingress"); len(lb) != 1 ||
		lb[0].(map[string]any)["domainInternal"] != DefaultPublicLB {
		t.Errorf("publicLoadBalancer = %v, want domainInternal %s", lb, DefaultPublicLB)
	}

	client := &http.Client{Timeout: time.Minute}
	for _, c := range []struct {
		host, path string
		h          map[string]string
		code       int
		name       string
	}{
		{e.host("route"), "/a/x", nil, 200, "a"},
		{strings.ToUpper(e.host("route")) + ":80", "/a", nil, 200, "a"},
		{e.host("route"), "/b", map[string]string{"X-Pick": "b"}, 200, "b"},
		{e.host("route"), "/b", map[string]string{"X-Pick": "bb"}, 200, "c"},
		{e.host("route"), "/", nil, 200, "c"},
		{e.host("route"), "/mirrored", nil, 200, "b"},
		{e.host("other"), "/a", nil, 404, ""},
	} {
		code, ec, body := get(t, client, s.ExternalAddr(), c.host, c.path, c.h)
		if code != c.code || ec.Name != c.name {
			t.Errorf("Host %s %s %v: %d from %q, want %d from %q (%s)", c.host, c.path, c.h, code, ec.Name, c.code, c.name, body)
		}
		if code == 200 && (ec.Host != c.host || ec.Path != c.path || ec.Proto != "HTTP/1.1") {
			t.Errorf("Host %s %s: the backend got Host %s path %s %s", c.host, c.path, ec.Host, ec.Path, ec.Proto)
		}
	}

	// h2c: from the client to the ingress, and to a port whose
	// appProtocol asks for it.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Protocols: &p}}
	if code, ec, body := get(t, h2, s.ExternalAddr(), e.host("route"), "/a", nil); code != 200 || ec.Proto != "HTTP/1.1" || ec.Name != "a" {
		t.Errorf("h2c client: %d %s from %q (%s), want HTTP/1.1 to a", code, ec.Proto, ec.Name, body)
	}
	if code, ec, body := get(t, client, s.ExternalAddr(), e.host("route"), "/h2c", nil); code != 200 || ec.Proto != "HTTP/2.0" || ec.Name != "a" {
		t.Errorf("h2c backend: %d %s from %q (%s), want HTTP/2.0 to a", code, ec.Proto, ec.Name, body)
	}

	// A probe asking for the hash gets the hash of the version routing it.
	want, err := Hash(e.get(t, "route"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ec, _ := get(t, client, s.ExternalAddr(), e.host("route"), "/", map[string]string{"K-Network-Probe": "probe", hashHeader: hashOverride}); ec.Headers.Get(hashHeader) != want {
		t.Errorf("K-Network-Hash at the backend = %q, want %q", ec.Headers.Get(hashHeader), want)
	}
	if _, ec, _ := get(t, client, s.ExternalAddr(), e.host("route"), "/", map[string]string{hashHeader: "given"}); ec.Headers.Get(hashHeader) != "given" {
		t.Errorf("K-Network-Hash at the backend = %q, want the client's", ec.Headers.Get(hashHeader))
	}
}

// host is a host name of the test's own, so that Ingresses a previous
// run (-count) left while its namespace goes claim none of its hosts.
func (e *env) host(name string) string { return name + "." + e.ns + ".example.com" }

func (e *env) get(t *testing.T, name string) *Ingress {
	t.Helper()
	u, err := e.dyn.Resource(GVR).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing, err := fromUnstructured(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return ing
}

func TestIngressServesItsClassOnlyAndRefusesWhatItCannotServe(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	e.create(t, "other", "istio.ingress.networking.knative.dev", Spec{Rules: []Rule{rule("", []string{e.host("other")}, Path{Splits: []Split{to("a", 0, nil)}})}})
	e.create(t, "plain", "", Spec{Rules: []Rule{rule("", []string{e.host("plain")}, Path{Splits: []Split{to("a", 0, nil)}})}})
	e.create(t, "half", Class, Spec{Rules: []Rule{rule("", []string{e.host("half")}, Path{Splits: []Split{to("a", 50, nil), to("b", 40, nil)}})}})
	e.create(t, "tls", Class, Spec{TLS: []TLS{{Hosts: []string{e.host("tls")}, SecretName: "x", SecretNamespace: e.ns}},
		Rules: []Rule{rule("", []string{e.host("tls")}, Path{Splits: []Split{to("a", 0, nil)}})}})
	for _, name := range []string{"half", "tls"} {
		e2etest.Eventually(t, name+" refused", func(ctx context.Context) (bool, error) {
			st, _, err := e.condition(ctx, name, "NetworkConfigured")
			if st == "False" {
				if r, _, _ := e.condition(ctx, name, "Ready"); r != "False" {
					return false, fmt.Errorf("Ready = %q", r)
				}
			}
			return st == "False", err
		})
	}
	client := &http.Client{Timeout: time.Minute}
	for _, host := range []string{e.host("other"), e.host("plain"), e.host("half"), e.host("tls")} {
		if code, _, body := get(t, client, s.ExternalAddr(), host, "/", nil); code != http.StatusNotFound {
			t.Errorf("Host %s: %d (%s), want 404", host, code, body)
		}
	}
	if st, u, _ := e.condition(context.Background(), "other", "Ready"); st != "" || u.Object["status"] != nil {
		t.Errorf("another class's ingress got a status: %v", u.Object["status"])
	}

	// config-network makes Gantry the default class: the ingress without
	// the annotation is served.
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: DefaultSystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configNetwork}, Data: map[string]string{configClassKey: Class}}
	if _, err := e.kube.CoreV1().ConfigMaps(DefaultSystemNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.CoreV1().ConfigMaps(DefaultSystemNamespace).Delete(context.Background(), configNetwork, metav1.DeleteOptions{})
	})
	e.waitReady(t, "plain")
	if code, ec, body := get(t, client, s.ExternalAddr(), e.host("plain"), "/", nil); code != 200 || ec.Name != "a" {
		t.Errorf("default class: %d from %q (%s), want 200 from a", code, ec.Name, body)
	}
}

func TestIngressSplitsByPercentAndAppendsHeadersBeforeAndAfterTheSplit(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	e.create(t, "split", Class, Spec{Rules: []Rule{rule(ExternalIP, []string{e.host("split")},
		Path{AppendHeaders: map[string]string{"X-Before": "path", "X-Split": "overridden"},
			Splits: []Split{to("a", 70, map[string]string{"X-Split": "a"}), to("b", 30, map[string]string{"X-Split": "b"}),
				to("c", 0, map[string]string{"X-Split": "c"})}})}})
	e.waitReady(t, "split")
	const n = 400
	counts := map[string]int{}
	client := &http.Client{Timeout: time.Minute}
	for range n {
		code, ec, body := get(t, client, s.ExternalAddr(), e.host("split"), "/", map[string]string{"X-Before": "client"})
		if code != 200 {
			t.Fatalf("%d: %s", code, body)
		}
		counts[ec.Name]++
		if got := ec.Headers.Get("X-Split"); got != ec.Name {
			t.Fatalf("X-Split at %s = %q, want the split's own", ec.Name, got)
		}
		if got := ec.Headers.Values("X-Before"); len(got) != 1 || got[0] != "path" {
			t.Fatalf("X-Before at %s = %q, want the path's value, set once", ec.Name, got)
		}
	}
	// a's share is binomial(400, 0.7): sd 9.2; five of them never fail by
	// chance (p < 1e-6).
	sd := math.Sqrt(n * 0.7 * 0.3)
	if a := counts["a"]; math.Abs(float64(a)-0.7*n) > 5*sd || counts["c"] != 0 || counts["a"]+counts["b"] != n {
		t.Errorf("splits 70/30/0 gave %v of %d", counts, n)
	}
}

func TestIngressTimeout(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, 2*time.Second)
	e.create(t, "slow", Class, Spec{Rules: []Rule{rule("", []string{e.host("slow")}, Path{Splits: []Split{to("a", 0, nil)}})}})
	e.waitReady(t, "slow")
	client := &http.Client{Timeout: time.Minute}
	for _, q := range []string{"before=500ms", "after=500ms"} {
		if code, _, body := get(t, client, s.ExternalAddr(), e.host("slow"), "/?"+q, nil); code != 200 {
			t.Errorf("%s: %d (%s), want 200 within the 2 s timeout", q, code, body)
		}
	}
	if code, _, body := get(t, client, s.ExternalAddr(), e.host("slow"), "/?before=20s", nil); code != http.StatusGatewayTimeout {
		t.Errorf("past the timeout: %d (%s), want 504", code, body)
	}
}

func TestIngressClusterLocalHostsOnlyOnTheLocalListener(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	fqdn := "private." + e.ns + ".svc.cluster.local"
	e.create(t, "private", Class, Spec{Rules: []Rule{
		rule(ClusterLocal, []string{fqdn}, Path{Splits: []Split{to("b", 0, nil)}}),
		rule(ExternalIP, []string{e.host("public")}, Path{Splits: []Split{to("a", 0, nil)}}),
		// Knative's DomainMapping: rewriteHost at the private host, through
		// an ExternalName Service at the ingress's own load balancer.
		rule(ExternalIP, []string{e.host("mapped")}, Path{RewriteHost: fqdn, Splits: []Split{to("lb", 0, nil)}}),
	}})
	e.waitReady(t, "private")
	client := &http.Client{Timeout: time.Minute}
	for _, host := range []string{fqdn, "private." + e.ns + ".svc", "private." + e.ns} {
		if code, _, body := get(t, client, s.ExternalAddr(), host, "/", nil); code != http.StatusNotFound {
			t.Errorf("external listener, Host %s: %d (%s), want 404", host, code, body)
		}
		if code, ec, body := get(t, client, s.LocalAddr(), host, "/", nil); code != 200 || ec.Name != "b" {
			t.Errorf("local listener, Host %s: %d from %q (%s), want b", host, code, ec.Name, body)
		}
	}
	for _, addr := range []string{s.ExternalAddr(), s.LocalAddr()} {
		if code, ec, body := get(t, client, addr, e.host("public"), "/", nil); code != 200 || ec.Name != "a" {
			t.Errorf("%s, Host %s: %d from %q (%s), want a", addr, e.host("public"), code, ec.Name, body)
		}
	}
	if code, ec, body := get(t, client, s.ExternalAddr(), e.host("mapped"), "/m", nil); code != 200 || ec.Name != "b" || ec.Host != fqdn {
		t.Errorf("rewriteHost: %d from %q with Host %q (%s), want b with Host %s", code, ec.Name, ec.Host, body, fqdn)
	}
}

func TestIngressUpdatesDropNoRequest(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	spec := func(to1 string) Spec {
		return Spec{Rules: []Rule{rule("", []string{e.host("update")}, Path{Splits: []Split{to(to1, 0, nil)}})}}
	}
	e.create(t, "update", Class, spec("a"))
	e.waitReady(t, "update")

	ctx, stop := context.WithCancel(context.Background())
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var firstErr string
	var wg sync.WaitGroup
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequest(http.MethodGet, "http://"+s.ExternalAddr()+"/", nil)
				req.Host = e.host("update")
				resp, err := client.Do(req)
				sent.Add(1)
				if err == nil {
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					mu.Lock()
					if firstErr == "" {
						firstErr = fmt.Sprint(err, resp)
					}
					mu.Unlock()
				}
			}
		})
	}
	names := []string{"b", "c", "a"}
	for i := range 12 {
		e2etest.Eventually(t, "an update", func(ctx context.Context) (bool, error) {
			u, err := e.dyn.Resource(GVR).Namespace(e.ns).Get(ctx, "update", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&Ingress{Spec: spec(names[i%3])})
			if err != nil {
				return false, err
			}
			u.Object["spec"] = obj["spec"]
			_, err = e.dyn.Resource(GVR).Namespace(e.ns).Update(ctx, u, metav1.UpdateOptions{})
			return err == nil, err
		})
		e.waitReady(t, "update")
		// Once Ready, the table that routes the new version serves.
		if _, ec, body := get(t, client, s.ExternalAddr(), e.host("update"), "/", nil); ec.Name != names[i%3] {
			t.Errorf("update %d: Ready, but answered by %q (%s), want %s", i, ec.Name, body, names[i%3])
		}
	}
	stop()
	wg.Wait()
	if failed.Load() > 0 || sent.Load() == 0 {
		t.Errorf("%d of %d requests failed during 12 updates; first: %s", failed.Load(), sent.Load(), firstErr)
	}
	t.Logf("%d requests during 12 updates", sent.Load())
}

// TestIngressPassesUpgradesThrough: an HTTP/1.1 Upgrade (as websockets
// use) reaches the backend, and the connection then carries both ways.
func TestIngressPassesUpgradesThrough(t *testing.T) {
	e := setup(t)
	s := e.startIngress(t, time.Minute)
	e.create(t, "upgrade", Class, Spec{Rules: []Rule{rule("", []string{e.host("ws")}, Path{Splits: []Split{to("b", 0, nil)}})}})
	e.waitReady(t, "upgrade")
	conn, err := net.DialTimeout("tcp", s.ExternalAddr(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", e.host("ws"), upgradeProto)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d, want 101", resp.StatusCode)
	}
	for _, msg := range []string{"one", "two"} {
		fmt.Fprintf(conn, "%s\n", msg)
		line, err := br.ReadString('\n')
		if err != nil || line != "b:"+msg+"\n" {
			t.Fatalf("echo of %q: %q, %v; want b:%s", msg, line, err, msg)
		}
	}
}
