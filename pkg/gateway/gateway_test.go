package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gantry.dev/gantry/pkg/stack"
)

func TestEveryManagementRouteRefusesAnonymousWith401(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, NewAuth("admin", "secret", "tok"))
	routes := []struct{ method, path string }{
		{"GET", "/system/functions"}, {"POST", "/system/functions"}, {"PUT", "/system/functions"},
		{"DELETE", "/system/functions"}, {"GET", "/system/function/x"}, {"POST", "/system/scale-function/x"},
		{"GET", "/system/apps"}, {"POST", "/system/apps"}, {"GET", "/system/apps/x"}, {"DELETE", "/system/apps/x"},
		{"GET", "/system/info"}, {"GET", "/system/namespaces"},
		{"GET", "/system/logs"}, {"GET", "/system/secrets"}, {"POST", "/system/secrets"}, {"PUT", "/system/secrets"}, {"DELETE", "/system/secrets"},
	}
	for _, r := range routes {
		if code, _, h := do(t, r.method, srv.URL()+r.path, "", nil); code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s anonymous: %d", r.method, r.path, code)
		}
		if code, _, _ := do(t, r.method, srv.URL()+r.path, "", map[string]string{"Authorization": "Bearer wrong"}); code != http.StatusUnauthorized {
			t.Errorf("%s %s wrong token: %d", r.method, r.path, code)
		}
		if code, _, _ := do(t, r.method, srv.URL()+r.path, "", map[string]string{"Authorization": "Bearer tok"}); code == http.StatusUnauthorized {
			t.Errorf("%s %s with the token: 401", r.method, r.path)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL()+"/system/functions", nil)
	req.SetBasicAuth("admin", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("basic auth: %v %v", resp, err)
	}
	resp.Body.Close()
	if code, _, _ := do(t, "GET", srv.URL()+"/healthz", "", nil); code != http.StatusOK {
		t.Fatalf("healthz must stay open: %d", code)
	}
}

func TestInvokeAnswersAndRefusesBadInputWithReasons(t *testing.T) {
	echo := instanceFunction(t, "echo", "echo")
	sized := instanceFunction(t, "sized", "echo")
	sized.SizeHeader = "X-Input-Size"
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{echo, sized}}, nil)
	code, body, h := do(t, "POST", srv.URL()+"/function/echo", "hello", nil)
	if code != 200 || body != "hello" || h.Get("X-Duration-Seconds") == "" {
		t.Fatalf("echo: %d %q %v", code, body, h)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/missing", "x", nil); code != 404 || !strings.Contains(body, "missing") {
		t.Fatalf("unknown function: %d %q", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/echo", strings.Repeat("x", 2<<20), nil); code != 413 || !strings.Contains(body, "limit") {
		t.Fatalf("big body: %d %q", code, body)
	}
	// Without its size header a request is served, sized by its body
	// (../shared/conventions.md).
	if code, body, _ := do(t, "POST", srv.URL()+"/function/sized", "x", nil); code != 200 || body != "x" {
		t.Fatalf("missing size header: %d %q", code, body)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/function/sized", "x", map[string]string{"X-Input-Size": "NaN"}); code != 400 {
		t.Fatalf("NaN size: %d", code)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/function/sized", "x", map[string]string{"X-Input-Size": "12.5"}); code != 200 {
		t.Fatalf("sized: %d", code)
	}
}

func TestChainForwardsEachOutputToTheNextFunction(t *testing.T) {
	s := &stack.Stack{Functions: []stack.Function{instanceFunction(t, "upper", "upper"), instanceFunction(t, "echo", "echo")},
		Apps: []stack.App{{Name: "shout", Functions: []string{"upper", "echo"}}}}
	srv := startGateway(t, s, nil)
	code, body, _ := do(t, "POST", srv.URL()+"/app/shout", "quiet please", nil)
	if code != 200 || body != "QUIET PLEASE" {
		t.Fatalf("chain: %d %q", code, body)
	}
	for _, name := range []string{"upper", "echo"} {
		st, _ := srv.D.Function(name)
		if st.Stats.Completed != 1 || st.App != "shout" {
			t.Fatalf("%s: %+v app %q", name, st.Stats, st.App)
		}
	}
}

func TestQueuePastItsBoundAnswers429WithRetryAfter(t *testing.T) {
	f := instanceFunction(t, "slow", "slow")
	f.MaxQueue, f.MaxScale = 1, 1
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	var wg sync.WaitGroup
	codes := make(chan int, 6)
	retry := make(chan string, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(srv.URL()+"/function/slow", "text/plain", strings.NewReader("x"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			code, h := resp.StatusCode, resp.Header
			codes <- code
			if code == 429 {
				retry <- h.Get("Retry-After")
			}
		}()
	}
	wg.Wait()
	close(codes)
	close(retry)
	n429, n200 := 0, 0
	for c := range codes {
		switch c {
		case 429:
			n429++
		case 200:
			n200++
		default:
			t.Errorf("unexpected status %d", c)
		}
	}
	if n429 == 0 || n200 == 0 {
		t.Fatalf("200s %d, 429s %d: want both", n200, n429)
	}
	for r := range retry {
		if r == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	st, _ := srv.D.Function("slow")
	if st.Stats.Rejected != int64(n429) {
		t.Fatalf("rejected %d, 429s %d", st.Stats.Rejected, n429)
	}
}

// An instance that crashes on a request it received is not retried: the
// request may have run. Declared idempotent, it is retried once.
func TestCrashAfterDeliveryIsRetriedOnlyWhenIdempotent(t *testing.T) {
	once := instanceFunction(t, "crash", "crash")
	twice := instanceFunction(t, "crash-idem", "crash")
	twice.Idempotent = true
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{once, twice}}, nil)
	code, body, _ := do(t, "POST", srv.URL()+"/function/crash", "x", nil)
	if code != 502 || !strings.Contains(body, "not retried") {
		t.Fatalf("crash: %d %q, want 502 not retried", code, body)
	}
	if st, _ := srv.D.Function("crash"); st.Stats.InstanceErrors != 1 || st.Stats.Accepted != 1 {
		t.Fatalf("stats %+v: want one attempt", st.Stats)
	}
	code, body, _ = do(t, "POST", srv.URL()+"/function/crash-idem", "x", nil)
	if code != 502 || !strings.Contains(body, "failed twice") {
		t.Fatalf("idempotent crash: %d %q, want 502 after a retry", code, body)
	}
	if st, _ := srv.D.Function("crash-idem"); st.Stats.InstanceErrors != 2 || st.Stats.Accepted != 2 {
		t.Fatalf("stats %+v: want two attempts, both instance errors", st.Stats)
	}
}

// One reset connection does not kill an instance: the request of an
// idempotent function is retried on the other instance, the one that
// failed passes its health check and keeps serving.
func TestResetConnectionIsRetriedAndTheInstanceKept(t *testing.T) {
	f := instanceFunction(t, "flaky", "flaky")
	f.Env["GANTRY_TEST_FLAKY"] = filepath.Join(t.TempDir(), "claimed")
	f.MinScale, f.MaxScale = 2, 2
	f.Idempotent = true
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	waitUntil(t, "two instances ready", func() bool {
		st, _ := srv.D.Function("flaky")
		return st.Available == 2
	})
	// The first request an instance gets is reset, after it was read:
	// retried on the other instance.
	for i := range 4 {
		code, body, _ := do(t, "POST", srv.URL()+"/function/flaky", "hello", nil)
		if code != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q, want 200 with the body echoed", i, code, body)
		}
	}
	waitUntil(t, "the health check's verdict", func() bool {
		st, _ := srv.D.Function("flaky")
		return st.Stats.Checks >= 1 && st.Running == 0 && st.Available == 2
	})
	st, _ := srv.D.Function("flaky")
	if st.Stats.InstanceErrors != 1 || st.Stats.Crashes != 0 || st.Stats.Stopped != 0 || st.Stats.Spawned != 2 {
		t.Fatalf("stats %+v: want an instance error, no instance stopped or replaced", st.Stats)
	}
}

func TestClientDisconnectCancelsTheQueuedRequest(t *testing.T) {
	f := instanceFunction(t, "slow", "slow")
	f.MaxScale = 1
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	go func() {
		if resp, err := http.Post(srv.URL()+"/function/slow", "text/plain", strings.NewReader("busy")); err == nil {
			resp.Body.Close()
		}
	}()
	waitUntil(t, "first request running", func() bool { st, _ := srv.D.Function("slow"); return st.Running == 1 })
	// The client goes once its request is queued (a fixed client timeout
	// could expire on a loaded machine before the request got there).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL()+"/function/slow", strings.NewReader("x"))
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitUntil(t, "second request queued", func() bool { st, _ := srv.D.Function("slow"); return st.Queued == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request outlived its client")
	}
	waitUntil(t, "queued request cancelled", func() bool {
		st, _ := srv.D.Function("slow")
		return st.Stats.Canceled == 1 && st.Queued == 0
	})
}

func TestShutdownDrainsRequestsInFlight(t *testing.T) {
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{instanceFunction(t, "slow", "slow")}}, nil)
	if code, _, _ := do(t, "POST", srv.URL()+"/function/slow", "warm", nil); code != 200 {
		t.Fatal("warm-up failed")
	}
	got := make(chan int, 1)
	go func() {
		resp, err := http.Post(srv.URL()+"/function/slow", "text/plain", strings.NewReader("x"))
		if err != nil {
			got <- 0
			return
		}
		resp.Body.Close()
		got <- resp.StatusCode
	}()
	waitUntil(t, "request running", func() bool { st, _ := srv.D.Function("slow"); return st.Running == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-got; code != 200 {
		t.Fatalf("in-flight request got %d during shutdown", code)
	}
}

// The OpenFaaS API flow faas-cli drives: deploy with envProcess, list,
// invoke, scale, remove.
func TestOpenFaaSDeployListInvokeScaleRemove(t *testing.T) {
	srv := startGateway(t, &stack.Stack{}, nil)
	f := instanceFunction(t, "x", "upper")
	dep, _ := json.Marshal(map[string]any{"service": "shout", "image": "ignored:latest", "envProcess": f.Command,
		"envVars": f.Env, "labels": map[string]string{"com.openfaas.scale.max": "3"},
		"annotations": map[string]string{"gantry.dev/criticality": "7", "gantry.dev/slo": "250ms"}})
	if code, body, _ := do(t, "POST", srv.URL()+"/system/functions", string(dep), nil); code != 202 {
		t.Fatalf("deploy: %d %s", code, body)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/system/functions", string(dep), nil); code != 409 {
		t.Fatalf("second deploy: %d, want 409", code)
	}
	code, body, _ := do(t, "GET", srv.URL()+"/system/functions", "", nil)
	var list []functionStatus
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != 200 || len(list) != 1 {
		t.Fatalf("list: %d %s", code, body)
	}
	if l := list[0]; l.Name != "shout" || l.Criticality != 7 || l.MaxScale != 3 || l.SLO != "250ms" || l.EnvProcess != f.Command {
		t.Fatalf("listed %+v", l)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/shout", "hi", nil); code != 200 || body != "HI" {
		t.Fatalf("invoke: %d %q", code, body)
	}
	if code, body, _ := do(t, "POST", srv.URL()+"/function/shout.openfaas-fn", "ns", nil); code != 200 || body != "NS" {
		t.Fatalf("invoke with faas-cli's namespace suffix: %d %q", code, body)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/system/scale-function/shout", `{"serviceName":"shout","replicas":3}`, nil); code != 202 {
		t.Fatalf("scale: %d", code)
	}
	waitUntil(t, "3 replicas", func() bool { st, _ := srv.D.Function("shout"); return st.Available == 3 })
	if code, _, _ := do(t, "POST", srv.URL()+"/system/scale-function/shout", `{"replicas":4}`, nil); code != 400 {
		t.Fatalf("scale past max: %d, want 400", code)
	}
	if code, _, _ := do(t, "DELETE", srv.URL()+"/system/functions", `{"functionName":"shout"}`, nil); code != 202 {
		t.Fatalf("remove: %d", code)
	}
	if code, _, _ := do(t, "GET", srv.URL()+"/system/function/shout", "", nil); code != 404 {
		t.Fatalf("after remove: %d", code)
	}
	if code, _, _ := do(t, "POST", srv.URL()+"/system/functions", `{"service":"Bad_Name","envProcess":"x"}`, nil); code != 400 {
		t.Fatalf("bad name: %d", code)
	}
}

func TestManyConcurrentClientsAllServed(t *testing.T) {
	f := instanceFunction(t, "echo", "echo")
	f.MaxQueue = 10000
	srv := startGateway(t, &stack.Stack{Functions: []stack.Function{f}}, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				want := strings.Repeat("a", 1+w+i)
				resp, err := http.Post(srv.URL()+"/function/echo", "text/plain", strings.NewReader(want))
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				if err != nil || resp.StatusCode != 200 || string(body) != want {
					mu.Lock()
					bad++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	st, _ := srv.D.Function("echo")
	if bad != 0 || st.Stats.Completed != 400 {
		t.Fatalf("%d bad answers, %d completed of 400", bad, st.Stats.Completed)
	}
}
