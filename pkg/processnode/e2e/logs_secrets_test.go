package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/gateway"
)

// faas-cli's secret and logs commands on gantry serve --backend
// kubernetes: a secret created through /system/secrets is a Kubernetes
// Secret, a function naming it finds it at $GANTRY_SECRETS_DIR/NAME (the
// process node's copy of the pod's Secret volume), and /system/logs reads
// the pod's output through the API server from the node (tail, since,
// follow), in OpenFaaS's format.
func TestKubernetesSecretsAndLogsOverTheOpenFaaSAPI(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	srv, api := startKubeGateway(t, e)

	api("POST", "/system/secrets", `{"name":"db","value":"first"}`, 202)
	api("POST", "/system/secrets", `{"name":"db","value":"again"}`, 409)
	api("PUT", "/system/secrets", `{"name":"db","value":"hunter2"}`, 202)
	if got := api("GET", "/system/secrets", "", 200); strings.TrimSpace(got) != `[{"name":"db","namespace":"openfaas-fn"}]` {
		t.Fatalf("list: %s", got)
	}
	sec, err := e.kube.CoreV1().Secrets(e.ns).Get(ctx, "db", metav1.GetOptions{})
	if err != nil || string(sec.Data["db"]) != "hunter2" || sec.Labels[kube.LabelManagedBy] != kube.ManagedBy {
		t.Fatalf("the Kubernetes Secret: %+v %v", sec, err)
	}
	api("POST", "/system/functions", `{"service":"sec","image":"example.invalid/sec:1","secrets":["nope"],"envProcess":"x"}`, 400)

	// The instance prints its secret, then serves.
	fprocess := `echo "secret=$(cat "$GANTRY_SECRETS_DIR/db")"; exec ` + program
	api("POST", "/system/functions", `{"service":"sec","image":"example.invalid/sec:1","secrets":["db"],`+
		`"envProcess":`+quote(fprocess)+`,"envVars":{"`+instanceEnv+`":"1"},"labels":{"com.openfaas.scale.min":"1"}}`, 202)
	if code, body, err := call(srv.URL()+"/function/sec", "hi"); err != nil || code != 200 || !strings.HasSuffix(body, ":hi") {
		t.Fatalf("invoke: %d %q %v", code, body, err)
	}

	lines := logLines(t, api("GET", "/system/logs?name=sec&tail=-1", "", 200))
	if !hasText(lines, "secret=hunter2") || !hasText(lines, "listening on") {
		t.Fatalf("logs: %+v", lines)
	}
	for _, l := range lines {
		if l.Name != "sec" || l.Namespace != "openfaas-fn" || !strings.HasPrefix(l.Instance, "sec") || l.Timestamp.IsZero() {
			t.Fatalf("line %+v", l)
		}
	}
	if tail := logLines(t, api("GET", "/system/logs?name=sec&tail=1", "", 200)); len(tail) != 1 || tail[0] != lines[len(lines)-1] {
		t.Fatalf("tail=1: %+v of %+v", tail, lines)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if got := logLines(t, api("GET", "/system/logs?name=sec&since="+future, "", 200)); len(got) != 0 {
		t.Fatalf("since the future: %+v", got)
	}
	api("GET", "/system/logs?name=nope", "", 404)

	// Following streams the kept lines and ends when the client goes.
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(fctx, "GET", srv.URL()+"/system/logs?name=sec&follow=true", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	seen := false
	for !seen && sc.Scan() {
		seen = strings.Contains(sc.Text(), "secret=hunter2")
	}
	cancel()
	resp.Body.Close()
	if !seen {
		t.Fatalf("follow ended without the secret's line: %v", sc.Err())
	}

	api("DELETE", "/system/functions", `{"functionName":"sec"}`, 202)
	api("DELETE", "/system/secrets", `{"name":"db"}`, 202)
	api("DELETE", "/system/secrets", `{"name":"db"}`, 404)
}

// startKubeGateway is gantry serve --backend kubernetes in the test's
// namespace, RTResource controller included; api sends one request and
// checks its status.
func startKubeGateway(t *testing.T, e *env) (*gateway.Server, func(method, path, body string, want int) string) {
	t.Helper()
	e2etest.InstallCRD(t, e.dyn)
	e2etest.StartRTController(t, e.cfg, e.ns, "gantry-processnode-e2e-"+e.ns)
	be, err := kube.New(e.cfg, e.ns, kube.Options{Port: port, OnClose: kube.CloseDelete, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gateway.Start(context.Background(), gateway.ServerConfig{Addr: "127.0.0.1:0", Backend: be,
		Dispatch: dispatch.Config{Tick: 100 * time.Millisecond, Logger: testLogger(t)},
		Gateway:  gateway.Config{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	api := func(method, path, body string, want int) string {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL()+path, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return string(b)
	}
	return srv, api
}

type logLine struct {
	Name, Namespace, Instance, Text string
	Timestamp                       time.Time
}

func logLines(t *testing.T, body string) []logLine {
	t.Helper()
	var out []logLine
	dec := json.NewDecoder(strings.NewReader(body))
	for dec.More() {
		var l logLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
		out = append(out, l)
	}
	return out
}

func hasText(lines []logLine, s string) bool {
	for _, l := range lines {
		if strings.Contains(l.Text, s) {
			return true
		}
	}
	return false
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Function namespaces on Kubernetes, as OpenFaaS has them: faas-cli
// namespace create makes a Kubernetes namespace marked openfaas=1; a
// function deployed there runs as an RTResource and pods in it, with its
// secrets and logs there, and answers at /function/NAME.NAMESPACE; list,
// describe and remove work across namespaces; a namespace that is not a
// function namespace is refused with the reason.
func TestKubernetesFunctionNamespaces(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	srv, api := startKubeGateway(t, e)
	ns := e.ns + "-fn"
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	e2etest.StartRTController(t, e.cfg, ns, "gantry-processnode-e2e-"+ns)

	fprocess := quote(`echo "secret=$(cat "$GANTRY_SECRETS_DIR/db")"; exec ` + program)
	deploy := func(namespace string, want int) string {
		return api("POST", "/system/functions", `{"service":"sec","image":"example.invalid/sec:1","namespace":"`+namespace+`",`+
			`"secrets":["db"],"envProcess":`+fprocess+`,"envVars":{"`+instanceEnv+`":"1"},"labels":{"com.openfaas.scale.min":"1"}}`, want)
	}
	if msg := deploy(ns, 400); !strings.Contains(msg, "does not exist") {
		t.Fatalf("into a namespace not created: %s", msg)
	}
	api("POST", "/system/namespace/", `{"name":"`+ns+`","labels":{"team":"a"}}`, 201)
	api("POST", "/system/namespace/", `{"name":"`+ns+`"}`, 409)
	kns, err := e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || kns.Labels["openfaas"] != "1" || kns.Labels["team"] != "a" {
		t.Fatalf("the Kubernetes namespace: %+v %v", kns, err)
	}
	if got := api("GET", "/system/namespaces", "", 200); !strings.Contains(got, `"`+ns+`"`) {
		t.Fatalf("namespaces: %s", got)
	}
	// The default namespace's Kubernetes namespace is not another one.
	if msg := api("POST", "/system/secrets", `{"name":"db","namespace":"`+e.ns+`","value":"x"}`, 400); !strings.Contains(msg, "default") {
		t.Fatalf("secret in the default's Kubernetes namespace: %s", msg)
	}

	api("POST", "/system/secrets?namespace="+ns, `{"name":"db","value":"in-`+ns+`"}`, 202)
	if _, err := e.kube.CoreV1().Secrets(ns).Get(ctx, "db", metav1.GetOptions{}); err != nil {
		t.Fatalf("the secret is not in %s: %v", ns, err)
	}
	deploy(ns, 202)
	if code, body, err := call(srv.URL()+"/function/sec."+ns, "hi"); err != nil || code != 200 || !strings.HasSuffix(body, ":hi") {
		t.Fatalf("invoke: %d %q %v", code, body, err)
	}
	if code, _, _ := call(srv.URL()+"/function/sec", "hi"); code != 404 {
		t.Fatalf("the default namespace has no sec: %d", code)
	}
	if _, err := e.dyn.Resource(rtGVR).Namespace(ns).Get(ctx, "sec", metav1.GetOptions{}); err != nil {
		t.Fatalf("no RTResource in %s: %v", ns, err)
	}
	pods, err := e.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelFunction + "=sec"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("no pod in %s: %v", ns, err)
	}
	if lines := logLines(t, api("GET", "/system/logs?name=sec&namespace="+ns, "", 200)); !hasText(lines, "secret=in-"+ns) || lines[0].Namespace != ns {
		t.Fatalf("logs: %+v", lines)
	}
	if got := api("GET", "/system/functions?namespace="+ns, "", 200); !strings.Contains(got, `"name":"sec"`) {
		t.Fatalf("list %s: %s", ns, got)
	}
	if got := api("GET", "/system/functions", "", 200); strings.TrimSpace(got) != "[]" {
		t.Fatalf("list default: %s", got)
	}
	api("GET", "/system/function/sec?namespace="+ns, "", 200)
	api("DELETE", "/system/namespace/"+ns, "", 409) // it holds a function
	api("DELETE", "/system/functions", `{"functionName":"sec","namespace":"`+ns+`"}`, 202)
	e2etest.Eventually(t, "the function's objects leave "+ns, func(ctx context.Context) (bool, error) {
		_, err := e.dyn.Resource(rtGVR).Namespace(ns).Get(ctx, "sec", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	api("DELETE", "/system/namespace/"+ns, "", 202)
	kns, err = e.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil && kns.DeletionTimestamp == nil {
		t.Fatalf("the Kubernetes namespace stays: %+v", kns.Status)
	}
}
