package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	gantryv1 "gantry.dev/gantry/api/v1alpha1"
	"gantry.dev/gantry/pkg/backend/kube"
	"gantry.dev/gantry/pkg/dispatch"
	"gantry.dev/gantry/pkg/e2etest"
	"gantry.dev/gantry/pkg/gateway"
	"gantry.dev/gantry/pkg/stack"
)

var rtGVR = schema.GroupVersionResource{Group: gantryv1.GroupName, Version: "v1alpha1", Resource: gantryv1.Resource}

// What gantry serve --backend kubernetes does, end to end: a function
// deployed as an RTResource with its criticality, its pods processes on
// the process node, requests through the gateway to the endpoints the
// EndpointSlice controller publishes; the autoscaler scales it up under
// load and back down after, without failing a request sent meanwhile; a
// pod killed (SIGKILL) and another deleted mid-request lose nothing: every
// request gets an answer, a failed one an error status, and with one retry
// every request succeeds.
func TestServeThroughKubernetes(t *testing.T) {
	e := setup(t)
	e2etest.InstallCRD(t, e.dyn)
	e2etest.StartRTController(t, e.cfg, e.ns, "gantry-processnode-e2e")
	ctx := context.Background()

	be, err := kube.New(e.cfg, e.ns, kube.Options{Port: port, OnClose: kube.CloseDelete, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	f := stack.Function{Name: "echo", Command: program, Image: "example.invalid/echo:1",
		Env:         map[string]string{instanceEnv: "1", "SLEEP": "200ms"},
		Criticality: 80, MinScale: 1, MaxScale: 4, Concurrency: 1,
		SLO: 300 * time.Millisecond, Timeout: 10 * time.Second}
	f.Defaults()
	srv, err := gateway.Start(ctx, gateway.ServerConfig{Addr: "127.0.0.1:0", Backend: be,
		Stack: &stack.Stack{Functions: []stack.Function{f}},
		// The default policy (gantry): its scale-down after the load
		// stops reads the clock at every tick, not arrivals
		// (pkg/policy/burst.go; the script burst-silence).
		Dispatch: dispatch.Config{Tick: 100 * time.Millisecond, Window: time.Second, IdleTimeout: 2 * time.Second, Logger: testLogger(t)},
		Gateway:  gateway.Config{Logger: testLogger(t)}})
	if err != nil {
		t.Fatal(err)
	}
	shutdown := sync.OnceFunc(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("gateway shutdown: %v", err)
		}
	})
	t.Cleanup(shutdown)
	url := srv.URL() + "/function/echo"

	// The criticality reaches the RTResource.
	rt, err := e.dyn.Resource(rtGVR).Namespace(e.ns).Get(ctx, "echo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedInt64(rt.Object, "spec", "criticality"); c != 80 {
		t.Errorf("spec.criticality = %d, want 80", c)
	}

	// The first request waits for the minimum instance's cold start.
	t0 := time.Now()
	if code, body, err := call(url, "warm"); err != nil || code != http.StatusOK || !strings.HasSuffix(body, ":warm") {
		t.Fatalf("first request: %d %q %v", code, body, err)
	}
	t.Logf("first request answered after %v (cold start of the minimum instance included)", time.Since(t0).Round(time.Millisecond))

	// Scale up: 6 clients at once, each request 200 ms, SLO 300 ms, until
	// a second pod answers (the 30 s bound turns a missing scale-up into a
	// failure; how soon it comes is logged, not asserted).
	maxReplicas := e.watchReplicas(t, "echo")
	var (
		mu       sync.Mutex
		hosts    = map[string]int{}
		secondAt time.Duration
	)
	load := time.Now()
	var wg sync.WaitGroup
	for c := range 6 {
		wg.Go(func() {
			for i := 0; ; i++ {
				mu.Lock()
				enough := len(hosts) >= 2 && i >= 4 || time.Since(load) > 30*time.Second
				mu.Unlock()
				if enough {
					return
				}
				code, body, err := call(url, fmt.Sprintf("up-%d-%d", c, i))
				if err != nil || code != http.StatusOK {
					t.Errorf("scale-up request: %d %q %v", code, body, err)
					continue
				}
				host, _, _ := strings.Cut(body, ":")
				mu.Lock()
				if _, seen := hosts[host]; !seen && len(hosts) == 1 {
					secondAt = time.Since(load)
				}
				hosts[host]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(hosts) < 2 || maxReplicas() < 2 {
		t.Errorf("under load for 30 s: answers from %d pods, at most %d replicas; want a scale-up", len(hosts), maxReplicas())
	}
	t.Logf("scale-up: a second pod answered %v into the load; answers by pod %v, at most %d replicas",
		secondAt.Round(time.Millisecond), hosts, maxReplicas())

	// Chaos under load: SIGKILL one pod's processes, delete another.
	var (
		sent, ok, firstFail, finalFail, lost atomic.Int64
		failures                             sync.Map
	)
	stop := make(chan struct{})
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				body := fmt.Sprintf("chaos-%d-%d", c, i)
				code, got, err := call(url, body)
				if err != nil {
					lost.Add(1) // no answer at all: the gateway dropped it
					failures.Store(body, err.Error())
					continue
				}
				if code == http.StatusOK && strings.HasSuffix(got, ":"+body) {
					ok.Add(1)
					continue
				}
				firstFail.Add(1)
				failures.Store(body, fmt.Sprintf("%d %s", code, got))
				if code, got, err = call(url, body); err != nil || code != http.StatusOK {
					finalFail.Add(1)
					failures.Store(body+" (retried)", fmt.Sprintf("%d %s %v", code, got, err))
				}
			}
		})
	}
	time.Sleep(time.Second)
	pods, err := e.readyPods(ctx, kube.LabelFunction+"=echo")
	if err != nil || len(pods) < 2 {
		t.Fatalf("want two ready pods to kill and delete: %d, %v", len(pods), err)
	}
	kpid, err := pid(&pods[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-kpid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the process group of pod %s: %v", pods[0].Name, err)
	}
	t.Logf("killed pod %s (process group %d) under load", pods[0].Name, kpid)
	time.Sleep(time.Second)
	if err := e.kube.CoreV1().Pods(e.ns).Delete(ctx, pods[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("deleted pod %s under load", pods[1].Name)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("chaos: %d requests, %d succeeded at once, %d failed once (answered with an error status), %d failed after a retry, %d unanswered",
		sent.Load(), ok.Load(), firstFail.Load(), finalFail.Load(), lost.Load())
	if lost.Load() != 0 || finalFail.Load() != 0 || ok.Load()+firstFail.Load() != sent.Load() {
		failures.Range(func(k, v any) bool { t.Logf("  %s: %s", k, v); return true })
		t.Errorf("requests lost or failed after a retry")
	}
	if alive(kpid) {
		t.Errorf("the killed pod's process %d is alive", kpid)
	}
	// The gateway's own retry on another instance is what hides the kill.
	t.Logf("gateway metrics: %s", metricLines(t, srv.URL()+"/metrics", "gantry_instance_retries_total", "gantry_request_failures_total"))

	// Scale down: idle instances are retired by idle age, back to the
	// minimum. A trickle of requests (one every 2 s) runs through its
	// first 20 s, while the first instances go: those being stopped must
	// not lose one.
	idle := time.Now()
	var trickleSent, trickleFailed atomic.Int64
	stopTrickle := make(chan struct{})
	endTrickle := sync.OnceFunc(func() { close(stopTrickle); wg.Wait() })
	// Before the gateway's shutdown (cleanups run last first): a failed
	// wait must not leave the trickle logging after the test.
	t.Cleanup(endTrickle)
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for i := 0; i < 10; i++ {
			select {
			case <-stopTrickle:
				return
			case <-tick.C:
			}
			trickleSent.Add(1)
			body := fmt.Sprintf("down-%d", i)
			if code, got, err := call(url, body); err != nil || code != http.StatusOK || !strings.HasSuffix(got, ":"+body) {
				trickleFailed.Add(1)
				t.Errorf("request during the scale-down: %d %q %v", code, got, err)
			}
		}
	})
	e2etest.Eventually(t, "the RTResource back at 1 replica with one pod", func(ctx context.Context) (bool, error) {
		rt, err := e.dyn.Resource(rtGVR).Namespace(e.ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		r, _, _ := unstructured.NestedInt64(rt.Object, "spec", "replicas")
		pods, err := e.readyPods(ctx, kube.LabelFunction+"=echo")
		return r == 1 && len(pods) == 1, err
	})
	endTrickle()
	t.Logf("scale-down: back to one pod %v after the load stopped; %d requests during it, %d failed",
		time.Since(idle).Round(time.Millisecond), trickleSent.Load(), trickleFailed.Load())
	if code, body, err := call(url, "after"); err != nil || code != http.StatusOK {
		t.Errorf("request after the scale-down: %d %q %v", code, body, err)
	}

	// Shutting the gateway down deletes the objects; their pods and
	// processes go.
	closing := time.Now()
	shutdown()
	e2etest.Eventually(t, "every pod of the function gone", func(ctx context.Context) (bool, error) {
		list, err := e.kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: kube.LabelFunction + "=echo"})
		return err == nil && len(list.Items) == 0, err
	})
	t.Logf("shutdown: every pod gone %v after the gateway closed", time.Since(closing).Round(time.Millisecond))
}

var client = &http.Client{Timeout: 30 * time.Second}

// metricLines are the samples of the named metrics.
func metricLines(t *testing.T, url string, names ...string) string {
	resp, err := client.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, n := range names {
			if strings.HasPrefix(l, n+"{") || strings.HasPrefix(l, n+" ") {
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 {
		return "(none of " + strings.Join(names, ", ") + ")"
	}
	return strings.Join(out, "; ")
}

// call POSTs body to url. err is set only when no answer came back.
func call(url, body string) (int, string, error) {
	return readAnswer(client.Post(url, "text/plain", strings.NewReader(body)))
}

// readAnswer reads a response whole; err is set only when no answer came
// back.
func readAnswer(resp *http.Response, err error) (int, string, error) {
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, string(b), nil
}

// watchReplicas polls the RTResource's spec.replicas until the test ends
// and returns the largest seen so far.
func (e *env) watchReplicas(t *testing.T, name string) func() int64 {
	var most atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if rt, err := e.dyn.Resource(rtGVR).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				r, _, _ := unstructured.NestedInt64(rt.Object, "spec", "replicas")
				for {
					m := most.Load()
					if r <= m || most.CompareAndSwap(m, r) {
						break
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int64 { return most.Load() }
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}
